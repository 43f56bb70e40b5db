package dev.rdmarun.runtime.engine;

/** What moved in a {@link QpEngine}, as its {@link QpEngine.Listener} hears it, last in each callback. */
public enum Progress {
    /**
     * Posted work completed: a signaled work request, or the engine's credit write behind
     * unsignaled ones, completes every one before it too. The window, the buffers and the
     * credits may have moved.
     */
    WORK_COMPLETED,
    /** A message (a SEND, or a WRITE with immediate) arrived on the QP's receive queue. */
    MESSAGE_ARRIVED,
    /** The engine failed ({@link QpEngine#failure} says why); reported once. */
    FAILED
}
