package dev.rdmarun.runtime;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.rdmarun.runtime.os.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A reusable off-heap array of ibv_wc that {@link CompletionQueue#poll} fills. Accessors read the
 * native struct in place (a flyweight): polling and reading completions allocate nothing.
 */
public final class WorkCompletions implements AutoCloseable {
    private static final long SIZE = WcLayout.SIZE;

    private final Arena arena;
    /** The array, unscoped: polls and reads check {@link #closed} instead of the arena (see Segments). */
    final MemorySegment segment;
    private boolean closed;
    private final int capacity;
    int count;
    /** Whether the last poll was of a software (soft0) CQ: its hints differ where the fabric does. */
    boolean software;
    /** System.nanoTime() when the last poll that found completions returned. */
    long polledNanos;

    public WorkCompletions(int capacity) {
        if (capacity < 1) throw new IllegalArgumentException("capacity must be positive");
        this.arena = Arena.ofShared();
        this.segment = Segments.unscoped(arena.allocate(WcLayout.IBV_WC, capacity));
        this.capacity = capacity;
    }

    public int capacity() {
        return capacity;
    }

    /** How many the last poll returned. */
    public int count() {
        return count;
    }

    /**
     * System.nanoTime() read when the last poll that found completions returned (0 before any):
     * when they were seen, for every completion of the batch, at the cost of one clock read.
     */
    public long polledNanos() {
        return polledNanos;
    }

    void ensureOpen() {
        if (closed) throw new IllegalStateException("these WorkCompletions are closed");
    }

    private long at(int i) {
        if (i < 0 || i >= count) throw new IndexOutOfBoundsException(i);
        return i * SIZE;
    }

    public long wrId(int i) {
        return segment.get(JAVA_LONG, at(i) + WcLayout.WR_ID);
    }

    public int statusCode(int i) {
        return segment.get(JAVA_INT, at(i) + WcLayout.STATUS);
    }

    public WcStatus status(int i) {
        return WcStatus.of(statusCode(i));
    }

    public boolean isSuccess(int i) {
        return statusCode(i) == 0;
    }

    public WcOpcode opcode(int i) {
        return WcOpcode.of(segment.get(JAVA_INT, at(i) + WcLayout.OPCODE));
    }

    public int byteLength(int i) {
        return segment.get(JAVA_INT, at(i) + WcLayout.BYTE_LEN);
    }

    public boolean hasImmediate(int i) {
        return (segment.get(JAVA_INT, at(i) + WcLayout.WC_FLAGS) & WcLayout.WITH_IMM) != 0;
    }

    /** Immediate data in host order (the wire carries it big-endian). */
    public int immediate(int i) {
        return Integer.reverseBytes(segment.get(JAVA_INT, at(i) + WcLayout.IMM_DATA));
    }

    public int qpNum(int i) {
        return segment.get(JAVA_INT, at(i) + WcLayout.QP_NUM);
    }

    public int vendorError(int i) {
        return segment.get(JAVA_INT, at(i) + WcLayout.VENDOR_ERR);
    }

    /** ibv_wc_status_str plus the likely cause: for error reports, not for the polling loop. */
    public String describe(int i) {
        WcStatus s = status(i);
        String text = s.text();
        return "work request " + wrId(i) + " on QP " + QueuePair.qpnText(qpNum(i)) + ": " + text + " (" + s + ", vendor error 0x"
                + Integer.toHexString(vendorError(i)) + ")" + (s.hint(software) != null ? "\n  hint: " + s.hint(software) : "");
    }

    /** Turns completion i into an exception when it failed. */
    public VerbsException failure(int i) {
        WcStatus s = status(i);
        return new VerbsException("work request " + wrId(i) + " on QP " + QueuePair.qpnText(qpNum(i)) + " completed with "
                + s.text() + " (" + s + ")", 0, s.hint(software));
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        count = 0; // every accessor now fails its index check
        arena.close();
    }
}
