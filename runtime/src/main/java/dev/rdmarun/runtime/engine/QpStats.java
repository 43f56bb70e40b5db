package dev.rdmarun.runtime.engine;

import java.util.concurrent.locks.StampedLock;
import org.HdrHistogram.Histogram;

/**
 * What one QP's engine counted. The dispatcher thread writes; other threads (a progress line,
 * heartbeats) may read without synchronization and see values a little behind, which a display
 * does not mind and which costs the data path nothing.
 *
 * <p>The counters run from the start, warm-up included. {@link QpEngine#measureFromHere} ends a
 * warm-up: from then on {@link #measured} leaves out every work request posted before it (its
 * completion, bytes and latency, whenever it completes) and every message a receive() took
 * before it; a message no receive() took counts in the phase it arrived in.
 */
public final class QpStats {
    long posted;
    long bytesPosted;
    long operations;
    long bytesSent;
    long bytesReceived;
    long messagesSent;
    long messagesReceived;
    long messagesNotReceived;
    /** Post-to-completion latency of signaled work requests, in ns. */
    final Histogram latency = new Histogram(3);

    // ---- the warm-up's share of the counters above (written under boundary's write lock at a boundary) ----
    /** The last work request of the warm-up: those up to it count as warm-up whenever they complete. */
    long warmupThrough;
    long warmupOperations;
    long warmupBytesSent;
    long warmupBytesReceived;
    long warmupMessagesReceived;
    long warmupMessagesNotReceived;
    /** Messages that arrived before the boundary and still wait for a receive() (the oldest ones, in order). */
    long warmupWaiting;
    /** The warm-up's latencies (see {@link #latencyInWarmup}). */
    final Histogram warmupLatency = new Histogram(3);
    int phase;
    long measuredSinceNanos;
    /**
     * System.nanoTime() of the last completion or arrival (0: none yet): where a bandwidth's time
     * ends, as perftest's ends at its last completion, not at whatever the script did afterwards.
     */
    long lastActivityNanos;
    /**
     * The measured phase's first work request and first arrival (counted as messagesReceived
     * counts), and when they happened (0: not yet): where the QP's time starts, as perftest's
     * starts at its first post, its receiver's at the first arrival, not at whatever the script
     * did before (a barrier, a sleeping peer). Set with {@link #firstOf}, without a branch.
     */
    long firstPostSeq = 1;
    long firstPostNanos;
    long firstArrival = 1;
    long firstArrivalNanos;
    /** Lets another thread read the measured figures consistently while a boundary moves them. */
    final StampedLock boundary = new StampedLock();

    /** Work requests posted by the user. */
    public long posted() {
        return posted;
    }

    /**
     * Bytes of the work requests posted by the user (each one's length: a SEND's or WRITE's
     * payload, a READ's data, an atomic's 8), warm-up included: what a measured section posted.
     */
    public long bytesPosted() {
        return bytesPosted;
    }

    /** Work requests of the user completed, warm-up included. */
    public long operations() {
        return operations;
    }

    /** Bytes this side sent with sends and writes, warm-up included. */
    public long bytesSent() {
        return bytesSent;
    }

    /** Bytes that arrived here: received messages, READ data, atomic results; warm-up included. */
    public long bytesReceived() {
        return bytesReceived;
    }

    /** Messages posted to the peer: sends and writeWithImm, each of which takes a receive there. */
    public long messagesSent() {
        return messagesSent;
    }

    /** Messages that arrived here (sends and writeWithImm of the peer), whether a receive took them or not; warm-up included. */
    public long messagesReceived() {
        return messagesReceived;
    }

    /** Messages that arrived but no receive took before this side finished; warm-up included. */
    public long messagesNotReceived() {
        return messagesNotReceived;
    }

    /** A copy of the latency histogram, warm-up included (call it on the dispatcher thread, or once the engine is idle). */
    public Histogram latencyCopy() {
        return latency.copy();
    }

    /**
     * The latencies of the measured phase (call it on the dispatcher thread, or once the engine is
     * idle): those of work requests posted after the last warm-up.
     */
    public Histogram measuredLatency() {
        Histogram h = latency.copy();
        if (warmupLatency.getTotalCount() > 0) h.subtract(warmupLatency);
        return h;
    }

    /** A number that grows whenever this QP makes any progress: for telling a stuck peer from a slow one. */
    public long progress() {
        return posted + operations + messagesReceived;
    }

    /**
     * The figures of the measured phase (everything, when no warm-up ended), read consistently from
     * any thread: a reading never mixes two phases.
     */
    public Measured measured() {
        while (true) {
            long stamp = boundary.tryOptimisticRead();
            Measured m = new Measured(phase, measuredSinceNanos, bytesSent - warmupBytesSent, bytesReceived - warmupBytesReceived,
                    operations - warmupOperations, messagesReceived - warmupMessagesReceived,
                    messagesNotReceived - warmupMessagesNotReceived, firstPostNanos, firstArrivalNanos, lastActivityNanos);
            if (stamp != 0 && boundary.validate(stamp)) return m;
            Thread.onSpinWait();
        }
    }

    /**
     * One reading of the measured phase's figures.
     *
     * @param phase              how many warm-ups ended before it (0: none, the whole run is measured)
     * @param sinceNanos         System.nanoTime() of the last warm-up's end (0 when none ended)
     * @param bytesSent          bytes sent by work requests of the phase
     * @param bytesReceived      bytes received (messages, READ data, atomic results)
     * @param operations         work requests of the phase completed
     * @param messagesReceived   messages of the phase (see the class comment)
     * @param messagesNotReceived those of them no receive() took
     * @param firstPostNanos     System.nanoTime() of the phase's first post (0: none yet)
     * @param firstArrivalNanos  System.nanoTime() of the phase's first arrival (0: none yet), or of the
     *                           phase's start when messages it counts were waiting already
     * @param lastActivityNanos  System.nanoTime() of this QP's last completion or arrival, of any phase (0: none)
     */
    public record Measured(int phase, long sinceNanos, long bytesSent, long bytesReceived, long operations,
                           long messagesReceived, long messagesNotReceived, long firstPostNanos, long firstArrivalNanos,
                           long lastActivityNanos) {
    }

    // ---- written by the engine, on the dispatcher thread ----

    // The three below run for every completion or message, and have no branch on the boundary: a
    // branch taken only after it (a work request of the warm-up completing in the measured phase)
    // is one the JIT compiled as never taken, and its first use sent the completion path back to
    // the interpreter at the start of each measurement, for as long as C2 took to compile it again
    // (0.9 s in the Soft-RoCE VM, BENCHMARKS.md).

    /** Work request {@code seq} completed with {@code bytes} coming in ({@code toLocal}) or going out. */
    void completedInWarmup(long seq, boolean toLocal, int bytes) {
        long in = inWarmup(seq);
        warmupOperations += in;
        if (toLocal) warmupBytesReceived += bytes * in;
        else warmupBytesSent += bytes * in;
    }

    /** The latency of signaled work request {@code seq}, already recorded in {@link #latency}. */
    void latencyInWarmup(long seq, long nanos) {
        // A count of 0 moves only the min and max, which measuredLatency()'s subtraction does not read.
        warmupLatency.recordValueWithCount(nanos, inWarmup(seq));
    }

    /**
     * {@code nanos} when {@code n} is {@code first}, else {@code kept}: the first post's or arrival's
     * time, taken without a branch (one taken once per phase is the kind C2 compiles as a trap).
     */
    static long firstOf(long n, long first, long nanos, long kept) {
        return kept ^ ((kept ^ nanos) & -same(n, first)); // -1 is all ones: nanos when n == first
    }

    /** 1 when {@code a == b}, else 0, without a branch. */
    static long same(long a, long b) {
        long d = a - b;
        return ((d | -d) >>> 63) ^ 1;
    }

    /** 1 when {@code seq} is the measured phase's first work request, else 0 (no branch). */
    long isFirstPost(long seq) {
        return same(seq, firstPostSeq);
    }

    /** A message arrived at {@code nanos} (its poll's clock), {@code length} bytes: counted, and timed when first. */
    void arrived(long nanos, int length) {
        lastActivityNanos = nanos;
        messagesReceived++;
        bytesReceived += length;
        firstArrivalNanos = firstOf(messagesReceived, firstArrival, nanos, firstArrivalNanos);
    }

    /** 1 when work request {@code seq} was posted in the warm-up ({@code seq <= warmupThrough}), else 0. */
    private long inWarmup(long seq) {
        return (seq - warmupThrough - 1) >>> 63;
    }

    /**
     * Ends a warm-up after work request {@code lastPosted}: all that completed and every message
     * taken so far become warm-up; {@code waiting} messages ({@code waitingBytes} bytes) still wait
     * for a receive().
     */
    void startMeasuring(long lastPosted, long waiting, long waitingBytes, long nanos) {
        startMeasuring(lastPosted, waiting, waitingBytes, nanos, waiting);
    }

    /**
     * As above, when only the oldest {@code warmupLeft} of the {@code waiting} messages were sent in
     * the peer's warm-up (the rest already in its measured phase): only those go back to the warm-up
     * if no receive takes them.
     */
    void startMeasuring(long lastPosted, long waiting, long waitingBytes, long nanos, long warmupLeft) {
        long stamp = boundary.writeLock();
        try {
            warmupThrough = lastPosted;
            warmupOperations = operations;
            warmupBytesSent = bytesSent;
            warmupBytesReceived = bytesReceived - waitingBytes;
            warmupMessagesReceived = messagesReceived - waiting;
            warmupMessagesNotReceived = messagesNotReceived;
            warmupWaiting = Math.min(waiting, Math.max(0, warmupLeft));
            warmupLatency.reset();
            warmupLatency.add(latency);
            phase++;
            measuredSinceNanos = nanos;
            firstPostSeq = lastPosted + 1;
            firstPostNanos = 0;
            firstArrival = messagesReceived + 1;
            // Messages the phase counts are here already: its time starts now, not at the next one.
            firstArrivalNanos = waiting > 0 ? nanos : 0;
        } finally {
            boundary.unlockWrite(stamp);
        }
    }

    /** The oldest waiting message left the queue (a receive() took it, or it was dropped). */
    void messageReleased() {
        warmupWaiting -= -warmupWaiting >>> 63; // one less while any is left (it is never negative)
    }

    /**
     * The oldest waiting message, of {@code length} bytes, is about to be dropped at the end: one
     * that arrived in the warm-up goes back to it (a message taken counts where it was taken).
     */
    void messageDropped(int length) {
        if (warmupWaiting == 0) return;
        long stamp = boundary.writeLock();
        try {
            warmupMessagesReceived++;
            warmupMessagesNotReceived++;
            warmupBytesReceived += length;
        } finally {
            boundary.unlockWrite(stamp);
        }
    }
}
