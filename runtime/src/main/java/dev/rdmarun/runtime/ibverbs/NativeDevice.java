package dev.rdmarun.runtime.ibverbs;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.Device;
import dev.rdmarun.runtime.SoftTransport;
import dev.rdmarun.runtime.ibverbs.ffi.LibIbverbs;
import java.lang.foreign.MemorySegment;

/** A libibverbs device. Valid while its listing is not freed; its contexts outlive the listing (as ibv_open_device allows). */
final class NativeDevice extends Device {
    /** Shared by the devices of one ibv_get_device_list call. */
    static final class Listing {
        private boolean freed;

        synchronized void free(LibIbverbs lib, MemorySegment array) {
            if (freed) return;
            freed = true;
            try {
                lib.freeDeviceList.invokeExact(array);
            } catch (Throwable t) {
                throw new IllegalStateException(t);
            }
        }

        synchronized void ensureListed() {
            if (freed) throw new IllegalStateException("device list is closed");
        }
    }

    private final Listing listing;
    private final MemorySegment handle;

    NativeDevice(Listing listing, MemorySegment handle, String name, long nodeGuid) {
        super(name, nodeGuid);
        this.listing = listing;
        this.handle = handle;
    }

    @Override
    public boolean isSoftware() {
        return false;
    }

    @Override
    public Context open(SoftTransport softTransport) {
        listing.ensureListed();
        return NativeContext.open(name(), handle);
    }
}
