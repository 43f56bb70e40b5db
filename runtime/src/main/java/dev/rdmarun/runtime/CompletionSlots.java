package dev.rdmarun.runtime;

import java.util.Arrays;

/**
 * wr_id ↔ pending operation, without maps or boxing: a wr_id is (generation << 32 | slot), so a
 * late completion for a slot that was already freed and reused is recognised and dropped.
 * Single-threaded (the dispatcher's). Grows by doubling; steady state allocates nothing.
 */
final class CompletionSlots {
    private PendingOperation[] operations;
    private int[] generations;
    private int[] free;
    private int freeCount;
    private int used;

    CompletionSlots(int initialCapacity) {
        operations = new PendingOperation[initialCapacity];
        generations = new int[initialCapacity];
        free = new int[initialCapacity];
        for (int i = 0; i < initialCapacity; i++) free[i] = initialCapacity - 1 - i;
        freeCount = initialCapacity;
    }

    long acquire(PendingOperation op) {
        if (op == null) throw new NullPointerException("operation");
        if (freeCount == 0) grow();
        int slot = free[--freeCount];
        operations[slot] = op;
        used++;
        return ((long) generations[slot] << 32) | slot;
    }

    /** The operation registered under wrId, removed from the table; null if none (stale or foreign wr_id). */
    PendingOperation release(long wrId) {
        int slot = (int) wrId;
        if (slot < 0 || slot >= operations.length) return null;
        PendingOperation op = operations[slot];
        if (op == null || generations[slot] != (int) (wrId >>> 32)) return null;
        operations[slot] = null;
        generations[slot]++;
        free[freeCount++] = slot;
        used--;
        return op;
    }

    int size() {
        return used;
    }

    /** Removes every operation and fails it with the cause. */
    void failAll(Throwable cause) {
        for (int slot = 0; slot < operations.length; slot++) {
            PendingOperation op = operations[slot];
            if (op == null) continue;
            release(((long) generations[slot] << 32) | slot);
            try {
                op.fail(cause);
            } catch (RuntimeException ignored) {
                // One failing callback must not keep the others from hearing about the shutdown.
            }
        }
    }

    private void grow() {
        int old = operations.length;
        int size = Math.max(16, old * 2);
        operations = Arrays.copyOf(operations, size);
        generations = Arrays.copyOf(generations, size);
        free = Arrays.copyOf(free, size);
        for (int i = size - 1; i >= old; i--) free[freeCount++] = i;
    }
}
