package dev.rdmarun.runtime;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.rdmarun.runtime.ffi.ContextOps;
import dev.rdmarun.runtime.ffi.Errno;
import dev.rdmarun.runtime.ffi.LibC;
import dev.rdmarun.runtime.ffi.LibIbverbs;
import dev.rdmarun.runtime.ffi.Structs;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Collectors;

/** An open device (ibv_context): queries, and the factory of PDs, completion channels and CQs. */
public final class Context extends VerbsResource {
    private final String deviceName;
    final MemorySegment handle;
    final ContextOps ops;
    final LibIbverbs lib;

    private Context(String deviceName, MemorySegment handle, LibIbverbs lib) {
        super("context of " + deviceName);
        this.deviceName = deviceName;
        this.handle = handle;
        this.lib = lib;
        this.ops = new ContextOps(handle);
    }

    static Context open(Device device, MemorySegment deviceHandle) {
        LibIbverbs lib = LibIbverbs.get();
        try (Arena arena = Arena.ofConfined()) {
            Errno errno = new Errno(arena);
            MemorySegment ctx = (MemorySegment) lib.openDevice.invokeExact(errno.segment(), deviceHandle);
            if (ctx.equals(MemorySegment.NULL)) {
                throw VerbsException.of("ibv_open_device(" + device.name() + ")", errno.value(),
                        "check permissions on /dev/infiniband/uverbs* and that the provider package (ibverbs-providers) is installed");
            }
            return new Context(device.name(), ctx, lib);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Opens the device with this name; the error lists the devices there are. */
    public static Context open(String deviceName) {
        try (DeviceList list = DeviceList.open()) {
            return list.find(deviceName).open();
        }
    }

    public String deviceName() {
        return deviceName;
    }

    public DeviceAttributes queryDevice() {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            Errno errno = new Errno(arena);
            MemorySegment a = arena.allocate(Structs.IBV_DEVICE_ATTR);
            int rc = (int) lib.queryDevice.invokeExact(errno.segment(), handle, a);
            if (rc != 0) throw VerbsException.of("ibv_query_device", rc > 0 ? rc : errno.value(), null);
            var L = Structs.IBV_DEVICE_ATTR;
            return new DeviceAttributes(
                    a.asSlice(Structs.DEVICE_ATTR_FW_VER, 64).getString(0),
                    Long.reverseBytes(a.get(JAVA_LONG, Structs.offset(L, "node_guid"))),
                    a.get(JAVA_LONG, Structs.offset(L, "max_mr_size")),
                    a.get(JAVA_INT, Structs.offset(L, "vendor_id")),
                    a.get(JAVA_INT, Structs.offset(L, "vendor_part_id")),
                    a.get(JAVA_INT, Structs.offset(L, "max_qp")),
                    a.get(JAVA_INT, Structs.offset(L, "max_qp_wr")),
                    a.get(JAVA_INT, Structs.offset(L, "max_sge")),
                    a.get(JAVA_INT, Structs.offset(L, "max_cq")),
                    a.get(JAVA_INT, Structs.offset(L, "max_cqe")),
                    a.get(JAVA_INT, Structs.offset(L, "max_mr")),
                    a.get(JAVA_INT, Structs.offset(L, "max_pd")),
                    a.get(JAVA_INT, Structs.offset(L, "max_qp_rd_atom")),
                    a.get(JAVA_INT, Structs.offset(L, "max_qp_init_rd_atom")),
                    DeviceAttributes.AtomicCapability.of(a.get(JAVA_INT, Structs.offset(L, "atomic_cap"))),
                    Byte.toUnsignedInt(a.get(JAVA_BYTE, Structs.offset(L, "phys_port_cnt"))));
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /**
     * ibv_query_port as the verbs.h macro does it: the verbs_context op with the full struct when
     * the provider has one, else the exported compat symbol on a zeroed struct.
     */
    public PortAttributes queryPort(int port) {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(Structs.IBV_PORT_ATTR); // zeroed
            int rc;
            int errnoValue = 0;
            if (ops.queryPortExtended != null) {
                rc = (int) ops.queryPortExtended.invokeExact(handle, (byte) port, a, Structs.IBV_PORT_ATTR.byteSize());
                errnoValue = rc;
            } else {
                Errno errno = new Errno(arena);
                rc = (int) lib.queryPortCompat.invokeExact(errno.segment(), handle, (byte) port, a);
                errnoValue = rc > 0 ? rc : errno.value();
            }
            if (rc != 0) {
                throw VerbsException.of("ibv_query_port(" + deviceName + ", port " + port + ")", errnoValue,
                        "ports are numbered from 1; " + deviceName + " has " + queryDevice().physPortCount());
            }
            var L = Structs.IBV_PORT_ATTR;
            return new PortAttributes(port,
                    PortAttributes.PortState.of(a.get(JAVA_INT, Structs.offset(L, "state"))),
                    Mtu.ofCode(a.get(JAVA_INT, Structs.offset(L, "max_mtu"))),
                    Mtu.ofCode(a.get(JAVA_INT, Structs.offset(L, "active_mtu"))),
                    a.get(JAVA_INT, Structs.offset(L, "gid_tbl_len")),
                    Integer.toUnsignedLong(a.get(JAVA_INT, Structs.offset(L, "max_msg_sz"))),
                    Short.toUnsignedInt(a.get(JAVA_SHORT, Structs.offset(L, "lid"))),
                    PortAttributes.LinkLayer.of(Byte.toUnsignedInt(a.get(JAVA_BYTE, Structs.offset(L, "link_layer")))));
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Every valid GID of every port, with its RoCE type and netdev (ibv_query_gid_table). */
    public List<GidEntry> gidTable() {
        ensureOpen();
        int ports = queryDevice().physPortCount();
        long max = 0;
        for (int p = 1; p <= ports; p++) max += queryPort(p).gidTableLength();
        if (max == 0) return List.of();
        try (Arena arena = Arena.ofConfined()) {
            Errno errno = new Errno(arena);
            long size = Structs.IBV_GID_ENTRY.byteSize();
            MemorySegment entries = arena.allocate(Structs.IBV_GID_ENTRY, max);
            long n = (long) lib.queryGidTable.invokeExact(errno.segment(), handle, entries, max, 0, size);
            if (n < 0) throw VerbsException.of("ibv_query_gid_table(" + deviceName + ")", (int) -n, null);
            List<GidEntry> result = new ArrayList<>((int) n);
            for (long i = 0; i < n; i++) {
                MemorySegment e = entries.asSlice(i * size, size);
                result.add(new GidEntry(
                        e.get(JAVA_INT, Structs.GID_ENTRY_PORT),
                        e.get(JAVA_INT, Structs.GID_ENTRY_INDEX),
                        Gid.read(e, Structs.GID_ENTRY_GID),
                        GidType.of(e.get(JAVA_INT, Structs.GID_ENTRY_TYPE)),
                        LibC.interfaceName(e.get(JAVA_INT, Structs.GID_ENTRY_IFINDEX))));
            }
            result.sort(Comparator.comparingInt(GidEntry::port).thenComparingInt(GidEntry::index));
            return List.copyOf(result);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** The valid GIDs of one port. */
    public List<GidEntry> gidTable(int port) {
        return gidTable().stream().filter(g -> g.port() == port).toList();
    }

    /** The GID entry with this index, or an exception listing the valid ones. */
    public GidEntry gid(int port, int index) {
        List<GidEntry> table = gidTable(port);
        for (GidEntry e : table) if (e.index() == index) return e;
        throw new VerbsException("GID index " + index + " of " + deviceName + " port " + port + " is empty",
                describeChoices(table));
    }

    /**
     * The GID rdma-run uses when none is given: the first RoCE v2 IPv4 GID, else the first RoCE v2
     * one, else the first valid one (InfiniBand ports and RoCE v1).
     */
    public GidEntry defaultGid(int port) {
        return defaultGid(gidTable(port))
                .orElseThrow(() -> new VerbsException(deviceName + " port " + port + " has no valid GID",
                        "a RoCE port needs an IP address on its netdev (ip addr add ... dev <netdev>)"));
    }

    /** The default pick among these entries (see {@link #defaultGid(int)}). */
    public static java.util.Optional<GidEntry> defaultGid(List<GidEntry> entries) {
        return entries.stream().filter(e -> e.type() == GidType.ROCE_V2 && e.gid().isIpv4Mapped()).findFirst()
                .or(() -> entries.stream().filter(e -> e.type() == GidType.ROCE_V2).findFirst())
                .or(() -> entries.stream().findFirst());
    }

    /** A hint that lists the RoCE v2 GIDs (or all, when there is none) of a port. */
    static String describeChoices(List<GidEntry> table) {
        List<GidEntry> v2 = table.stream().filter(e -> e.type() == GidType.ROCE_V2).toList();
        List<GidEntry> shown = v2.isEmpty() ? table : v2;
        if (shown.isEmpty()) return "the port has no valid GID: give its netdev an IP address";
        return "valid " + (v2.isEmpty() ? "" : "RoCE v2 ") + "GID indexes: " + shown.stream()
                .map(e -> e.index() + " (" + (e.ipv4() != null ? e.ipv4() : e.gid().toString())
                        + (e.netdev() != null ? " on " + e.netdev() : "") + ")")
                .collect(Collectors.joining(", "));
    }

    public ProtectionDomain allocateProtectionDomain() {
        ensureOpen();
        return ProtectionDomain.allocate(this);
    }

    public CompletionChannel createCompletionChannel() {
        ensureOpen();
        return CompletionChannel.create(this);
    }

    /** A CQ of at least {@code entries} entries; with a channel it can deliver completion events. */
    public CompletionQueue createCompletionQueue(int entries, CompletionChannel channel) {
        ensureOpen();
        return CompletionQueue.create(this, entries, channel);
    }

    public CompletionQueue createCompletionQueue(int entries) {
        return createCompletionQueue(entries, null);
    }

    @Override
    protected void destroy() {
        try (Arena arena = Arena.ofConfined()) {
            Errno errno = new Errno(arena);
            int rc = (int) lib.closeDevice.invokeExact(errno.segment(), handle);
            if (rc != 0) throw VerbsException.of("ibv_close_device(" + deviceName + ")", errno.value(), null);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    @Override
    public String toString() {
        return "Context[" + deviceName + "]";
    }

    static MemorySegment pointer(MemorySegment segment) {
        return segment.get(ADDRESS, 0);
    }
}
