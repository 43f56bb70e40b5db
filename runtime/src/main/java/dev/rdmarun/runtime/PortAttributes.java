package dev.rdmarun.runtime;

/** The ibv_port_attr fields rdma-run uses. */
public record PortAttributes(
        int port,
        PortState state,
        Mtu maxMtu,
        Mtu activeMtu,
        int gidTableLength,
        long maxMessageSize,
        int lid,
        LinkLayer linkLayer) {

    /** enum ibv_port_state. */
    public enum PortState {
        NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER, UNKNOWN;

        public static PortState of(int code) {
            PortState[] all = values();
            return code >= 0 && code < all.length - 1 ? all[code] : UNKNOWN;
        }
    }

    /** IBV_LINK_LAYER_*: RoCE ports are ETHERNET and need a GRH (a GID) to address the peer. */
    public enum LinkLayer {
        UNSPECIFIED, INFINIBAND, ETHERNET;

        public static LinkLayer of(int code) {
            return switch (code) {
                case 1 -> INFINIBAND;
                case 2 -> ETHERNET;
                default -> UNSPECIFIED;
            };
        }
    }
}
