package dev.rdmarun.runtime;

/**
 * One RDMA device of a {@link DeviceList}: a libibverbs device, or rdma-run's software emulation.
 * {@link #open(SoftTransport)} gives a {@link Context} that stays valid after the list is closed.
 */
public abstract class Device {
    private final String name;
    private final long nodeGuid;

    protected Device(String name, long nodeGuid) {
        this.name = name;
        this.nodeGuid = nodeGuid;
    }

    public final String name() {
        return name;
    }

    /** Node GUID in host order. */
    public final long nodeGuid() {
        return nodeGuid;
    }

    /** The GUID as ibv_devices prints it: 16 hex digits. */
    public final String nodeGuidHex() {
        return String.format("%016x", nodeGuid);
    }

    /** True for rdma-run's software emulation (no kernel RDMA involved). */
    public abstract boolean isSoftware();

    /** Opens the device; soft0 reaches its peers as {@link SoftTransport#configured()} says. */
    public final Context open() {
        return open(SoftTransport.configured());
    }

    /**
     * Opens the device. {@code softTransport} says how a software device reaches other contexts;
     * a libibverbs device ignores it.
     */
    public abstract Context open(SoftTransport softTransport);

    @Override
    public String toString() {
        return name + " (" + nodeGuidHex() + (isSoftware() ? ", software emulation" : "") + ")";
    }
}
