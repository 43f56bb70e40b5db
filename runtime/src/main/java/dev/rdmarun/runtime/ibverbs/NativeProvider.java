package dev.rdmarun.runtime.ibverbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.rdmarun.runtime.Device;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.VerbsProvider;
import dev.rdmarun.runtime.ibverbs.ffi.LibIbverbs;
import dev.rdmarun.runtime.os.Calls;
import dev.rdmarun.runtime.os.Errno;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/** The devices libibverbs lists (hardware, rxe, siw): ibv_get_device_list / ibv_free_device_list. */
public final class NativeProvider implements VerbsProvider {
    @Override
    public int order() {
        return 0;
    }

    @Override
    public Discovery discover() {
        LibIbverbs lib;
        try {
            lib = LibIbverbs.get();
        } catch (UnsatisfiedLinkError e) {
            return Discovery.unavailable(new VerbsException(e.getMessage(), null));
        }
        return Calls.control((arena, errno) -> {
            MemorySegment count = arena.allocate(JAVA_INT);
            MemorySegment array = (MemorySegment) lib.getDeviceList.invokeExact(errno.segment(), count);
            if (array.equals(MemorySegment.NULL)) {
                int err = errno.value();
                String hint = err == Errno.ENOSYS
                        ? "this kernel has no RDMA support: load rdma_rxe and add a Soft-RoCE device"
                                + " (modprobe rdma_rxe; rdma link add rxe0 type rxe netdev eth0), or use a machine with an RDMA NIC"
                        : null;
                return Discovery.unavailable(VerbsException.of("ibv_get_device_list", err, hint));
            }
            int n = count.get(JAVA_INT, 0);
            MemorySegment entries = array.reinterpret(ADDRESS.byteSize() * (n + 1L));
            NativeDevice.Listing listing = new NativeDevice.Listing();
            List<Device> devices = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                MemorySegment dev = entries.getAtIndex(ADDRESS, i);
                String name = LibIbverbs.string((MemorySegment) lib.getDeviceName.invokeExact(dev));
                long guidBigEndian = (long) lib.getDeviceGuid.invokeExact(dev);
                devices.add(new NativeDevice(listing, dev, name, Long.reverseBytes(guidBigEndian)));
            }
            return new Discovery(devices, null, () -> listing.free(lib, array));
        });
    }
}
