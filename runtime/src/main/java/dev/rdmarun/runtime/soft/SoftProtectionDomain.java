package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.ProtectionDomain;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import java.util.Set;

/** A protection domain of soft0: memory keys are only honoured for QPs of the same PD. */
final class SoftProtectionDomain extends ProtectionDomain {
    final SoftContext context;

    SoftProtectionDomain(SoftContext context) {
        super(context);
        this.context = context;
    }

    @Override
    protected MemoryRegion register(long length, Set<Access> flags) {
        return SoftMemoryRegion.register(this, length, flags);
    }

    @Override
    protected QueuePair newQueuePair(QueuePairConfig config) {
        return SoftQueuePair.create(this, config);
    }

    @Override
    protected void destroy() {
        // nothing native to release; the VerbsResource base has closed the MRs and QPs
    }
}
