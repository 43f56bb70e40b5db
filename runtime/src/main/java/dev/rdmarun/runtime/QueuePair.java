package dev.rdmarun.runtime;

import static dev.rdmarun.runtime.ffi.Structs.*;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.rdmarun.runtime.ffi.Errno;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.Set;

/**
 * ibv_qp. Control path: RESET→INIT→RTR→RTS with the attributes the IB spec requires for each
 * transition, ERR, RESET, and a state query. Data path: post methods that fill one reusable
 * off-heap work request and call the provider's post_send/post_recv op; they allocate nothing
 * and are for one thread at a time (the dispatcher's).
 */
public final class QueuePair extends VerbsResource {
    // enum ibv_qp_attr_mask
    private static final int STATE = 1, ACCESS_FLAGS = 1 << 3, PKEY_INDEX = 1 << 4, PORT = 1 << 5, QKEY = 1 << 6,
            AV = 1 << 7, PATH_MTU = 1 << 8, TIMEOUT = 1 << 9, RETRY_CNT = 1 << 10, RNR_RETRY = 1 << 11,
            RQ_PSN = 1 << 12, MAX_QP_RD_ATOMIC = 1 << 13, MIN_RNR_TIMER = 1 << 15, SQ_PSN = 1 << 16,
            MAX_DEST_RD_ATOMIC = 1 << 17, CAP = 1 << 19, DEST_QPN = 1 << 20;
    // enum ibv_wr_opcode
    private static final int OP_WRITE = 0, OP_WRITE_IMM = 1, OP_SEND = 2, OP_SEND_IMM = 3, OP_READ = 4,
            OP_CMP_SWP = 5, OP_FETCH_ADD = 6;
    /** Atomics operate on one naturally aligned 64-bit word. */
    private static final int ATOMIC_SIZE = 8;

    private final ProtectionDomain pd;
    private final Context context;
    final MemorySegment handle;
    private final QueuePairConfig config;
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
    private int port;

    private QueuePair(ProtectionDomain pd, MemorySegment handle, QueuePairConfig config, int maxInlineData) {
        super("queue pair", pd, config.sendCq(), config.recvCq());
        this.pd = pd;
        this.context = pd.context;
        this.handle = handle.reinterpret(IBV_QP.byteSize());
        this.config = config;
        this.qpNum = this.handle.get(JAVA_INT, QP_QP_NUM);
        this.maxInlineData = maxInlineData;
        this.postSendOp = context.ops.postSend;
        this.postRecvOp = context.ops.postRecv;
        this.sendWr = arena.allocate(IBV_SEND_WR);
        this.sendSge = arena.allocate(IBV_SGE);
        this.recvWr = arena.allocate(IBV_RECV_WR);
        this.recvSge = arena.allocate(IBV_SGE);
        this.badWr = arena.allocate(ADDRESS);
        sendWr.set(ADDRESS, SEND_WR_NEXT, MemorySegment.NULL);
        recvWr.set(ADDRESS, RECV_WR_NEXT, MemorySegment.NULL);
    }

    static QueuePair create(ProtectionDomain pd, QueuePairConfig c) {
        if (c.sendCq().context != pd.context || c.recvCq().context != pd.context) {
            throw new IllegalArgumentException("the CQs and the PD belong to different devices");
        }
        return Calls.control((arena, errno) -> {
            MemorySegment init = arena.allocate(IBV_QP_INIT_ATTR);
            init.set(ADDRESS, QP_INIT_SEND_CQ, c.sendCq().handle);
            init.set(ADDRESS, QP_INIT_RECV_CQ, c.recvCq().handle);
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
            return new QueuePair(pd, qp, c, init.get(JAVA_INT, QP_INIT_CAP_MAX_INLINE));
        });
    }

    public int qpNum() {
        return qpNum;
    }

    public QueuePairConfig config() {
        return config;
    }

    public ProtectionDomain protectionDomain() {
        return pd;
    }

    public int maxInlineData() {
        return maxInlineData;
    }

    /** This QP's half of the out-of-band exchange, for the given port and local GID index. */
    public QpEndpoint localEndpoint(int port, int gidIndex, int psn) {
        PortAttributes p = context.queryPort(port);
        Gid gid = context.gid(port, gidIndex).gid();
        return new QpEndpoint(p.lid(), qpNum, psn, gid, p.activeMtu());
    }

    /** The current state, as ibv_query_qp reports it (the seeds' print_qp_state). */
    public QpState queryState() {
        ensureOpen();
        return Calls.control((arena, errno) -> {
            MemorySegment attr = arena.allocate(IBV_QP_ATTR);
            MemorySegment init = arena.allocate(IBV_QP_INIT_ATTR);
            int rc = (int) context.lib.queryQp.invokeExact(errno.segment(), handle, attr, STATE, init);
            if (rc != 0) throw VerbsException.of("ibv_query_qp", rc > 0 ? rc : errno.value(), null);
            return QpState.of(attr.get(JAVA_INT, QP_ATTR_STATE));
        });
    }

    /** RESET→INIT: the port, P_Key index 0, and which remote operations this QP accepts. */
    public void modifyToInit(int port, Set<Access> remoteAccess) {
        modify("RESET→INIT", attr -> {
            attr.set(JAVA_INT, QP_ATTR_STATE, QpState.INIT.code());
            attr.set(JAVA_SHORT, QP_ATTR_PKEY_INDEX, (short) 0);
            attr.set(JAVA_BYTE, QP_ATTR_PORT_NUM, (byte) port);
            attr.set(JAVA_INT, QP_ATTR_ACCESS_FLAGS, Access.bits(remoteAccess));
            return STATE | PKEY_INDEX | PORT | ACCESS_FLAGS | (config.type() == QpType.UD ? QKEY : 0);
        }, null);
        this.port = port;
    }

    /** INIT→RTR: connects the receive side to the remote QP. */
    public void modifyToRtr(RtrAttributes a) {
        QpEndpoint r = a.remote();
        PortAttributes portAttr = context.queryPort(a.port());
        if (portAttr.linkLayer() == PortAttributes.LinkLayer.ETHERNET && r.gid().isZero()) {
            throw new VerbsException("the peer's GID is empty: RoCE addresses QPs by GID",
                    "the peer must choose a valid GID index (rdma-run gids)");
        }
        modify("INIT→RTR", attr -> {
            attr.set(JAVA_INT, QP_ATTR_STATE, QpState.RTR.code());
            attr.set(JAVA_INT, QP_ATTR_PATH_MTU, a.pathMtu().code());
            attr.set(JAVA_INT, QP_ATTR_DEST_QP_NUM, r.qpn());
            attr.set(JAVA_INT, QP_ATTR_RQ_PSN, r.psn());
            attr.set(JAVA_SHORT, QP_ATTR_AH_DLID, (short) r.lid());
            attr.set(JAVA_BYTE, QP_ATTR_AH_SL, (byte) a.serviceLevel());
            attr.set(JAVA_BYTE, QP_ATTR_AH_PORT_NUM, (byte) a.port());
            if (!r.gid().isZero()) {
                attr.set(JAVA_BYTE, QP_ATTR_AH_IS_GLOBAL, (byte) 1);
                r.gid().write(attr, QP_ATTR_AH_DGID);
                attr.set(JAVA_BYTE, QP_ATTR_AH_SGID_INDEX, (byte) a.sgidIndex());
                attr.set(JAVA_BYTE, QP_ATTR_AH_HOP_LIMIT, (byte) a.hopLimit());
                attr.set(JAVA_BYTE, QP_ATTR_AH_TRAFFIC_CLASS, (byte) a.trafficClass());
            }
            int mask = STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN;
            if (config.type() == QpType.RC) {
                attr.set(JAVA_BYTE, QP_ATTR_MAX_DEST_RD_ATOMIC, (byte) a.maxDestRdAtomic());
                attr.set(JAVA_BYTE, QP_ATTR_MIN_RNR_TIMER, (byte) a.minRnrTimer());
                mask |= MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
            }
            return mask;
        }, errno -> "the local GID index " + a.sgidIndex() + " may be wrong or of another RoCE version/IP family"
                + " than the peer's GID " + r.gid() + "; " + Context.describeChoices(context.gidTable(a.port())));
    }

    /** RTR→RTS: enables the send side. */
    public void modifyToRts(RtsAttributes a) {
        modify("RTR→RTS", attr -> {
            attr.set(JAVA_INT, QP_ATTR_STATE, QpState.RTS.code());
            attr.set(JAVA_INT, QP_ATTR_SQ_PSN, a.sqPsn());
            int mask = STATE | SQ_PSN;
            if (config.type() == QpType.RC) {
                attr.set(JAVA_BYTE, QP_ATTR_TIMEOUT, (byte) a.timeout());
                attr.set(JAVA_BYTE, QP_ATTR_RETRY_CNT, (byte) a.retryCount());
                attr.set(JAVA_BYTE, QP_ATTR_RNR_RETRY, (byte) a.rnrRetry());
                attr.set(JAVA_BYTE, QP_ATTR_MAX_RD_ATOMIC, (byte) a.maxRdAtomic());
                mask |= TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC;
            }
            return mask;
        }, null);
    }

    /** Any state→ERR: outstanding work requests complete with WR_FLUSH_ERR. */
    public void modifyToError() {
        modify("→ERR", attr -> {
            attr.set(JAVA_INT, QP_ATTR_STATE, QpState.ERR.code());
            return STATE;
        }, null);
    }

    /** Any state→RESET: the queues are emptied without completions. */
    public void modifyToReset() {
        modify("→RESET", attr -> {
            attr.set(JAVA_INT, QP_ATTR_STATE, QpState.RESET.code());
            return STATE;
        }, null);
    }

    private interface AttrWriter {
        int write(MemorySegment attr);
    }

    private interface Hint {
        String of(int errno);
    }

    private void modify(String transition, AttrWriter writer, Hint hint) {
        ensureOpen();
        Calls.control((arena, errno) -> {
            MemorySegment attr = arena.allocate(IBV_QP_ATTR);
            int mask = writer.write(attr);
            int rc = (int) context.lib.modifyQp.invokeExact(errno.segment(), handle, attr, mask);
            if (rc != 0) {
                int e = rc > 0 ? rc : errno.value();
                throw VerbsException.of("ibv_modify_qp(QP " + qpNum + ", " + transition + ")", e,
                        hint == null ? null : hint.of(e));
            }
            return null;
        });
    }

    // ---- data path: allocation-free, one thread at a time ----

    /** SEND of [offset, offset+length) of mr; length 0 sends an empty message. */
    public void postSend(long wrId, MemoryRegion mr, long offset, int length, int flags) {
        postSendWr(wrId, OP_SEND, mr, offset, length, flags, 0, 0L, 0, 0L, 0L);
    }

    /** SEND with 32-bit immediate data (host order; carried big-endian). */
    public void postSendWithImm(long wrId, MemoryRegion mr, long offset, int length, int imm, int flags) {
        postSendWr(wrId, OP_SEND_IMM, mr, offset, length, flags, imm, 0L, 0, 0L, 0L);
    }

    /** RDMA WRITE of local [offset, offset+length) to remote address/rkey. */
    public void postWrite(long wrId, MemoryRegion mr, long offset, int length, long remoteAddress, int rkey, int flags) {
        postSendWr(wrId, OP_WRITE, mr, offset, length, flags, 0, remoteAddress, rkey, 0L, 0L);
    }

    /** RDMA WRITE that also consumes a receive at the peer and delivers the immediate. */
    public void postWriteWithImm(long wrId, MemoryRegion mr, long offset, int length, long remoteAddress, int rkey,
                                 int imm, int flags) {
        postSendWr(wrId, OP_WRITE_IMM, mr, offset, length, flags, imm, remoteAddress, rkey, 0L, 0L);
    }

    /** RDMA READ of remote address/rkey into local [offset, offset+length) (mr needs LOCAL_WRITE). */
    public void postRead(long wrId, MemoryRegion mr, long offset, int length, long remoteAddress, int rkey, int flags) {
        postSendWr(wrId, OP_READ, mr, offset, length, flags, 0, remoteAddress, rkey, 0L, 0L);
    }

    /** 64-bit compare-and-swap at the remote address; the old value lands at local offset. */
    public void postCompareAndSwap(long wrId, MemoryRegion mr, long offset, long remoteAddress, int rkey,
                                   long compare, long swap, int flags) {
        postSendWr(wrId, OP_CMP_SWP, mr, offset, ATOMIC_SIZE, flags, 0, remoteAddress, rkey, compare, swap);
    }

    /** 64-bit fetch-and-add at the remote address; the old value lands at local offset. */
    public void postFetchAndAdd(long wrId, MemoryRegion mr, long offset, long remoteAddress, int rkey, long add,
                                int flags) {
        postSendWr(wrId, OP_FETCH_ADD, mr, offset, ATOMIC_SIZE, flags, 0, remoteAddress, rkey, add, 0L);
    }

    private void postSendWr(long wrId, int opcode, MemoryRegion mr, long offset, int length, int flags, int imm,
                            long remoteAddress, int rkey, long compareAdd, long swap) {
        ensureOpen();
        mr.checkBounds(offset, length);
        if ((flags & SendFlags.INLINE) != 0 && length > maxInlineData) {
            throw new IllegalArgumentException("inline send of " + length + " bytes exceeds this QP's max inline data "
                    + maxInlineData);
        }
        MemorySegment wr = sendWr;
        wr.set(JAVA_LONG, SEND_WR_WR_ID, wrId);
        fillSge(sendSge, mr, offset, length);
        wr.set(ADDRESS, SEND_WR_SG_LIST, length == 0 ? MemorySegment.NULL : sendSge);
        wr.set(JAVA_INT, SEND_WR_NUM_SGE, length == 0 ? 0 : 1);
        wr.set(JAVA_INT, SEND_WR_OPCODE, opcode);
        wr.set(JAVA_INT, SEND_WR_SEND_FLAGS, flags);
        wr.set(JAVA_INT, SEND_WR_IMM_DATA, Integer.reverseBytes(imm));
        if (opcode == OP_CMP_SWP || opcode == OP_FETCH_ADD) {
            wr.set(JAVA_LONG, SEND_WR_ATOMIC_REMOTE_ADDR, remoteAddress);
            wr.set(JAVA_LONG, SEND_WR_ATOMIC_COMPARE_ADD, compareAdd);
            wr.set(JAVA_LONG, SEND_WR_ATOMIC_SWAP, swap);
            wr.set(JAVA_INT, SEND_WR_ATOMIC_RKEY, rkey);
        } else {
            wr.set(JAVA_LONG, SEND_WR_RDMA_REMOTE_ADDR, remoteAddress);
            wr.set(JAVA_INT, SEND_WR_RDMA_RKEY, rkey);
        }
        int rc;
        try {
            rc = (int) postSendOp.invokeExact(handle, wr, badWr);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
        if (rc != 0) throw postFailure("ibv_post_send", rc, config.maxSendWr(), "send");
    }

    /** Posts a receive into [offset, offset+length) of mr (which needs LOCAL_WRITE). */
    public void postReceive(long wrId, MemoryRegion mr, long offset, int length) {
        ensureOpen();
        mr.checkBounds(offset, length);
        recvWr.set(JAVA_LONG, RECV_WR_WR_ID, wrId);
        fillSge(recvSge, mr, offset, length);
        recvWr.set(ADDRESS, RECV_WR_SG_LIST, length == 0 ? MemorySegment.NULL : recvSge);
        recvWr.set(JAVA_INT, RECV_WR_NUM_SGE, length == 0 ? 0 : 1);
        int rc;
        try {
            rc = (int) postRecvOp.invokeExact(handle, recvWr, badWr);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
        if (rc != 0) throw postFailure("ibv_post_recv", rc, config.maxRecvWr(), "receive");
    }

    private static void fillSge(MemorySegment sge, MemoryRegion mr, long offset, int length) {
        sge.set(JAVA_LONG, SGE_ADDR, mr.address() + offset);
        sge.set(JAVA_INT, SGE_LENGTH, length);
        sge.set(JAVA_INT, SGE_LKEY, mr.lkey());
    }

    private VerbsException postFailure(String call, int rc, int depth, String queue) {
        String hint = switch (rc) {
            case Errno.ENOMEM -> "the " + queue + " queue is full (" + depth + " deep): wait for completions before posting more";
            case Errno.EINVAL -> "the QP is in a state that does not accept this work request (" + queryState() + ")";
            default -> null;
        };
        return VerbsException.of(call + " on QP " + qpNum, rc, hint);
    }

    /** The port given at INIT (0 before). */
    public int port() {
        return port;
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
