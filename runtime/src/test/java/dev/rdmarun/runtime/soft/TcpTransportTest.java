package dev.rdmarun.runtime.soft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
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
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WorkCompletions;
import dev.rdmarun.runtime.WrOpcode;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * soft0's TCP data path against a peer written by hand ({@link RawPeer}) that holds the fabric
 * key: frames of any size land intact, a frame that fails its checks writes nothing, and ACKs
 * are cumulative both ways (the responder answers a burst once, the requester completes every
 * SEND and WRITE before the request an answer is for).
 */
class TcpTransportTest {
    private static final int PEER_QPN = 0x4242;
    private static final int PEER_PSN = 7;
    private static final int MY_PSN = 100;
    private static final int REGION = 1 << 20;

    private Context context;
    private ServerSocket outside;
    private QueuePair qp;
    private CompletionQueue cq;
    private MemoryRegion mr;
    private FabricKey key;
    private QpEndpoint local;
    private int peerLid;

    /** One QP whose peer is "another process": the test, behind a listener of its own. */
    @BeforeEach
    void connect() throws Exception {
        context = Context.open(SoftDevice.NAME);
        ProtectionDomain pd = context.allocateProtectionDomain();
        cq = context.createCompletionQueue(256);
        qp = pd.createQueuePair(QueuePairConfig.rc(cq).withDepth(128, 16));
        var access = EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        qp.modifyToInit(1, access);
        mr = pd.registerMemory(REGION, access);
        GidEntry gid = context.defaultGid(1);
        local = qp.localEndpoint(1, gid.index(), MY_PSN);
        outside = new ServerSocket(0, 1, SoftFabric.address(local.gid()));
        peerLid = outside.getLocalPort();
        key = FabricKey.random();
        QpEndpoint remote = new QpEndpoint(peerLid, PEER_QPN, PEER_PSN, local.gid(), local.mtu());
        qp.modifyToRtr(RtrAttributes.of(remote, 1, gid.index(), remote.mtu()).withFabricKey(key));
        qp.modifyToRts(RtsAttributes.of(MY_PSN).withRetry(17, 7)); // about 4 s without an answer
    }

    @AfterEach
    void close() throws Exception {
        if (context != null) context.close();
        if (outside != null) outside.close();
    }

    /** Connects to the QP's listener as its peer, with the key. */
    private RawPeer requester() throws Exception {
        RawPeer peer = new RawPeer(new InetSocketAddress(SoftFabric.address(local.gid()), local.lid()));
        assertTrue(peer.authenticate(key, true), "the acceptor proves it knows the key");
        return peer;
    }

    /** Takes the connection the QP opens to its peer, as that peer. */
    private RawPeer responder() throws Exception {
        RawPeer peer = RawPeer.accept(outside);
        assertTrue(peer.acceptAuthenticated(key), "the connector proves it knows the key");
        return peer;
    }

    private static byte[] pattern(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) b[i] = (byte) (seed + i * 31 + (i >>> 8));
        return b;
    }

    private byte[] memory(long offset, int n) {
        return mr.segment().asSlice(offset, n).toArray(ValueLayout.JAVA_BYTE);
    }

    /** Reads the QP's answers up to the one for psn; returns them all. */
    private static List<Packet> answersUpTo(RawPeer peer, int psn) throws Exception {
        List<Packet> answers = new ArrayList<>();
        Packet p;
        do {
            p = peer.readFrame();
            answers.add(p);
        } while (p.psn != psn);
        return answers;
    }

    private List<WcStatus> poll(int n, List<Long> wrIds) {
        List<WcStatus> statuses = new ArrayList<>();
        try (WorkCompletions wc = new WorkCompletions(n)) {
            long deadline = System.nanoTime() + 30_000_000_000L; // a safety net against hanging
            while (statuses.size() < n) {
                assertTrue(System.nanoTime() < deadline, "only " + statuses.size() + " of " + n + " completions");
                int got = cq.poll(wc);
                for (int i = 0; i < got; i++) {
                    statuses.add(wc.status(i));
                    wrIds.add(wc.wrId(i));
                }
            }
        }
        return statuses;
    }

    @Test
    void anAuthenticatedConnectionIsClosedOnceIdleAndNoQpUsesItsKey() throws Exception {
        ((SoftContext) context).transport.idleDeadlineNanos = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(200);
        try (RawPeer peer = requester()) {
            qp.close(); // no QP of the context uses the key any more
            assertTrue(peer.closedByPeer(), "closed once idle for the deadline, although its writer keeps waking");
        }
    }

    @Test
    void anRnrNakCarriesNoPayload() throws Exception {
        try (RawPeer peer = requester()) {
            Packet send = RawPeer.packet(Packet.REQUEST, WrOpcode.SEND.code(), qp.qpNum(), PEER_QPN, peerLid, PEER_PSN);
            send.copyFrom(MemorySegment.ofArray(pattern(65_536, 3)), 0, 65_536);
            peer.send(send); // no receive posted
            Packet nak = peer.readFrame();
            assertEquals(Packet.NAK, nak.kind);
            assertEquals(Packet.NAK_RNR, nak.opcode);
            assertEquals(0, nak.length, "the NAK does not send the SEND's payload back");
        }
    }

    @Test
    void framesOfEverySizeInOneStreamLandIntact() throws Exception {
        int[] sizes = {1, 70_000, 8, 8192, 300_000, 64, 65_536, 3};
        List<Packet> frames = new ArrayList<>();
        long offset = 0;
        for (int i = 0; i < sizes.length; i++) {
            frames.add(RawPeer.writeRequest(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN + i, mr.address() + offset, mr.rkey(),
                    pattern(sizes[i], i)));
            offset += sizes[i] + 13;
        }
        try (RawPeer peer = requester()) {
            peer.send(frames.toArray(Packet[]::new)); // one write: the reader meets frames cut anywhere
            for (Packet answer : answersUpTo(peer, PEER_PSN + sizes.length - 1)) assertEquals(Packet.ACK, answer.kind);
        }
        offset = 0;
        for (int i = 0; i < sizes.length; i++) {
            assertArrayEquals(pattern(sizes[i], i), memory(offset, sizes[i]), "frame " + i + " of " + sizes[i] + " bytes");
            offset += sizes[i] + 13;
        }
        assertEquals(QpState.RTS, qp.queryState());
    }

    @Test
    void aBurstThatArrivesTogetherIsAcknowledgedOnceForItsLastRequest() throws Exception {
        int n = 8;
        Packet[] burst = new Packet[n];
        for (int i = 0; i < n; i++) {
            burst[i] = RawPeer.writeRequest(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN + i, mr.address() + 8L * i, mr.rkey(),
                    new byte[] {(byte) (i + 1), 0, 0, 0, 0, 0, 0, 0});
        }
        List<Packet> answers;
        try (RawPeer peer = requester()) {
            peer.send(burst); // 576 bytes in one write: each request but the last has its successor behind it
            answers = answersUpTo(peer, PEER_PSN + n - 1);
        }
        assertTrue(answers.size() < n, answers.size() + " ACKs for " + n + " requests that arrived together");
        int last = PEER_PSN - 1;
        for (Packet a : answers) {
            assertEquals(Packet.ACK, a.kind);
            assertEquals(PEER_QPN, a.dstQpn);
            assertEquals(qp.qpNum(), a.srcQpn);
            assertTrue(a.psn > last, "cumulative ACKs only move forward");
            last = a.psn;
        }
        for (int i = 0; i < n; i++) assertEquals(i + 1, mr.segment().get(ValueLayout.JAVA_LONG, 8L * i));
    }

    @Test
    void oneAckForTheLastOfSeveralWritesCompletesThemAll() throws Exception {
        for (int i = 1; i <= 4; i++) qp.postWrite(i, mr, 0, 64, 0x10_0000L, 0x77, SendFlags.SIGNALED);
        try (RawPeer peer = responder()) {
            int lastPsn = 0;
            for (int i = 0; i < 4; i++) {
                Packet request = peer.readFrame();
                assertEquals(MY_PSN + i, request.psn);
                assertEquals(64, request.length);
                lastPsn = request.psn;
            }
            peer.send(RawPeer.packet(Packet.ACK, 0, qp.qpNum(), PEER_QPN, peerLid, lastPsn));
            List<Long> wrIds = new ArrayList<>();
            assertEquals(List.of(WcStatus.SUCCESS, WcStatus.SUCCESS, WcStatus.SUCCESS, WcStatus.SUCCESS), poll(4, wrIds));
            assertEquals(List.of(1L, 2L, 3L, 4L), wrIds);
        }
    }

    @Test
    void aNakForALaterWriteCompletesTheOnesBeforeItAndFailsIt() throws Exception {
        for (int i = 1; i <= 4; i++) qp.postWrite(i, mr, 0, 8, 0x10_0000L, 0x77, SendFlags.SIGNALED);
        try (RawPeer peer = responder()) {
            for (int i = 0; i < 4; i++) peer.readFrame();
            peer.send(RawPeer.packet(Packet.NAK, Packet.NAK_REMOTE_ACCESS, qp.qpNum(), PEER_QPN, peerLid, MY_PSN + 2));
            List<Long> wrIds = new ArrayList<>();
            assertEquals(List.of(WcStatus.SUCCESS, WcStatus.SUCCESS, WcStatus.REM_ACCESS_ERR, WcStatus.WR_FLUSH_ERR),
                    poll(4, wrIds));
            assertEquals(List.of(1L, 2L, 3L, 4L), wrIds);
        }
    }

    /** A READ's only answer is its data: an ACK for a request after it does not complete it. */
    @Test
    void anAckPastAReadDoesNotCompleteTheRead() throws Exception {
        qp.postWrite(1, mr, 0, 8, 0x10_0000L, 0x77, SendFlags.SIGNALED);
        qp.postRead(2, mr, 4096, 16, 0x10_0000L, 0x77, SendFlags.SIGNALED);
        qp.postWrite(3, mr, 0, 8, 0x10_0000L, 0x77, SendFlags.SIGNALED);
        try (RawPeer peer = responder()) {
            for (int i = 0; i < 3; i++) peer.readFrame();
            Packet ackPastTheRead = RawPeer.packet(Packet.ACK, 0, qp.qpNum(), PEER_QPN, peerLid, MY_PSN + 2);
            Packet data = RawPeer.packet(Packet.READ_RESPONSE, 0, qp.qpNum(), PEER_QPN, peerLid, MY_PSN + 1);
            data.copyFrom(MemorySegment.ofArray(pattern(16, 5)), 0, 16);
            peer.send(ackPastTheRead, data);
            List<Long> wrIds = new ArrayList<>();
            assertEquals(List.of(WcStatus.SUCCESS, WcStatus.SUCCESS), poll(2, wrIds), "the WRITE, then the READ");
            assertEquals(List.of(1L, 2L), wrIds);
            assertArrayEquals(pattern(16, 5), memory(4096, 16), "the READ completed with its data");
            peer.send(RawPeer.packet(Packet.ACK, 0, qp.qpNum(), PEER_QPN, peerLid, MY_PSN + 2));
            assertEquals(List.of(WcStatus.SUCCESS), poll(1, wrIds));
            assertEquals(3L, wrIds.get(2));
        }
    }

    @Test
    void aFrameLongerThanMaxMsgSzClosesTheConnectionAndWritesNothing() throws Exception {
        sendSpoiledWriteAndExpectClose(4096, 1,
                frame -> java.nio.ByteBuffer.wrap(frame).putInt(0, TcpFrames.HEADER + (int) SoftContext.MAX_MESSAGE + 1));
    }

    /** A header that does not check out ends the connection before its payload is read anywhere. */
    @Test
    void aFrameWithAnInvalidHeaderWritesNothing() throws Exception {
        sendSpoiledWriteAndExpectClose(65_536, 2, frame -> frame[4] = 9); // no such kind
    }

    /** A valid WRITE of size bytes into the region, spoiled by spoil before it is sent: the connection closes, the region stays zero. */
    private void sendSpoiledWriteAndExpectClose(int size, int seed, java.util.function.Consumer<byte[]> spoil) throws Exception {
        try (RawPeer peer = requester()) {
            Packet p = RawPeer.writeRequest(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN, mr.address(), mr.rkey(), pattern(size, seed));
            byte[] frame = TcpTransportFuzzTest.frames(p);
            spoil.accept(frame);
            peer.out.write(frame);
            peer.out.flush();
            assertTrue(peer.closedByPeer());
        }
        assertArrayEquals(new byte[size], memory(0, size));
    }

    /** A large WRITE whose rkey check fails is refused after its payload was read, and lands nowhere. */
    @Test
    void aLargeWriteOutsideTheRegionIsRefusedAndWritesNothing() throws Exception {
        try (RawPeer peer = requester()) {
            peer.write(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN, mr.address() + REGION - 1000, mr.rkey(),
                    pattern(65_536, 3));
            Packet answer = peer.readFrame();
            assertEquals(Packet.NAK, answer.kind);
            assertEquals(Packet.NAK_REMOTE_ACCESS, answer.opcode);
            assertEquals(PEER_PSN, answer.psn);
        }
        assertArrayEquals(new byte[REGION], memory(0, REGION));
        assertEquals(QpState.ERR, qp.queryState());
    }

    /**
     * A request whose ACK was left to its successor is still acknowledged when that successor
     * brings no answer that covers it: a duplicate (answered for its older PSN), or one out of
     * sequence (dropped).
     */
    @Test
    void aDeferredAckIsSentWhenTheNextRequestDoesNotCoverIt() throws Exception {
        try (RawPeer peer = requester()) {
            peer.write(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN, mr.address(), mr.rkey(), new byte[] {1});
            assertEquals(PEER_PSN, peer.readFrame().psn);
            peer.send(RawPeer.writeRequest(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN + 1, mr.address() + 1, mr.rkey(), new byte[] {2}),
                    RawPeer.writeRequest(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN, mr.address(), mr.rkey(), new byte[] {9}));
            List<Packet> answers = answersUpTo(peer, PEER_PSN + 1);
            assertEquals(List.of(PEER_PSN, PEER_PSN + 1), answers.stream().map(a -> a.psn).toList(),
                    "the duplicate's ACK, then the one left for it");
            peer.send(RawPeer.writeRequest(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN + 2, mr.address() + 2, mr.rkey(), new byte[] {3}),
                    RawPeer.writeRequest(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN + 9, mr.address() + 3, mr.rkey(), new byte[] {9}));
            assertEquals(PEER_PSN + 2, peer.readFrame().psn, "the request before one out of sequence");
            for (Packet a : answers) assertEquals(Packet.ACK, a.kind);
        }
        assertArrayEquals(new byte[] {1, 2, 3, 0}, memory(0, 4), "a duplicate or out of sequence request is not executed");
    }
}
