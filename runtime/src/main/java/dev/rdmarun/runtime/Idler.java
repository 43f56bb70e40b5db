package dev.rdmarun.runtime;

/**
 * How the dispatcher thread waits after a round, and how another thread cuts the wait short when
 * it queues a task. One per dispatcher at a time ({@link IdleMode}; {@link PollingDispatcher#relax}
 * swaps it). Not Agrona's {@code IdleStrategy}: EVENT mode must be woken through an eventfd, which
 * that contract has no call for; {@link AgronaIdler} adapts Agrona's strategies to it.
 */
interface Idler {
    /** After a round that did [work] (0: none): starts over, spins, backs off or sleeps. */
    void idle(int work) throws Throwable;

    /** From a thread that queued a task: ends the wait if this way of waiting would miss it. */
    void wake();
}
