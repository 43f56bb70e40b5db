package dev.rdmarun.runtime.ibverbs.ffi;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.rdmarun.runtime.os.Errno;
import dev.rdmarun.runtime.os.Native;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * The fast-path verbs of one open device. verbs.h implements ibv_poll_cq, ibv_post_send,
 * ibv_post_recv and ibv_req_notify_cq as static inline calls through {@code context->ops};
 * these handles are bound to those provider function pointers once per context, so a call
 * from Java costs one downcall, as in C. The ops return an errno value directly (no capture).
 */
public final class ContextOps {
    /** int poll_cq(ibv_cq *, int num_entries, ibv_wc *): pure user-space in every provider, so critical. */
    public final MethodHandle pollCq;
    /** int req_notify_cq(ibv_cq *, int solicited_only). */
    public final MethodHandle reqNotifyCq;
    /**
     * int post_send(ibv_qp *, ibv_send_wr *, ibv_send_wr **bad_wr): critical, like post_recv. Both
     * return at once (user space, or a short doorbell syscall in software providers), never block
     * and never call back into Java, so the thread-state transition they skip is pure cost.
     */
    public final MethodHandle postSend;
    /** int post_recv(ibv_qp *, ibv_recv_wr *, ibv_recv_wr **bad_wr). */
    public final MethodHandle postRecv;
    /**
     * int query_port(ibv_context *, uint8_t, ibv_port_attr *, size_t) from verbs_context when the
     * provider has it (as the ibv_query_port macro does), else null: use the exported compat symbol.
     */
    public final MethodHandle queryPortExtended;

    public ContextOps(MemorySegment context) {
        MemorySegment ctx = context.reinterpret(Structs.IBV_CONTEXT.byteSize());
        pollCq = bind(ctx.get(ADDRESS, Structs.CONTEXT_OPS_POLL_CQ),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS), Linker.Option.critical(false));
        reqNotifyCq = bind(ctx.get(ADDRESS, Structs.CONTEXT_OPS_REQ_NOTIFY_CQ),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        postSend = bind(ctx.get(ADDRESS, Structs.CONTEXT_OPS_POST_SEND),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), Linker.Option.critical(false));
        postRecv = bind(ctx.get(ADDRESS, Structs.CONTEXT_OPS_POST_RECV),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), Linker.Option.critical(false));
        queryPortExtended = extendedQueryPort(context);
    }

    private static MethodHandle extendedQueryPort(MemorySegment context) {
        MemorySegment ctx = context.reinterpret(Structs.IBV_CONTEXT.byteSize());
        // verbs_get_ctx(): only contexts marked __VERBS_ABI_IS_EXTENDED (all-ones) have a verbs_context.
        if (ctx.get(ADDRESS, Structs.CONTEXT_ABI_COMPAT).address() != -1L) return null;
        MemorySegment vctx = MemorySegment.ofAddress(context.address() + Structs.VERBS_CONTEXT_FROM_CONTEXT)
                .reinterpret(Structs.VERBS_CONTEXT.byteSize());
        long sz = vctx.get(JAVA_LONG, Structs.VERBS_CONTEXT_SZ);
        // verbs_get_ctx_op(): the op exists only if the provider's verbs_context is big enough to hold it.
        if (sz < Structs.VERBS_CONTEXT.byteSize() - Structs.VERBS_CONTEXT_QUERY_PORT) return null;
        MemorySegment fn = vctx.get(ADDRESS, Structs.VERBS_CONTEXT_QUERY_PORT);
        if (fn.equals(MemorySegment.NULL)) return null;
        return bind(fn, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, ADDRESS, JAVA_LONG));
    }

    private static MethodHandle bind(MemorySegment fn, FunctionDescriptor fd, Linker.Option... options) {
        if (fn.equals(MemorySegment.NULL)) {
            throw new IllegalStateException("the verbs provider leaves an ops entry NULL");
        }
        return Native.LINKER.downcallHandle(fn, fd, options);
    }
}
