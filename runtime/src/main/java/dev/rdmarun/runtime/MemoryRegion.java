package dev.rdmarun.runtime;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.rdmarun.runtime.ffi.Structs;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;

/** ibv_mr over page-aligned off-heap memory that this object owns and frees after deregistering. */
public final class MemoryRegion extends VerbsResource {
    static final long PAGE = 4096;

    private final Arena arena;
    private final MemorySegment buffer;
    private final MemorySegment handle;
    private final Set<Access> access;
    private final int lkey;
    private final int rkey;
    private final ProtectionDomain pd;

    private MemoryRegion(ProtectionDomain pd, Arena arena, MemorySegment buffer, MemorySegment handle, Set<Access> access) {
        super("memory region", pd);
        this.pd = pd;
        this.arena = arena;
        this.buffer = buffer;
        this.handle = handle.reinterpret(Structs.IBV_MR.byteSize());
        this.access = Set.copyOf(access);
        this.lkey = this.handle.get(JAVA_INT, Structs.MR_LKEY);
        this.rkey = this.handle.get(JAVA_INT, Structs.MR_RKEY);
    }

    static MemoryRegion register(ProtectionDomain pd, long length, Set<Access> access) {
        if (length <= 0) throw new IllegalArgumentException("a memory region needs a positive length, not " + length);
        Set<Access> flags = access.isEmpty() ? EnumSet.noneOf(Access.class) : EnumSet.copyOf(access);
        if ((flags.contains(Access.REMOTE_WRITE) || flags.contains(Access.REMOTE_ATOMIC))
                && !flags.contains(Access.LOCAL_WRITE)) {
            // The verbs spec requires it; ibv_reg_mr would fail with EINVAL.
            throw new IllegalArgumentException("REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE too");
        }
        Arena arena = Arena.ofShared();
        try {
            MemorySegment buffer = arena.allocate(length, PAGE);
            return Calls.control((scratch, errno) -> {
                MemorySegment mr = (MemorySegment) pd.context.lib.regMr.invokeExact(
                        errno.segment(), pd.handle, buffer, length, Access.bits(flags));
                if (mr.equals(MemorySegment.NULL)) {
                    int e = errno.value();
                    String hint = e == dev.rdmarun.runtime.ffi.Errno.ENOMEM || e == dev.rdmarun.runtime.ffi.Errno.EFAULT
                            ? "too little locked memory: raise the memlock limit (ulimit -l unlimited, or memlock in /etc/security/limits.conf)"
                            : null;
                    throw VerbsException.of("ibv_reg_mr(" + length + " bytes, " + flags + ")", e, hint);
                }
                return new MemoryRegion(pd, arena, buffer, mr, flags);
            });
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
    }

    /** The registered memory. Valid until close. */
    public MemorySegment segment() {
        ensureOpen();
        return buffer;
    }

    public long address() {
        return buffer.address();
    }

    public long length() {
        return buffer.byteSize();
    }

    public int lkey() {
        return lkey;
    }

    public int rkey() {
        return rkey;
    }

    public Set<Access> access() {
        return access;
    }

    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /** What a peer needs to address this region remotely. */
    public RemoteRegion toRemote() {
        return new RemoteRegion(address(), length(), rkey);
    }

    /** Throws when [offset, offset+length) is not inside this region. Allocation-free on success. */
    void checkBounds(long offset, long length) {
        if (offset < 0 || length < 0 || offset + length > buffer.byteSize()) {
            throw new IndexOutOfBoundsException("range [" + offset + ", " + (offset + length)
                    + ") is outside the " + buffer.byteSize() + "-byte memory region");
        }
    }

    @Override
    protected void destroy() {
        try {
            Calls.control((scratch, errno) -> {
                int rc = (int) pd.context.lib.deregMr.invokeExact(errno.segment(), handle);
                if (rc != 0) throw VerbsException.of("ibv_dereg_mr", rc > 0 ? rc : errno.value(), null);
                return null;
            });
        } finally {
            arena.close();
        }
    }
}
