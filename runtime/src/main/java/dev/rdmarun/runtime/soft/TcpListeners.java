package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.SoftTransport;
import dev.rdmarun.runtime.VerbsException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A context's listeners and whom they admit: one listener per GID address, bound to that address
 * only, on an ephemeral port (the LID), and the {@value TcpTransport#MAX_UNAUTHENTICATED} slots
 * of accepted connections still authenticating. A connection accepted when they are all taken
 * always gets a slot: one that sent nothing yet goes first, then one of the source address that
 * holds the most slots, the oldest of those ({@link TcpTransport}'s class comment says why).
 */
final class TcpListeners {
    private final TcpTransport transport;
    private final ConcurrentHashMap<InetAddress, ServerSocketChannel> listeners = new ConcurrentHashMap<>();
    /** Accepted connections still authenticating, oldest first (guarded by itself). */
    private final List<TcpConnection> unauthenticated = new ArrayList<>();
    /** Unauthenticated connections closed to make room for a newer one. */
    private final AtomicLong evicted = new AtomicLong();

    TcpListeners(TcpTransport transport) {
        this.transport = transport;
    }

    /** The port of the listener on address, listening from now on if it was not yet. */
    int listen(InetAddress address) {
        String device = transport.context.deviceName();
        ServerSocketChannel server = listeners.computeIfAbsent(address, a -> {
            try {
                ServerSocketChannel s = ServerSocketChannel.open();
                s.bind(new InetSocketAddress(a, 0));
                Thread.ofVirtual().name(device + "-accept").start(() -> acceptLoop(s));
                SoftFabric.listening(new InetSocketAddress(a, s.socket().getLocalPort()), transport.context);
                return s;
            } catch (IOException e) {
                throw new VerbsException("the software provider cannot listen on " + a.getHostAddress() + ": "
                        + e.getMessage(), "soft0 QPs reach other processes over TCP; check that this process may"
                        + " open a listening socket, or set " + SoftTransport.PROPERTY + "=memory when both"
                        + " peers are in this JVM");
            }
        });
        if (transport.closed) TcpTransport.closeQuietly(server); // closed while it was being opened
        return server.socket().getLocalPort();
    }

    private void acceptLoop(ServerSocketChannel server) {
        while (!transport.closed && server.isOpen()) {
            try {
                SocketChannel s = server.accept();
                if (transport.closed) {
                    TcpTransport.closeQuietly(s);
                    continue;
                }
                s.setOption(StandardSocketOptions.TCP_NODELAY, true);
                TcpConnection c = new TcpConnection(transport, null, s);
                admit(c);
                transport.start(c);
                Thread.ofVirtual().name(transport.context.deviceName() + "-tcp-auth").start(c::acceptorLoop);
            } catch (IOException | RuntimeException | Error e) {
                if (transport.closed || !server.isOpen()) return;
                // one failed accept (out of descriptors, say) must not end the listener
            }
        }
    }

    /**
     * Gives c one of the slots, evicting an unauthenticated connection when they are all taken: a
     * newcomer may be the peer, while those that hold slots are idle or slow.
     */
    private void admit(TcpConnection c) {
        TcpConnection victim = null;
        synchronized (unauthenticated) {
            if (unauthenticated.size() >= TcpTransport.MAX_UNAUTHENTICATED) {
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
    private TcpConnection victim() {
        Map<InetAddress, Integer> held = slotsBySource();
        TcpConnection best = null;
        for (TcpConnection c : unauthenticated) { // oldest first: a later one replaces best only when strictly worse off
            if (best == null || !c.heard && best.heard
                    || c.heard == best.heard && held.get(c.source) > held.get(best.source)) {
                best = c;
            }
        }
        return best;
    }

    /** Whether c still held an unauthenticated slot (false: it was evicted); it holds none now. */
    boolean leaveSlot(TcpConnection c) {
        synchronized (unauthenticated) {
            return unauthenticated.remove(c);
        }
    }

    /** Unauthenticated connections closed to make room for newer ones. */
    long evictedConnections() {
        return evicted.get();
    }

    /** How many unauthenticated slots each source address holds now. */
    Map<InetAddress, Integer> unauthenticatedBySource() {
        synchronized (unauthenticated) {
            return slotsBySource();
        }
    }

    /** The slots each source holds (the lock on unauthenticated held). */
    private Map<InetAddress, Integer> slotsBySource() {
        Map<InetAddress, Integer> held = new HashMap<>();
        for (TcpConnection c : unauthenticated) held.merge(c.source, 1, Integer::sum);
        return held;
    }

    int count() {
        return listeners.size();
    }

    /** The addresses the listeners are bound to. */
    List<InetAddress> addresses() {
        return listeners.values().stream().map(s -> s.socket().getInetAddress()).toList();
    }

    void close() {
        for (ServerSocketChannel s : listeners.values()) TcpTransport.closeQuietly(s);
    }
}
