package dev.rdmarun.runtime.ibverbs;

import static dev.rdmarun.runtime.ibverbs.ffi.Structs.*;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.AddressVector;
import dev.rdmarun.runtime.DeviceAttributes;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.QpAttr;
import dev.rdmarun.runtime.QpAttributes;
import dev.rdmarun.runtime.QpState;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.SendWorkRequest;
import dev.rdmarun.runtime.WrOpcode;
import dev.rdmarun.runtime.os.Calls;
import dev.rdmarun.runtime.os.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * ibv_qp. Posting fills one reusable off-heap work request (and SGE) per queue and calls the
 * provider's post_send/post_recv op: allocation-free, one thread at a time.
 */
final class NativeQueuePair extends QueuePair {
    private final NativeContext context;
    private final MemorySegment handle;
    private final int qpNum;
    private final int maxInlineData;
    private final MethodHandle postSendOp;
    private final MethodHandle postRecvOp;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment sendWr;
    private final MemorySegment sendSge;
    private final MemorySegment recvWr;
    private final MemorySegment recvSge;
    private final MemorySegment badWr;

    private NativeQueuePair(NativeProtectionDomain pd, MemorySegment handle, QueuePairConfig config, int maxInlineData) {
        super(pd, config);
        this.context = pd.context;
        this.handle = handle.reinterpret(IBV_QP.byteSize());
        this.qpNum = this.handle.get(JAVA_INT, QP_QP_NUM);
        this.maxInlineData = maxInlineData;
        this.postSendOp = context.ops.postSend;
        this.postRecvOp = context.ops.postRecv;
        // Unscoped views (see Segments): QueuePair checks that it is open before every post.
        this.sendWr = Segments.unscoped(arena.allocate(IBV_SEND_WR));
        this.sendSge = Segments.unscoped(arena.allocate(IBV_SGE));
        this.recvWr = Segments.unscoped(arena.allocate(IBV_RECV_WR));
        this.recvSge = Segments.unscoped(arena.allocate(IBV_SGE));
        this.badWr = Segments.unscoped(arena.allocate(ADDRESS));
        sendWr.set(ADDRESS, SEND_WR_NEXT, MemorySegment.NULL);
        recvWr.set(ADDRESS, RECV_WR_NEXT, MemorySegment.NULL);
    }

    static NativeQueuePair create(NativeProtectionDomain pd, QueuePairConfig c) {
        return Calls.control((arena, errno) -> {
            MemorySegment init = arena.allocate(IBV_QP_INIT_ATTR);
            init.set(ADDRESS, QP_INIT_SEND_CQ, ((NativeCompletionQueue) c.sendCq()).handle);
            init.set(ADDRESS, QP_INIT_RECV_CQ, ((NativeCompletionQueue) c.recvCq()).handle);
            init.set(JAVA_INT, QP_INIT_CAP_MAX_SEND_WR, c.maxSendWr());
            init.set(JAVA_INT, QP_INIT_CAP_MAX_RECV_WR, c.maxRecvWr());
            init.set(JAVA_INT, QP_INIT_CAP_MAX_SEND_SGE, c.maxSendSge());
            init.set(JAVA_INT, QP_INIT_CAP_MAX_RECV_SGE, c.maxRecvSge());
            init.set(JAVA_INT, QP_INIT_CAP_MAX_INLINE, c.maxInlineData());
            init.set(JAVA_INT, QP_INIT_QP_TYPE, c.type().code());
            init.set(JAVA_INT, QP_INIT_SQ_SIG_ALL, c.signalAll() ? 1 : 0);
            MemorySegment qp = (MemorySegment) pd.context.lib.createQp.invokeExact(errno.segment(), pd.handle, init);
            if (qp.equals(MemorySegment.NULL)) {
                DeviceAttributes d = pd.context.queryDevice();
                throw VerbsException.of("ibv_create_qp(" + c.type() + ")", errno.value(),
                        "the device allows max_qp_wr=" + d.maxQpWr() + ", max_sge=" + d.maxSge()
                                + ", max_qp=" + d.maxQp() + "; inline data is limited by the provider");
            }
            // The provider may round the capabilities up; it writes the real ones back into init.
            return new NativeQueuePair(pd, qp, c, init.get(JAVA_INT, QP_INIT_CAP_MAX_INLINE));
        });
    }

    @Override
    public int qpNum() {
        return qpNum;
    }

    @Override
    public int maxInlineData() {
        return maxInlineData;
    }

    @Override
    protected QpState currentState() {
        return Calls.control((arena, errno) -> {
            MemorySegment attr = arena.allocate(IBV_QP_ATTR);
            MemorySegment init = arena.allocate(IBV_QP_INIT_ATTR);
            int rc = (int) context.lib.queryQp.invokeExact(errno.segment(), handle, attr, QpAttr.STATE.bit(), init);
            if (rc != 0) throw VerbsException.of("ibv_query_qp", rc > 0 ? rc : errno.value(), null);
            return QpState.of(attr.get(JAVA_INT, QP_ATTR_STATE));
        });
    }

    /** Writes the attributes the mask names into an ibv_qp_attr and calls ibv_modify_qp. */
    @Override
    protected int applyModify(QpAttributes a) {
        return Calls.control((arena, errno) -> {
            MemorySegment attr = arena.allocate(IBV_QP_ATTR);
            if (a.has(QpAttr.STATE)) attr.set(JAVA_INT, QP_ATTR_STATE, a.state().code());
            if (a.has(QpAttr.CUR_STATE)) attr.set(JAVA_INT, QP_ATTR_CUR_STATE, a.currentState().code());
            if (a.has(QpAttr.ACCESS_FLAGS)) attr.set(JAVA_INT, QP_ATTR_ACCESS_FLAGS, Access.bits(a.access()));
            if (a.has(QpAttr.PKEY_INDEX)) attr.set(JAVA_SHORT, QP_ATTR_PKEY_INDEX, (short) a.pkeyIndex());
            if (a.has(QpAttr.PORT)) attr.set(JAVA_BYTE, QP_ATTR_PORT_NUM, (byte) a.port());
            if (a.has(QpAttr.QKEY)) attr.set(JAVA_INT, QP_ATTR_QKEY, a.qkey());
            if (a.has(QpAttr.AV)) {
                AddressVector av = a.addressVector();
                attr.set(JAVA_SHORT, QP_ATTR_AH_DLID, (short) av.dlid());
                attr.set(JAVA_BYTE, QP_ATTR_AH_SL, (byte) av.serviceLevel());
                attr.set(JAVA_BYTE, QP_ATTR_AH_PORT_NUM, (byte) av.port());
                if (av.isGlobal()) {
                    attr.set(JAVA_BYTE, QP_ATTR_AH_IS_GLOBAL, (byte) 1);
                    av.dgid().write(attr, QP_ATTR_AH_DGID);
                    attr.set(JAVA_BYTE, QP_ATTR_AH_SGID_INDEX, (byte) av.sgidIndex());
                    attr.set(JAVA_BYTE, QP_ATTR_AH_HOP_LIMIT, (byte) av.hopLimit());
                    attr.set(JAVA_BYTE, QP_ATTR_AH_TRAFFIC_CLASS, (byte) av.trafficClass());
                }
            }
            if (a.has(QpAttr.PATH_MTU)) attr.set(JAVA_INT, QP_ATTR_PATH_MTU, a.pathMtu().code());
            if (a.has(QpAttr.TIMEOUT)) attr.set(JAVA_BYTE, QP_ATTR_TIMEOUT, (byte) a.timeout());
            if (a.has(QpAttr.RETRY_CNT)) attr.set(JAVA_BYTE, QP_ATTR_RETRY_CNT, (byte) a.retryCount());
            if (a.has(QpAttr.RNR_RETRY)) attr.set(JAVA_BYTE, QP_ATTR_RNR_RETRY, (byte) a.rnrRetry());
            if (a.has(QpAttr.RQ_PSN)) attr.set(JAVA_INT, QP_ATTR_RQ_PSN, a.rqPsn());
            if (a.has(QpAttr.MAX_QP_RD_ATOMIC)) attr.set(JAVA_BYTE, QP_ATTR_MAX_RD_ATOMIC, (byte) a.maxRdAtomic());
            if (a.has(QpAttr.MIN_RNR_TIMER)) attr.set(JAVA_BYTE, QP_ATTR_MIN_RNR_TIMER, (byte) a.minRnrTimer());
            if (a.has(QpAttr.SQ_PSN)) attr.set(JAVA_INT, QP_ATTR_SQ_PSN, a.sqPsn());
            if (a.has(QpAttr.MAX_DEST_RD_ATOMIC)) attr.set(JAVA_BYTE, QP_ATTR_MAX_DEST_RD_ATOMIC, (byte) a.maxDestRdAtomic());
            if (a.has(QpAttr.DEST_QPN)) attr.set(JAVA_INT, QP_ATTR_DEST_QP_NUM, a.destQpn());
            int rc = (int) context.lib.modifyQp.invokeExact(errno.segment(), handle, attr, a.maskBits());
            return rc == 0 ? 0 : rc > 0 ? rc : errno.value();
        });
    }

    @Override
    protected int postSendRequest(SendWorkRequest r) {
        MemorySegment wr = sendWr;
        WrOpcode opcode = r.opcode();
        int length = r.length();
        wr.set(JAVA_LONG, SEND_WR_WR_ID, r.wrId());
        fillSge(sendSge, r.mr(), r.offset(), length);
        wr.set(ADDRESS, SEND_WR_SG_LIST, length == 0 ? MemorySegment.NULL : sendSge);
        wr.set(JAVA_INT, SEND_WR_NUM_SGE, length == 0 ? 0 : 1);
        wr.set(JAVA_INT, SEND_WR_OPCODE, opcode.code());
        wr.set(JAVA_INT, SEND_WR_SEND_FLAGS, r.flags());
        wr.set(JAVA_INT, SEND_WR_IMM_DATA, Integer.reverseBytes(r.imm()));
        if (opcode.isAtomic()) {
            wr.set(JAVA_LONG, SEND_WR_ATOMIC_REMOTE_ADDR, r.remoteAddress());
            wr.set(JAVA_LONG, SEND_WR_ATOMIC_COMPARE_ADD, r.compareAdd());
            wr.set(JAVA_LONG, SEND_WR_ATOMIC_SWAP, r.swap());
            wr.set(JAVA_INT, SEND_WR_ATOMIC_RKEY, r.rkey());
        } else {
            wr.set(JAVA_LONG, SEND_WR_RDMA_REMOTE_ADDR, r.remoteAddress());
            wr.set(JAVA_INT, SEND_WR_RDMA_RKEY, r.rkey());
        }
        try {
            return (int) postSendOp.invokeExact(handle, wr, badWr);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
    }

    @Override
    protected int postReceiveRequest(long wrId, MemoryRegion mr, long offset, int length) {
        recvWr.set(JAVA_LONG, RECV_WR_WR_ID, wrId);
        fillSge(recvSge, mr, offset, length);
        recvWr.set(ADDRESS, RECV_WR_SG_LIST, length == 0 ? MemorySegment.NULL : recvSge);
        recvWr.set(JAVA_INT, RECV_WR_NUM_SGE, length == 0 ? 0 : 1);
        try {
            return (int) postRecvOp.invokeExact(handle, recvWr, badWr);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
    }

    private static void fillSge(MemorySegment sge, MemoryRegion mr, long offset, int length) {
        sge.set(JAVA_LONG, SGE_ADDR, mr.address() + offset);
        sge.set(JAVA_INT, SGE_LENGTH, length);
        sge.set(JAVA_INT, SGE_LKEY, mr.lkey());
    }

    @Override
    protected void destroy() {
        try {
            Calls.control((scratch, errno) -> {
                int rc = (int) context.lib.destroyQp.invokeExact(errno.segment(), handle);
                if (rc != 0) throw VerbsException.of("ibv_destroy_qp", rc > 0 ? rc : errno.value(), null);
                return null;
            });
        } finally {
            arena.close();
        }
    }
}
