package dev.rdmarun.runtime.soft;

import java.util.concurrent.locks.LockSupport;

/**
 * What a thread that busy-polls soft0 CQs does when they are empty; one per polling thread.
 * soft0's "hardware" is threads of this machine (the engines, the TCP readers and writers): a
 * poller that kept a core spinning would take it from them. So an empty poll yields, and after
 * {@value #SPIN_POLLS} empty polls in a row (some hundred microseconds in which nothing completed
 * on any soft0 CQ this thread polls) the poller naps for {@value #NAP_NANOS} ns at most, woken at
 * once by a completion pushed to a CQ it polls; {@value #POLLS_BETWEEN_NAPS} empty polls come
 * between two naps, so the poller's other work (tasks, agents) waits about a nap at most. A poller
 * that keeps finding completions never naps. CQs with a completion channel never nap: their owner
 * sleeps on the channel.
 */
final class PollIdle {
    static final int SPIN_POLLS = 200;
    static final int POLLS_BETWEEN_NAPS = 20;
    static final long NAP_NANOS = 50_000;
    private static final ThreadLocal<PollIdle> OF_THREAD = ThreadLocal.withInitial(PollIdle::new);

    final Thread thread = Thread.currentThread();
    /**
     * [PAD]: the poller's count of empty polls in a row, written at every poll. In an array, on a
     * cache line apart from {@link #napping}, which pushers of other threads read at every completion.
     */
    private final int[] emptyPolls = new int[2 * PAD + 1];
    private static final int PAD = 16;
    private volatile boolean napping;

    private PollIdle() {}

    /** The current thread's. */
    static PollIdle ofCurrentThread() {
        return OF_THREAD.get();
    }

    /** A poll found completions. */
    void completed() {
        if (emptyPolls[PAD] != 0) emptyPolls[PAD] = 0;
    }

    /** A poll of cq found nothing: yield, or nap after a long run of empty polls. */
    void idle(SoftCompletionQueue cq) {
        if (++emptyPolls[PAD] < SPIN_POLLS) {
            Thread.yield();
            return;
        }
        emptyPolls[PAD] = SPIN_POLLS - POLLS_BETWEEN_NAPS;
        napping = true;
        // A completion pushed after this sees the nap and ends it; one pushed to cq just before
        // is seen here. (One pushed to another CQ just before waits for the nap's end.)
        if (cq.isEmpty()) LockSupport.parkNanos(this, NAP_NANOS);
        napping = false;
    }

    /** A completion was pushed to a CQ this thread polls: end its nap. */
    void wake() {
        if (napping) LockSupport.unpark(thread);
    }
}
