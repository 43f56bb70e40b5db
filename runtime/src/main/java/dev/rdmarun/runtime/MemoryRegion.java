package dev.rdmarun.runtime;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;

/** ibv_mr over page-aligned off-heap memory that this object owns and frees after deregistering. */
public abstract non-sealed class MemoryRegion extends VerbsResource {
    public static final long PAGE = 4096;

    private final ProtectionDomain pd;
    private final Arena arena;
    private final MemorySegment buffer;
    private final Set<Access> access;
    private final int lkey;
    private final int rkey;

    protected MemoryRegion(ProtectionDomain pd, Arena arena, MemorySegment buffer, Set<Access> access, int lkey, int rkey) {
        super("memory region", pd);
        this.pd = pd;
        this.arena = arena;
        this.buffer = buffer;
        this.access = Set.copyOf(access);
        this.lkey = lkey;
        this.rkey = rkey;
    }

    /** Registration of memory a provider allocates: gets the arena and the page-aligned buffer. */
    protected interface Registration<M extends MemoryRegion> {
        M register(Arena arena, MemorySegment buffer);
    }

    /**
     * Allocates {@code length} page-aligned bytes in a new arena and registers them; the arena is
     * closed again when registration fails.
     */
    protected static <M extends MemoryRegion> M allocate(long length, Registration<M> registration) {
        Arena arena = Arena.ofShared();
        try {
            return registration.register(arena, arena.allocate(length, PAGE));
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
    }

    /** The registered memory. Valid until close. */
    public final MemorySegment segment() {
        ensureOpen();
        return buffer;
    }

    public final long address() {
        return buffer.address();
    }

    public final long length() {
        return buffer.byteSize();
    }

    public final int lkey() {
        return lkey;
    }

    public final int rkey() {
        return rkey;
    }

    public final Set<Access> access() {
        return access;
    }

    public final ProtectionDomain protectionDomain() {
        return pd;
    }

    /** What a peer needs to address this region remotely. */
    public final RemoteRegion toRemote() {
        return new RemoteRegion(address(), length(), rkey);
    }

    /** Throws when the region is closed or [offset, offset+length) is not inside it. Allocation-free on success. */
    final void checkBounds(long offset, long length) {
        ensureOpen();
        // Not offset + length > size: that sum overflows for an offset near Long.MAX_VALUE.
        if (offset < 0 || length < 0 || offset > buffer.byteSize() - length) {
            throw new IndexOutOfBoundsException(length + " bytes at offset " + offset + " are outside the "
                    + buffer.byteSize() + "-byte memory region");
        }
    }

    @Override
    protected final void destroy() {
        try {
            deregister();
        } finally {
            arena.close();
        }
    }

    /** Releases the registration; the memory is freed afterwards. */
    protected abstract void deregister();
}
