package dev.rdmarun.runtime.soft;

import static dev.rdmarun.runtime.soft.SoftFabricSecurityTest.listener;
import static dev.rdmarun.runtime.soft.SoftFabricSecurityTest.side;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.QpEndpoint;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.SoftTransport;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.soft.SoftFabricSecurityTest.Side;
import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Idle connections opened to a soft0 port before the peer arrives (a flood) do not keep the peer
 * out: the acceptor evicts them, fairly per source, and a requester keeps trying to connect
 * until its connect timeout instead of spending its retries on a listener that closes it.
 */
class SoftFloodTest {
    /** The DSL's default retries (7 of 67 ms): about 0.5 s without an answer ends a request. */
    private static final int RETRY_TIMEOUT = 14;
    private final List<AutoCloseable> opened = new ArrayList<>();
    private Context a;
    private Context b;

    @AfterEach
    void close() throws Exception {
        System.clearProperty(SoftTransport.PROPERTY);
        for (AutoCloseable c : opened) c.close();
        if (a != null) a.close();
        if (b != null) b.close();
    }

    private static TcpTransport transport(Context c) {
        return ((SoftContext) c).transport;
    }

    /** Waits (a safety net of 20 s, not an assertion on time) until condition holds. */
    private static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "still not: " + what);
            LockSupport.parkNanos(1_000_000);
        }
    }

    /** Opens n idle connections to at (nothing sent), and returns once the listener closed all but the slots it keeps. */
    private void flood(InetSocketAddress at, int n) throws IOException {
        try (Selector selector = Selector.open()) {
            for (int i = 0; i < n; i++) {
                SocketChannel c = SocketChannel.open(at);
                opened.add(c);
                c.configureBlocking(false);
                c.register(selector, SelectionKey.OP_READ);
            }
            int closedByListener = 0;
            long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos(); // a safety net against hanging
            ByteBuffer sink = ByteBuffer.allocate(64);
            while (closedByListener < n - TcpTransport.MAX_UNAUTHENTICATED) {
                assertTrue(System.nanoTime() < deadline, "the listener closed only " + closedByListener);
                selector.select(100);
                for (SelectionKey k : selector.selectedKeys()) {
                    if (((SocketChannel) k.channel()).read(sink.clear()) < 0) {
                        k.cancel();
                        closedByListener++;
                    }
                }
                selector.selectedKeys().clear();
            }
        }
    }

    private static void writeAndCheck(Side from, Side to, long value) {
        from.mr().segment().set(ValueLayout.JAVA_LONG, 0, value);
        from.qp().postWrite(value, from.mr(), 0, 8, to.mr().address(), to.mr().rkey(), SendFlags.SIGNALED);
        assertEquals(WcStatus.SUCCESS, SoftProviderTest.pollOne(from.cq()));
        assertEquals(value, to.mr().segment().get(ValueLayout.JAVA_LONG, 0), "the data moved");
    }

    /**
     * 64 idle connections to each soft0 port before the QPs connect hold every unauthenticated
     * slot (they would for 2 s, longer than the requests' 0.5 s of retries): the QPs' own
     * connections still authenticate, and data moves both ways.
     */
    @Test
    void sixtyFourIdleConnectionsBeforeThePeerDoNotKeepItOut() throws Exception {
        System.setProperty(SoftTransport.PROPERTY, "tcp");
        // Each port is flooded as soon as it exists, before anything connects to it.
        a = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        flood(listener(x), 64);
        b = Context.open(SoftDevice.NAME);
        Side y = side(b, 2);
        flood(listener(y), 64);
        FabricKey key = FabricKey.random();
        SoftFabricSecurityTest.connect(x, y.endpoint(), key, RETRY_TIMEOUT, Duration.ofSeconds(20));
        SoftFabricSecurityTest.connect(y, x.endpoint(), key, RETRY_TIMEOUT, Duration.ofSeconds(20));
        writeAndCheck(x, y, 41L);
        writeAndCheck(y, x, 42L);
        assertTrue(transport(b).listeners.evictedConnections() >= 48, "the flood's connections were evicted and counted");
    }

    /**
     * When every slot is taken, a newcomer gets one: a source that holds many slots loses one of
     * them (its oldest) before a source that holds one.
     */
    @Test
    void anEvictionTakesASlotFromTheSourceThatHoldsMost() throws Exception {
        a = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        TcpTransport t = transport(a);
        InetAddress many = InetAddress.getByName("127.0.0.2");
        InetAddress one = InetAddress.getByName("127.0.0.3");
        InetAddress newcomer = InetAddress.getByName("127.0.0.4");
        List<Socket> fromMany = new ArrayList<>();
        for (int i = 0; i < TcpTransport.MAX_UNAUTHENTICATED - 1; i++) fromMany.add(open(many, listener(x)));
        open(one, listener(x));
        await("every slot taken", () -> t.listeners.unauthenticatedBySource().equals(
                Map.of(many, TcpTransport.MAX_UNAUTHENTICATED - 1, one, 1)));
        open(newcomer, listener(x));
        await("one evicted", () -> t.listeners.evictedConnections() == 1);
        assertEquals(Map.of(many, TcpTransport.MAX_UNAUTHENTICATED - 2, one, 1, newcomer, 1), t.listeners.unauthenticatedBySource());
        fromMany.getFirst().setSoTimeout(20_000); // a safety net against hanging
        assertEquals(-1, fromMany.getFirst().getInputStream().read(), "the oldest of the source with most slots is closed");
    }

    /** Accepts the requester's next connection, reads its hello and closes it unanswered (as a full listener did). */
    private static void closeUnanswered(ServerSocket listener) throws IOException {
        try (RawPeer p = RawPeer.accept(listener)) {
            p.in.readFully(new byte[4 + 2 + TcpHandshake.KEY_ID_LENGTH + TcpHandshake.NONCE_LENGTH]);
        }
    }

    private Socket open(InetAddress from, InetSocketAddress to) throws IOException {
        Socket s = new Socket();
        opened.add(s);
        s.bind(new InetSocketAddress(from, 0));
        s.connect(to);
        return s;
    }

    /**
     * A listener that closes the first attempts before answering (as one full of unauthenticated
     * connections did) for longer than the requests' retries last: the requester keeps trying, and
     * its write lands once a connection authenticates.
     */
    @Test
    void aRequesterKeepsConnectingUntilItsConnectTimeout() throws Exception {
        a = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        FabricKey key = FabricKey.random();
        try (ServerSocket peer = new ServerSocket(0, 50, SoftFabric.address(x.endpoint().gid()))) {
            QpEndpoint remote = new QpEndpoint(peer.getLocalPort(), 0x4242, 7, x.endpoint().gid(), x.endpoint().mtu());
            SoftFabricSecurityTest.connect(x, remote, key, RETRY_TIMEOUT, Duration.ofSeconds(20));
            x.qp().postWrite(1, x.mr(), 0, 8, 0x1000, 0x77, SendFlags.SIGNALED);
            // Closed unanswered past the 0.5 s of retries: 20 + 40 + ... + 500 + 500 ms of back-off.
            for (int i = 0; i < 8; i++) closeUnanswered(peer);
            try (RawPeer p = RawPeer.accept(peer)) {
                assertTrue(p.acceptAuthenticated(key), "the requester authenticates at last");
                Packet write = p.readFrame();
                assertEquals(Packet.REQUEST, write.kind);
                Packet ack = RawPeer.packet(Packet.ACK, 0, x.qp().qpNum(), 0x4242, peer.getLocalPort(), write.psn);
                p.send(ack);
                assertEquals(WcStatus.SUCCESS, SoftProviderTest.pollOne(x.cq()));
            }
        }
    }

    /**
     * A listener that closes every attempt before answering: once the connect timeout has passed
     * the requests' retries run out, and the QP's trouble names the port and a flood, not the GID.
     */
    @Test
    void aRequesterThatNeverAuthenticatesSaysWhy() throws Exception {
        a = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        try (ServerSocket peer = new ServerSocket(0, 50, SoftFabric.address(x.endpoint().gid()))) {
            QpEndpoint remote = new QpEndpoint(peer.getLocalPort(), 0x4242, 7, x.endpoint().gid(), x.endpoint().mtu());
            SoftFabricSecurityTest.connect(x, remote, FabricKey.random(), RETRY_TIMEOUT, Duration.ofMillis(300));
            Thread closer = Thread.ofVirtual().start(() -> {
                try {
                    while (true) closeUnanswered(peer); // until the listener is closed
                } catch (IOException e) {
                    // closed: the test is over
                }
            });
            x.qp().postWrite(1, x.mr(), 0, 8, 0x1000, 0x77, SendFlags.SIGNALED);
            assertEquals(WcStatus.RETRY_EXC_ERR, SoftProviderTest.pollOne(x.cq()));
            String trouble = x.qp().connectionTrouble();
            assertNotNull(trouble);
            assertTrue(trouble.startsWith("could not authenticate to the peer's soft0 port "
                    + SoftFabric.address(x.endpoint().gid()).getHostAddress() + ":" + peer.getLocalPort()
                    + " within 300ms: it closed "), trouble);
            assertTrue(trouble.contains("a flood of connections?") && !trouble.contains("GID"), trouble);
            peer.close();
            closer.join();
        }
    }
}
