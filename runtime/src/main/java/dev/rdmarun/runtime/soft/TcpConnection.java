package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.FabricKey;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.jctools.queues.atomic.MpscAtomicArrayQueue;

/**
 * One soft0 TCP connection, a {@link Link}: a writer thread drains the outbound queue, a reader
 * delivers to the engine. Outbound ones (route set) connect and authenticate as connector,
 * accepted ones as acceptor ({@link TcpHandshake}). Its own class because it is the only part of
 * the transport with threads on the data path: the listener, routes and sweeper only make and end it.
 *
 * <p>The writer sends up to {@value TcpTransport#BATCH} queued frames with one gathering write: their
 * headers from its own direct buffer, their payloads from the packets' direct buffers, with no copy
 * in between. The reader takes frames through a {@value TcpFrames#READ_BUFFER}-byte buffer (many
 * small ones per read); once a header is judged, the rest of its payload is read straight into the
 * packet, together with whatever follows it (the next frame's start, into the buffer). When that
 * shows the next request for the same QP already there, the responder may leave this one's ACK to
 * a later, cumulative one ({@link Responder}).
 */
final class TcpConnection implements Link {
    private final TcpTransport transport;
    private final SoftContext context;
    final TcpTransport.Route route;
    private final MpscAtomicArrayQueue<Packet> out = new MpscAtomicArrayQueue<>(TcpTransport.QUEUE);
    /** The writer's batch: its packets, their headers (direct, one slot each) and the buffers of one gathering write. */
    private final Packet[] batch = new Packet[TcpTransport.BATCH];
    private final ByteBuffer[] headers = new ByteBuffer[TcpTransport.BATCH];
    private final ByteBuffer[] gather = new ByteBuffer[2 * TcpTransport.BATCH];
    /** The socket, null once closed; and when it was opened (the authentication deadline counts from it). */
    volatile SocketChannel socket;
    private volatile boolean writerSleeping;
    volatile boolean dead;
    /** The key this connection proved; null until it did. */
    private volatile FabricKey key;
    volatile long openedAt = System.nanoTime();
    /** When it authenticated, and when a frame was last written and last read (authentication counts as both). */
    private volatile long authenticatedAt;
    private volatile long lastWritten = System.nanoTime();
    private volatile long lastRead = lastWritten;
    /** Accepted: the address it came from, and whether it has sent anything yet (an idle one is evicted first). */
    final InetAddress source;
    volatile boolean heard;
    /** Outbound: whether it ever authenticated; until then its QPs' retries wait (see {@link TcpTransport}). */
    private volatile boolean authenticated;
    /** Outbound, before it first authenticated: attempts, those the listener closed before answering, the last failure. */
    private volatile int attempts;
    private volatile int closedUnanswered;
    private volatile String lastFailure;
    /** Outbound: whether its last attempt was refused (no listener: its QPs stop waiting for it). */
    private volatile boolean refused;
    /** Set by {@link TcpHandshake#connect} once the hello is sent and once the listener answered it (writer thread). */
    boolean helloSent;
    boolean answered;
    Thread writer;

    TcpConnection(TcpTransport transport, TcpTransport.Route route, SocketChannel accepted) {
        this.transport = transport;
        this.context = transport.context;
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
        if (dead || transport.closed) {
            p.release(); // nobody to deliver to: the packet is lost
            return true;
        }
        if (!out.offer(p)) return false;
        if (writerSleeping) LockSupport.unpark(writer);
        return true;
    }

    void sweep(long now) {
        if (dead) {
            transport.connections.remove(this);
            return;
        }
        SocketChannel s = socket;
        FabricKey k = key;
        if (s != null && k == null) {
            if (now - openedAt > TimeUnit.MILLISECONDS.toNanos(TcpHandshake.AUTH_DEADLINE_MS)) closeSocket();
            return;
        }
        // Idle: nothing carried since the deadline (a connection not yet used counts from its creation).
        if (now - lastWritten <= transport.idleDeadlineNanos || now - lastRead <= transport.idleDeadlineNanos) return;
        if (route == null) {
            if (k == null || !context.keyInUse(k)) close();
            return;
        }
        // Atomic with connectionTo: a QP that registers the key first gets this connection kept.
        transport.outbound.computeIfPresent(route, (r, c) -> {
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
        return route != null && !authenticated && !refused && !dead && !transport.closed;
    }

    /** Whether it is open and authenticated: what it carried may still be on its way. */
    boolean carrying() {
        return socket != null && key != null && !dead;
    }

    /** When the peer last sent a frame on it (or it authenticated). */
    long lastRead() {
        return lastRead;
    }

    /** When it authenticated: the handshake's answer is no answer to a request. */
    long authenticatedAt() {
        return authenticatedAt;
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
            FabricKey k = TcpHandshake.accept(this, context, in, o);
            if (k == null) return;
            counted = false;
            if (!transport.listeners.leaveSlot(this)) return; // evicted in the meantime: its socket is closed
            key = k;
            lastWritten = lastRead = authenticatedAt = System.nanoTime();
            writer.start();
            TcpTransport.io().name(context.deviceName() + "-tcp-reader").start(() -> {
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
            if (counted) transport.listeners.leaveSlot(this);
            if (!reading) ended();
        }
    }

    /** An accepted connection ends with its socket: forget it. */
    private void ended() {
        dead = true;
        closeSocket();
        transport.connections.remove(this);
        if (writer.isAlive()) LockSupport.unpark(writer);
    }

    /** Outbound connection: connects, proves the key and checks the acceptor's proof, then starts the reader. */
    private SocketChannel connect() throws IOException {
        SocketChannel s = SocketChannel.open();
        openedAt = System.nanoTime(); // before the socket is visible: the sweeper times the handshake from here
        socket = s;
        s.setOption(StandardSocketOptions.TCP_NODELAY, true);
        s.socket().connect(route.remote(), TcpTransport.CONNECT_TIMEOUT_MS);
        if (transport.closed || dead) throw new IOException("closed");
        InputStream in = s.socket().getInputStream();
        OutputStream o = s.socket().getOutputStream();
        TcpHandshake.connect(this, route.key(), in, o);
        key = route.key();
        authenticated = true;
        lastWritten = lastRead = authenticatedAt = System.nanoTime();
        TcpTransport.io().name(context.deviceName() + "-tcp-reader").start(() -> {
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

    void writeLoop() {
        // Made by the writer, which starts once a connection is authenticated (or has work to connect for).
        ByteBuffer slots = ByteBuffer.allocateDirect(TcpTransport.BATCH * TcpFrames.FRAME_HEADER);
        for (int i = 0; i < TcpTransport.BATCH; i++) headers[i] = slots.slice(i * TcpFrames.FRAME_HEADER, TcpFrames.FRAME_HEADER);
        long retryAfter = 0;
        long backoff = TimeUnit.MILLISECONDS.toNanos(TcpTransport.MIN_BACKOFF_MS);
        SocketChannel output = null;
        while (!transport.closed && !dead) {
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
                        backoff = TimeUnit.MILLISECONDS.toNanos(TcpTransport.MIN_BACKOFF_MS);
                    }
                }
                if (socket == null) throw new IOException("connection lost");
                // Only what was written is activity: a writer that wakes to an empty queue is not.
                if (writeBatch(output)) lastWritten = System.nanoTime();
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
                    backoff = Math.min(2 * backoff, TimeUnit.MILLISECONDS.toNanos(TcpTransport.MAX_BACKOFF_MS));
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
        while (n < TcpTransport.BATCH && (p = out.poll()) != null) batch[n++] = p;
        if (n == 0) return false;
        try {
            int buffers = 0;
            long bytes = 0;
            for (int i = 0; i < n; i++) {
                ByteBuffer header = headers[i].clear();
                TcpFrames.writeHeader(header, batch[i]);
                gather[buffers++] = header.flip();
                if (batch[i].length > 0) gather[buffers++] = batch[i].payloadBuffer();
                bytes += TcpFrames.FRAME_HEADER + batch[i].length;
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
                && System.nanoTime() - openedAt < TimeUnit.MILLISECONDS.toNanos(TcpHandshake.AUTH_DEADLINE_MS);
        helloSent = answered = false;
        if (unanswered) closedUnanswered++;
        refused = e instanceof java.net.ConnectException;
        lastFailure = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        attempts++;
    }

    private void sleep() {
        writerSleeping = true;
        if (out.isEmpty() && !transport.closed && !dead) LockSupport.parkNanos(this, TimeUnit.MILLISECONDS.toNanos(50));
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
        ByteBuffer in = ByteBuffer.allocateDirect(TcpFrames.READ_BUFFER).limit(0);
        ByteBuffer[] scatter = {null, in};
        // The loop stays thin: the JIT compiles a method after some hundred calls, but the body
        // of a loop that never returns only after tens of thousands of iterations (interpreted until then).
        while (!transport.closed && socket == s && readFrame(s, in, scatter, k)) {
            lastRead = System.nanoTime();
        }
    }

    /** Reads one frame and hands it to the engine (or skips it); false when the connection is to end. */
    private boolean readFrame(SocketChannel s, ByteBuffer in, ByteBuffer[] scatter, FabricKey k) throws IOException {
        TcpFrames.fill(s, in, 4);
        if (TcpFrames.frameLength(in) < 0) return false; // too long (or short) for any packet
        TcpFrames.fill(s, in, TcpFrames.FRAME_HEADER);
        Packet p = context.pool.acquire();
        boolean kept = false;
        try {
            int length = TcpFrames.readHeader(in, p);
            if (length < 0) return false; // malformed
            SoftQueuePair qp = context.qp(p.dstQpn);
            if (qp == null || !qp.acceptsOver(k)) {
                TcpFrames.skip(s, in, length); // not ours to read: dropped unread
                transport.skippedFrames.incrementAndGet();
                return true;
            }
            TcpFrames.readPayload(s, in, scatter, p.payloadBuffer(length));
            p.followed = p.kind == Packet.REQUEST && TcpFrames.nextRequestFor(in, p.dstQpn);
            p.replyLink = this;
            while (!context.engine.deliver(p)) {
                if (transport.closed || dead) return false;
                LockSupport.parkNanos(10_000);
            }
            kept = true;
            return true;
        } finally {
            if (!kept) p.release();
        }
    }

    void close() {
        dead = true;
        closeSocket();
        if (writer != null) LockSupport.unpark(writer);
    }

    void closeSocket() {
        SocketChannel s = socket;
        socket = null;
        if (s != null) TcpTransport.closeQuietly(s);
    }
}
