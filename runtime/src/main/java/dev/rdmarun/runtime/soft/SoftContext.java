package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.CompletionChannel;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.DeviceAttributes;
import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.Gid;
import dev.rdmarun.runtime.GidEntry;
import dev.rdmarun.runtime.GidType;
import dev.rdmarun.runtime.Mtu;
import dev.rdmarun.runtime.PortAttributes;
import dev.rdmarun.runtime.ProtectionDomain;
import dev.rdmarun.runtime.SoftTransport;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * An open soft0: its one port (RoCE v2-style: QPs are addressed by GID, the host's IPv4
 * addresses, and by LID), its engine thread, and the tables the engine resolves QP numbers and
 * memory keys with.
 *
 * <p>LIDs: every context has an in-JVM LID (1..{@value SoftFabric#MAX_MEMORY_LID}, below every
 * TCP port a listener can get), which {@code queryPort(1).lid()} reports and QPs of this JVM may
 * address it with. The LID a QP's {@link dev.rdmarun.runtime.QueuePair#localEndpoint} reports
 * depends on the mode ({@link SoftFabric}): the in-JVM LID in {@code memory} mode, otherwise the
 * TCP port of this context's listener on that GID's address (opened then, on first use).
 *
 * <p>QP numbers and memory keys are random (as an RNIC's are hard to guess), unique, and resolved
 * through their table index: a QPN is 24 bits, a random tag above the index (never 0 or 1); a
 * key is a random tag, the index and a random generation, so a stale key does not match.
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
    private static final int QP_INDEX_BITS = 14;
    private static final int MR_INDEX_BITS = 14;
    private static final SecureRandom RANDOM = new SecureRandom();

    private final DeviceAttributes attributes;
    private final List<GidEntry> gids;
    final Engine engine;
    final PacketPool pool = new PacketPool(4096);
    final TcpTransport transport;
    final SoftTransport mode;
    /** This context's in-JVM LID. */
    private final int memoryLid;
    /** Keys of this context's QPs whose peer is reached over TCP, by key id, with how many QPs use each. */
    private final ConcurrentHashMap<String, KeyUse> keys = new ConcurrentHashMap<>();
    private final AtomicReferenceArray<SoftQueuePair> qps = new AtomicReferenceArray<>(MAX_QP);
    private final AtomicReferenceArray<SoftMemoryRegion> mrs = new AtomicReferenceArray<>(MAX_MR);
    private final int[] mrKeys = new int[MAX_MR];
    private final boolean[] mrUsed = new boolean[MAX_MR];

    private static final class KeyUse {
        final FabricKey key;
        int users;

        KeyUse(FabricKey key) {
            this.key = key;
        }
    }

    private SoftContext(SoftDevice device, SoftTransport mode) {
        super(device.name());
        this.mode = Objects.requireNonNull(mode, "softTransport");
        this.gids = hostGids();
        this.memoryLid = SoftFabric.register(this);
        this.engine = new Engine(this, device.name() + "-engine-lid" + memoryLid); // one per context: loopback has two
        this.transport = new TcpTransport(this);
        this.attributes = new DeviceAttributes("rdma-run software emulation 1", device.nodeGuid(), Long.MAX_VALUE,
                0, 0, MAX_QP, MAX_QP_WR, 1, MAX_QP, MAX_CQE, MAX_MR, MAX_QP, MAX_RD_ATOMIC, MAX_RD_ATOMIC,
                DeviceAttributes.AtomicCapability.HCA, 1);
        engine.start();
    }

    static SoftContext open(SoftDevice device, SoftTransport mode) {
        return new SoftContext(device, mode);
    }

    @Override
    public boolean isSoftware() {
        return true;
    }

    /** This context's in-JVM LID (what queryPort reports). */
    int memoryLid() {
        return memoryLid;
    }

    /**
     * The LID a peer reaches this context with through the GID at gidIndex: the in-JVM LID in
     * memory mode, else the port of the listener on that GID's address (opened now if need be).
     */
    @Override
    protected int endpointLid(int port, int gidIndex) {
        if (mode == SoftTransport.MEMORY) return memoryLid;
        return transport.listen(SoftFabric.address(gid(port, gidIndex).gid()));
    }

    /** The gid at this index of the port (the QP's source GID). */
    GidEntry gidEntry(int index) {
        for (GidEntry e : gids) if (e.index() == index) return e;
        return null;
    }

    // ---- fabric keys of QPs reached over TCP ----

    /** A QP reached over TCP uses key from now on (it authenticates connections with it). */
    void keyUsed(FabricKey key) {
        keys.compute(TcpHandshake.keyId(key), (id, use) -> {
            KeyUse u = use != null ? use : new KeyUse(key);
            u.users++;
            return u;
        });
    }

    /** A QP no longer uses key. */
    void keyReleased(FabricKey key) {
        keys.computeIfPresent(TcpHandshake.keyId(key), (id, use) -> --use.users <= 0 ? null : use);
    }

    /** The key with this id some QP of this context uses, or null. */
    FabricKey keyById(String keyId) {
        KeyUse u = keys.get(keyId);
        return u == null ? null : u.key;
    }

    boolean keyInUse(FabricKey key) {
        return keyById(TcpHandshake.keyId(key)) != null;
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
                MAX_MESSAGE, memoryLid, PortAttributes.LinkLayer.ETHERNET);
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

    /**
     * Takes a free table slot (from a random start) for qp; returns its QPN: a random 10-bit tag
     * (1..1023) above the 14-bit index, so never 0 or 1 and hard to guess. -1 when max_qp QPs exist.
     */
    int addQp(SoftQueuePair qp) {
        int start = RANDOM.nextInt(MAX_QP);
        for (int k = 0; k < MAX_QP; k++) {
            int i = (start + k) & (MAX_QP - 1);
            if (qps.compareAndSet(i, null, qp)) return ((1 + RANDOM.nextInt(1023)) << QP_INDEX_BITS) | i;
        }
        return -1;
    }

    void removeQp(int qpn, SoftQueuePair qp) {
        qps.compareAndSet(qpn & (MAX_QP - 1), qp, null);
    }

    /** The QP with this number, or null. Allocation-free. */
    SoftQueuePair qp(int qpn) {
        SoftQueuePair qp = qps.get(qpn & (MAX_QP - 1));
        return qp != null && qp.qpNum() == qpn ? qp : null;
    }

    /**
     * Reserves a memory key: a random 9-bit tag (so the key stays positive), the table index (14
     * bits, from a random start) and a random 8-bit generation different from the slot's last key,
     * so a key used after deregistration no longer matches. -1 when max_mr regions exist.
     */
    synchronized int reserveMrKey() {
        int start = RANDOM.nextInt(MAX_MR);
        for (int k = 0; k < MAX_MR; k++) {
            int i = (start + k) & (MAX_MR - 1);
            if (i == 0 || mrUsed[i]) continue;
            mrUsed[i] = true;
            int key;
            do {
                key = (RANDOM.nextInt(1 << 9) << (8 + MR_INDEX_BITS)) | (i << 8) | RANDOM.nextInt(256);
            } while (key == mrKeys[i]);
            mrKeys[i] = key;
            return key;
        }
        return -1;
    }

    private static int mrIndex(int key) {
        return (key >>> 8) & (MAX_MR - 1);
    }

    /** Makes a reserved key resolvable by the engine. */
    void publishMr(int key, SoftMemoryRegion mr) {
        mrs.set(mrIndex(key), mr);
    }

    synchronized void removeMr(int key) {
        int i = mrIndex(key);
        if (i > 0 && mrKeys[i] == key) {
            mrs.set(i, null);
            mrUsed[i] = false;
        }
    }

    /** The region with this lkey/rkey, or null. */
    SoftMemoryRegion mr(int key) {
        int i = mrIndex(key);
        if (i == 0) return null;
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
