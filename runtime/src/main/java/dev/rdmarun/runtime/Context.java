package dev.rdmarun.runtime;

import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * An open device (ibv_context): queries, and the factory of PDs, completion channels and CQs.
 * Each provider (the libibverbs binding, the software emulation) implements it; code above the
 * runtime sees only this class.
 */
public abstract non-sealed class Context extends VerbsResource {
    private final String deviceName;

    protected Context(String deviceName) {
        super("context of " + deviceName);
        this.deviceName = deviceName;
    }

    /** Opens the device with this name; the error lists the devices there are. */
    public static Context open(String deviceName) {
        try (DeviceList list = DeviceList.open()) {
            return list.find(deviceName).open();
        }
    }

    public final String deviceName() {
        return deviceName;
    }

    /** True for rdma-run's software emulation, false for a device driven through libibverbs. */
    public abstract boolean isSoftware();

    public final DeviceAttributes queryDevice() {
        ensureOpen();
        return deviceAttributes();
    }

    /** ibv_query_port; ports are numbered from 1. */
    public final PortAttributes queryPort(int port) {
        ensureOpen();
        return portAttributes(port);
    }

    /** Every valid GID of every port, with its RoCE type and netdev (ibv_query_gid_table), by port and index. */
    public final List<GidEntry> gidTable() {
        ensureOpen();
        return readGidTable().stream()
                .sorted(Comparator.comparingInt(GidEntry::port).thenComparingInt(GidEntry::index))
                .toList();
    }

    /**
     * The LID a peer addresses this port with when this side uses the GID at {@code gidIndex}
     * ({@link QueuePair#localEndpoint}). Hardware: the port's LID. A provider whose address depends
     * on the GID (soft0: the port of its listener on that GID's address) overrides it.
     */
    protected int endpointLid(int port, int gidIndex) {
        return queryPort(port).lid();
    }

    /** The valid GIDs of one port. */
    public final List<GidEntry> gidTable(int port) {
        return gidTable().stream().filter(g -> g.port() == port).toList();
    }

    /** The GID entry with this index, or an exception listing the valid ones. */
    public final GidEntry gid(int port, int index) {
        List<GidEntry> table = gidTable(port);
        for (GidEntry e : table) if (e.index() == index) return e;
        throw new VerbsException("GID index " + index + " of " + deviceName + " port " + port + " is empty",
                describeChoices(table));
    }

    /**
     * The GID rdma-run uses when none is given: the first RoCE v2 IPv4 GID, else the first RoCE v2
     * one, else the first valid one (InfiniBand ports and RoCE v1).
     */
    public final GidEntry defaultGid(int port) {
        return defaultGid(gidTable(port))
                .orElseThrow(() -> new VerbsException(deviceName + " port " + port + " has no valid GID",
                        "a RoCE port needs an IP address on its netdev (ip addr add ... dev <netdev>)"));
    }

    /** The default pick among these entries (see {@link #defaultGid(int)}). */
    public static Optional<GidEntry> defaultGid(List<GidEntry> entries) {
        return entries.stream().filter(e -> e.type() == GidType.ROCE_V2 && e.gid().isIpv4Mapped()).findFirst()
                .or(() -> entries.stream().filter(e -> e.type() == GidType.ROCE_V2).findFirst())
                .or(() -> entries.stream().findFirst());
    }

    /** A hint that lists the RoCE v2 GIDs (or all, when there is none) of a port. */
    public static String describeChoices(List<GidEntry> table) {
        List<GidEntry> v2 = table.stream().filter(e -> e.type() == GidType.ROCE_V2).toList();
        List<GidEntry> shown = v2.isEmpty() ? table : v2;
        if (shown.isEmpty()) return "the port has no valid GID: give its netdev an IP address";
        return "valid " + (v2.isEmpty() ? "" : "RoCE v2 ") + "GID indexes: " + shown.stream()
                .map(e -> e.index() + " (" + (e.ipv4() != null ? e.ipv4() : e.gid().toString())
                        + (e.netdev() != null ? " on " + e.netdev() : "") + ")")
                .collect(Collectors.joining(", "));
    }

    public final ProtectionDomain allocateProtectionDomain() {
        ensureOpen();
        return newProtectionDomain();
    }

    public final CompletionChannel createCompletionChannel() {
        ensureOpen();
        return newCompletionChannel();
    }

    /** A CQ of at least {@code entries} entries; with a channel it can deliver completion events. */
    public final CompletionQueue createCompletionQueue(int entries, CompletionChannel channel) {
        ensureOpen();
        if (entries < 1) throw new IllegalArgumentException("a CQ needs at least 1 entry, not " + entries);
        if (channel != null && channel.context() != this) {
            throw new IllegalArgumentException("the completion channel belongs to another device");
        }
        return newCompletionQueue(entries, channel);
    }

    public final CompletionQueue createCompletionQueue(int entries) {
        return createCompletionQueue(entries, null);
    }

    @Override
    public String toString() {
        return "Context[" + deviceName + "]";
    }

    // ---- what a provider implements; called on an open context ----

    protected abstract DeviceAttributes deviceAttributes();

    protected abstract PortAttributes portAttributes(int port);

    protected abstract List<GidEntry> readGidTable();

    protected abstract ProtectionDomain newProtectionDomain();

    protected abstract CompletionChannel newCompletionChannel();

    protected abstract CompletionQueue newCompletionQueue(int entries, CompletionChannel channel);
}
