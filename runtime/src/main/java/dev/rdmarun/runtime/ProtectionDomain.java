package dev.rdmarun.runtime;

import java.lang.foreign.MemorySegment;
import java.util.Set;

/** ibv_pd: scopes memory regions and queue pairs. */
public final class ProtectionDomain extends VerbsResource {
    final Context context;
    final MemorySegment handle;

    private ProtectionDomain(Context context, MemorySegment handle) {
        super("protection domain", context);
        this.context = context;
        this.handle = handle;
    }

    static ProtectionDomain allocate(Context context) {
        return Calls.control((arena, errno) -> {
            MemorySegment pd = (MemorySegment) context.lib.allocPd.invokeExact(errno.segment(), context.handle);
            if (pd.equals(MemorySegment.NULL)) throw VerbsException.of("ibv_alloc_pd", errno.value(), null);
            return new ProtectionDomain(context, pd);
        });
    }

    public Context context() {
        return context;
    }

    /**
     * Allocates {@code length} bytes of page-aligned off-heap memory and registers them with exactly
     * these access flags (least privilege: LOCAL_WRITE only where the HCA writes into it).
     */
    public MemoryRegion registerMemory(long length, Set<Access> access) {
        ensureOpen();
        return MemoryRegion.register(this, length, access);
    }

    public QueuePair createQueuePair(QueuePairConfig config) {
        ensureOpen();
        return QueuePair.create(this, config);
    }

    @Override
    protected void destroy() {
        Calls.control((arena, errno) -> {
            int rc = (int) context.lib.deallocPd.invokeExact(errno.segment(), handle);
            if (rc != 0) throw VerbsException.of("ibv_dealloc_pd", rc > 0 ? rc : errno.value(), null);
            return null;
        });
    }
}
