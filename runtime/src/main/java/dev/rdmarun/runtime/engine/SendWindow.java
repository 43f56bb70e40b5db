package dev.rdmarun.runtime.engine;

import dev.rdmarun.runtime.MemoryRegion;
import java.lang.foreign.ValueLayout;

/**
 * The send window of one QP: which work requests were posted, which completed and which a driver
 * has awaited, by sequence number, and what each one was (a ring indexed by sequence number).
 * Apart from the engine because this bookkeeping, and the rule that one signaled completion
 * completes every earlier work request, hold whatever the work requests are.
 */
final class SendWindow {
    private final int sendDepth;
    private final int signalEvery;
    private final long resultWords;
    private final QpStats stats;
    private final MemoryRegion recv;
    private final MemoryRegion data;

    // a ring of EngineConfig.rememberedWork() entries, indexed by sequence number
    private final int ringMask;
    private final byte[] ringKind;
    private final int[] ringSize;
    private final long[] ringLocalOffset;
    private final long[] ringPostNanos;
    private final long[] ringResult;
    private long posted;
    private long completed;
    /** The last work request a driver awaited: the ones after it are outstanding, forgotten or not. */
    private long awaited;
    private long lastSignaled;

    /**
     * {@code recv} holds the atomics' result words (from {@link EngineConfig#resultWordsOffset});
     * an atomic's old value is copied into {@code data} at its completion.
     */
    SendWindow(EngineConfig config, QpStats stats, MemoryRegion recv, MemoryRegion data) {
        this.sendDepth = config.sendDepth();
        this.signalEvery = config.signalEvery();
        this.resultWords = config.resultWordsOffset();
        this.stats = stats;
        this.recv = recv;
        this.data = data;
        int ring = config.rememberedWork();
        ringMask = ring - 1;
        ringKind = new byte[ring];
        ringSize = new int[ring];
        ringLocalOffset = new long[ring];
        ringPostNanos = new long[ring];
        ringResult = new long[ring];
    }

    /** Entries in the ring: what a work request was stays known for this many later posts. */
    int capacity() {
        return ringMask + 1;
    }

    /** The ring entry of [seq]. */
    int slot(long seq) {
        return (int) (seq & ringMask);
    }

    long posted() {
        return posted;
    }

    long completed() {
        return completed;
    }

    long lastSignaled() {
        return lastSignaled;
    }

    /** {@code sendDepth} work requests are in flight. */
    boolean full() {
        return posted - completed >= sendDepth;
    }

    /** Selective signaling: one work request in {@code signalEvery}. */
    boolean signals(long seq) {
        return seq % signalEvery == 0;
    }

    /**
     * The result word of work request [seq]: at most sendDepth are in flight, numbered
     * consecutively, so seq mod sendDepth names a word no other one in flight uses.
     */
    long resultWordOf(long seq) {
        return resultWords + (seq % sendDepth) * 8;
    }

    /**
     * Notes what [seq] is, before it is posted; a signaled one's latency is timed from here, and
     * the measured phase's first one starts its QP's time ({@link QpStats#firstPostNanos}).
     */
    void record(long seq, OpKind kind, int bytes, long localOffset, boolean signaled) {
        int at = slot(seq);
        ringKind[at] = (byte) kind.ordinal();
        ringSize[at] = bytes;
        ringLocalOffset[at] = localOffset;
        ringResult[at] = 0;
        // One branch, on a value: the first post's own test never is one (QpStats#firstOf).
        if (((signaled ? 1 : 0) | stats.isFirstPost(seq)) != 0) {
            long now = System.nanoTime();
            ringPostNanos[at] = now;
            stats.firstPostNanos = QpStats.firstOf(seq, stats.firstPostSeq, now, stats.firstPostNanos);
        }
    }

    /** [seq] was handed to the device. */
    void posted(long seq, boolean signaled) {
        posted = seq;
        if (signaled) lastSignaled = seq;
    }

    int outstanding() {
        return (int) Math.min(Integer.MAX_VALUE, posted - awaited);
    }

    /** The last work request taken, or forgotten: one nobody awaits is forgotten once the ring wraps. */
    private long takenOrForgotten() {
        return Math.max(awaited, posted - ringMask - 1);
    }

    long nextToAwait() {
        long last = takenOrForgotten();
        return last < posted ? last + 1 : 0;
    }

    /** Throws unless [seq] is one still to take: its ring slot may hold a later work request. */
    void checkNotTaken(long seq) {
        long last = takenOrForgotten();
        if (seq <= last) {
            throw new IllegalArgumentException("work request " + seq + " cannot be taken: "
                    + (seq < 1 ? "sequence numbers start at 1" : "it was taken already, or is older than the ring's last "
                    + (ringMask + 1) + " (the next to take is " + (last + 1) + ")"));
        }
    }

    void markAwaited(long seq) {
        if (seq > awaited) awaited = Math.min(seq, posted);
    }

    OpKind kindOf(long seq) {
        return OpKind.of(ringKind[slot(seq)]);
    }

    int sizeOf(long seq) {
        return ringSize[slot(seq)];
    }

    long resultOf(long seq) {
        return ringResult[slot(seq)];
    }

    /** When signaled work request [seq] was posted (System.nanoTime()). */
    long postNanosOf(long seq) {
        return ringPostNanos[slot(seq)];
    }

    /** Completes every work request up to [seq] (RC completes in order): counts them, copies atomics' old values. */
    void completeThrough(long seq) {
        for (long s = completed + 1; s <= seq; s++) {
            int at = slot(s);
            OpKind kind = OpKind.of(ringKind[at]);
            stats.operations++;
            if (kind.writesLocalBuffer()) {
                stats.bytesReceived += ringSize[at];
                if (kind.isAtomic()) {
                    long old = recv.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, resultWordOf(s));
                    ringResult[at] = old;
                    // In completion order: the buffer ends with the old value of the last atomic aimed at it.
                    data.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, ringLocalOffset[at], old);
                }
            } else {
                stats.bytesSent += ringSize[at];
            }
            stats.completedInWarmup(s, kind.writesLocalBuffer(), ringSize[at]);
        }
        if (seq > completed) completed = seq;
    }
}
