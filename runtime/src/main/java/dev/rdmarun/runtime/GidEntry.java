package dev.rdmarun.runtime;

/** One valid GID table entry of a port: what show_gids prints. netdev is null when none is bound. */
public record GidEntry(int port, int index, Gid gid, GidType type, String netdev) {
    /** Dotted IPv4 of an IPv4-mapped GID, else null. */
    public String ipv4() {
        return gid.ipv4();
    }
}
