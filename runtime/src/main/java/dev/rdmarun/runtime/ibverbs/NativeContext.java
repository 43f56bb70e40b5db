package dev.rdmarun.runtime.ibverbs;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.rdmarun.runtime.CompletionChannel;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.DeviceAttributes;
import dev.rdmarun.runtime.Gid;
import dev.rdmarun.runtime.GidEntry;
import dev.rdmarun.runtime.GidType;
import dev.rdmarun.runtime.Mtu;
import dev.rdmarun.runtime.PortAttributes;
import dev.rdmarun.runtime.ProtectionDomain;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.ibverbs.ffi.ContextOps;
import dev.rdmarun.runtime.ibverbs.ffi.LibIbverbs;
import dev.rdmarun.runtime.ibverbs.ffi.Structs;
import dev.rdmarun.runtime.os.CStruct;
import dev.rdmarun.runtime.os.Calls;
import dev.rdmarun.runtime.os.LibC;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/** ibv_context of a libibverbs device, with its provider's fast-path ops bound once. */
final class NativeContext extends Context {
    final MemorySegment handle;
    final ContextOps ops;
    final LibIbverbs lib;

    private NativeContext(String deviceName, MemorySegment handle, LibIbverbs lib) {
        super(deviceName);
        this.handle = handle;
        this.lib = lib;
        this.ops = new ContextOps(handle);
    }

    static NativeContext open(String name, MemorySegment deviceHandle) {
        LibIbverbs lib = LibIbverbs.get();
        return Calls.control((arena, errno) -> {
            MemorySegment ctx = (MemorySegment) lib.openDevice.invokeExact(errno.segment(), deviceHandle);
            if (ctx.equals(MemorySegment.NULL)) {
                throw VerbsException.of("ibv_open_device(" + name + ")", errno.value(),
                        "check permissions on /dev/infiniband/uverbs* and that the provider package (ibverbs-providers) is installed");
            }
            return new NativeContext(name, ctx, lib);
        });
    }

    @Override
    public boolean isSoftware() {
        return false;
    }

    @Override
    protected DeviceAttributes deviceAttributes() {
        return Calls.control((arena, errno) -> {
            MemorySegment a = arena.allocate(Structs.IBV_DEVICE_ATTR);
            int rc = (int) lib.queryDevice.invokeExact(errno.segment(), handle, a);
            if (rc != 0) throw VerbsException.of("ibv_query_device", rc > 0 ? rc : errno.value(), null);
            var L = Structs.IBV_DEVICE_ATTR;
            return new DeviceAttributes(
                    a.asSlice(Structs.DEVICE_ATTR_FW_VER, 64).getString(0),
                    Long.reverseBytes(a.get(JAVA_LONG, CStruct.offset(L, "node_guid"))),
                    a.get(JAVA_LONG, CStruct.offset(L, "max_mr_size")),
                    a.get(JAVA_INT, CStruct.offset(L, "vendor_id")),
                    a.get(JAVA_INT, CStruct.offset(L, "vendor_part_id")),
                    a.get(JAVA_INT, CStruct.offset(L, "max_qp")),
                    a.get(JAVA_INT, CStruct.offset(L, "max_qp_wr")),
                    a.get(JAVA_INT, CStruct.offset(L, "max_sge")),
                    a.get(JAVA_INT, CStruct.offset(L, "max_cq")),
                    a.get(JAVA_INT, CStruct.offset(L, "max_cqe")),
                    a.get(JAVA_INT, CStruct.offset(L, "max_mr")),
                    a.get(JAVA_INT, CStruct.offset(L, "max_pd")),
                    a.get(JAVA_INT, CStruct.offset(L, "max_qp_rd_atom")),
                    a.get(JAVA_INT, CStruct.offset(L, "max_qp_init_rd_atom")),
                    DeviceAttributes.AtomicCapability.of(a.get(JAVA_INT, CStruct.offset(L, "atomic_cap"))),
                    Byte.toUnsignedInt(a.get(JAVA_BYTE, CStruct.offset(L, "phys_port_cnt"))));
        });
    }

    /**
     * ibv_query_port as the verbs.h macro does it: the verbs_context op with the full struct when
     * the provider has one, else the exported compat symbol on a zeroed struct.
     */
    @Override
    protected PortAttributes portAttributes(int port) {
        return Calls.control((arena, errno) -> {
            MemorySegment a = arena.allocate(Structs.IBV_PORT_ATTR); // zeroed
            int rc;
            int errnoValue;
            if (ops.queryPortExtended != null) {
                rc = (int) ops.queryPortExtended.invokeExact(handle, (byte) port, a, Structs.IBV_PORT_ATTR.byteSize());
                errnoValue = rc;
            } else {
                rc = (int) lib.queryPortCompat.invokeExact(errno.segment(), handle, (byte) port, a);
                errnoValue = rc > 0 ? rc : errno.value();
            }
            if (rc != 0) {
                throw VerbsException.of("ibv_query_port(" + deviceName() + ", port " + port + ")", errnoValue,
                        "ports are numbered from 1; " + deviceName() + " has " + deviceAttributes().physPortCount());
            }
            var L = Structs.IBV_PORT_ATTR;
            return new PortAttributes(port,
                    PortAttributes.PortState.of(a.get(JAVA_INT, CStruct.offset(L, "state"))),
                    Mtu.ofCode(a.get(JAVA_INT, CStruct.offset(L, "max_mtu"))),
                    Mtu.ofCode(a.get(JAVA_INT, CStruct.offset(L, "active_mtu"))),
                    a.get(JAVA_INT, CStruct.offset(L, "gid_tbl_len")),
                    Integer.toUnsignedLong(a.get(JAVA_INT, CStruct.offset(L, "max_msg_sz"))),
                    Short.toUnsignedInt(a.get(JAVA_SHORT, CStruct.offset(L, "lid"))),
                    PortAttributes.LinkLayer.of(Byte.toUnsignedInt(a.get(JAVA_BYTE, CStruct.offset(L, "link_layer")))));
        });
    }

    @Override
    protected List<GidEntry> readGidTable() {
        int ports = deviceAttributes().physPortCount();
        long max = 0;
        for (int p = 1; p <= ports; p++) max += portAttributes(p).gidTableLength();
        if (max == 0) return List.of();
        long entries = max;
        return Calls.control((arena, errno) -> {
            long size = Structs.IBV_GID_ENTRY.byteSize();
            MemorySegment table = arena.allocate(Structs.IBV_GID_ENTRY, entries);
            long n = (long) lib.queryGidTable.invokeExact(errno.segment(), handle, table, entries, 0, size);
            if (n < 0) throw VerbsException.of("ibv_query_gid_table(" + deviceName() + ")", (int) -n, null);
            List<GidEntry> result = new ArrayList<>((int) n);
            for (long i = 0; i < n; i++) {
                MemorySegment e = table.asSlice(i * size, size);
                result.add(new GidEntry(
                        e.get(JAVA_INT, Structs.GID_ENTRY_PORT),
                        e.get(JAVA_INT, Structs.GID_ENTRY_INDEX),
                        Gid.read(e, Structs.GID_ENTRY_GID),
                        GidType.of(e.get(JAVA_INT, Structs.GID_ENTRY_TYPE)),
                        LibC.interfaceName(e.get(JAVA_INT, Structs.GID_ENTRY_IFINDEX))));
            }
            return result;
        });
    }

    @Override
    protected ProtectionDomain newProtectionDomain() {
        return NativeProtectionDomain.allocate(this);
    }

    @Override
    protected CompletionChannel newCompletionChannel() {
        return NativeCompletionChannel.create(this);
    }

    @Override
    protected CompletionQueue newCompletionQueue(int entries, CompletionChannel channel) {
        return NativeCompletionQueue.create(this, entries, (NativeCompletionChannel) channel);
    }

    @Override
    protected void destroy() {
        Calls.control((arena, errno) -> {
            int rc = (int) lib.closeDevice.invokeExact(errno.segment(), handle);
            if (rc != 0) throw VerbsException.of("ibv_close_device(" + deviceName() + ")", errno.value(), null);
            return null;
        });
    }
}
