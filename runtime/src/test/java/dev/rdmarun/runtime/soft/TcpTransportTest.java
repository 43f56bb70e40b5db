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
 * key: frames of any size land intact, and a frame that fails its checks writes nothing.
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
    void aFrameLongerThanMaxMsgSzClosesTheConnectionAndWritesNothing() throws Exception {
        try (RawPeer peer = requester()) {
            Packet p = RawPeer.writeRequest(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN, mr.address(), mr.rkey(), pattern(4096, 1));
            byte[] frame = TcpTransportFuzzTest.frames(p);
            java.nio.ByteBuffer.wrap(frame).putInt(0, TcpTransport.HEADER + (int) SoftContext.MAX_MESSAGE + 1);
            peer.out.write(frame);
            peer.out.flush();
            assertTrue(peer.closedByPeer());
        }
        assertArrayEquals(new byte[4096], memory(0, 4096));
    }

    /** A header that does not check out ends the connection before its payload is read anywhere. */
    @Test
    void aFrameWithAnInvalidHeaderWritesNothing() throws Exception {
        try (RawPeer peer = requester()) {
            Packet p = RawPeer.writeRequest(qp.qpNum(), PEER_QPN, peerLid, PEER_PSN, mr.address(), mr.rkey(), pattern(65_536, 2));
            byte[] frame = TcpTransportFuzzTest.frames(p);
            frame[4] = 9; // no such kind
            peer.out.write(frame);
            peer.out.flush();
            assertTrue(peer.closedByPeer());
        }
        assertArrayEquals(new byte[65_536], memory(0, 65_536));
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
}
