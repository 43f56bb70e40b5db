package dev.rdmarun.runtime.soft;

import static dev.rdmarun.runtime.soft.SoftFabricSecurityTest.side;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.QpEndpoint;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.soft.SoftFabricSecurityTest.Side;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * soft0's responder is the peer's process: a peer held by a collection, the JIT or a loaded host
 * says nothing for a while on a connection that loses nothing. Its requesters wait for it (up to
 * their connect timeout) instead of counting retries; a peer that talks but never about the QP
 * still runs the retries out. The peer here is written by hand, so it stalls exactly when told.
 */
class SoftStalledPeerTest {
    /** ~1 ms ACK timeout: 7 retries are over in ~10 ms. */
    private static final int RETRY_TIMEOUT = 8;
    private Context a;

    @AfterEach
    void close() {
        if (a != null) a.close();
    }

    /** Held for 20 times the retries' span, then it answers: the write completes, nothing was resent. */
    @Test
    void aStalledPeerIsWaitedFor() throws Exception {
        try (Peer p = peer(Duration.ofSeconds(20))) {
            Packet write = p.raw.readFrame();
            LockSupport.parkNanos(Duration.ofMillis(200).toNanos()); // the stall (an input, not a measurement)
            p.raw.send(RawPeer.packet(Packet.ACK, 0, p.x.qp().qpNum(), 0x4242, p.port, write.psn));
            assertEquals(WcStatus.SUCCESS, SoftProviderTest.pollOne(p.x.cq()));
            assertEquals(0, p.raw.in.available(), "the stall made the requester resend");
        }
    }

    /** Silent past the connect timeout: the retries count again, and run out. */
    @Test
    void aPeerSilentPastTheConnectTimeoutRunsOutOfRetries() throws Exception {
        try (Peer p = peer(Duration.ofMillis(300))) {
            p.raw.readFrame();
            assertEquals(WcStatus.RETRY_EXC_ERR, SoftProviderTest.pollOne(p.x.cq()));
        }
    }

    /** Frames for another QP keep arriving, never an answer for this one (its peer QP is gone): RETRY_EXC_ERR. */
    @Test
    void aPeerThatTalksButNeverAnswersRunsOutOfRetries() throws Exception {
        try (Peer p = peer(Duration.ofSeconds(20))) {
            p.raw.readFrame();
            AtomicBoolean over = new AtomicBoolean();
            Thread chatter = Thread.ofVirtual().start(() -> {
                try {
                    for (int psn = 0; !over.get(); psn++) {
                        p.raw.send(RawPeer.packet(Packet.ACK, 0, 0xdead, 0x4242, p.port, psn));
                        LockSupport.parkNanos(200_000);
                    }
                } catch (IOException e) {
                    // closed: the test is over
                }
            });
            try {
                assertEquals(WcStatus.RETRY_EXC_ERR, SoftProviderTest.pollOne(p.x.cq()));
            } finally {
                over.set(true);
                chatter.join();
            }
        }
    }

    private record Peer(Side x, ServerSocket listener, RawPeer raw, int port) implements AutoCloseable {
        @Override
        public void close() throws IOException {
            raw.close();
            listener.close();
        }
    }

    /** A QP of this JVM whose WRITE went to a hand-written peer that authenticated and read nothing yet. */
    private Peer peer(Duration connectTimeout) throws IOException {
        a = Context.open(SoftDevice.NAME);
        Side x = side(a, 1);
        FabricKey key = FabricKey.random();
        ServerSocket listener = new ServerSocket(0, 50, SoftFabric.address(x.endpoint().gid()));
        int port = listener.getLocalPort();
        QpEndpoint remote = new QpEndpoint(port, 0x4242, 7, x.endpoint().gid(), x.endpoint().mtu());
        SoftFabricSecurityTest.connect(x, remote, key, RETRY_TIMEOUT, connectTimeout);
        x.qp().postWrite(1, x.mr(), 0, 8, 0x1000, 0x77, SendFlags.SIGNALED);
        RawPeer raw = RawPeer.accept(listener);
        assertTrue(raw.acceptAuthenticated(key), "the requester authenticates");
        return new Peer(x, listener, raw, port);
    }
}
