package dev.rdmarun.runtime.engine;

/**
 * What moved in a {@link QpEngine}, as its {@link QpEngine.Listener} hears it, once the engine's
 * state for it is complete: a listener may post and take from inside the call.
 */
public enum Progress {
    /**
     * Posted work completed: a signaled work request, or one of the engine's own credit writes
     * (also on a QP that posted nothing: the credits it returns to the peer), completes every one
     * before it too. The window, the buffers and the credits may have moved.
     */
    WORK_COMPLETED,
    /**
     * A message (a SEND, or a WRITE with immediate) arrived on the QP's receive queue. Reported
     * before older held messages move on to the inbox, so that a waiting receive takes this one
     * straight from its receive slot; the move then takes what is left.
     */
    MESSAGE_ARRIVED,
    /** The engine failed ({@link QpEngine#failure} says why); reported once. */
    FAILED
}
