package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.SoftTransport;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WrOpcode;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.jctools.queues.atomic.MpscAtomicArrayQueue;

/**
 * The software fabric between processes. A context listens only where a QP's local endpoint
 * asked for a LID: one listener per GID address, bound to that address only, on an ephemeral
 * port (the LID). It opens one connection per (remote listener, {@link FabricKey}) it sends
 * requests to; responses return on the connection their request came on.
 *
 * <p>Authentication, before any frame (all big-endian; {@code HMAC} is HMAC-SHA256 keyed by the
 * fabric key, nonces from SecureRandom, MACs compared in constant time):
 * <ol>
 *   <li>connector: {@value #MAGIC_TEXT} (u32), version {@value #VERSION} (u16), key id (8 bytes: the
 *       first 8 of SHA-256("rdma-run soft0 key id" ‖ key), never the key), nonce C (32 bytes);</li>
 *   <li>acceptor (knows the key: a QP of its context uses it over TCP; else it closes):
 *       magic, version, nonce A (32), HMAC("rdma-run soft0 acceptor" ‖ C ‖ A) (32);</li>
 *   <li>connector checks that MAC (else closes) and sends HMAC("rdma-run soft0 connector" ‖ A ‖ C) (32);
 *       the acceptor checks it (else closes).</li>
 * </ol>
 * A connection must finish this within {@value #AUTH_DEADLINE_MS} ms; at most
 * {@value #MAX_UNAUTHENTICATED} accepted connections per context may be authenticating at once.
 * A connection accepted when they are all taken always gets a slot: the acceptor evicts (closes
 * and counts) one of them, one that sent nothing yet first, of the source address that holds the
 * most slots, the oldest of those. So idle connections opened before a peer arrives (a flood)
 * cannot keep it out, and a source with many slots loses one before a source with one. An
 * authenticated connection that carried nothing for {@value #IDLE_DEADLINE_MS} ms while no QP
 * of the context uses its key is closed.
 *
 * <p>A connector keeps what its QPs queued until its first connection authenticates, and tries
 * again after each failure, backing off from {@value #MIN_BACKOFF_MS} ms to {@value #MAX_BACKOFF_MS}
 * ms; unless an attempt was refused (nothing listens there), its QPs do not count their retries
 * meanwhile, until their connect timeout
 * ({@link dev.rdmarun.runtime.RtrAttributes#withConnectTimeout}) has passed
 * ({@link dev.rdmarun.runtime.QueuePair#connectionTrouble} then says what went wrong).
 *
 * <p>Frames: a u32 length, a {@value #HEADER}-byte header (kind, opcode, rnr timer, QPNs, PSN, LID,
 * remote address, rkey, immediate, atomic operands, READ length, payload length) and the payload.
 * The header is read and checked first (kind, opcode, 24-bit QPNs and PSNs, lengths up to
 * max_msg_sz; a frame longer than max_msg_sz plus the header closes the connection); a frame for
 * no QP, or for a QP whose peer is not behind this connection's key, is skipped unread into
 * memory. What was in flight on a closed connection is lost, which the requesters' retry timers
 * turn into RETRY_EXC_ERR, as a real fabric would.
 *
 * <p>An authenticated connection has a reader and a writer thread. The writer sends up to
 * {@value #BATCH} queued frames with one gathering write: their headers from its own direct
 * buffer, their payloads from the packets' direct buffers, with no copy in between. The reader
 * takes frames through a {@value #READ_BUFFER}-byte buffer (many small ones per read); once a
 * header is judged, the rest of its payload is read straight into the packet, together with
 * whatever follows it (the next frame's start, into the buffer). When that shows the next request
 * for the same QP already there, the responder may leave this one's ACK to a later, cumulative one
 * ({@link SoftQueuePair}).
 */
final class TcpTransport {
    static final String MAGIC_TEXT = "RDSW";
    static final int MAGIC = 0x52445357;
    static final int VERSION = 2;
    static final int HEADER = 60;
    /** A frame's length field and header: what a reader needs before it can judge the frame. */
    static final int FRAME_HEADER = 4 + HEADER;
    static final int KEY_ID_LENGTH = 8;
    static final int NONCE_LENGTH = 32;
    static final int MAC_LENGTH = 32;
    static final int AUTH_DEADLINE_MS = 2000;
    static final int IDLE_DEADLINE_MS = 30_000;
    static final int MAX_UNAUTHENTICATED = 16;
    private static final byte[] KEY_ID_LABEL = "rdma-run soft0 key id".getBytes(StandardCharsets.US_ASCII);
    static final byte[] ACCEPTOR_LABEL = "rdma-run soft0 acceptor".getBytes(StandardCharsets.US_ASCII);
    static final byte[] CONNECTOR_LABEL = "rdma-run soft0 connector".getBytes(StandardCharsets.US_ASCII);
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final int QUEUE = 1 << 14;
    /** Frames a writer gathers into one write (two buffers each: header, payload). */
    static final int BATCH = 64;
    /**
     * A reader's buffer: small frames (ACKs) are taken many per read from it, while most of a
     * large payload is read straight into its packet (only what came with its header is copied).
     */
    static final int READ_BUFFER = 8192;
    /** The largest payload of a next request that lets the responder defer the ACK of the one before. */
    static final int FOLLOWING_PAYLOAD = 1 << 16;
    private static final int CONNECT_TIMEOUT_MS = 3000;
    /** A connector's wait after its first failed attempt, doubled after each next one up to MAX_BACKOFF_MS. */
    static final int MIN_BACKOFF_MS = 20;
    static final int MAX_BACKOFF_MS = 500;
    private static final long SWEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
    /** {@link #IDLE_DEADLINE_MS} in nanoseconds; tests shorten it to see an idle connection closed. */
    volatile long idleDeadlineNanos = TimeUnit.MILLISECONDS.toNanos(IDLE_DEADLINE_MS);

    private final SoftContext context;
    private final ConcurrentHashMap<InetAddress, ServerSocketChannel> listeners = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Route, Connection> outbound = new ConcurrentHashMap<>();
    private final Set<Connection> connections = ConcurrentHashMap.newKeySet();
    /** Accepted connections still authenticating, oldest first (guarded by itself). */
    private final java.util.List<Connection> unauthenticated = new java.util.ArrayList<>();
    /** Unauthenticated connections closed to make room for a newer one. */
    private final AtomicLong evicted = new AtomicLong();
    private volatile Thread sweeper;
    /** Frames of authenticated connections skipped unread (for no QP, or a QP not behind their key). */
    private final AtomicLong skippedFrames = new AtomicLong();
    private volatile boolean closed;

    static {
        // Loads the JCA providers now, not in a QP's first handshake (where it would eat into its ACK timeout).
        mac(FabricKey.random(), ACCEPTOR_LABEL, new byte[NONCE_LENGTH], keyIdBytes(FabricKey.random()));
    }

    /** Where requests of QPs with one key go: connections are per remote listener and key. */
    private record Route(InetSocketAddress remote, FabricKey key) {}

    TcpTransport(SoftContext context) {
        this.context = context;
    }

    /** The key id sent in the clear: a truncated hash, so the key itself never crosses the wire. */
    static String keyId(FabricKey key) {
        return HexFormat.of().formatHex(keyIdBytes(key));
    }

    static byte[] keyIdBytes(FabricKey key) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update(KEY_ID_LABEL);
            byte[] digest = sha.digest(key.toBytes());
            byte[] id = new byte[KEY_ID_LENGTH];
            System.arraycopy(digest, 0, id, 0, KEY_ID_LENGTH);
            return id;
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("the JDK has no SHA-256", e);
        }
    }

    static byte[] mac(FabricKey key, byte[] label, byte[] first, byte[] second) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key.toBytes(), "HmacSHA256"));
            mac.update(label);
            mac.update(first);
            return mac.doFinal(second);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("the JDK has no HmacSHA256", e);
        }
    }

    /**
     * The port of this context's listener on address (bound to that address only), listening
     * from now on if it was not yet: that port is the LID of endpoints with that GID.
     */
    int listen(InetAddress address) {
        if (closed) throw new VerbsException("this soft0 context is closed", null);
        ServerSocketChannel server = listeners.computeIfAbsent(address, a -> {
            try {
                ServerSocketChannel s = ServerSocketChannel.open();
                s.bind(new InetSocketAddress(a, 0));
                Thread.ofVirtual().name(context.deviceName() + "-accept").start(() -> acceptLoop(s));
                SoftFabric.listening(new InetSocketAddress(a, s.socket().getLocalPort()), context);
                return s;
            } catch (IOException e) {
                throw new VerbsException("the software provider cannot listen on " + a.getHostAddress() + ": "
                        + e.getMessage(), "soft0 QPs reach other processes over TCP; check that this process may"
                        + " open a listening socket, or set " + SoftTransport.PROPERTY + "=memory when both"
                        + " peers are in this JVM");
            }
        });
        startSweeper();
        if (closed) closeQuietly(server);
        return server.socket().getLocalPort();
    }

    /** The connection that carries requests with this key to this remote listener (connected on first use). */
    Link connectionTo(InetSocketAddress remote, FabricKey key) {
        startSweeper();
        return outbound.compute(new Route(remote, key), (r, c) -> c == null || c.dead ? start(new Connection(r, null)) : c);
    }

    /**
     * An authenticated connection's reader and writer: platform threads that block in read and
     * write. Virtual ones cost a trip through the JDK's poller and a carrier hand-off each time a
     * read or write waits, which a stream of frames does all the time. (The handshake of an
     * accepted connection stays on a cheap virtual thread: anyone may open one.)
     */
    private static Thread.Builder io() {
        return Thread.ofPlatform().daemon(true);
    }

    private Connection start(Connection c) {
        connections.add(c);
        c.writer = io().name(context.deviceName() + "-tcp-writer").unstarted(c::writeLoop);
        if (c.route != null) c.writer.start();
        return c;
    }

    private void acceptLoop(ServerSocketChannel server) {
        while (!closed && server.isOpen()) {
            try {
                SocketChannel s = server.accept();
                if (closed) {
                    closeQuietly(s);
                    continue;
                }
                s.setOption(StandardSocketOptions.TCP_NODELAY, true);
                Connection c = new Connection(null, s);
                admit(c);
                start(c);
                Thread.ofVirtual().name(context.deviceName() + "-tcp-auth").start(c::acceptorLoop);
            } catch (IOException | RuntimeException | Error e) {
                if (closed || !server.isOpen()) return;
                // one failed accept (out of descriptors, say) must not end the listener
            }
        }
    }

    /**
     * Gives c one of the MAX_UNAUTHENTICATED slots, evicting an unauthenticated connection when
     * they are all taken: a newcomer may be the peer, while those that hold slots are idle or
     * slow (see the class comment for which one goes).
     */
    private void admit(Connection c) {
        Connection victim = null;
        synchronized (unauthenticated) {
            if (unauthenticated.size() >= MAX_UNAUTHENTICATED) {
                victim = victim();
                unauthenticated.remove(victim);
            }
            unauthenticated.add(c);
        }
        if (victim != null) {
            evicted.incrementAndGet();
            victim.closeSocket(); // its handshake fails, and its thread forgets it
        }
    }

    /** The slot to free: one that sent nothing yet first, then of the source holding most slots, the oldest. */
    private Connection victim() {
        java.util.Map<InetAddress, Integer> held = slotsBySource();
        Connection best = null;
        for (Connection c : unauthenticated) { // oldest first: a later one replaces best only when strictly worse off
            if (best == null || !c.heard && best.heard
                    || c.heard == best.heard && held.get(c.source) > held.get(best.source)) {
                best = c;
            }
        }
        return best;
    }

    /** Whether c still held an unauthenticated slot (false: it was evicted); it holds none now. */
    private boolean leaveSlot(Connection c) {
        synchronized (unauthenticated) {
            return unauthenticated.remove(c);
        }
    }

    /** Unauthenticated connections this context's listeners closed to make room for newer ones. */
    long evictedConnections() {
        return evicted.get();
    }

    /** How many unauthenticated slots each source address holds now. */
    java.util.Map<InetAddress, Integer> unauthenticatedBySource() {
        synchronized (unauthenticated) {
            return slotsBySource();
        }
    }

    /** The slots each source holds (the lock on unauthenticated held). */
    private java.util.Map<InetAddress, Integer> slotsBySource() {
        java.util.Map<InetAddress, Integer> held = new java.util.HashMap<>();
        for (Connection c : unauthenticated) held.merge(c.source, 1, Integer::sum);
        return held;
    }

    /** Closes connections past their deadline: unauthenticated after AUTH_DEADLINE_MS, unused and idle after IDLE_DEADLINE_MS. */
    private void startSweeper() {
        if (sweeper != null) return;
        synchronized (this) {
            if (sweeper != null || closed) return;
            sweeper = Thread.ofVirtual().name(context.deviceName() + "-tcp-sweeper").start(this::sweepLoop);
        }
    }

    private void sweepLoop() {
        while (!closed) {
            long now = System.nanoTime();
            for (Connection c : connections) {
                try {
                    c.sweep(now);
                } catch (RuntimeException e) {
                    c.close();
                }
            }
            LockSupport.parkNanos(this, SWEEP_NANOS);
        }
    }

    long skippedFrames() {
        return skippedFrames.get();
    }

    int listenerCount() {
        return listeners.size();
    }

    /** The addresses the listeners are bound to. */
    java.util.List<InetAddress> listenerAddresses() {
        return listeners.values().stream().map(s -> s.socket().getInetAddress()).toList();
    }

    void close() {
        closed = true;
        for (ServerSocketChannel s : listeners.values()) closeQuietly(s);
        for (Connection c : connections) c.close();
        Thread t = sweeper;
        if (t != null) {
            LockSupport.unpark(t);
            try {
                t.join(TimeUnit.SECONDS.toMillis(5));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception ignored) {
            // closing anyway
        }
    }

    /**
     * One TCP connection: a writer thread drains the outbound queue, a reader delivers to the
     * engine. Outbound ones (route set) connect and authenticate as connector, accepted ones as acceptor.
     */
    final class Connection implements Link {
        private final Route route;
        private final MpscAtomicArrayQueue<Packet> out = new MpscAtomicArrayQueue<>(QUEUE);
        /** The writer's batch: its packets, their headers (direct, one slot each) and the buffers of one gathering write. */
        private final Packet[] batch = new Packet[BATCH];
        private final ByteBuffer[] headers = new ByteBuffer[BATCH];
        private final ByteBuffer[] gather = new ByteBuffer[2 * BATCH];
        private volatile SocketChannel socket;
        private volatile boolean writerSleeping;
        private volatile boolean dead;
        /** The key this connection proved; null until it did. */
        private volatile FabricKey key;
        private volatile long openedAt = System.nanoTime();
        private volatile long lastActivity = System.nanoTime();
        /** Accepted: the address it came from, and whether it has sent anything yet (an idle one is evicted first). */
        private final InetAddress source;
        private volatile boolean heard;
        /** Outbound: whether it ever authenticated; until then its QPs' retries wait (see the class comment). */
        private volatile boolean authenticated;
        /** Outbound, before it first authenticated: attempts, those the listener closed before answering, the last failure. */
        private volatile int attempts;
        private volatile int closedUnanswered;
        private volatile String lastFailure;
        /** Outbound: whether its last attempt was refused (no listener: its QPs stop waiting for it). */
        private volatile boolean refused;
        /** Set in connect() once the hello is sent and once the listener answered it (writer thread). */
        private boolean helloSent;
        private boolean answered;
        Thread writer;

        Connection(Route route, SocketChannel accepted) {
            this.route = route;
            this.socket = accepted;
            InetAddress from = null;
            try {
                if (accepted != null && accepted.getRemoteAddress() instanceof InetSocketAddress a) from = a.getAddress();
            } catch (IOException e) {
                // closed already: it gets a slot of its own and ends at once
            }
            this.source = from;
        }

        /** The key this connection authenticated with, or null. */
        FabricKey key() {
            return key;
        }

        @Override
        public boolean offer(Packet p) {
            if (dead || closed) {
                p.release(); // nobody to deliver to: the packet is lost
                return true;
            }
            if (!out.offer(p)) return false;
            if (writerSleeping) LockSupport.unpark(writer);
            return true;
        }

        void sweep(long now) {
            if (dead) {
                connections.remove(this);
                return;
            }
            SocketChannel s = socket;
            FabricKey k = key;
            if (s != null && k == null) {
                if (now - openedAt > TimeUnit.MILLISECONDS.toNanos(AUTH_DEADLINE_MS)) closeSocket();
                return;
            }
            // Idle: nothing carried since the deadline (a connection not yet used counts from its creation).
            if (now - lastActivity <= idleDeadlineNanos) return;
            if (route == null) {
                if (k == null || !context.keyInUse(k)) close();
                return;
            }
            // Atomic with connectionTo: a QP that registers the key first gets this connection kept.
            outbound.computeIfPresent(route, (r, c) -> {
                if (c != this || context.keyInUse(r.key()) || !out.isEmpty()) return c;
                close();
                return null;
            });
        }

        /**
         * Outbound, while it has not authenticated yet: whether its QPs should keep waiting for it
         * (it is alive, and its last attempt was not refused); once it authenticated, or when
         * nothing listens at the peer's port, they count their retries as usual.
         */
        boolean connecting() {
            return route != null && !authenticated && !refused && !dead && !closed;
        }

        /**
         * Outbound: why it did not authenticate within timeoutNanos, in one sentence, or null when
         * it did (or never tried).
         */
        String trouble(long timeoutNanos) {
            int n = attempts;
            if (route == null || authenticated || n == 0) return null;
            long ms = TimeUnit.NANOSECONDS.toMillis(timeoutNanos);
            String head = "could not authenticate to the peer's soft0 port " + route.remote().getAddress().getHostAddress()
                    + ":" + route.remote().getPort() + " within " + (ms < 1000 ? ms + "ms" : ms / 1000 + "s") + ": ";
            int unanswered = closedUnanswered;
            if (unanswered > 0) {
                return head + "it closed " + unanswered + " of " + n + " attempts before answering (its unauthenticated"
                        + " slots held by a flood of connections?, or the two sides' fabric keys differ)";
            }
            return head + n + " attempts failed, the last with: " + lastFailure;
        }

        /** Accepted connection: authenticates (or closes); once it is, a reader and the writer start. */
        void acceptorLoop() {
            SocketChannel s = socket;
            boolean counted = true;
            boolean reading = false;
            try {
                if (s == null) return;
                // The handshake goes through the socket's streams (read timeouts); frames then through the channel.
                InputStream in = s.socket().getInputStream();
                OutputStream o = s.socket().getOutputStream();
                byte[] hello = readExactly(in, 4 + 2 + KEY_ID_LENGTH + NONCE_LENGTH);
                if (readInt(hello, 0) != MAGIC || ((hello[4] & 0xff) << 8 | hello[5] & 0xff) != VERSION) return;
                FabricKey k = context.keyById(HexFormat.of().formatHex(hello, 6, 6 + KEY_ID_LENGTH));
                if (k == null) return; // no QP here uses that key
                byte[] nonceC = java.util.Arrays.copyOfRange(hello, 6 + KEY_ID_LENGTH, hello.length);
                byte[] nonceA = new byte[NONCE_LENGTH];
                RANDOM.nextBytes(nonceA);
                byte[] reply = new byte[4 + 2 + NONCE_LENGTH + MAC_LENGTH];
                writeInt(reply, 0, MAGIC);
                reply[4] = (byte) (VERSION >>> 8);
                reply[5] = (byte) VERSION;
                System.arraycopy(nonceA, 0, reply, 6, NONCE_LENGTH);
                System.arraycopy(mac(k, ACCEPTOR_LABEL, nonceC, nonceA), 0, reply, 6 + NONCE_LENGTH, MAC_LENGTH);
                o.write(reply);
                o.flush();
                byte[] proof = readExactly(in, MAC_LENGTH);
                if (!MessageDigest.isEqual(proof, mac(k, CONNECTOR_LABEL, nonceA, nonceC))) return;
                counted = false;
                if (!leaveSlot(this)) return; // evicted in the meantime: its socket is closed
                key = k;
                lastActivity = System.nanoTime();
                writer.start();
                io().name(context.deviceName() + "-tcp-reader").start(() -> {
                    try {
                        readLoop(s);
                    } catch (IOException | RuntimeException | Error e) {
                        // a peer gone or garbage: the connection ends
                    } finally {
                        ended();
                    }
                });
                reading = true;
            } catch (IOException | RuntimeException | Error e) {
                // garbage, a peer gone, or a deadline passed: the connection ends
            } finally {
                if (counted) leaveSlot(this);
                if (!reading) ended();
            }
        }

        /** An accepted connection ends with its socket: forget it. */
        private void ended() {
            dead = true;
            closeSocket();
            connections.remove(this);
            if (writer.isAlive()) LockSupport.unpark(writer);
        }

        /** Outbound connection: connects, proves the key and checks the acceptor's proof, then starts the reader. */
        private SocketChannel connect() throws IOException {
            SocketChannel s = SocketChannel.open();
            openedAt = System.nanoTime(); // before the socket is visible: the sweeper times the handshake from here
            socket = s;
            s.setOption(StandardSocketOptions.TCP_NODELAY, true);
            s.socket().connect(route.remote(), CONNECT_TIMEOUT_MS);
            if (closed || dead) throw new IOException("closed");
            InputStream in = s.socket().getInputStream();
            OutputStream o = s.socket().getOutputStream();
            byte[] nonceC = new byte[NONCE_LENGTH];
            RANDOM.nextBytes(nonceC);
            byte[] hello = new byte[4 + 2 + KEY_ID_LENGTH + NONCE_LENGTH];
            writeInt(hello, 0, MAGIC);
            hello[4] = (byte) (VERSION >>> 8);
            hello[5] = (byte) VERSION;
            System.arraycopy(keyIdBytes(route.key()), 0, hello, 6, KEY_ID_LENGTH);
            System.arraycopy(nonceC, 0, hello, 6 + KEY_ID_LENGTH, NONCE_LENGTH);
            o.write(hello);
            o.flush();
            helloSent = true;
            byte[] reply = readExactly(in, 4 + 2 + NONCE_LENGTH + MAC_LENGTH);
            answered = true;
            if (readInt(reply, 0) != MAGIC || ((reply[4] & 0xff) << 8 | reply[5] & 0xff) != VERSION) {
                throw new IOException("not a soft0 listener");
            }
            byte[] nonceA = java.util.Arrays.copyOfRange(reply, 6, 6 + NONCE_LENGTH);
            byte[] theirs = java.util.Arrays.copyOfRange(reply, 6 + NONCE_LENGTH, reply.length);
            if (!MessageDigest.isEqual(theirs, mac(route.key(), ACCEPTOR_LABEL, nonceC, nonceA))) {
                throw new IOException("the listener does not know the key");
            }
            o.write(mac(route.key(), CONNECTOR_LABEL, nonceA, nonceC));
            o.flush();
            key = route.key();
            authenticated = true;
            lastActivity = System.nanoTime();
            io().name(context.deviceName() + "-tcp-reader").start(() -> {
                try {
                    readLoop(s);
                } catch (IOException | RuntimeException | Error e) {
                    // peer gone or garbage: the connection ends (the writer reconnects if it has work)
                } finally {
                    if (socket == s) closeSocket();
                    LockSupport.unpark(writer);
                }
            });
            return s;
        }

        /**
         * Reads n bytes before the authentication deadline (the sweeper closes the socket when it
         * passes; the read timeout only keeps one read from waiting past it).
         */
        private byte[] readExactly(InputStream in, int n) throws IOException {
            byte[] b = new byte[n];
            int got = 0;
            Socket s = socket == null ? null : socket.socket();
            while (got < n) {
                long left = TimeUnit.NANOSECONDS.toMillis(openedAt + TimeUnit.MILLISECONDS.toNanos(AUTH_DEADLINE_MS)
                        - System.nanoTime());
                if (left <= 0 || s == null) throw new SocketTimeoutException("authentication deadline");
                s.setSoTimeout((int) left);
                int r = in.read(b, got, n - got);
                if (r < 0) throw new EOFException();
                heard = true;
                got += r;
            }
            s.setSoTimeout(0);
            return b;
        }

        void writeLoop() {
            // Made by the writer, which starts once a connection is authenticated (or has work to connect for).
            ByteBuffer slots = ByteBuffer.allocateDirect(BATCH * FRAME_HEADER);
            for (int i = 0; i < BATCH; i++) headers[i] = slots.slice(i * FRAME_HEADER, FRAME_HEADER);
            long retryAfter = 0;
            long backoff = TimeUnit.MILLISECONDS.toNanos(MIN_BACKOFF_MS);
            SocketChannel output = null;
            while (!closed && !dead) {
                try {
                    if (output == null) {
                        if (route == null) {
                            output = socket;
                        } else {
                            if (out.isEmpty()) {
                                sleep();
                                continue;
                            }
                            if (!context.keyInUse(route.key())) {
                                drop(); // no QP waits for these any more (it was destroyed or reset)
                                continue;
                            }
                            long wait = retryAfter - System.nanoTime();
                            if (wait > 0) {
                                LockSupport.parkNanos(this, wait); // close() unparks
                                continue;
                            }
                            output = connect();
                            backoff = TimeUnit.MILLISECONDS.toNanos(MIN_BACKOFF_MS);
                        }
                    }
                    if (socket == null) throw new IOException("connection lost");
                    // Only what was written is activity: a writer that wakes to an empty queue is not.
                    if (writeBatch(output)) lastActivity = System.nanoTime();
                    else sleep();
                } catch (IOException | RuntimeException | Error e) {
                    // The connection failed: what is queued is lost (requesters retry and time out),
                    // unless nothing was ever sent on one: that waits for the first to authenticate.
                    output = null;
                    key = null;
                    closeSocket();
                    if (route == null) {
                        drop();
                        dead = true; // an accepted connection is not re-made by this side
                    } else {
                        // Refused: nothing listens there (the peer is gone), which no waiting mends.
                        if (authenticated || e instanceof java.net.ConnectException) drop();
                        if (!authenticated) failedAttempt(e);
                        retryAfter = System.nanoTime() + backoff;
                        backoff = Math.min(2 * backoff, TimeUnit.MILLISECONDS.toNanos(MAX_BACKOFF_MS));
                    }
                }
            }
            drop();
        }

        /**
         * Writes what is queued, up to BATCH frames, with one gathering write (every frame's header
         * and payload, with no copy); false when nothing was queued.
         */
        private boolean writeBatch(SocketChannel output) throws IOException {
            int n = 0;
            Packet p;
            while (n < BATCH && (p = out.poll()) != null) batch[n++] = p;
            if (n == 0) return false;
            try {
                int buffers = 0;
                long bytes = 0;
                for (int i = 0; i < n; i++) {
                    ByteBuffer header = headers[i].clear();
                    writeHeader(header, batch[i]);
                    gather[buffers++] = header.flip();
                    if (batch[i].length > 0) gather[buffers++] = batch[i].payloadBuffer();
                    bytes += FRAME_HEADER + batch[i].length;
                }
                while (bytes > 0) bytes -= output.write(gather, 0, buffers);
            } finally {
                for (int i = 0; i < n; i++) {
                    batch[i].release();
                    batch[i] = null;
                }
                java.util.Arrays.fill(gather, null);
            }
            return true;
        }

        /** Notes why an attempt to make the first connection failed (for {@link #trouble}). */
        private void failedAttempt(Throwable e) {
            // Closed (or reset) by the listener after our hello and before its answer, within our deadline.
            boolean unanswered = helloSent && !answered && e instanceof IOException
                    && !(e instanceof SocketTimeoutException)
                    && System.nanoTime() - openedAt < TimeUnit.MILLISECONDS.toNanos(AUTH_DEADLINE_MS);
            helloSent = answered = false;
            if (unanswered) closedUnanswered++;
            refused = e instanceof java.net.ConnectException;
            lastFailure = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
            attempts++;
        }

        private void sleep() {
            writerSleeping = true;
            if (out.isEmpty() && !closed && !dead) LockSupport.parkNanos(this, TimeUnit.MILLISECONDS.toNanos(50));
            writerSleeping = false;
        }

        private void drop() {
            Packet p;
            while ((p = out.poll()) != null) p.release();
        }

        /** Reads frames of an authenticated connection until it ends; only frames for QPs behind this key are kept. */
        private void readLoop(SocketChannel s) throws IOException {
            FabricKey k = key;
            // In read mode: [position, limit) is read from the socket and not yet parsed. One per
            // reader: a reconnection's reader may start while the old one is still ending.
            ByteBuffer in = ByteBuffer.allocateDirect(READ_BUFFER).limit(0);
            ByteBuffer[] scatter = {null, in};
            // The loop stays thin: the JIT compiles a method after some hundred calls, but the body
            // of a loop that never returns only after tens of thousands of iterations (interpreted until then).
            while (!closed && socket == s && readFrame(s, in, scatter, k)) {
                lastActivity = System.nanoTime();
            }
        }

        /** Reads one frame and hands it to the engine (or skips it); false when the connection is to end. */
        private boolean readFrame(SocketChannel s, ByteBuffer in, ByteBuffer[] scatter, FabricKey k) throws IOException {
            fill(s, in, 4);
            if (frameLength(in) < 0) return false; // too long (or short) for any packet
            fill(s, in, FRAME_HEADER);
            Packet p = context.pool.acquire();
            boolean kept = false;
            try {
                int length = readHeader(in, p);
                if (length < 0) return false; // malformed
                SoftQueuePair qp = context.qp(p.dstQpn);
                if (qp == null || !qp.acceptsOver(k)) {
                    skip(s, in, length); // not ours to read: dropped unread
                    skippedFrames.incrementAndGet();
                    return true;
                }
                readPayload(s, in, scatter, p.payloadBuffer(length));
                p.followed = p.kind == Packet.REQUEST && nextRequestFor(in, p.dstQpn);
                p.replyLink = this;
                while (!context.engine.deliver(p)) {
                    if (closed || dead) return false;
                    LockSupport.parkNanos(10_000);
                }
                kept = true;
                return true;
            } finally {
                if (!kept) p.release();
            }
        }

        /**
         * Fills payload: what came with the header is copied from the buffer; the rest is read
         * straight into the payload, and what follows it (the next frames' start) into the buffer.
         */
        private static void readPayload(SocketChannel s, ByteBuffer in, ByteBuffer[] scatter, ByteBuffer payload)
                throws IOException {
            int buffered = Math.min(payload.remaining(), in.remaining());
            payload.put(0, in, in.position(), buffered).position(buffered);
            in.position(in.position() + buffered);
            if (!payload.hasRemaining()) return;
            in.clear(); // it was all this payload's
            scatter[0] = payload;
            try {
                while (payload.hasRemaining()) {
                    if (s.read(scatter) < 0) throw new EOFException();
                }
            } finally {
                scatter[0] = null;
                in.flip();
            }
        }

        /**
         * Whether the buffer holds the whole header of a request for qpn (the next frame, already
         * received) whose payload is at most {@value #FOLLOWING_PAYLOAD} bytes (so it is soon here too).
         */
        private static boolean nextRequestFor(ByteBuffer in, int qpn) {
            int at = in.position();
            return in.remaining() >= FRAME_HEADER && in.get(at + 4) == Packet.REQUEST && in.getInt(at + 8) == qpn
                    && in.getInt(at) - HEADER <= FOLLOWING_PAYLOAD;
        }

        /** Reads until at least n bytes (at most READ_BUFFER) are unparsed in the reader's buffer. */
        private static void fill(SocketChannel s, ByteBuffer in, int n) throws IOException {
            if (in.remaining() >= n) return;
            in.compact();
            while (in.position() < n) {
                if (s.read(in) < 0) throw new EOFException();
            }
            in.flip();
        }

        /** Consumes n bytes of the stream through the reader's buffer, keeping none of them. */
        private static void skip(SocketChannel s, ByteBuffer in, int n) throws IOException {
            int buffered = Math.min(n, in.remaining());
            in.position(in.position() + buffered);
            n -= buffered;
            if (n == 0) return;
            while (n > 0) {
                in.clear().limit(Math.min(n, in.capacity()));
                int r = s.read(in);
                if (r < 0) throw new EOFException();
                n -= r;
            }
            in.clear().limit(0); // all of it was this frame's
        }

        void close() {
            dead = true;
            closeSocket();
            if (writer != null) LockSupport.unpark(writer);
        }

        private void closeSocket() {
            SocketChannel s = socket;
            socket = null;
            if (s != null) closeQuietly(s);
        }
    }

    private static int readInt(byte[] b, int at) {
        return (b[at] & 0xff) << 24 | (b[at + 1] & 0xff) << 16 | (b[at + 2] & 0xff) << 8 | b[at + 3] & 0xff;
    }

    private static void writeInt(byte[] b, int at, int v) {
        b[at] = (byte) (v >>> 24);
        b[at + 1] = (byte) (v >>> 16);
        b[at + 2] = (byte) (v >>> 8);
        b[at + 3] = (byte) v;
    }

    /** Puts a frame's length and header for p at b's position ({@value #FRAME_HEADER} bytes, big-endian); its payload follows. */
    static void writeHeader(ByteBuffer b, Packet p) {
        b.putInt(HEADER + p.length);
        b.put((byte) p.kind);
        b.put((byte) p.opcode);
        b.put((byte) p.rnrTimer);
        b.put((byte) 0);
        b.putInt(p.dstQpn);
        b.putInt(p.srcQpn);
        b.putInt(p.psn);
        b.putInt(p.srcLid);
        b.putLong(p.remoteAddress);
        b.putInt(p.rkey);
        b.putInt(p.imm);
        b.putLong(p.compareAdd);
        b.putLong(p.swap);
        b.putInt(p.readLength);
        b.putInt(p.length);
    }

    /**
     * The length of the frame that starts at b's position (its first 4 bytes, not consumed), or -1
     * when no valid frame is that long (shorter than a header, or a payload longer than max_msg_sz).
     */
    static int frameLength(ByteBuffer b) {
        int frame = b.getInt(b.position());
        return frame < HEADER || frame - HEADER > SoftContext.MAX_MESSAGE ? -1 : frame;
    }

    /**
     * Reads one frame's length and header ({@value #FRAME_HEADER} bytes at b's position) into p;
     * returns the payload length still to read, or -1 when the frame is not a valid packet (too long
     * for max_msg_sz included). Nothing is allocated: the payload is read only after this accepted it.
     */
    static int readHeader(ByteBuffer b, Packet p) {
        int frame = frameLength(b);
        if (frame < 0) return -1;
        b.getInt();
        p.kind = b.get() & 0xff;
        p.opcode = b.get() & 0xff;
        p.rnrTimer = b.get() & 0xff;
        b.get();
        p.dstQpn = b.getInt();
        p.srcQpn = b.getInt();
        p.psn = b.getInt();
        p.srcLid = b.getInt();
        p.remoteAddress = b.getLong();
        p.rkey = b.getInt();
        p.imm = b.getInt();
        p.compareAdd = b.getLong();
        p.swap = b.getLong();
        p.readLength = b.getInt();
        int length = b.getInt();
        if (length != frame - HEADER || !valid(p)) return -1;
        return length;
    }

    private static boolean valid(Packet p) {
        if (p.kind < Packet.REQUEST || p.kind > Packet.MAX_KIND) return false;
        if (p.kind == Packet.REQUEST && WrOpcode.of(p.opcode) == null) return false;
        if (p.kind == Packet.NAK && (p.opcode < 1 || p.opcode > Packet.MAX_SYNDROME)) return false;
        if (p.rnrTimer > 31 || p.readLength < 0 || p.readLength > SoftContext.MAX_MESSAGE) return false;
        if ((p.dstQpn & ~0xffffff) != 0 || (p.srcQpn & ~0xffffff) != 0 || (p.psn & ~0xffffff) != 0) return false;
        return (p.srcLid & ~0xffff) == 0;
    }
}
