package dev.rdmarun.samples;

import dev.rdmarun.dsl.ControlToken;
import dev.rdmarun.dsl.ScenarioException;
import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.Gid;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.Mtu;
import dev.rdmarun.runtime.ProtectionDomain;
import dev.rdmarun.runtime.QpEndpoint;
import dev.rdmarun.runtime.QpState;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.RtrAttributes;
import dev.rdmarun.runtime.RtsAttributes;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WcOpcode;
import dev.rdmarun.runtime.WorkCompletions;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Multi-QP RC over one TCP connection, at the runtime level (the seeds' C flow, in Java):
 * one PD, ONE shared CQ, N RC QPs, one MR; every QP goes to INIT and gets a receive
 * (wr_id = QP index) before the endpoints are exchanged; then RTR/RTS, a TCP barrier so both
 * sides have their receives posted before anyone sends, one SEND per QP each way, and the
 * shared CQ is polled until N send and N receive completions arrived. Each completion is
 * matched to its QP by wr_id and checked against the QP number the CQ reports.
 *
 * <pre>
 *   server: MultiQpRuntime --listen 18600 -d rxe0 -g 1 -q 4
 *   client: MultiQpRuntime --connect 10.77.0.1:18600 -d rxe0 -g 1 -q 4
 * </pre>
 *
 * Exit status: 0 when every check passed on this side and the peer reported success, 1 on any
 * failure (with a sentence saying what), 2 on a usage error.
 *
 * <p>Wire format (ASCII lines, each at most {@value #MAX_LINE} bytes): a header
 * {@code rdma-run-multiqp 2 <server|client> <nqp>}, then one line per QP
 * {@code qp <index> <qpn> <psn> <lid> <gid hex> <mtu bytes>}, and from the client
 * {@code nonce <64 hex digits>}: a fresh nonce from which both sides derive the fabric key they give
 * RTR (soft0 authenticates its TCP connections with it; hardware ignores it) with the secret they
 * share, {@code $RDMA_RUN_TOKEN} or else the per-user secret, so the key never travels; later the barrier lines
 * {@code ready} and {@code done ok|done fail}. Both sides write their whole message before
 * reading the peer's, and read all of it before judging it, so a mismatch is reported on both
 * sides and the connection still closes cleanly.
 */
public final class MultiQpRuntime {
    static final String MAGIC = "rdma-run-multiqp";
    static final int VERSION = 3;
    /** What the fabric key derived from the shared secret and the client's nonce is for. */
    static final String KEY_PURPOSE = "rdma-run multi-qp sample soft0 fabric key";
    static final int NONCE_BYTES = 32;
    static final int MAX_QPS = 256;
    static final int MAX_LINE = 512;
    /** Bytes per message slot in the MR: receive slots first, then send slots. */
    static final int SLOT = 256;
    static final int IB_PORT_DEFAULT = 1;

    /**
     * The secret both sides derive soft0's fabric key from: {@code $RDMA_RUN_TOKEN}, else the
     * per-user secret (two processes of one user, or hosts sharing the home directory, agree).
     */
    static ControlToken sharedSecret() throws Failure {
        try {
            return ControlToken.fromEnvironment();
        } catch (ScenarioException e) {
            throw new Failure(e.getMessage());
        }
    }

    /** A failure with a sentence for people; the program exits 1 with it. */
    static final class Failure extends Exception {
        Failure(String message) {
            super(message);
        }

        Failure(String message, Throwable cause) {
            super(message, cause);
        }
    }

    static final class Usage extends Exception {
        Usage(String message) {
            super(message);
        }
    }

    record Options(Integer listenPort, String host, int connectPort, String device, Integer gidIndex, int qps,
                   int ibPort, int timeoutSeconds, int holdSeconds) {
        boolean server() {
            return listenPort != null;
        }

        String side() {
            return server() ? "server" : "client";
        }

        String peerSide() {
            return server() ? "client" : "server";
        }
    }

    static final String USAGE = """
            usage: MultiQpRuntime (--listen PORT | --connect HOST:PORT) [-d DEV] [-g GIDX] [-q NQP] [-i IBPORT] [-t SECONDS] [--hold SECONDS]
              --listen PORT        be the server: wait for one client on this TCP port
              --connect HOST:PORT  be the client: connect to a server
              -d DEV               RDMA device (default: the first one)
              -g GIDX              local GID index (default: the first RoCE v2 IPv4 GID)
              -q NQP               number of RC QPs, same on both sides (default 4, at most 256)
              -i IBPORT            port of the device (default 1)
              -t SECONDS           bound on every wait: accept, connect, each read, CQ polling (default 30)
              --hold SECONDS       after closing every verbs object, stay alive this long before exiting
                                   (lets a test check `rdma resource show` for leaks; default 0)""";

    public static void main(String[] args) {
        Options o;
        try {
            o = parse(args);
        } catch (Usage u) {
            System.err.println("multi-qp: " + u.getMessage());
            System.err.println(USAGE);
            System.exit(2);
            return;
        }
        int status = run(o);
        if (o.holdSeconds() > 0) {
            // Every verbs object is closed by now: a test can check with `rdma resource show`
            // that this live process holds none (after exit the kernel would free them anyway).
            System.out.println("multi-qp " + o.side() + ": verbs objects closed; holding " + o.holdSeconds()
                    + " s before exiting with status " + status);
            LockSupport.parkNanos(TimeUnit.SECONDS.toNanos(o.holdSeconds()));
        }
        System.exit(status);
    }

    static Options parse(String[] args) throws Usage {
        Integer listen = null;
        String host = null;
        int connectPort = 0;
        String device = null;
        Integer gid = null;
        int qps = 4;
        int ibPort = IB_PORT_DEFAULT;
        int timeout = 30;
        int hold = 0;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("-h") || a.equals("--help")) throw new Usage("help");
            if (i + 1 >= args.length) throw new Usage("option " + a + " needs a value");
            String v = args[++i];
            switch (a) {
                case "--listen", "-l" -> listen = intArg(a, v, 1, 65535);
                case "--connect", "-c" -> {
                    int colon = v.lastIndexOf(':');
                    if (colon <= 0 || colon == v.length() - 1) throw new Usage("--connect needs HOST:PORT, not '" + v + "'");
                    host = v.substring(0, colon);
                    connectPort = intArg(a, v.substring(colon + 1), 1, 65535);
                }
                case "-d", "--device" -> device = v;
                case "-g", "--gid-index" -> gid = intArg(a, v, 0, 255);
                case "-q", "--qps" -> qps = intArg(a, v, 1, MAX_QPS);
                case "-i", "--ib-port" -> ibPort = intArg(a, v, 1, 255);
                case "-t", "--timeout" -> timeout = intArg(a, v, 1, 3600);
                case "--hold" -> hold = intArg(a, v, 0, 3600);
                default -> throw new Usage("unknown option " + a);
            }
        }
        if ((listen == null) == (host == null)) throw new Usage("give exactly one of --listen PORT and --connect HOST:PORT");
        return new Options(listen, host, connectPort, device, gid, qps, ibPort, timeout, hold);
    }

    private static int intArg(String option, String value, int min, int max) throws Usage {
        try {
            int n = Integer.parseInt(value);
            if (n < min || n > max) throw new Usage(option + " must be in " + min + ".." + max + ", not " + n);
            return n;
        } catch (NumberFormatException e) {
            throw new Usage(option + " needs a number, not '" + value + "'");
        }
    }

    /** Runs one side; returns the exit status. Every resource is closed on every path. */
    static int run(Options o) {
        String side = o.side();
        long t0 = System.nanoTime();
        // The server binds first: a busy port fails before any RDMA setup, and a client that
        // connects while this side is still setting up waits in the backlog.
        try (ServerSocket listener = o.server() ? listen(o) : null;
             Context ctx = openDevice(o.device());
             ProtectionDomain pd = ctx.allocateProtectionDomain();
             // 2 completions per QP (one send, one receive) are outstanding at most.
             CompletionQueue cq = ctx.createCompletionQueue(2 * o.qps() + 1);
             // Send/recv only: the HCA writes into the receive slots, nobody accesses it remotely.
             MemoryRegion mr = pd.registerMemory(2L * o.qps() * SLOT, EnumSet.of(Access.LOCAL_WRITE));
             QpSet qps = new QpSet();
             WorkCompletions wc = new WorkCompletions(Math.min(2 * o.qps(), 64))) {

            int gidIndex = o.gidIndex() != null ? o.gidIndex() : ctx.defaultGid(o.ibPort()).index();
            System.out.printf("multi-qp %s: device %s port %d GID index %d (%s), %d RC QPs on one shared CQ (%d entries)%n",
                    side, ctx.deviceName(), o.ibPort(), gidIndex, ctx.gid(o.ibPort(), gidIndex).gid(), o.qps(), cq.capacity());

            // QPs, all on the shared CQ; RESET→INIT; a receive on every QP (wr_id = QP index).
            SecureRandom random = new SecureRandom();
            List<QpEndpoint> local = new ArrayList<>(o.qps());
            for (int i = 0; i < o.qps(); i++) {
                QueuePair qp = qps.add(pd.createQueuePair(QueuePairConfig.rc(cq).withDepth(4, 4)));
                // No remote access: SEND/RECV needs none (least privilege).
                qp.modifyToInit(o.ibPort(), EnumSet.noneOf(Access.class));
                local.add(qp.localEndpoint(o.ibPort(), gidIndex, random.nextInt(1 << 24)));
            }
            printStates(side, qps, "after RESET→INIT");
            for (int i = 0; i < o.qps(); i++) qps.get(i).postReceive(i, mr, recvOffset(i), SLOT);
            long tSetup = System.nanoTime();

            ControlToken secret = sharedSecret(); // before the peer: an unusable secret file is known now
            try (Socket socket = o.server() ? accept(listener, o) : connect(o)) {
                socket.setSoTimeout(o.timeoutSeconds() * 1000);
                socket.setTcpNoDelay(true);
                Wire wire = new Wire(socket, o.timeoutSeconds());

                // Exchange: whole message out, whole message in, then judge it.
                // The client sends a fresh nonce with its endpoints; both sides derive the pair's
                // fabric key from it and their shared secret, so an observer of this exchange cannot.
                byte[] nonce = null;
                if (!o.server()) {
                    nonce = new byte[NONCE_BYTES];
                    random.nextBytes(nonce);
                }
                wire.send(encode(side, local) + (nonce == null ? "" : "nonce " + HexFormat.of().formatHex(nonce) + "\n"), "its QP endpoints");
                List<QpEndpoint> remote = wire.receiveEndpoints(o);
                if (nonce == null) nonce = wire.receiveNonce();
                FabricKey key = secret.fabricKey(nonce, KEY_PURPOSE);
                long tExchange = System.nanoTime();

                // RTR/RTS every QP i against remote QP i.
                for (int i = 0; i < o.qps(); i++) {
                    QueuePair qp = qps.get(i);
                    QpEndpoint r = remote.get(i);
                    Mtu pathMtu = Mtu.min(local.get(i).mtu(), r.mtu());
                    qp.modifyToRtr(RtrAttributes.of(r, o.ibPort(), gidIndex, pathMtu).withFabricKey(key));
                }
                printStates(side, qps, "after INIT→RTR");
                for (int i = 0; i < o.qps(); i++) qps.get(i).modifyToRts(RtsAttributes.of(local.get(i).psn()));
                printStates(side, qps, "after RTR→RTS");

                // Barrier: the peer's receives are posted (it posted them before the exchange, and
                // it says "ready" only after its QPs reached RTS), so no send meets an empty RQ.
                wire.send("ready\n", "the barrier before sending");
                wire.expect("ready", "the barrier before sending");
                long tBarrier = System.nanoTime();

                // One signaled SEND per QP, wr_id = QP index, naming this side and the QP.
                for (int i = 0; i < o.qps(); i++) {
                    byte[] payload = payload(side, i).getBytes(StandardCharsets.US_ASCII);
                    MemorySegment.copy(payload, 0, mr.segment(), ValueLayout.JAVA_BYTE, sendOffset(o.qps(), i), payload.length);
                    qps.get(i).postSend(i, mr, sendOffset(o.qps(), i), payload.length, SendFlags.SIGNALED);
                }

                Tally tally = poll(o, qps, cq, wc, mr);
                long tTraffic = System.nanoTime();
                boolean ok = tally.report(o, qps, remote);

                // Final barrier: neither side tears its QPs down while the peer may still wait for
                // an ACK, and each side learns whether the other passed.
                wire.send(ok ? "done ok\n" : "done fail\n", "its final result");
                String verdict = wire.line("the peer's final result");
                boolean peerOk = switch (verdict) {
                    case "done ok" -> true;
                    case "done fail" -> false;
                    default -> throw new Failure("the peer sent '" + printable(verdict) + "' instead of its final result");
                };
                if (!peerOk) System.out.println("multi-qp " + side + ": the " + o.peerSide() + " reported a failure (see its output)");

                System.out.printf("multi-qp %s: timings: setup %d ms, exchange %d ms, connect+barrier %d ms, traffic %d ms, total %d ms%n",
                        side, ms(tSetup - t0), ms(tExchange - tSetup), ms(tBarrier - tExchange), ms(tTraffic - tBarrier),
                        ms(System.nanoTime() - t0));
                if (ok && peerOk) {
                    System.out.printf("multi-qp %s: PASS: %d QPs, %d send + %d recv completions, all payloads verified%n",
                            side, o.qps(), tally.totalSends, tally.totalRecvs);
                    return 0;
                }
                System.out.printf("multi-qp %s: FAIL: %d QPs, %d send + %d recv completions%s%n", side, o.qps(),
                        tally.totalSends, tally.totalRecvs, ok ? " (this side passed; the peer did not)" : "");
                return 1;
            }
        } catch (Failure f) {
            System.err.println("multi-qp " + side + ": FAIL: " + f.getMessage());
            return 1;
        } catch (VerbsException e) {
            System.err.println("multi-qp " + side + ": FAIL: " + e.describe());
            return 1;
        } catch (IOException e) {
            System.err.println("multi-qp " + side + ": FAIL: TCP connection to the " + o.peerSide() + ": " + e);
            return 1;
        } catch (RuntimeException e) {
            System.err.println("multi-qp " + side + ": FAIL: unexpected error: " + e);
            e.printStackTrace();
            return 1;
        }
    }

    private static long ms(long nanos) {
        return TimeUnit.NANOSECONDS.toMillis(nanos);
    }

    static long recvOffset(int i) {
        return (long) i * SLOT;
    }

    static long sendOffset(int n, int i) {
        return (long) (n + i) * SLOT;
    }

    static String payload(String side, int qp) {
        return "multi-qp payload from " + side + " on QP " + qp;
    }

    private static Context openDevice(String name) {
        if (name != null) return Context.open(name);
        try (var list = dev.rdmarun.runtime.DeviceList.open()) {
            return list.defaultDevice().open(); // real devices first; soft0 where there is none
        }
    }

    // ---- TCP ----

    private static ServerSocket listen(Options o) throws Failure {
        try {
            ServerSocket s = new ServerSocket();
            s.setReuseAddress(true);
            s.bind(new InetSocketAddress(o.listenPort()));
            s.setSoTimeout(o.timeoutSeconds() * 1000);
            System.out.println("multi-qp server: listening on TCP port " + o.listenPort());
            return s;
        } catch (IOException e) {
            throw new Failure("cannot listen on TCP port " + o.listenPort() + ": " + e.getMessage(), e);
        }
    }

    private static Socket accept(ServerSocket listener, Options o) throws Failure {
        try {
            Socket s = listener.accept();
            System.out.println("multi-qp server: client connected from " + s.getRemoteSocketAddress());
            return s;
        } catch (SocketTimeoutException e) {
            throw new Failure("no client connected to TCP port " + o.listenPort() + " within " + o.timeoutSeconds() + " s");
        } catch (IOException e) {
            throw new Failure("accept on TCP port " + o.listenPort() + " failed: " + e.getMessage(), e);
        }
    }

    /** Connects, retrying "connection refused" until the timeout (the server may still be starting). */
    private static Socket connect(Options o) throws Failure {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(o.timeoutSeconds());
        IOException last = null;
        while (System.nanoTime() < deadline) {
            Socket s = new Socket();
            try {
                int left = (int) Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
                s.connect(new InetSocketAddress(o.host(), o.connectPort()), left);
                System.out.println("multi-qp client: connected to " + o.host() + ":" + o.connectPort());
                return s;
            } catch (ConnectException e) {
                last = e;
                closeQuietly(s);
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(200));
            } catch (IOException e) {
                closeQuietly(s);
                throw new Failure("cannot connect to " + o.host() + ":" + o.connectPort() + ": " + e.getMessage(), e);
            }
        }
        throw new Failure("cannot connect to " + o.host() + ":" + o.connectPort() + " within " + o.timeoutSeconds()
                + " s" + (last != null ? " (" + last.getMessage() + ")" : "") + ": is the server running?");
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // nothing to do
        }
    }

    static String encode(String side, List<QpEndpoint> endpoints) {
        StringBuilder sb = new StringBuilder();
        sb.append(MAGIC).append(' ').append(VERSION).append(' ').append(side).append(' ').append(endpoints.size()).append('\n');
        for (int i = 0; i < endpoints.size(); i++) {
            QpEndpoint e = endpoints.get(i);
            sb.append("qp ").append(i).append(' ').append(e.qpn()).append(' ').append(e.psn()).append(' ')
                    .append(e.lid()).append(' ').append(e.gid().toHex()).append(' ').append(e.mtu().bytes()).append('\n');
        }
        return sb.toString();
    }

    /** Shows at most 60 characters of peer text, with control and non-ASCII bytes escaped. */
    static String printable(String s) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < s.length() && sb.length() < 60; i++) {
            char c = s.charAt(i);
            if (c >= 0x20 && c < 0x7f) sb.append(c);
            else sb.append(String.format("\\x%02x", (int) c & 0xff));
        }
        return s.length() > 60 ? sb + "..." : sb.toString();
    }

    /** Bounded line I/O over the socket: every read has the socket timeout, every line a length limit. */
    static final class Wire {
        private final InputStream in;
        private final OutputStream out;
        private final int timeoutSeconds;

        Wire(Socket socket, int timeoutSeconds) throws IOException {
            this.in = new BufferedInputStream(socket.getInputStream());
            this.out = socket.getOutputStream();
            this.timeoutSeconds = timeoutSeconds;
        }

        void send(String text, String what) throws Failure {
            try {
                out.write(text.getBytes(StandardCharsets.US_ASCII));
                out.flush();
            } catch (IOException e) {
                throw new Failure("the peer closed the TCP connection (" + e.getMessage() + ") while this side sent "
                        + what + "; did the peer fail? see its output", e);
            }
        }

        /** One line without its '\n'; a clear Failure on EOF, timeout, overlong line or a NUL/binary byte. */
        String line(String waitingFor) throws Failure {
            StringBuilder sb = new StringBuilder();
            try {
                while (true) {
                    int b = in.read();
                    if (b < 0) {
                        throw new Failure("the peer closed the TCP connection while this side waited for " + waitingFor
                                + (sb.isEmpty() ? "" : " (partial line '" + printable(sb.toString()) + "')")
                                + "; did the peer fail? see its output");
                    }
                    if (b == '\n') return sb.toString();
                    if (b == '\r') continue;
                    if (b < 0x20 || b >= 0x7f) {
                        throw new Failure("the peer sent binary data (byte 0x" + Integer.toHexString(b) + " after '"
                                + printable(sb.toString()) + "') while this side waited for " + waitingFor
                                + ": it is not a rdma-run multi-QP sample");
                    }
                    if (sb.length() >= MAX_LINE) {
                        throw new Failure("the peer sent a line longer than " + MAX_LINE + " bytes ('" + printable(sb.toString())
                                + "') while this side waited for " + waitingFor + ": it is not a rdma-run multi-QP sample");
                    }
                    sb.append((char) b);
                }
            } catch (SocketTimeoutException e) {
                throw new Failure("no answer from the peer within " + timeoutSeconds + " s while waiting for " + waitingFor);
            } catch (IOException e) {
                // A reset (the peer closed with unread data, or died) says the same as an EOF.
                throw new Failure("the peer closed the TCP connection (" + e.getMessage() + ") while this side waited for "
                        + waitingFor + "; did the peer fail? see its output", e);
            }
        }

        void expect(String expected, String waitingFor) throws Failure {
            String got = line(waitingFor);
            if (!got.equals(expected)) {
                throw new Failure("the peer sent '" + printable(got) + "' instead of '" + expected + "' at " + waitingFor);
            }
        }

        /** The client's nonce line: {@code nonce} and exactly 64 lowercase hex digits. */
        byte[] receiveNonce() throws Failure {
            String text = line("the client's nonce");
            String hex = text.startsWith("nonce ") ? text.substring(6) : "";
            if (hex.length() != 2 * NONCE_BYTES || !hex.chars().allMatch(c -> c >= '0' && c <= '9' || c >= 'a' && c <= 'f')) {
                throw new Failure("malformed nonce line: expected 'nonce <64 lowercase hex digits>'");
            }
            return HexFormat.of().parseHex(hex);
        }

        /** Reads the peer's header and all its QP lines, then checks them against this side. */
        List<QpEndpoint> receiveEndpoints(Options o) throws Failure {
            String header = line("the peer's QP endpoints");
            String[] h = header.split(" ");
            if (h.length != 4 || !h[0].equals(MAGIC)) {
                throw new Failure("the peer is not a rdma-run multi-QP sample: its first line is '" + printable(header)
                        + "', expected '" + MAGIC + " " + VERSION + " <side> <nqp>'");
            }
            if (!h[1].equals(Integer.toString(VERSION))) {
                throw new Failure("the peer speaks multi-QP exchange version " + printable(h[1]) + ", this side " + VERSION);
            }
            if (!h[2].equals(o.peerSide())) {
                throw new Failure("the peer is a " + printable(h[2]) + " too: connect a --listen side to a --connect side");
            }
            int n = number(h[3], "QP count in header '" + printable(header) + "'", 1, MAX_QPS);
            List<QpEndpoint> endpoints = new ArrayList<>(n);
            for (int i = 0; i < n; i++) endpoints.add(parseEndpoint(line("the peer's endpoint of QP " + i), i));
            // Judged only after the whole message is read: the connection then closes cleanly
            // and the peer, which does the same, reports the same mismatch.
            if (n != o.qps()) {
                throw new Failure("QP count mismatch: remote has " + n + " QP" + (n == 1 ? "" : "s") + ", this side "
                        + o.qps() + "; start both sides with the same -q");
            }
            return endpoints;
        }

        private static QpEndpoint parseEndpoint(String text, int index) throws Failure {
            String[] f = text.split(" ");
            String what = "endpoint line '" + printable(text) + "'";
            if (f.length != 7 || !f[0].equals("qp")) {
                throw new Failure("malformed " + what + ": expected 'qp <index> <qpn> <psn> <lid> <gid> <mtu>'");
            }
            int idx = number(f[1], "QP index in " + what, 0, MAX_QPS - 1);
            if (idx != index) throw new Failure("the peer sent QP " + idx + " where QP " + index + " was due");
            int qpn = number(f[2], "QPN in " + what, 1, 0xffffff);
            int psn = number(f[3], "PSN in " + what, 0, 0xffffff);
            int lid = number(f[4], "LID in " + what, 0, 0xffff);
            Gid gid;
            try {
                if (f[5].length() != 32) throw new IllegalArgumentException();
                gid = Gid.parseHex(f[5]);
            } catch (IllegalArgumentException e) {
                throw new Failure("bad GID in " + what + ": expected 32 hex digits");
            }
            Mtu mtu;
            try {
                mtu = Mtu.ofBytes(number(f[6], "MTU in " + what, 256, 4096));
            } catch (IllegalArgumentException e) {
                throw new Failure("bad MTU in " + what + ": " + e.getMessage());
            }
            return new QpEndpoint(lid, qpn, psn, gid, mtu);
        }

        private static int number(String s, String what, int min, int max) throws Failure {
            try {
                int n = Integer.parseInt(s);
                if (n < min || n > max) throw new Failure(what + " is " + n + ", outside " + min + ".." + max);
                return n;
            } catch (NumberFormatException e) {
                throw new Failure(what + " is not a number: '" + printable(s) + "'");
            }
        }
    }

    // ---- verbs ----

    /** The N QPs, closed newest first. */
    static final class QpSet implements AutoCloseable {
        private final List<QueuePair> qps = new ArrayList<>();

        QueuePair add(QueuePair qp) {
            qps.add(qp);
            return qp;
        }

        QueuePair get(int i) {
            return qps.get(i);
        }

        int size() {
            return qps.size();
        }

        @Override
        public void close() {
            RuntimeException failure = null;
            for (int i = qps.size() - 1; i >= 0; i--) {
                try {
                    qps.get(i).close();
                } catch (RuntimeException e) {
                    if (failure == null) failure = e;
                    else failure.addSuppressed(e);
                }
            }
            if (failure != null) throw failure;
        }
    }

    /** print_qp_state of the seeds, for every QP. */
    static void printStates(String side, QpSet qps, String title) {
        StringBuilder sb = new StringBuilder("multi-qp " + side + ": QP states " + title + ":");
        for (int i = 0; i < qps.size(); i++) {
            QueuePair qp = qps.get(i);
            sb.append(String.format(" QP%d(qpn %d)=%s", i, qp.qpNum(), qp.queryState()));
        }
        System.out.println(sb);
    }

    /** Completions per QP index, and what went wrong. */
    static final class Tally {
        final int[] sends;
        final int[] recvs;
        final String[] received;
        final List<String> errors = new ArrayList<>();
        int totalSends;
        int totalRecvs;

        Tally(int n) {
            sends = new int[n];
            recvs = new int[n];
            received = new String[n];
        }

        boolean report(Options o, QpSet qps, List<QpEndpoint> remote) {
            String side = o.side();
            int n = o.qps();
            // Count problems only when polling ended normally: after an error or a timeout the
            // missing completions are a consequence, and the first error already says why.
            if (errors.isEmpty()) {
                for (int i = 0; i < n; i++) {
                    if (sends[i] != 1) errors.add("QP " + i + ": " + sends[i] + " send completions, expected 1");
                    if (recvs[i] != 1) errors.add("QP " + i + ": " + recvs[i] + " receive completions, expected 1");
                    if (recvs[i] == 1 && !payload(o.peerSide(), i).equals(received[i])) {
                        errors.add("QP " + i + ": received '" + printable(received[i]) + "', expected '"
                                + payload(o.peerSide(), i) + "'");
                    }
                }
            }
            System.out.printf("multi-qp %s: per-QP results%n", side);
            System.out.printf("  %-3s %-9s %-10s %-6s %-5s %-5s %s%n", "QP", "qpn", "remote qpn", "state", "sends", "recvs", "received payload");
            for (int i = 0; i < n; i++) {
                QueuePair qp = qps.get(i);
                QpState state;
                try {
                    state = qp.queryState();
                } catch (RuntimeException e) {
                    state = QpState.UNKNOWN;
                }
                boolean good = sends[i] == 1 && recvs[i] == 1 && payload(o.peerSide(), i).equals(received[i]);
                System.out.printf("  %-3d %-9d %-10d %-6s %-5d %-5d %s%n", i, qp.qpNum(), remote.get(i).qpn(), state,
                        sends[i], recvs[i], (good ? "ok " : "BAD ") + (received[i] == null ? "-" : "'" + printable(received[i]) + "'"));
            }
            for (String e : errors) System.out.println("multi-qp " + side + ": error: " + e);
            return errors.isEmpty();
        }
    }

    /**
     * Polls the shared CQ until every QP has one send and one receive completion, or stops early
     * at the first error completion (its QP then flushes the rest) or when the timeout passes;
     * what went wrong goes into the tally's errors, so the per-QP table is printed either way.
     */
    static Tally poll(Options o, QpSet qps, CompletionQueue cq, WorkCompletions wc, MemoryRegion mr) {
        int n = o.qps();
        Tally t = new Tally(n);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(o.timeoutSeconds());
        int idle = 0;
        while (t.totalSends < n || t.totalRecvs < n) {
            int got = cq.poll(wc);
            if (got == 0) {
                if (System.nanoTime() > deadline) {
                    t.errors.add("timed out after " + o.timeoutSeconds() + " s polling the shared CQ: "
                            + t.totalSends + " of " + n + " send and " + t.totalRecvs + " of " + n
                            + " receive completions arrived");
                    return t;
                }
                // Spin briefly, then back off: on Soft-RoCE the "HCA" is kernel softirq work that
                // needs the same CPUs a busy-polling process would take.
                if (++idle > 1000) LockSupport.parkNanos(50_000);
                else Thread.onSpinWait();
                continue;
            }
            idle = 0;
            for (int k = 0; k < got; k++) {
                String error = account(t, wc, k, qps, mr, n);
                if (error != null) {
                    t.errors.add(error);
                    return t;
                }
            }
        }
        return t;
    }

    /** Counts completion k against its QP (by wr_id); returns why it is wrong, or null. */
    private static String account(Tally t, WorkCompletions wc, int k, QpSet qps, MemoryRegion mr, int n) {
        if (!wc.isSuccess(k)) return "error completion: " + wc.describe(k);
        long wrId = wc.wrId(k);
        if (wrId < 0 || wrId >= n) return "completion with wr_id " + wrId + ", not a QP index 0.." + (n - 1);
        int i = (int) wrId;
        if (wc.qpNum(k) != qps.get(i).qpNum()) {
            return "completion with wr_id " + i + " reports qp_num " + wc.qpNum(k) + ", but QP " + i + " is qpn "
                    + qps.get(i).qpNum();
        }
        WcOpcode op = wc.opcode(k);
        switch (op) {
            case SEND -> {
                t.sends[i]++;
                t.totalSends++;
            }
            case RECV -> {
                t.recvs[i]++;
                t.totalRecvs++;
                int len = wc.byteLength(k);
                if (len < 0 || len > SLOT) return "receive on QP " + i + " reports " + len + " bytes, the slot has " + SLOT;
                byte[] bytes = mr.segment().asSlice(recvOffset(i), len).toArray(ValueLayout.JAVA_BYTE);
                t.received[i] = new String(bytes, StandardCharsets.US_ASCII);
            }
            default -> {
                return "unexpected completion opcode " + op + " for wr_id " + i;
            }
        }
        return null;
    }

    private MultiQpRuntime() {}
}
