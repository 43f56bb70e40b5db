package dev.rdmarun.runtime;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.ServiceLoader;
import java.util.stream.Collectors;

/**
 * The devices of every {@link VerbsProvider}: the libibverbs ones first, rdma-run's software
 * emulation last, so the default (first) device is real hardware or rxe whenever there is one.
 * Closing the list frees the providers' device lists; opened contexts stay valid.
 */
public final class DeviceList implements AutoCloseable {
    private final List<Device> devices;
    private final List<VerbsException> unavailable;
    private final List<Runnable> releases;
    private volatile boolean closed;

    private DeviceList(List<Device> devices, List<VerbsException> unavailable, List<Runnable> releases) {
        this.devices = List.copyOf(devices);
        this.unavailable = List.copyOf(unavailable);
        this.releases = releases;
    }

    /** Lists the devices of every provider. Never fails for a provider that cannot run here: see {@link #unavailable()}. */
    public static DeviceList open() {
        List<VerbsProvider> providers = new ArrayList<>();
        ServiceLoader.load(VerbsProvider.class, DeviceList.class.getClassLoader()).forEach(providers::add);
        providers.sort(Comparator.comparingInt(VerbsProvider::order));
        List<Device> devices = new ArrayList<>();
        List<VerbsException> unavailable = new ArrayList<>();
        List<Runnable> releases = new ArrayList<>();
        for (VerbsProvider p : providers) {
            VerbsProvider.Discovery d = p.discover();
            devices.addAll(d.devices());
            if (d.unavailable() != null) unavailable.add(d.unavailable());
            releases.add(d.release());
        }
        return new DeviceList(devices, unavailable, releases);
    }

    /** Every device, real ones first. */
    public List<Device> devices() {
        ensureOpen();
        return devices;
    }

    /** The devices driven through libibverbs (hardware, rxe, siw), without the software emulation. */
    public List<Device> kernelDevices() {
        return devices().stream().filter(d -> !d.isSoftware()).toList();
    }

    /** Why a provider has no devices on this machine (e.g. "this kernel has no RDMA support"); empty when all could list. */
    public List<VerbsException> unavailable() {
        return unavailable;
    }

    /** The device with this name, or an exception that lists the devices there are (and why others are missing). */
    public Device find(String name) {
        ensureOpen();
        for (Device d : devices) if (d.name().equals(name)) return d;
        String names = devices.stream().map(Device::name).collect(Collectors.joining(", "));
        // Where only the software provider is, its name is the way out: say so.
        String known = devices.isEmpty() ? "there are no RDMA devices"
                : devices.stream().allMatch(Device::isSoftware)
                        ? "devices: " + names + ", rdma-run's software provider (-d " + devices.get(0).name() + " runs there)"
                        : "devices: " + names;
        String why = unavailable.stream().map(VerbsException::describeInline).collect(Collectors.joining("; "));
        throw new VerbsException("no RDMA device named '" + name + "'", why.isEmpty() ? known : known + "; " + why);
    }

    /** The device used when none is named: the first one (real devices come first). */
    public Device defaultDevice() {
        ensureOpen();
        if (devices.isEmpty()) throw new VerbsException("there are no RDMA devices", null);
        return devices.get(0);
    }

    void ensureOpen() {
        if (closed) throw new IllegalStateException("device list is closed");
    }

    @Override
    public synchronized void close() {
        if (closed) return;
        closed = true;
        for (Runnable r : releases) r.run();
    }
}
