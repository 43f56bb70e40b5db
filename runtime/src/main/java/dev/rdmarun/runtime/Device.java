package dev.rdmarun.runtime;

import java.lang.foreign.MemorySegment;

/**
 * One RDMA device of a {@link DeviceList}. Valid while its list is open; {@link #open()} gives
 * a {@link Context} that stays valid after the list is closed (as ibv_open_device allows).
 */
public final class Device {
    private final DeviceList list;
    private final MemorySegment handle;
    private final String name;
    private final long nodeGuid;

    Device(DeviceList list, MemorySegment handle, String name, long nodeGuid) {
        this.list = list;
        this.handle = handle;
        this.name = name;
        this.nodeGuid = nodeGuid;
    }

    public String name() {
        return name;
    }

    /** Node GUID in host order (ibv_get_device_guid gives it big-endian). */
    public long nodeGuid() {
        return nodeGuid;
    }

    /** The GUID as ibv_devices prints it: 16 hex digits. */
    public String nodeGuidHex() {
        return String.format("%016x", nodeGuid);
    }

    public Context open() {
        list.ensureOpen();
        return Context.open(this, handle);
    }

    @Override
    public String toString() {
        return name + " (" + nodeGuidHex() + ")";
    }
}
