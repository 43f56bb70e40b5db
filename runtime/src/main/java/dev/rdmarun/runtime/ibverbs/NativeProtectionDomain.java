package dev.rdmarun.runtime.ibverbs;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.ProtectionDomain;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.os.Calls;
import java.lang.foreign.MemorySegment;
import java.util.Set;

/** ibv_pd. */
final class NativeProtectionDomain extends ProtectionDomain {
    final NativeContext context;
    final MemorySegment handle;

    private NativeProtectionDomain(NativeContext context, MemorySegment handle) {
        super(context);
        this.context = context;
        this.handle = handle;
    }

    static NativeProtectionDomain allocate(NativeContext context) {
        return Calls.control((arena, errno) -> {
            MemorySegment pd = (MemorySegment) context.lib.allocPd.invokeExact(errno.segment(), context.handle);
            if (pd.equals(MemorySegment.NULL)) throw VerbsException.of("ibv_alloc_pd", errno.value(), null);
            return new NativeProtectionDomain(context, pd);
        });
    }

    @Override
    protected MemoryRegion register(long length, Set<Access> flags) {
        return NativeMemoryRegion.register(this, length, flags);
    }

    @Override
    protected QueuePair newQueuePair(QueuePairConfig config) {
        return NativeQueuePair.create(this, config);
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
