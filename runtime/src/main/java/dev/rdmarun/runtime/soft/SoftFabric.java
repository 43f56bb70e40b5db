package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.Gid;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How a QP reaches the context its address vector names. The destination is (GID, LID): the
 * host's address and the TCP port of that context's transport. A context of this JVM (one of our
 * addresses and a LID registered here) is reached in memory; any other over TCP.
 *
 * <p>The system property {@value SoftDevice#TRANSPORT_PROPERTY}{@code =tcp} sends even same-JVM traffic
 * over TCP, so the TCP path can be tested in one process.
 */
final class SoftFabric {
    private static final ConcurrentHashMap<Integer, SoftContext> LOCAL = new ConcurrentHashMap<>();

    private SoftFabric() {}

    static void register(SoftContext context) {
        LOCAL.put(context.lid(), context);
    }

    static void unregister(SoftContext context) {
        LOCAL.remove(context.lid(), context);
    }

    /** The link from {@code from} towards (dgid, dlid); resolved once per QP, at RTR. */
    static Link linkTo(SoftContext from, Gid dgid, int dlid) {
        SoftContext local = LOCAL.get(dlid);
        if (local != null && from.hasAddress(dgid) && !"tcp".equals(System.getProperty(SoftDevice.TRANSPORT_PROPERTY))) {
            return new LocalLink(local.engine);
        }
        return from.transport.connectionTo(new InetSocketAddress(address(dgid), dlid));
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
