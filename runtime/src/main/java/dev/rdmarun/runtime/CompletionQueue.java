package dev.rdmarun.runtime;

import java.lang.foreign.MemorySegment;

/**
 * ibv_cq. {@link #poll} and {@link #requestNotify} are the data path: they allocate nothing.
 * Polling is meant for one thread at a time: the owner of the CQ, usually a {@link PollingDispatcher}.
 */
public abstract non-sealed class CompletionQueue extends VerbsResource {
    private final Context context;
    private final CompletionChannel channel;
    private int unackedEvents;

    protected CompletionQueue(Context context, CompletionChannel channel) {
        super("completion queue", context, channel);
        this.context = context;
        this.channel = channel;
    }

    /** Call at the end of a provider's constructor: from then on the channel may report this CQ. */
    protected final void attachToChannel() {
        if (channel != null) channel.attach(this);
    }

    public final Context context() {
        return context;
    }

    public final CompletionChannel channel() {
        return channel;
    }

    /** Entries the provider actually gave (at least what was asked). */
    public abstract int capacity();

    /**
     * Polls up to {@code completions.capacity()} completions into {@code completions}; returns how
     * many (0 when the CQ is empty). Allocation-free.
     */
    public final int poll(WorkCompletions completions) {
        ensureOpen();
        completions.ensureOpen();
        int n = pollInto(completions.segment, completions.capacity());
        if (n < 0) {
            throw VerbsException.of("ibv_poll_cq", -n, "the CQ overflowed: make it larger than all outstanding work requests of the QPs that share it");
        }
        completions.count = n;
        if (n > 0) completions.polledNanos = System.nanoTime(); // one clock read per batch, none per completion
        completions.software = context.isSoftware();
        return n;
    }

    /** Arms the CQ: the next completion (or next solicited one) raises one event on its channel. */
    public final void requestNotify(boolean solicitedOnly) {
        ensureOpen();
        if (channel == null) throw new IllegalStateException("this CQ has no completion channel to notify");
        int rc = arm(solicitedOnly);
        if (rc != 0) throw VerbsException.of("ibv_req_notify_cq", rc, null);
    }

    final void eventReceived() {
        unackedEvents++;
    }

    /** Acknowledges the events taken so far (ibv_ack_cq_events takes a mutex: batch it). */
    public final void acknowledgeEvents() {
        if (unackedEvents == 0) return;
        int n = unackedEvents;
        unackedEvents = 0;
        acknowledge(n);
    }

    @Override
    protected final void destroy() {
        // ibv_destroy_cq waits for every event to be acknowledged: ack first, or it never returns.
        acknowledgeEvents();
        if (channel != null) channel.detach(this);
        destroyQueue();
    }

    // ---- what a provider implements ----

    /** Writes up to {@code max} ibv_wc structs into {@code wcArray}; returns the count, or -errno. */
    protected abstract int pollInto(MemorySegment wcArray, int max);

    /** ibv_req_notify_cq: 0 or an errno. */
    protected abstract int arm(boolean solicitedOnly);

    protected abstract void acknowledge(int events);

    protected abstract void destroyQueue();
}
