package dev.rdmarun.runtime.device;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.CompletionChannel;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.GidEntry;
import dev.rdmarun.runtime.ProtectionDomain;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.RtrAttributes;
import dev.rdmarun.runtime.RtsAttributes;
import java.util.Set;

/** Two RC QPs of one context connected to each other (rxe loops back through its netdev). */
final class Loopback implements AutoCloseable {
    static final int PORT = 1;

    final Context context;
    final ProtectionDomain pd;
    final CompletionChannel channel;
    final CompletionQueue cq;
    final QueuePair a;
    final QueuePair b;
    final GidEntry gid;

    Loopback(Context context, Set<Access> qpAccess, int rnrRetry) {
        this.context = context;
        this.pd = context.allocateProtectionDomain();
        this.channel = context.createCompletionChannel();
        this.cq = context.createCompletionQueue(256, channel);
        this.a = pd.createQueuePair(QueuePairConfig.rc(cq).withDepth(64, 64));
        this.b = pd.createQueuePair(QueuePairConfig.rc(cq).withDepth(64, 64));
        this.gid = context.defaultGid(PORT);
        a.modifyToInit(PORT, qpAccess);
        b.modifyToInit(PORT, qpAccess);
        connect(a, b, 0x100, 0x200, rnrRetry);
        connect(b, a, 0x200, 0x100, rnrRetry);
    }

    private void connect(QueuePair local, QueuePair remote, int localPsn, int remotePsn, int rnrRetry) {
        var endpoint = remote.localEndpoint(PORT, gid.index(), remotePsn);
        local.modifyToRtr(RtrAttributes.of(endpoint, PORT, gid.index(), endpoint.mtu()).withMaxDestRdAtomic(4));
        local.modifyToRts(RtsAttributes.of(localPsn).withRnrRetry(rnrRetry).withMaxRdAtomic(4));
    }

    @Override
    public void close() {
        pd.close();
        cq.close();
        channel.close();
    }
}
