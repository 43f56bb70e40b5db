package dev.rdmarun.runtime;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * ibv_comp_channel: a file descriptor that becomes readable when an armed CQ gets a completion.
 * Its fd is non-blocking, so a dispatcher can wait on it with poll(2) beside its own wake-up fd
 * and {@link #nextEvent()} never blocks. Single consumer: the thread that waits on it.
 */
public abstract non-sealed class CompletionChannel extends VerbsResource {
    private final Context context;
    private final CopyOnWriteArrayList<CompletionQueue> cqs = new CopyOnWriteArrayList<>();

    protected CompletionChannel(Context context) {
        super("completion channel", context);
        this.context = context;
    }

    public final Context context() {
        return context;
    }

    /** The fd to wait on for POLLIN. */
    public abstract int fd();

    final void attach(CompletionQueue cq) {
        cqs.add(cq);
    }

    final void detach(CompletionQueue cq) {
        cqs.remove(cq);
    }

    /** The CQs that report to this channel. */
    protected final List<CompletionQueue> attached() {
        return cqs;
    }

    /**
     * Takes one pending completion event: the CQ it is for, or null when none is pending. The event
     * is counted on that CQ and acknowledged in batches ({@link CompletionQueue#acknowledgeEvents()}).
     * Allocation-free.
     */
    public final CompletionQueue nextEvent() {
        ensureOpen();
        CompletionQueue cq = takeEvent();
        if (cq != null) cq.eventReceived();
        return cq;
    }

    /** ibv_get_cq_event without blocking: the CQ of the next event, or null. */
    protected abstract CompletionQueue takeEvent();
}
