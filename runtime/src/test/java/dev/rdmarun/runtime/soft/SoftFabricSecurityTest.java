package dev.rdmarun.runtime.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.DeviceList;
import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.GidEntry;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.ProtectionDomain;
import dev.rdmarun.runtime.QpEndpoint;
import dev.rdmarun.runtime.QpState;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.RtrAttributes;
import dev.rdmarun.runtime.RtsAttributes;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.SoftTransport;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WorkCompletions;
import java.io.DataInputStream;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What holds against a third party on the host: soft0 binds only where it is used, every TCP
 * connection proves the fabric key before a packet of it is accepted, QPs take packets only from
 * their peer's link, and no one (with or without the key) makes a context buffer what no QP wants.
 */
class SoftFabricSecurityTest {
    private static final Set<Access> ALL = EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
    private Context a;
    private Context b;

    @AfterEach
    void close() {
        System.clearProperty(SoftTransport.PROPERTY);
        if (a != null) a.close();
        if (b != null) b.close();
    }

    /** A QP of a context with its CQ, a 4 KiB region open to every access, and its local endpoint. */
    record Side(QueuePair qp, CompletionQueue cq, MemoryRegion mr, QpEndpoint endpoint, GidEntry gid) {}

    static Side side(Context c, int psn) {
        ProtectionDomain pd = c.allocateProtectionDomain();
        CompletionQueue cq = c.createCompletionQueue(256);
        QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq).withDepth(128, 16));
        qp.modifyToInit(1, ALL);
        GidEntry gid = c.defaultGid(1);
        MemoryRegion mr = pd.registerMemory(4096, ALL);
        return new Side(qp, cq, mr, qp.localEndpoint(1, gid.index(), psn), gid);
    }

    /** Connects s to remote; its requests give up after about 4 s without an answer. */
    private static void connect(Side s, QpEndpoint remote, FabricKey key) {
        connect(s, remote, key, 17);
    }

    private static void connect(Side s, QpEndpoint remote, FabricKey key, int timeout) {
        connect(s, remote, key, timeout, null);
    }

    /** Connects s to remote with 7 retries of ACK timeout exponent timeout, and this connect timeout (null: soft0's). */
    static void connect(Side s, QpEndpoint remote, FabricKey key, int timeout, java.time.Duration connectTimeout) {
        s.qp().modifyToRtr(RtrAttributes.of(remote, 1, s.gid().index(), remote.mtu()).withFabricKey(key)
                .withConnectTimeout(connectTimeout));
        s.qp().modifyToRts(RtsAttributes.of(s.endpoint().psn()).withRetry(timeout, 7));
    }

    static InetSocketAddress listener(Side s) {
        return new InetSocketAddress(SoftFabric.address(s.endpoint().gid()), s.endpoint().lid());
    }

    private static SoftTransportView view(Context c) {
        return new SoftTransportView((SoftContext) c);
    }

    private record SoftTransportView(SoftContext context) {
        long skipped() {
            return context.transport.skippedFrames();
        }

        int listeners() {
            return context.transport.listeners.count();
        }
    }

    @Test
    void memoryModeNeverListensAndReachesOnlyThisJvm() {
        System.setProperty(SoftTransport.PROPERTY, "memory");
        a = Context.open(SoftDevice.NAME);
        b = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        Side y = side(b, 2);
        assertTrue(x.endpoint().lid() >= 1 && x.endpoint().lid() <= SoftFabric.MAX_MEMORY_LID, "an in-JVM LID");
        assertEquals(a.queryPort(1).lid(), x.endpoint().lid());
        connect(x, y.endpoint(), null); // no key needed in memory
        connect(y, x.endpoint(), null);
        y.mr().segment().set(ValueLayout.JAVA_LONG, 0, 5L);
        x.qp().postRead(1, x.mr(), 0, 8, y.mr().address(), y.mr().rkey(), SendFlags.SIGNALED);
        assertEquals(WcStatus.SUCCESS, SoftProviderTest.pollOne(x.cq()));
        assertEquals(5L, x.mr().segment().get(ValueLayout.JAVA_LONG, 0));
        assertEquals(0, view(a).listeners());
        assertEquals(0, view(b).listeners());
        // A peer that is not in this JVM (a TCP port as LID) is refused at RTR.
        Side z = side(a, 3);
        QpEndpoint elsewhere = new QpEndpoint(40000, 77, 1, y.endpoint().gid(), y.endpoint().mtu());
        VerbsException e = assertThrows(VerbsException.class, () -> connect(z, elsewhere, FabricKey.random()));
        assertEquals(22, e.errno());
        assertTrue(e.hint().contains("memory"), e.hint());
        assertEquals(QpState.INIT, z.qp().queryState());
    }

    @Test
    void theTransportGivenAtOpenWinsOverTheSystemProperty() {
        System.setProperty(SoftTransport.PROPERTY, "tcp");
        try (DeviceList list = DeviceList.open()) {
            a = list.find(SoftDevice.NAME).open(SoftTransport.MEMORY);
        }
        Side x = side(a, 1);
        assertTrue(x.endpoint().lid() <= SoftFabric.MAX_MEMORY_LID, "an in-JVM LID, not a listener's port");
        assertEquals(0, view(a).listeners());
    }

    @Test
    void aTransportPropertyOfNoKnownValueIsOneSentence() {
        System.setProperty(SoftTransport.PROPERTY, "udp");
        VerbsException e = assertThrows(VerbsException.class, () -> Context.open(SoftDevice.NAME));
        assertTrue(e.getMessage().contains("is not one of auto, memory, tcp"), e.getMessage());
    }

    @Test
    void autoModeListensOnlyOnTheGidInUse() {
        a = Context.open(SoftDevice.NAME);
        assertEquals(0, view(a).listeners(), "nothing listens before a local endpoint asks for a LID");
        Side x = side(a, 1);
        assertEquals(1, view(a).listeners());
        assertTrue(x.endpoint().lid() > SoftFabric.MAX_MEMORY_LID, "the LID is the listener's port");
        assertEquals(java.util.List.of(SoftFabric.address(x.endpoint().gid())),
                ((SoftContext) a).transport.listeners.addresses(), "bound to the GID's address only");
        side(a, 2);
        assertEquals(1, view(a).listeners(), "one listener per address");
    }

    @Test
    void aQpReachedOverTcpNeedsAFabricKeyAtRtr() {
        System.setProperty(SoftTransport.PROPERTY, "tcp");
        a = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        Side y = side(a, 2);
        VerbsException e = assertThrows(VerbsException.class, () -> connect(x, y.endpoint(), null));
        assertEquals(22, e.errno());
        assertTrue(e.getMessage().contains("has no fabric key"), e.getMessage());
        // The QP number as perftest prints it, as every other sentence naming one does.
        assertTrue(e.getMessage().contains("ibv_modify_qp(QP " + QueuePair.qpnText(x.qp().qpNum()) + ", INIT→RTR)"), e.getMessage());
        assertTrue(e.hint().contains("RtrAttributes.withFabricKey"), e.hint());
        assertEquals(QpState.INIT, x.qp().queryState());
    }

    @Test
    void aWrongKeyIsRejected() {
        System.setProperty(SoftTransport.PROPERTY, "tcp");
        a = Context.open(SoftDevice.NAME);
        b = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        Side y = side(b, 2);
        // ~1 ms ACK timeout, and 0.1 s of waiting for a first connection: a wrong key never answers
        connect(x, y.endpoint(), FabricKey.random(), 8, java.time.Duration.ofMillis(100));
        connect(y, x.endpoint(), FabricKey.random(), 8);
        x.mr().segment().set(ValueLayout.JAVA_LONG, 0, 9L);
        x.qp().postWrite(1, x.mr(), 0, 8, y.mr().address(), y.mr().rkey(), SendFlags.SIGNALED);
        try (WorkCompletions wc = new WorkCompletions(1)) {
            long deadline = System.nanoTime() + 30_000_000_000L; // a safety net against hanging
            while (x.cq().poll(wc) == 0) assertTrue(System.nanoTime() < deadline, "no completion");
            assertEquals(WcStatus.RETRY_EXC_ERR, wc.status(0));
            String hint = wc.failure(0).hint();
            assertTrue(hint.contains("soft0 TCP port") && !hint.contains("UDP 4791"), hint);
        }
        String trouble = x.qp().connectionTrouble();
        assertTrue(trouble != null && trouble.contains("within 100ms: it closed ")
                && trouble.contains("the two sides' fabric keys differ"), trouble);
        assertEquals(0L, y.mr().segment().get(ValueLayout.JAVA_LONG, 0), "nothing written");
    }

    /** A third connection, without the key, can neither read nor write a buffer nor disturb the exchange. */
    @Test
    void aThirdConnectionCannotReadWriteOrDisturb() throws Exception {
        System.setProperty(SoftTransport.PROPERTY, "tcp");
        a = Context.open(SoftDevice.NAME);
        b = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        Side y = side(b, 2);
        FabricKey key = FabricKey.random();
        connect(x, y.endpoint(), key);
        connect(y, x.endpoint(), key);
        for (int round = 0; round < 20; round++) {
            // The attacker knows everything but the key: the QPNs, LIDs, rkey, address and PSN.
            try (RawPeer evil = new RawPeer(listener(y))) {
                if (round % 2 == 0) {
                    evil.out.writeInt(TcpHandshake.MAGIC);
                    evil.out.writeShort(1); // the old, unauthenticated protocol
                    evil.write(y.qp().qpNum(), x.qp().qpNum(), x.endpoint().lid(), 2 + round, y.mr().address(),
                            y.mr().rkey(), new byte[] {1, 1, 1, 1, 1, 1, 1, 1});
                    assertTrue(evil.closedByPeer());
                } else {
                    // Knows the key id (it crosses the wire) but not the key: the acceptor's proof does not check out.
                    FabricKey guess = FabricKey.random();
                    byte[] nonce = new byte[32];
                    evil.out.writeInt(TcpHandshake.MAGIC);
                    evil.out.writeShort(TcpHandshake.VERSION);
                    evil.out.write(TcpHandshake.keyIdBytes(key));
                    evil.out.write(nonce);
                    evil.out.flush();
                    evil.in.readFully(new byte[70]);
                    evil.out.write(TcpHandshake.mac(guess, TcpHandshake.CONNECTOR_LABEL, nonce, nonce));
                    evil.write(y.qp().qpNum(), x.qp().qpNum(), x.endpoint().lid(), 2 + round, y.mr().address(),
                            y.mr().rkey(), new byte[] {1, 1, 1, 1, 1, 1, 1, 1});
                    assertTrue(evil.closedByPeer());
                }
            }
            x.mr().segment().set(ValueLayout.JAVA_LONG, 0, 100L + round);
            x.qp().postWrite(round, x.mr(), 0, 8, y.mr().address(), y.mr().rkey(), SendFlags.SIGNALED);
            assertEquals(WcStatus.SUCCESS, SoftProviderTest.pollOne(x.cq()));
            assertEquals(100L + round, y.mr().segment().get(ValueLayout.JAVA_LONG, 0), "only the peer writes");
        }
        assertEquals(QpState.RTS, y.qp().queryState());
    }

    /**
     * A party that has a key some QP of the context uses (here: the test itself) still reaches only
     * that QP: a QP whose peer is in memory takes nothing from TCP, frames for unknown QPNs are
     * skipped unread, and a frame for the QP behind that key lands.
     */
    @Test
    void tcpReachesOnlyTheQpBehindItsKey() throws Exception {
        a = Context.open(SoftDevice.NAME); // auto: QPs of this JVM talk in memory
        Side x = side(a, 1);
        Side y = side(a, 2);
        connect(x, y.endpoint(), null);
        connect(y, x.endpoint(), null);
        FabricKey key = FabricKey.random();
        Side t = side(a, 3);
        try (ServerSocket outside = new ServerSocket(0, 1, SoftFabric.address(t.endpoint().gid()))) {
            // t's peer is "another process": a port no soft0 context of this JVM has.
            QpEndpoint remote = new QpEndpoint(outside.getLocalPort(), 0x4242, 7, t.endpoint().gid(), t.endpoint().mtu());
            connect(t, remote, key);
            try (RawPeer peer = new RawPeer(listener(t))) {
                assertTrue(peer.authenticate(key, true), "the acceptor proves it knows the key");
                byte[] big = new byte[1 << 20];
                for (int i = 0; i < 8; i++) {
                    peer.write(0x123456, 0x4242, outside.getLocalPort(), 7, 0, 0, big); // no such QP
                }
                // y's peer is x, in memory: from TCP nothing, even with every header field right.
                peer.write(y.qp().qpNum(), x.qp().qpNum(), a.queryPort(1).lid(), 2, y.mr().address(), y.mr().rkey(),
                        new byte[] {3, 3, 3, 3, 3, 3, 3, 3});
                peer.write(t.qp().qpNum(), 0x4242, outside.getLocalPort(), 7, t.mr().address(), t.mr().rkey(),
                        new byte[] {4, 0, 0, 0, 0, 0, 0, 0});
                // The ACK of the last frame comes back: everything before it was handled.
                DataInputStream in = peer.in;
                int frame = in.readInt();
                byte[] rest = new byte[frame];
                in.readFully(rest);
                assertEquals(Packet.ACK, rest[0]);
            }
        }
        assertEquals(4L, t.mr().segment().get(ValueLayout.JAVA_BYTE, 0));
        assertEquals(0L, y.mr().segment().get(ValueLayout.JAVA_LONG, 0), "the in-memory QP took nothing from TCP");
        assertEquals(9, view(a).skipped(), "skipped at the reader, never queued");
        // and the in-memory pair still works
        x.mr().segment().set(ValueLayout.JAVA_LONG, 0, 11L);
        x.qp().postWrite(1, x.mr(), 0, 8, y.mr().address(), y.mr().rkey(), SendFlags.SIGNALED);
        assertEquals(WcStatus.SUCCESS, SoftProviderTest.pollOne(x.cq()));
        assertEquals(11L, y.mr().segment().get(ValueLayout.JAVA_LONG, 0));
    }

    @Test
    void aConnectionThatDoesNotAuthenticateIsClosed() throws Exception {
        a = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        try (RawPeer idle = new RawPeer(listener(x))) {
            assertTrue(idle.closedByPeer(), "closed after the authentication deadline");
        }
    }

    @Test
    void messagesOverMaxMsgSzFailAtPost() {
        a = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        Side y = side(a, 2);
        connect(x, y.endpoint(), null);
        connect(y, x.endpoint(), null);
        int tooLong = (int) SoftContext.MAX_MESSAGE + 1;
        MemoryRegion big = x.qp().protectionDomain().registerMemory(tooLong, ALL);
        for (Runnable post : new Runnable[] {
                () -> x.qp().postSend(1, big, 0, tooLong, SendFlags.SIGNALED),
                () -> x.qp().postWrite(2, big, 0, tooLong, y.mr().address(), y.mr().rkey(), SendFlags.SIGNALED),
                () -> x.qp().postRead(3, big, 0, tooLong, y.mr().address(), y.mr().rkey(), SendFlags.SIGNALED),
                () -> x.qp().postReceive(4, big, 0, tooLong)}) {
            VerbsException e = assertThrows(VerbsException.class, post::run);
            assertEquals(22, e.errno());
            assertTrue(e.hint().contains("max_msg_sz (16777216 bytes)"), e.hint());
        }
        x.qp().postWrite(5, big, 0, tooLong - 1, y.mr().address(), y.mr().rkey(), SendFlags.SIGNALED);
        assertEquals(WcStatus.REM_ACCESS_ERR, SoftProviderTest.pollOne(x.cq()), "max_msg_sz itself may be posted");
    }

    @Test
    void qpNumbersAndKeysAreValidUniqueAndStaleKeysDoNotMatch() {
        a = Context.open(SoftDevice.NAME);
        ProtectionDomain pd = a.allocateProtectionDomain();
        CompletionQueue cq = a.createCompletionQueue(8);
        java.util.Set<Integer> qpns = new java.util.HashSet<>();
        for (int i = 0; i < 64; i++) {
            int qpn = pd.createQueuePair(QueuePairConfig.rc(cq)).qpNum();
            assertTrue(qpn > 1 && qpn <= 0xffffff, "a 24-bit QPN other than 0 and 1: " + qpn);
            assertTrue(qpns.add(qpn), "unique");
        }
        MemoryRegion mr = pd.registerMemory(64, ALL);
        int old = mr.rkey();
        mr.close();
        assertEquals(null, ((SoftContext) a).mr(old));
        MemoryRegion again = pd.registerMemory(64, ALL);
        assertNotEquals(old, again.rkey());
        assertEquals(null, ((SoftContext) a).mr(old), "a stale key names nothing");
    }
}
