package dev.rdmarun.runtime.soft;

/**
 * One hop of the software fabric towards another context: in this JVM ({@link LocalLink}) or
 * over TCP ({@link TcpConnection}). {@link #offer} never blocks an engine: a busy link refuses and
 * the engine keeps the packet until the link takes it. A link that cannot deliver drops the
 * packet, as a network does; the requester's retry timer then reports the loss.
 */
interface Link {
    /** Takes the packet (and will deliver or drop it), or returns false when it is busy right now. */
    boolean offer(Packet p);
}
