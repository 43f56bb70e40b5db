package dev.rdmarun.runtime;

import java.util.EnumSet;
import java.util.Set;

/** ibv_pd: scopes memory regions and queue pairs. */
public abstract non-sealed class ProtectionDomain extends VerbsResource {
    private final Context context;

    protected ProtectionDomain(Context context) {
        super("protection domain", context);
        this.context = context;
    }

    public final Context context() {
        return context;
    }

    /**
     * Allocates {@code length} bytes of page-aligned off-heap memory and registers them with exactly
     * these access flags (least privilege: LOCAL_WRITE only where the HCA writes into it).
     */
    public final MemoryRegion registerMemory(long length, Set<Access> access) {
        ensureOpen();
        if (length <= 0) throw new IllegalArgumentException("a memory region needs a positive length, not " + length);
        Set<Access> flags = access.isEmpty() ? EnumSet.noneOf(Access.class) : EnumSet.copyOf(access);
        if ((flags.contains(Access.REMOTE_WRITE) || flags.contains(Access.REMOTE_ATOMIC))
                && !flags.contains(Access.LOCAL_WRITE)) {
            // The verbs spec requires it; ibv_reg_mr would fail with EINVAL.
            throw new IllegalArgumentException("REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE too");
        }
        return register(length, flags);
    }

    public final QueuePair createQueuePair(QueuePairConfig config) {
        ensureOpen();
        if (config.sendCq().context() != context || config.recvCq().context() != context) {
            throw new IllegalArgumentException("the CQs and the PD belong to different devices");
        }
        return newQueuePair(config);
    }

    /** Allocates and registers the memory ({@link MemoryRegion#allocate} gives it page-aligned). */
    protected abstract MemoryRegion register(long length, Set<Access> flags);

    protected abstract QueuePair newQueuePair(QueuePairConfig config);
}
