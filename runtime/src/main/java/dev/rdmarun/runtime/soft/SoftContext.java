package dev.rdmarun.runtime.soft;

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
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * An open soft0: its one port (RoCE v2-style: QPs are addressed by GID, the host's IPv4
 * addresses, and by LID, the TCP port of this context's transport), its engine thread, and the
 * tables the engine resolves QP numbers and memory keys with.
 */
final class SoftContext extends Context {
    static final int MAX_QP = 1 << 14;
    static final int MAX_MR = 1 << 14;
    static final int MAX_QP_WR = 1 << 14;
    static final int MAX_CQE = 1 << 20;
    static final int MAX_INLINE = 1024;
    static final int MAX_RD_ATOMIC = 16;
    static final long MAX_MESSAGE = 1L << 24;
    static final int PORT = 1;
    /** QP numbers start here, as rxe's do (0 and 1 are the special QPs). */
    static final int FIRST_QPN = 16;

    private final DeviceAttributes attributes;
    private final List<GidEntry> gids;
    final Engine engine;
    final PacketPool pool = new PacketPool(4096);
    final TcpTransport transport;
    private final AtomicReferenceArray<SoftQueuePair> qps = new AtomicReferenceArray<>(MAX_QP);
    private final AtomicReferenceArray<SoftMemoryRegion> mrs = new AtomicReferenceArray<>(MAX_MR);
    private final byte[] mrGenerations = new byte[MAX_MR];
    private final boolean[] mrUsed = new boolean[MAX_MR];

    private SoftContext(SoftDevice device) {
        super(device.name());
        this.gids = hostGids();
        this.engine = new Engine(this, device.name() + "-engine");
        this.transport = TcpTransport.listen(this);
        this.attributes = new DeviceAttributes("rdma-run software emulation 1", device.nodeGuid(), Long.MAX_VALUE,
                0, 0, MAX_QP, MAX_QP_WR, 1, MAX_QP, MAX_CQE, MAX_MR, MAX_QP, MAX_RD_ATOMIC, MAX_RD_ATOMIC,
                DeviceAttributes.AtomicCapability.HCA, 1);
        engine.start();
        SoftFabric.register(this);
    }

    static SoftContext open(SoftDevice device) {
        return new SoftContext(device);
    }

    @Override
    public boolean isSoftware() {
        return true;
    }

    /** This context's port LID: the TCP port its transport listens on, unique on this host. */
    int lid() {
        return transport.port();
    }

    boolean hasAddress(Gid gid) {
        for (GidEntry e : gids) if (e.gid().equals(gid)) return true;
        return false;
    }

    /** The host's IPv4 addresses as RoCE v2 GIDs: interfaces that are up, loopback last. */
    private static List<GidEntry> hostGids() {
        record Address(boolean loopback, int ifindex, String netdev, InetAddress ip) {}
        List<Address> found = new ArrayList<>();
        try {
            for (NetworkInterface nic : Collections.list(NetworkInterface.getNetworkInterfaces())) {
                if (!nic.isUp()) continue;
                for (InetAddress a : Collections.list(nic.getInetAddresses())) {
                    if (a instanceof Inet4Address) found.add(new Address(nic.isLoopback(), nic.getIndex(), nic.getName(), a));
                }
            }
        } catch (SocketException e) {
            // no interfaces readable: loopback only
        }
        if (found.isEmpty()) found.add(new Address(true, 1, "lo", InetAddress.getLoopbackAddress()));
        found.sort(Comparator.comparing(Address::loopback).thenComparingInt(Address::ifindex));
        List<GidEntry> table = new ArrayList<>();
        for (int i = 0; i < found.size(); i++) {
            byte[] raw = new byte[16];
            raw[10] = (byte) 0xff;
            raw[11] = (byte) 0xff;
            System.arraycopy(found.get(i).ip().getAddress(), 0, raw, 12, 4);
            table.add(new GidEntry(PORT, i, new Gid(raw), GidType.ROCE_V2, found.get(i).netdev()));
        }
        return List.copyOf(table);
    }

    @Override
    protected DeviceAttributes deviceAttributes() {
        return attributes;
    }

    @Override
    protected PortAttributes portAttributes(int port) {
        if (port != PORT) {
            throw new dev.rdmarun.runtime.VerbsException("ibv_query_port(" + deviceName() + ", port " + port
                    + ") failed: Invalid argument (errno 22)", 22, "ports are numbered from 1; " + deviceName() + " has 1");
        }
        return new PortAttributes(PORT, PortAttributes.PortState.ACTIVE, Mtu.MTU_4096, Mtu.MTU_4096, gids.size(),
                MAX_MESSAGE, lid(), PortAttributes.LinkLayer.ETHERNET);
    }

    @Override
    protected List<GidEntry> readGidTable() {
        return gids;
    }

    @Override
    protected ProtectionDomain newProtectionDomain() {
        return new SoftProtectionDomain(this);
    }

    @Override
    protected CompletionChannel newCompletionChannel() {
        return new SoftCompletionChannel(this);
    }

    @Override
    protected CompletionQueue newCompletionQueue(int entries, CompletionChannel channel) {
        return new SoftCompletionQueue(this, entries, (SoftCompletionChannel) channel);
    }

    // ---- tables the engine resolves packets with ----

    /** Takes a free QP number for qp; -1 when max_qp QPs exist. */
    int addQp(SoftQueuePair qp) {
        for (int i = 0; i < MAX_QP; i++) {
            if (qps.compareAndSet(i, null, qp)) return FIRST_QPN + i;
        }
        return -1;
    }

    void removeQp(int qpn) {
        qps.set(qpn - FIRST_QPN, null);
    }

    SoftQueuePair qp(int qpn) {
        int i = qpn - FIRST_QPN;
        return i >= 0 && i < MAX_QP ? qps.get(i) : null;
    }

    /**
     * Reserves a memory key: the table index in the upper 24 bits, a generation in the lower 8, so
     * a key used after deregistration no longer matches. -1 when max_mr regions exist.
     */
    synchronized int reserveMrKey() {
        for (int i = 1; i < MAX_MR; i++) {
            if (!mrUsed[i]) {
                mrUsed[i] = true;
                mrGenerations[i]++;
                return (i << 8) | (mrGenerations[i] & 0xff);
            }
        }
        return -1;
    }

    /** Makes a reserved key resolvable by the engine. */
    void publishMr(int key, SoftMemoryRegion mr) {
        mrs.set(key >>> 8, mr);
    }

    synchronized void removeMr(int key) {
        int i = key >>> 8;
        if (i > 0 && i < MAX_MR) {
            mrs.set(i, null);
            mrUsed[i] = false;
        }
    }

    /** The region with this lkey/rkey, or null. */
    SoftMemoryRegion mr(int key) {
        int i = key >>> 8;
        if (i <= 0 || i >= MAX_MR) return null;
        SoftMemoryRegion mr = mrs.get(i);
        return mr != null && mr.lkey() == key ? mr : null;
    }

    /** Engine thread: a packet for one of this context's QPs. Packets for no (or a gone) QP are dropped. */
    void handle(Packet p) {
        SoftQueuePair qp = qp(p.dstQpn);
        if (qp == null) {
            p.release();
            return;
        }
        try {
            if (p.isRequest()) qp.onRequest(p);
            else qp.onResponse(p);
        } catch (RuntimeException e) {
            // A QP torn down under a packet (its memory closed, say) must not stop the engine. The
            // packet may already be on its way again, so it is left to the GC rather than pooled.
        }
    }

    @Override
    protected void destroy() {
        SoftFabric.unregister(this);
        engine.stop();
        transport.close();
    }
}
