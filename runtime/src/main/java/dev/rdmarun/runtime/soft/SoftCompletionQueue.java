package dev.rdmarun.runtime.soft;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WcLayout;
import dev.rdmarun.runtime.WcOpcode;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.os.Errno;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A CQ of soft0: a ring of ibv_wc structs in off-heap memory, in the same layout libibverbs
 * polls into, so {@code WorkCompletions} reads both providers alike. The engine (and a QP's
 * flush) pushes, the owner polls; pushing more than the CQ holds is an overflow, which the next
 * poll reports (ibv_poll_cq then fails), as CQ overflow is an error in the verbs spec too.
 */
final class SoftCompletionQueue extends CompletionQueue {
    private static final long WC = WcLayout.SIZE;

    private final SoftCompletionChannel channel;
    /** The thread that polls this CQ, as far as its naps go: a completion ends its nap. */
    private volatile PollIdle poller;
    private final int capacity;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment ring;
    private final MemorySegment zeros;
    private long head;
    private long tail;
    private boolean overflowed;
    private boolean armed;
    private boolean solicitedOnly;
    /** An event raised and not yet taken by the channel. */
    private final AtomicBoolean eventPending = new AtomicBoolean();

    SoftCompletionQueue(SoftContext context, int entries, SoftCompletionChannel channel) {
        super(context, channel);
        if (entries > SoftContext.MAX_CQE) {
            throw VerbsException.of("ibv_create_cq(" + entries + " entries)", Errno.EINVAL,
                    "the device allows at most max_cqe=" + SoftContext.MAX_CQE + " entries per CQ");
        }
        this.channel = channel;
        this.capacity = entries;
        this.ring = arena.allocate(WcLayout.IBV_WC, entries);
        this.zeros = arena.allocate(WcLayout.IBV_WC);
        attachToChannel();
    }

    @Override
    public int capacity() {
        return capacity;
    }

    /** Adds one completion. Allocation-free; any thread (it locks the CQ). */
    synchronized void push(long wrId, WcStatus status, WcOpcode opcode, int byteLength, int qpNum, int srcQp,
                           boolean hasImm, int imm, boolean solicited) {
        if (isClosed()) return;
        if (tail - head == capacity) {
            overflowed = true;
            return;
        }
        long base = (tail % capacity) * WC;
        MemorySegment.copy(zeros, 0, ring, base, WC);
        ring.set(JAVA_LONG, base + WcLayout.WR_ID, wrId);
        ring.set(JAVA_INT, base + WcLayout.STATUS, status.code());
        ring.set(JAVA_INT, base + WcLayout.OPCODE, opcode.code());
        ring.set(JAVA_INT, base + WcLayout.BYTE_LEN, byteLength);
        ring.set(JAVA_INT, base + WcLayout.QP_NUM, qpNum);
        ring.set(JAVA_INT, base + WcLayout.SRC_QP, srcQp);
        if (hasImm) {
            ring.set(JAVA_INT, base + WcLayout.IMM_DATA, Integer.reverseBytes(imm)); // big-endian, as on the wire
            ring.set(JAVA_INT, base + WcLayout.WC_FLAGS, WcLayout.WITH_IMM);
        }
        tail++;
        PollIdle p = poller;
        if (p != null) p.wake();
        if (armed && (!solicitedOnly || solicited || status != WcStatus.SUCCESS)) {
            armed = false;
            eventPending.set(true);
            channel.signal();
        }
    }

    /** Takes this CQ's pending event, if it has one (the channel's scan). */
    boolean takeEvent() {
        return eventPending.compareAndSet(true, false);
    }

    @Override
    protected int pollInto(MemorySegment wcArray, int max) {
        int n = take(wcArray, max);
        // The "hardware" of soft0 is threads of this machine (the engine, the TCP transport): a
        // caller that busy-polls an empty CQ lets them run (PollIdle), or on a machine with as many
        // busy pollers as cores every completion would wait for the scheduler to preempt one.
        PollIdle idle = poller;
        if (idle == null || idle.thread != Thread.currentThread()) poller = idle = PollIdle.ofCurrentThread();
        if (n != 0) {
            idle.completed();
        } else if (channel != null) {
            Thread.yield();
        } else {
            idle.idle(this);
        }
        return n;
    }

    /** No completion waits (nor an overflow). */
    synchronized boolean isEmpty() {
        return tail == head && !overflowed;
    }

    private synchronized int take(MemorySegment wcArray, int max) {
        if (overflowed) return -Errno.EOVERFLOW;
        int n = (int) Math.min(max, tail - head);
        for (int i = 0; i < n; i++) {
            MemorySegment.copy(ring, ((head + i) % capacity) * WC, wcArray, i * WC, WC);
        }
        head += n;
        return n;
    }

    @Override
    protected synchronized int arm(boolean solicited) {
        armed = true;
        solicitedOnly = solicited;
        // A completion already waiting raises no new event on hardware either; the dispatcher polls once more after arming.
        return 0;
    }

    @Override
    protected void acknowledge(int events) {
        // events are counted by the channel's queue; nothing to release
    }

    @Override
    protected synchronized void destroyQueue() {
        arena.close();
    }
}
