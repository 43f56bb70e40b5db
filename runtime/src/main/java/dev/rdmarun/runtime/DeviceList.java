package dev.rdmarun.runtime;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.rdmarun.runtime.ffi.Errno;
import dev.rdmarun.runtime.ffi.LibIbverbs;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

/** ibv_get_device_list / ibv_free_device_list as a closeable list. */
public final class DeviceList implements AutoCloseable {
    private final MemorySegment array;
    private final List<Device> devices;
    private volatile boolean closed;

    private DeviceList(MemorySegment array, List<Device> devices) {
        this.array = array;
        this.devices = devices;
    }

    /**
     * The RDMA devices of this machine. An empty list when there are none; a
     * {@link VerbsException} with a hint when the kernel has no RDMA support at all.
     */
    public static DeviceList open() {
        LibIbverbs lib = LibIbverbs.get();
        try (Arena arena = Arena.ofConfined()) {
            Errno errno = new Errno(arena);
            MemorySegment count = arena.allocate(JAVA_INT);
            MemorySegment array = (MemorySegment) lib.getDeviceList.invokeExact(errno.segment(), count);
            if (array.equals(MemorySegment.NULL)) {
                int err = errno.value();
                if (err == Errno.ENOSYS) {
                    throw VerbsException.of("ibv_get_device_list", err,
                            "this kernel has no RDMA support: load rdma_rxe and add a Soft-RoCE device"
                                    + " (modprobe rdma_rxe; rdma link add rxe0 type rxe netdev eth0), or use a machine with an RDMA NIC");
                }
                throw VerbsException.of("ibv_get_device_list", err, null);
            }
            int n = count.get(JAVA_INT, 0);
            MemorySegment entries = array.reinterpret(ADDRESS.byteSize() * (n + 1L));
            List<Device> devices = new ArrayList<>(n);
            DeviceList list = new DeviceList(array, devices);
            for (int i = 0; i < n; i++) {
                MemorySegment dev = entries.getAtIndex(ADDRESS, i);
                String name = LibIbverbs.string((MemorySegment) lib.getDeviceName.invokeExact(dev));
                long guidBigEndian = (long) lib.getDeviceGuid.invokeExact(dev);
                devices.add(new Device(list, dev, name, Long.reverseBytes(guidBigEndian)));
            }
            return list;
        } catch (VerbsException | UnsatisfiedLinkError e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    public List<Device> devices() {
        ensureOpen();
        return List.copyOf(devices);
    }

    /** The device with this name, or an exception that lists the devices there are. */
    public Device find(String name) {
        ensureOpen();
        for (Device d : devices) if (d.name().equals(name)) return d;
        String known = devices.isEmpty() ? "there are no RDMA devices"
                : "devices: " + devices.stream().map(Device::name).collect(Collectors.joining(", "));
        throw new VerbsException("no RDMA device named '" + name + "'", known);
    }

    void ensureOpen() {
        if (closed) throw new IllegalStateException("device list is closed");
    }

    @Override
    public synchronized void close() {
        if (closed) return;
        closed = true;
        try {
            LibIbverbs.get().freeDeviceList.invokeExact(array);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
