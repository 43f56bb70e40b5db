package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.Gid;
import dev.rdmarun.runtime.SoftTransport;
import dev.rdmarun.runtime.VerbsException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How a QP reaches the context its address vector names: (GID, LID). soft0 binds only where it
 * is used, as the context's {@link SoftTransport} chooses when it opens:
 *
 * <ul>
 *   <li>{@code auto} (the default): a context of this JVM (one of our GIDs and its in-JVM LID or
 *       one of its listeners' ports) is reached in memory, any other over TCP. A context listens
 *       only once a QP's local endpoint asks for a LID, and only on the address of that GID, on
 *       an ephemeral port (that port is the LID);</li>
 *   <li>{@code memory}: never opens a socket; only QPs of this JVM are reachable, by the in-JVM
 *       LIDs 1..{@value #MAX_MEMORY_LID} (below every TCP port, so they cannot be confused);</li>
 *   <li>{@code tcp}: as {@code auto}, but even QPs of this JVM talk over TCP (to test the path
 *       between processes in one).</li>
 * </ul>
 *
 * <p>A QP reached over TCP needs a {@link FabricKey} at RTR: every TCP connection proves the key
 * before any packet on it is accepted (see {@link TcpHandshake}), and such a QP accepts packets
 * only from connections that proved its key; a QP reached in memory accepts nothing from TCP.
 */
final class SoftFabric {
    /** Highest in-JVM LID: below the ports a listener gets (ephemeral, at least 1024). */
    static final int MAX_MEMORY_LID = 1023;

    private static final ConcurrentHashMap<Integer, SoftContext> MEMORY = new ConcurrentHashMap<>();
    private static final ConcurrentHashMap<InetSocketAddress, SoftContext> LISTENERS = new ConcurrentHashMap<>();

    private SoftFabric() {}

    /** Gives the context a free in-JVM LID. */
    static int register(SoftContext context) {
        for (int lid = 1; lid <= MAX_MEMORY_LID; lid++) {
            if (MEMORY.putIfAbsent(lid, context) == null) return lid;
        }
        throw new VerbsException("soft0 has " + MAX_MEMORY_LID + " contexts open in this JVM: no LID is free",
                "close contexts that are no longer used");
    }

    static void listening(InetSocketAddress address, SoftContext context) {
        LISTENERS.put(address, context);
    }

    static void unregister(SoftContext context) {
        MEMORY.remove(context.memoryLid(), context);
        LISTENERS.values().removeIf(c -> c == context);
    }

    /**
     * The link from {@code from} towards (dgid, dlid); resolved once per QP, at RTR. A null key is
     * fine in memory; over TCP it is an EINVAL with the sentence that says so.
     */
    static Link linkTo(SoftContext from, Gid dgid, int dlid, FabricKey key, String call) {
        if (dlid < 1 || dlid > 0xffff) {
            throw new VerbsException(call + ": the peer's LID " + dlid + " names no soft0 context", 22,
                    "soft0 LIDs are 1..65535: use the LID of the peer's localEndpoint");
        }
        InetAddress address = address(dgid);
        if (!(address instanceof Inet4Address) || address.isAnyLocalAddress() || address.isMulticastAddress()
                || dgid.raw()[12] == (byte) 0xff && dgid.raw()[13] == (byte) 0xff && dgid.raw()[14] == (byte) 0xff
                && dgid.raw()[15] == (byte) 0xff) {
            throw new VerbsException(call + ": the peer's GID " + dgid + " is not a unicast IPv4 address", 22,
                    "soft0 addresses peers by the IPv4-mapped GID of their localEndpoint");
        }
        SoftContext local = null;
        if (from.mode != SoftTransport.TCP && from.hasAddress(dgid)) {
            local = dlid <= MAX_MEMORY_LID ? MEMORY.get(dlid) : LISTENERS.get(new InetSocketAddress(address, dlid));
        }
        if (local != null) return new LocalLink(local);
        if (from.mode == SoftTransport.MEMORY) {
            throw new VerbsException(call + ": no soft0 context of this JVM has GID " + dgid + " and LID " + dlid, 22,
                    "the transport memory (" + SoftTransport.PROPERTY + "=memory) reaches only QPs of this JVM; unset it to reach other processes");
        }
        if (dlid <= MAX_MEMORY_LID) {
            throw new VerbsException(call + ": no soft0 context of this JVM has GID " + dgid + " and LID " + dlid, 22,
                    "LIDs up to " + MAX_MEMORY_LID + " are soft0's in-JVM LIDs; a peer in another process gives the TCP"
                            + " port of its localEndpoint");
        }
        if (key == null) {
            throw new VerbsException(call + ": the peer is reached over TCP and this QP has no fabric key", 22,
                    "soft0 accepts packets from another process only over a connection that proves the key both"
                            + " peers share: set one with RtrAttributes.withFabricKey (rdma-run scenarios and pingpong do)");
        }
        return from.transport.connectionTo(new InetSocketAddress(address, dlid), key);
    }

    /** The IP address a GID stands for (IPv4-mapped GIDs give IPv4). */
    static InetAddress address(Gid gid) {
        try {
            return InetAddress.getByAddress(gid.raw());
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("a GID has 16 bytes", e);
        }
    }
}
