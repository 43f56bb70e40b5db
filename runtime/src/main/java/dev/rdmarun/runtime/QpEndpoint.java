package dev.rdmarun.runtime;

/**
 * What a peer needs to connect its QP to this one: the out-of-band exchange carries it
 * (ibv_rc_pingpong's LID:QPN:PSN:GID, plus the port's active MTU for path MTU negotiation).
 */
public record QpEndpoint(int lid, int qpn, int psn, Gid gid, Mtu mtu) {
    public QpEndpoint {
        if (lid < 0 || lid > 0xffff) throw new IllegalArgumentException("LID out of range: " + lid);
        if (qpn <= 0 || qpn > 0xffffff) throw new IllegalArgumentException("QPN out of range: " + qpn);
        if (psn < 0 || psn > 0xffffff) throw new IllegalArgumentException("PSN out of range: " + psn);
        if (gid == null) throw new IllegalArgumentException("endpoint without GID");
        if (mtu == null) throw new IllegalArgumentException("endpoint without MTU");
    }
}
