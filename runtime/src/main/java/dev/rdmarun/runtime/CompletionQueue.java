package dev.rdmarun.runtime;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.rdmarun.runtime.ffi.Structs;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * ibv_cq. {@link #poll} and {@link #requestNotify} go straight to the provider's ops (as the
 * static inline ibv_poll_cq / ibv_req_notify_cq do) and allocate nothing. Polling is meant for
 * one thread at a time: the owner of the CQ, usually a {@link PollingDispatcher}.
 */
public final class CompletionQueue extends VerbsResource {
    final Context context;
    final MemorySegment handle;
    private final CompletionChannel channel;
    private final int capacity;
    private final MethodHandle pollCq;
    private final MethodHandle reqNotifyCq;
    private int unackedEvents;

    private CompletionQueue(Context context, MemorySegment handle, CompletionChannel channel) {
        super("completion queue", context, channel);
        this.context = context;
        this.handle = handle.reinterpret(Structs.IBV_CQ.byteSize());
        this.channel = channel;
        this.capacity = this.handle.get(JAVA_INT, Structs.CQ_CQE);
        this.pollCq = context.ops.pollCq;
        this.reqNotifyCq = context.ops.reqNotifyCq;
        if (channel != null) channel.attach(this);
    }

    static CompletionQueue create(Context context, int entries, CompletionChannel channel) {
        if (entries < 1) throw new IllegalArgumentException("a CQ needs at least 1 entry, not " + entries);
        MemorySegment ch = channel == null ? MemorySegment.NULL : channel.handle;
        return Calls.control((arena, errno) -> {
            MemorySegment cq = (MemorySegment) context.lib.createCq.invokeExact(
                    errno.segment(), context.handle, entries, MemorySegment.NULL, ch, 0);
            if (cq.equals(MemorySegment.NULL)) {
                throw VerbsException.of("ibv_create_cq(" + entries + " entries)", errno.value(),
                        "the device allows at most max_cqe=" + context.queryDevice().maxCqe() + " entries per CQ");
            }
            return new CompletionQueue(context, cq, channel);
        });
    }

    /** Entries the provider actually gave (at least what was asked). */
    public int capacity() {
        return capacity;
    }

    public CompletionChannel channel() {
        return channel;
    }

    /**
     * Polls up to {@code completions.capacity()} completions into {@code completions}; returns how
     * many (0 when the CQ is empty). Allocation-free.
     */
    public int poll(WorkCompletions completions) {
        ensureOpen();
        int n;
        try {
            n = (int) pollCq.invokeExact(handle, completions.capacity(), completions.segment);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
        if (n < 0) throw VerbsException.of("ibv_poll_cq", -n, "the CQ may have overflowed: make it larger than all outstanding work requests");
        completions.count = n;
        return n;
    }

    /** Arms the CQ: the next completion (or next solicited one) raises one event on its channel. */
    public void requestNotify(boolean solicitedOnly) {
        ensureOpen();
        if (channel == null) throw new IllegalStateException("this CQ has no completion channel to notify");
        int rc;
        try {
            rc = (int) reqNotifyCq.invokeExact(handle, solicitedOnly ? 1 : 0);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
        if (rc != 0) throw VerbsException.of("ibv_req_notify_cq", rc, null);
    }

    void eventReceived() {
        unackedEvents++;
    }

    /** Acknowledges the events taken so far (ibv_ack_cq_events takes a mutex: batch it). */
    public void acknowledgeEvents() {
        if (unackedEvents == 0) return;
        int n = unackedEvents;
        unackedEvents = 0;
        try {
            context.lib.ackCqEvents.invokeExact(handle, n);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
    }

    @Override
    protected void destroy() {
        // ibv_destroy_cq waits for every event to be acknowledged: ack first, or it never returns.
        acknowledgeEvents();
        if (channel != null) channel.detach(this);
        Calls.control((arena, errno) -> {
            int rc = (int) context.lib.destroyCq.invokeExact(errno.segment(), handle);
            if (rc != 0) throw VerbsException.of("ibv_destroy_cq", rc > 0 ? rc : errno.value(),
                    "a QP still uses this CQ");
            return null;
        });
    }
}
