package dev.rdmarun.dsl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.engine.OpKind;
import java.io.IOException;
import java.net.ServerSocket;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The operations RdmaJava gained to match {@code rdma { }}, called from Java on soft0, both peers
 * in this JVM: the scenario-level write, writeWithImm, sendWithImm and read on every QP, and on one
 * QP writeWithImm, awaitCompletions, measure and measureRoundTrip, server and client blocks.
 */
class RdmaJavaTest {
    /** What each side saw, by name, for the assertions after the run. */
    private final Map<String, Object> seen = new ConcurrentHashMap<>();

    private ScenarioResult side(Peer peer) throws TimeoutException {
        return RdmaJava.run(new RdmaOptions().withPeer(peer), s -> {
            s.device("soft0");
            s.qps(2);
            s.bufferSize(64);
            s.remoteAccess(RemoteAccess.WRITE, RemoteAccess.READ);
            s.timeoutMillis(30_000);
            s.connect(s.getPeer());
            s.client(c -> {
                c.write(8, 0, 0);
                c.writeWithImm(11, 8, 0, 0);
                c.sendWithImm(12, 8, 0);
                c.read(8, 0, 0);
                c.awaitAll();
            });
            s.server(sv -> {
                seen.put("every QP's writeWithImm", sv.receive().stream().map(Message::getImmediate).toList());
                seen.put("every QP's sendWithImm", sv.receive().stream().map(Message::getImmediate).toList());
            });
            s.barrier();
            s.qp(0, qp -> {
                qp.client(c -> {
                    c.writeWithImm(21, 8, 0, 0, 0, 0);
                    c.send(8, 0);
                    seen.put("both completions, oldest first", c.awaitCompletions(2).stream().map(Completion::getOpcode).toList());
                    Message echo = c.measureRoundTrip("round trip", () -> {
                        c.send(8, 0);
                        return c.receive();
                    });
                    seen.put("the echo's length", echo.getLength());
                });
                qp.server(sv -> {
                    seen.put("QP 0's writeWithImm", sv.measure("first message", () -> sv.receive()).getImmediate());
                    sv.receive();
                    sv.receive();
                    sv.send(8, 0);
                });
            });
        });
    }

    @Test
    @Timeout(120)
    void theOperationsRdmaJavaAddedRunOnSoft0() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            Future<ScenarioResult> server = pool.submit(() -> side(Peer.listen(port)));
            Future<ScenarioResult> client = pool.submit(() -> side(Peer.connect("127.0.0.1", port)));
            ScenarioResult serverResult = server.get();
            ScenarioResult clientResult = client.get();
            assertEquals(List.of(11, 11), seen.get("every QP's writeWithImm"));
            assertEquals(List.of(12, 12), seen.get("every QP's sendWithImm"));
            assertEquals(21, seen.get("QP 0's writeWithImm"));
            assertEquals(List.of(OpKind.WRITE_WITH_IMM, OpKind.SEND), seen.get("both completions, oldest first"));
            assertEquals(8, seen.get("the echo's length"));
            assertTrue(serverResult.getSections().containsKey("first message"), serverResult.getSections().keySet().toString());
            assertTrue(clientResult.getSections().containsKey("round trip"), clientResult.getSections().keySet().toString());
        } finally {
            pool.shutdownNow();
        }
    }

    /** A wait's deadline reaches Java as the checked TimeoutException that RdmaJava.run declares, with its one sentence. */
    @Test
    @Timeout(120)
    void aWaitsDeadlineIsATimeoutExceptionInJava() throws Exception {
        int port = freePort();
        Map<String, String> noWarmup = Map.of("warmup", "0", "preflight", "0"); // the server's 2 s include waiting for the client's hello
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            // The 2 s below also bound the handshake: a first one in a cold JVM on a loaded host (class
            // loading, the first HMACs) was seen to take longer. One untimed pair first makes it a warm one.
            int warmPort = freePort();
            Future<ScenarioResult> warmServer = pool.submit(() -> RdmaJava.run(new RdmaOptions().withParameters(noWarmup)
                    .withPeer(Peer.listen(warmPort)), s -> { s.device("soft0"); s.connect(s.getPeer()); s.barrier(); }));
            RdmaJava.run(new RdmaOptions().withParameters(noWarmup).withPeer(Peer.connect("127.0.0.1", warmPort)),
                    s -> { s.device("soft0"); s.connect(s.getPeer()); s.barrier(); });
            warmServer.get();
            Future<ScenarioResult> server = pool.submit(() -> RdmaJava.run(new RdmaOptions().withParameters(noWarmup).withPeer(Peer.listen(port)), s -> {
                s.device("soft0");
                s.timeoutMillis(2_000);
                s.connect(s.getPeer());
                s.qp(0, qp -> qp.receive()); // the client never sends
            }));
            Future<ScenarioResult> client = pool.submit(() -> RdmaJava.run(new RdmaOptions().withParameters(noWarmup).withPeer(Peer.connect("127.0.0.1", port)), s -> {
                s.device("soft0");
                s.timeoutMillis(60_000); // a local setting: the server's wait is the one that ends
                s.connect(s.getPeer());
                s.barrier();
            }));
            ExecutionException atServer = assertThrows(ExecutionException.class, server::get);
            TimeoutException timeout = assertInstanceOf(TimeoutException.class, atServer.getCause());
            assertInstanceOf(RdmaTimeoutException.class, timeout);
            assertTrue(timeout.getMessage().startsWith("the server waited 2s for a message in receive() on QP 0; "), timeout.getMessage());
            ExecutionException atClient = assertThrows(ExecutionException.class, client::get);
            assertInstanceOf(PeerException.class, atClient.getCause()); // the client did not time out: its peer did, and said so
        } finally {
            pool.shutdownNow();
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    @Test
    void aScenarioExceptionTakesJustAMessage() {
        assertEquals("x", new ScenarioException("x").getMessage());
    }
}
