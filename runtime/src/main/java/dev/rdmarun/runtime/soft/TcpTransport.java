package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.VerbsException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The software fabric between processes. A context listens only where a QP's local endpoint
 * asked for a LID: one listener per GID address, bound to that address only, on an ephemeral
 * port (the LID). It opens one connection per (remote listener, {@link FabricKey}) it sends
 * requests to; responses return on the connection their request came on.
 *
 * <p>Connections authenticate before any frame ({@link TcpHandshake}), and must finish that within {@value TcpHandshake#AUTH_DEADLINE_MS} ms; at most
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
 * <p>Frames are coded by {@link TcpFrames} and carried by {@link TcpConnection}. What was in
 * flight on a closed connection is lost, which the requesters' retry timers turn into
 * RETRY_EXC_ERR, as a real fabric would.
 *
 * <p>This class makes and ends a context's connections (listeners, the slots of unauthenticated
 * ones, routes, the sweeper); what one connection does is {@link TcpConnection}'s, so that the
 * threads of the data path are in one class and the policy about whom to keep in another.
 */
final class TcpTransport {
    static final int IDLE_DEADLINE_MS = 30_000;
    static final int MAX_UNAUTHENTICATED = 16;
    static final int QUEUE = 1 << 14;
    /** Frames a writer gathers into one write (two buffers each: header, payload). */
    static final int BATCH = 64;
    static final int CONNECT_TIMEOUT_MS = 3000;
    /** A connector's wait after its first failed attempt, doubled after each next one up to MAX_BACKOFF_MS. */
    static final int MIN_BACKOFF_MS = 20;
    static final int MAX_BACKOFF_MS = 500;
    private static final long SWEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
    /** {@link #IDLE_DEADLINE_MS} in nanoseconds; tests shorten it to see an idle connection closed. */
    volatile long idleDeadlineNanos = TimeUnit.MILLISECONDS.toNanos(IDLE_DEADLINE_MS);

    final SoftContext context;
    final TcpListeners listeners = new TcpListeners(this);
    final ConcurrentHashMap<Route, TcpConnection> outbound = new ConcurrentHashMap<>();
    final Set<TcpConnection> connections = ConcurrentHashMap.newKeySet();
    private volatile Thread sweeper;
    /** Frames of authenticated connections skipped unread (for no QP, or a QP not behind their key). */
    final AtomicLong skippedFrames = new AtomicLong();
    volatile boolean closed;

    static {
        // Loads the JCA providers now, not in a QP's first handshake (where it would eat into its ACK timeout).
        TcpHandshake.mac(FabricKey.random(), TcpHandshake.ACCEPTOR_LABEL, new byte[TcpHandshake.NONCE_LENGTH],
                TcpHandshake.keyIdBytes(FabricKey.random()));
    }

    /** Where requests of QPs with one key go: connections are per remote listener and key. */
    record Route(InetSocketAddress remote, FabricKey key) {}

    TcpTransport(SoftContext context) {
        this.context = context;
    }

    /**
     * The port of this context's listener on address (bound to that address only), listening
     * from now on if it was not yet: that port is the LID of endpoints with that GID.
     */
    int listen(InetAddress address) {
        if (closed) throw new VerbsException("this soft0 context is closed", null);
        int port = listeners.listen(address);
        startSweeper();
        return port;
    }

    /** The connection that carries requests with this key to this remote listener (connected on first use). */
    Link connectionTo(InetSocketAddress remote, FabricKey key) {
        startSweeper();
        return outbound.compute(new Route(remote, key), (r, c) -> c == null || c.dead ? start(new TcpConnection(this, r, null)) : c);
    }

    /**
     * An authenticated connection's reader and writer: platform threads that block in read and
     * write. Virtual ones cost a trip through the JDK's poller and a carrier hand-off each time a
     * read or write waits, which a stream of frames does all the time. (The handshake of an
     * accepted connection stays on a cheap virtual thread: anyone may open one.)
     */
    static Thread.Builder io() {
        return Thread.ofPlatform().daemon(true);
    }

    /** Counts c among the connections and makes its writer (started now for an outbound one). */
    TcpConnection start(TcpConnection c) {
        connections.add(c);
        c.writer = io().name(context.deviceName() + "-tcp-writer").unstarted(c::writeLoop);
        if (c.route != null) c.writer.start();
        return c;
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
            for (TcpConnection c : connections) {
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

    void close() {
        closed = true;
        listeners.close();
        for (TcpConnection c : connections) c.close();
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

    static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception ignored) {
            // closing anyway
        }
    }
}
