package dev.rdmarun.runtime;

/** How a {@link PollingDispatcher} waits when a poll found nothing to do. */
public enum IdleMode {
    /** Spin on the CQ: lowest latency, one core at 100%. */
    BUSY_SPIN,
    /** Spin, then yield, then park with growing back-off (Agrona's BackoffIdleStrategy). */
    BACKOFF,
    /** Arm the CQs and sleep in poll(2) on the completion channel until a completion event. */
    EVENT
}
