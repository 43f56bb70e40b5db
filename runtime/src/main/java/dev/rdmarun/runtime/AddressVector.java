package dev.rdmarun.runtime;

/**
 * ibv_ah_attr: how a QP reaches its peer. RoCE always routes through a GRH, so {@link #dgid} is
 * the peer's GID and {@link #sgidIndex} picks the local one; InfiniBand may address by LID only
 * (dgid zero: no GRH).
 */
public record AddressVector(int dlid, Gid dgid, int sgidIndex, int port, int hopLimit, int trafficClass,
                            int serviceLevel) {
    public AddressVector {
        if (dlid < 0 || dlid > 0xffff) throw new IllegalArgumentException("LID out of range: " + dlid);
        if (dgid == null) throw new IllegalArgumentException("address vector without GID (use Gid.ZERO for none)");
        if (sgidIndex < 0 || sgidIndex > 255) throw new IllegalArgumentException("GID index out of range: " + sgidIndex);
        if (port < 1 || port > 255) throw new IllegalArgumentException("port out of range: " + port);
        if (serviceLevel < 0 || serviceLevel > 15) throw new IllegalArgumentException("service level is 0..15");
    }

    /** True when the peer is addressed through a GRH (ah_attr.is_global). */
    public boolean isGlobal() {
        return !dgid.isZero();
    }
}
