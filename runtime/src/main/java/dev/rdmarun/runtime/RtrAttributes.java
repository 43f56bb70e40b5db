package dev.rdmarun.runtime;

import java.time.Duration;

/**
 * INIT→RTR: the remote QP and the path to it. For RC the IB spec also requires
 * max_dest_rd_atomic (incoming READ/atomic depth) and min_rnr_timer (what this side asks a
 * sender to wait when no receive is posted). RoCE always addresses through a GRH: sgidIndex
 * chooses the local GID, and it must be of the same RoCE version and IP family as the peer's.
 * {@code fabricKey} (null: none) is the software provider's connection secret ({@link FabricKey}):
 * soft0 requires it for a QP whose peer is in another process, hardware ignores it.
 * {@code connectTimeout} (null: 30 s) is soft0's too: how long the QP waits for its first TCP
 * connection to the peer before its ACK timeouts count as retries ({@link #withConnectTimeout}).
 */
public record RtrAttributes(
        QpEndpoint remote,
        int port,
        int sgidIndex,
        Mtu pathMtu,
        int maxDestRdAtomic,
        int minRnrTimer,
        int hopLimit,
        int trafficClass,
        int serviceLevel,
        FabricKey fabricKey,
        Duration connectTimeout) {

    public RtrAttributes {
        if (remote == null) throw new IllegalArgumentException("RTR needs the remote endpoint");
        if (port < 1 || port > 255) throw new IllegalArgumentException("port out of range: " + port);
        if (sgidIndex < 0 || sgidIndex > 255) throw new IllegalArgumentException("GID index out of range: " + sgidIndex);
        if (minRnrTimer < 0 || minRnrTimer > 31) throw new IllegalArgumentException("min_rnr_timer is 0..31");
        if (connectTimeout != null && connectTimeout.isNegative()) {
            throw new IllegalArgumentException("the connect timeout is negative: " + connectTimeout);
        }
    }

    /** The attributes without a connect timeout (soft0's default then). */
    public RtrAttributes(QpEndpoint remote, int port, int sgidIndex, Mtu pathMtu, int maxDestRdAtomic, int minRnrTimer,
                         int hopLimit, int trafficClass, int serviceLevel, FabricKey fabricKey) {
        this(remote, port, sgidIndex, pathMtu, maxDestRdAtomic, minRnrTimer, hopLimit, trafficClass, serviceLevel,
                fabricKey, null);
    }

    /** Defaults of ibv_rc_pingpong: 1 outstanding READ/atomic, min_rnr_timer 12 (0.64 ms), hop limit 1. */
    public static RtrAttributes of(QpEndpoint remote, int port, int sgidIndex, Mtu pathMtu) {
        return new RtrAttributes(remote, port, sgidIndex, pathMtu, 1, 12, 1, 0, 0, null);
    }

    public RtrAttributes withMaxDestRdAtomic(int n) {
        return new RtrAttributes(remote, port, sgidIndex, pathMtu, n, minRnrTimer, hopLimit, trafficClass, serviceLevel, fabricKey,
                connectTimeout);
    }

    public RtrAttributes withMinRnrTimer(int t) {
        return new RtrAttributes(remote, port, sgidIndex, pathMtu, maxDestRdAtomic, t, hopLimit, trafficClass, serviceLevel, fabricKey,
                connectTimeout);
    }

    /** The secret shared with the peer for soft0's connection (see {@link FabricKey}). */
    public RtrAttributes withFabricKey(FabricKey key) {
        return new RtrAttributes(remote, port, sgidIndex, pathMtu, maxDestRdAtomic, minRnrTimer, hopLimit, trafficClass,
                serviceLevel, key, connectTimeout);
    }

    /**
     * soft0: how long the QP keeps trying to make its first TCP connection to the peer's soft0
     * port (a listener busy with a flood of unauthenticated connections, or slow to answer) before
     * its ACK timeouts count against the retry count; the scenario's timeout, for rdma-run. Its
     * requests wait on the connection meanwhile. It is also how long a connected peer may say
     * nothing at all (a stalled process, which TCP does not lose packets to) before the ACK
     * timeouts count. Hardware ignores it.
     */
    public RtrAttributes withConnectTimeout(Duration timeout) {
        return new RtrAttributes(remote, port, sgidIndex, pathMtu, maxDestRdAtomic, minRnrTimer, hopLimit, trafficClass,
                serviceLevel, fabricKey, timeout);
    }
}
