package dev.rdmarun.runtime.soft;

import java.util.concurrent.atomic.AtomicLong;
import org.jctools.queues.atomic.MpmcAtomicArrayQueue;

/**
 * Reusable packets of one context. Any thread may take or return one (engines, TCP readers and
 * writers); a preallocated lock-free array queue holds the free ones, so a warm pool allocates
 * nothing. When it is empty a new packet is made; when it is full a returned one is left to the GC.
 *
 * <p>A packet's payload buffer grows to the largest message it carried (up to 16 MiB). The free
 * packets keep at most {@link #RETAINED_BYTES} of payload between uses: enough for every packet of
 * a steady stream of large messages to be reused, while a burst of them does not pin gigabytes of
 * direct memory for the context's lifetime. A packet returned beyond that gives its buffer up.
 */
final class PacketPool {
    /** Payload bytes the free packets may keep: 16 messages of 16 MiB, 4096 of 64 KiB. */
    static final long RETAINED_BYTES = 256L << 20;

    private final MpmcAtomicArrayQueue<Packet> free;
    private final long retainLimit;
    /** Payload capacity of the packets in {@link #free}. */
    private final AtomicLong retained = new AtomicLong();

    PacketPool(int capacity) {
        this(capacity, RETAINED_BYTES);
    }

    PacketPool(int capacity, long retainLimit) {
        free = new MpmcAtomicArrayQueue<>(capacity);
        this.retainLimit = retainLimit;
    }

    Packet acquire() {
        Packet p = free.poll();
        if (p == null) return new Packet(this);
        retained.addAndGet(-p.capacity());
        return p;
    }

    void release(Packet p) {
        p.reset();
        if (retained.addAndGet(p.capacity()) > retainLimit) {
            retained.addAndGet(-p.capacity());
            p.shrink();
            retained.addAndGet(p.capacity());
        }
        if (!free.offer(p)) retained.addAndGet(-p.capacity());
    }

    /** Payload bytes the free packets keep now. */
    long retainedBytes() {
        return retained.get();
    }
}
