package dev.rdmarun.runtime;

import java.util.List;

/**
 * A source of RDMA devices behind the one verbs API: the libibverbs binding, or the software
 * emulation. {@link DeviceList} finds providers with {@link java.util.ServiceLoader} and lists
 * their devices in {@link #order()}, so real devices come before emulated ones.
 */
public interface VerbsProvider {
    /** Lower first: devices of a lower order are listed (and chosen by default) first. */
    int order();

    /** The devices this provider has here, or why it has none. */
    Discovery discover();

    /**
     * What {@link #discover()} found. {@code unavailable} says why a provider cannot run on this
     * machine (no kernel RDMA support, libibverbs missing), else null; {@code release} frees what
     * listing needed (ibv_free_device_list) once the list is closed.
     */
    record Discovery(List<Device> devices, VerbsException unavailable, Runnable release) {
        public static Discovery unavailable(VerbsException why) {
            return new Discovery(List.of(), why, () -> { });
        }
    }
}
