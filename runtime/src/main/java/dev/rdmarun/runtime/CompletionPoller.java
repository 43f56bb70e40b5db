package dev.rdmarun.runtime;

import java.util.ArrayList;
import java.util.List;

/**
 * The dispatcher's CQ duty: polls its CQs in batches and completes the {@link PendingOperation}
 * that each wr_id names in the slot table. Apart from the dispatcher because it is the data path's
 * half of the loop: the wr_id table and the batch belong to it, the thread and the waiting do not.
 * Dispatcher thread only, but for the unmatched handler.
 */
final class CompletionPoller {
    private static final int BATCH = 32;

    private final CompletionSlots slots = new CompletionSlots(256);
    private final WorkCompletions completions = new WorkCompletions(BATCH);
    private final List<CompletionQueue> cqs = new ArrayList<>();
    private volatile PollingDispatcher.UnmatchedCompletionHandler unmatched = (c, i) -> { };

    void setUnmatchedCompletionHandler(PollingDispatcher.UnmatchedCompletionHandler handler) {
        this.unmatched = handler;
    }

    boolean hasCompletionQueues() {
        return !cqs.isEmpty();
    }

    void add(CompletionQueue cq) {
        if (!cqs.contains(cq)) cqs.add(cq);
    }

    void remove(CompletionQueue cq) {
        cqs.remove(cq);
    }

    long register(PendingOperation op) {
        return slots.acquire(op);
    }

    void unregister(long wrId) {
        slots.release(wrId);
    }

    int pending() {
        return slots.size();
    }

    /** Polls every CQ until it has nothing more; returns the completions taken (0: none). */
    int poll() {
        int total = 0;
        for (int c = 0; c < cqs.size(); c++) {
            CompletionQueue cq = cqs.get(c);
            int n;
            while ((n = cq.poll(completions)) > 0) {
                for (int i = 0; i < n; i++) {
                    PendingOperation op = slots.release(completions.wrId(i));
                    try {
                        if (op != null) op.complete(completions, i);
                        else unmatched.onUnmatched(completions, i);
                    } catch (RuntimeException e) {
                        // As for tasks and agents: one operation's failure must not stop every QP's polling.
                        TaskQueue.reportUncaught(e);
                    }
                }
                total += n;
                if (n < completions.capacity()) break;
            }
        }
        return total;
    }

    /** Asks every CQ for an event at its next completion (before a sleep). */
    void arm() {
        for (int c = 0; c < cqs.size(); c++) cqs.get(c).requestNotify(false);
    }

    /** Acknowledges the events counted on every CQ, one call per CQ (after a sleep). */
    void acknowledgeEvents() {
        for (int c = 0; c < cqs.size(); c++) cqs.get(c).acknowledgeEvents();
    }

    /** Fails every pending operation (the dispatcher stops). */
    void failAll(Throwable cause) {
        slots.failAll(cause);
    }

    void close() {
        completions.close();
    }
}
