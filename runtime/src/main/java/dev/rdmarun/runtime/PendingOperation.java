package dev.rdmarun.runtime;

/**
 * Work waiting for its completion in a {@link PollingDispatcher}. Both methods run on the
 * dispatcher thread. Implementations are meant to be reused (one per QP or per in-flight slot),
 * so completing work allocates nothing.
 */
public interface PendingOperation {
    /** The completion at {@code index} of {@code completions} is for this operation (success or not). */
    void complete(WorkCompletions completions, int index);

    /** The operation will never complete: the dispatcher shut down or its CQ failed. */
    void fail(Throwable cause);
}
