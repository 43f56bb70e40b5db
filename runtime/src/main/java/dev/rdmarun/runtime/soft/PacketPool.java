package dev.rdmarun.runtime.soft;

import org.jctools.queues.atomic.MpmcAtomicArrayQueue;

/**
 * Reusable packets of one context. Any thread may take or return one (engines, TCP readers and
 * writers); a preallocated lock-free array queue holds the free ones, so a warm pool allocates
 * nothing. When it is empty a new packet is made; when it is full a returned one is left to the GC.
 */
final class PacketPool {
    private final MpmcAtomicArrayQueue<Packet> free;

    PacketPool(int capacity) {
        free = new MpmcAtomicArrayQueue<>(capacity);
    }

    Packet acquire() {
        Packet p = free.poll();
        return p != null ? p : new Packet(this);
    }

    void release(Packet p) {
        p.reset();
        free.offer(p);
    }
}
