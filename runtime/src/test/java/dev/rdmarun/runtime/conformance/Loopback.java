package dev.rdmarun.runtime.conformance;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.CompletionChannel;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.GidEntry;
import dev.rdmarun.runtime.ProtectionDomain;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.RtrAttributes;
import dev.rdmarun.runtime.RtsAttributes;
import java.util.Set;

/**
 * Two RC QPs of one context connected to each other, on one CQ (rxe loops back through its
 * netdev; soft0 through memory, or its own TCP listener when the TCP transport is forced).
 */
final class Loopback implements AutoCloseable {
    static final int PORT = 1;
    /** The pair's shared secret (soft0 over TCP needs one; hardware ignores it). */
    private final FabricKey key = FabricKey.random();

    final ProtectionDomain pd;
    final CompletionChannel channel;
    final CompletionQueue cq;
    final QueuePair a;
    final QueuePair b;
    final GidEntry gid;
    private final boolean owner;

    /** Its own PD, completion channel and CQ (closed with it); min_rnr_timer 12 (0.64 ms). */
    Loopback(Context context, Set<Access> qpAccess, int rnrRetry) {
        this(context, qpAccess, rnrRetry, 12);
    }

    Loopback(Context context, Set<Access> qpAccess, int rnrRetry, int minRnrTimer) {
        this.pd = context.allocateProtectionDomain();
        this.channel = context.createCompletionChannel();
        this.cq = context.createCompletionQueue(256, channel);
        this.owner = true;
        QueuePairConfig config = QueuePairConfig.rc(cq).withDepth(64, 64);
        this.a = pd.createQueuePair(config);
        this.b = pd.createQueuePair(config);
        this.gid = context.defaultGid(PORT);
        connect(qpAccess, rnrRetry, minRnrTimer);
    }

    /** On a PD and CQ the caller owns (close() then closes only the QPs). */
    Loopback(Context context, ProtectionDomain pd, CompletionQueue cq, QueuePairConfig config, Set<Access> qpAccess,
             int rnrRetry) {
        this.pd = pd;
        this.channel = null;
        this.cq = cq;
        this.owner = false;
        this.a = pd.createQueuePair(config);
        this.b = pd.createQueuePair(config);
        this.gid = context.defaultGid(PORT);
        connect(qpAccess, rnrRetry, 12);
    }

    private void connect(Set<Access> qpAccess, int rnrRetry, int minRnrTimer) {
        a.modifyToInit(PORT, qpAccess);
        b.modifyToInit(PORT, qpAccess);
        connect(a, b, 0x100, 0x200, rnrRetry, minRnrTimer);
        connect(b, a, 0x200, 0x100, rnrRetry, minRnrTimer);
    }

    private void connect(QueuePair local, QueuePair remote, int localPsn, int remotePsn, int rnrRetry, int minRnrTimer) {
        var endpoint = remote.localEndpoint(PORT, gid.index(), remotePsn);
        local.modifyToRtr(RtrAttributes.of(endpoint, PORT, gid.index(), endpoint.mtu())
                .withMaxDestRdAtomic(4).withMinRnrTimer(minRnrTimer).withFabricKey(key));
        local.modifyToRts(RtsAttributes.of(localPsn).withRnrRetry(rnrRetry).withMaxRdAtomic(4));
    }

    @Override
    public void close() {
        if (owner) {
            pd.close();
            cq.close();
            channel.close();
        } else {
            a.close();
            b.close();
        }
    }
}
