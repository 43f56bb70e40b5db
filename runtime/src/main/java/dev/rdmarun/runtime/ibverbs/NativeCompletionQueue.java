package dev.rdmarun.runtime.ibverbs;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.ibverbs.ffi.Structs;
import dev.rdmarun.runtime.os.Calls;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/** ibv_cq; polling and arming go straight to the provider's ops, as the static inline verbs do. */
final class NativeCompletionQueue extends CompletionQueue {
    private final NativeContext context;
    final MemorySegment handle;
    private final int capacity;
    private final MethodHandle pollCq;
    private final MethodHandle reqNotifyCq;

    private NativeCompletionQueue(NativeContext context, MemorySegment handle, NativeCompletionChannel channel) {
        super(context, channel);
        this.context = context;
        this.handle = handle.reinterpret(Structs.IBV_CQ.byteSize());
        this.capacity = this.handle.get(JAVA_INT, Structs.CQ_CQE);
        this.pollCq = context.ops.pollCq;
        this.reqNotifyCq = context.ops.reqNotifyCq;
        attachToChannel();
    }

    static NativeCompletionQueue create(NativeContext context, int entries, NativeCompletionChannel channel) {
        MemorySegment ch = channel == null ? MemorySegment.NULL : channel.handle;
        return Calls.control((arena, errno) -> {
            MemorySegment cq = (MemorySegment) context.lib.createCq.invokeExact(
                    errno.segment(), context.handle, entries, MemorySegment.NULL, ch, 0);
            if (cq.equals(MemorySegment.NULL)) {
                throw VerbsException.of("ibv_create_cq(" + entries + " entries)", errno.value(),
                        "the device allows at most max_cqe=" + context.queryDevice().maxCqe() + " entries per CQ");
            }
            return new NativeCompletionQueue(context, cq, channel);
        });
    }

    @Override
    public int capacity() {
        return capacity;
    }

    @Override
    protected int pollInto(MemorySegment wcArray, int max) {
        try {
            return (int) pollCq.invokeExact(handle, max, wcArray);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
    }

    @Override
    protected int arm(boolean solicitedOnly) {
        try {
            return (int) reqNotifyCq.invokeExact(handle, solicitedOnly ? 1 : 0);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
    }

    @Override
    protected void acknowledge(int events) {
        try {
            context.lib.ackCqEvents.invokeExact(handle, events);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
    }

    @Override
    protected void destroyQueue() {
        Calls.control((arena, errno) -> {
            int rc = (int) context.lib.destroyCq.invokeExact(errno.segment(), handle);
            if (rc != 0) throw VerbsException.of("ibv_destroy_cq", rc > 0 ? rc : errno.value(), "a QP still uses this CQ");
            return null;
        });
    }
}
