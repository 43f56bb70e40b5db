package dev.rdmarun.samples;

import dev.rdmarun.dsl.Message;
import dev.rdmarun.dsl.Peer;
import dev.rdmarun.dsl.RdmaJava;
import dev.rdmarun.dsl.RdmaOptions;
import dev.rdmarun.dsl.ScenarioResult;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.TimeoutException;

/**
 * The design card from Java, through {@link RdmaJava} (no suspend lambdas): 4 QPs, each sends
 * {@code -n} messages and awaits each completion, then one message each way per QP is checked.
 *
 * <pre>
 *   server: CardJava --listen 18515 [-d DEV] [-n ITERS]
 *   client: CardJava --connect HOST:18515 [-d DEV] [-n ITERS]
 * </pre>
 * Exit status 0 on success, 1 when the run failed (one sentence on stderr), 2 on a usage error.
 */
public final class CardJava {
    private CardJava() {}

    public static void main(String[] args) {
        Peer peer = null;
        String device = null;
        int iterations = 1000;
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--listen" -> peer = Peer.listen(Integer.parseInt(args[++i]));
                    case "--connect" -> peer = Peer.parse(args[++i]);
                    case "-d" -> device = args[++i];
                    case "-n" -> iterations = Integer.parseInt(args[++i]);
                    default -> throw new IllegalArgumentException("unknown argument " + args[i]);
                }
            }
            if (peer == null) throw new IllegalArgumentException("give --listen PORT or --connect HOST:PORT");
        } catch (RuntimeException e) {
            System.err.println("card-java: " + e.getMessage());
            System.exit(2);
            return;
        }
        RdmaOptions options = new RdmaOptions().withParameters(Map.of("iterations", Integer.toString(iterations))).withPeer(peer);
        String deviceName = device;
        try {
            ScenarioResult result = RdmaJava.run(options, s -> {
                if (deviceName != null) s.device(deviceName);
                s.qps(4);
                s.connect(s.getPeer());
                int n = s.intParam("iterations", 1000);
                String me = s.isServer() ? "server" : "client";
                String them = s.isServer() ? "client" : "server";
                s.forEachQp(qp -> {
                    for (int i = 0; i < n; i++) {
                        qp.send(64);
                        qp.awaitCompletion();
                    }
                    qp.send(("hello from the " + me + " on QP " + qp.getIndex()).getBytes(StandardCharsets.UTF_8));
                    // The peer's n card messages come first (they waited in the inbox), then its hello.
                    for (int i = 0; i < n; i++) qp.receive();
                    Message hello = qp.receive();
                    String expected = "hello from the " + them + " on QP " + qp.getIndex();
                    if (!hello.text().equals(expected)) {
                        throw new IllegalStateException("QP " + qp.getIndex() + " received '" + hello.text() + "', expected '" + expected + "'");
                    }
                });
            });
            System.out.println(result.table());
            System.out.println("card-java " + result.getRole().getLabel() + ": PASS: " + result.getTotal().getOperations()
                    + " work requests, " + result.getTotal().getMessagesReceived() + " messages received");
        } catch (RuntimeException | TimeoutException e) { // TimeoutException: a wait outlived the timeout (RdmaTimeoutException)
            System.err.println("card-java: FAIL: " + dev.rdmarun.dsl.ValidationKt.describeFailure(e));
            System.exit(1);
        }
    }
}
