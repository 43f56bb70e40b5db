package dev.rdmarun.runtime;

import dev.rdmarun.runtime.os.Errno;
import java.util.Objects;
import java.util.Set;

/**
 * ibv_qp. Control path: RESET→INIT→RTR→RTS with the attributes the IB spec requires for each
 * transition, ERR, RESET, the general {@link #modify}, and a state query. Data path: post methods
 * that hand one work request to the provider; they allocate nothing and are for one thread at a
 * time (the dispatcher's).
 */
public abstract non-sealed class QueuePair extends VerbsResource {
    /** Atomics operate on one naturally aligned 64-bit word. */
    public static final int ATOMIC_SIZE = 8;

    private final ProtectionDomain pd;
    private final Context context;
    private final QueuePairConfig config;
    private int port;
    /** The request the positional post methods fill: the data path is one thread's at a time. */
    private final SendWorkRequest scratch = new SendWorkRequest();

    protected QueuePair(ProtectionDomain pd, QueuePairConfig config) {
        super("queue pair", pd, config.sendCq(), config.recvCq());
        this.pd = pd;
        this.context = pd.context();
        this.config = config;
    }

    public abstract int qpNum();

    /** {@code qpn} as perftest's address lines print it (0x0125): the form of the verbs layer's and the engine's sentences. */
    public static String qpnText(int qpn) {
        return String.format(java.util.Locale.ROOT, "%#06x", qpn);
    }

    /** Inline data the provider granted (at least what the config asked). */
    public abstract int maxInlineData();

    public final QueuePairConfig config() {
        return config;
    }

    public final ProtectionDomain protectionDomain() {
        return pd;
    }

    /** The port given at INIT (0 before). */
    public final int port() {
        return port;
    }

    /**
     * This QP's half of the out-of-band exchange, for the given port and local GID index. Its LID
     * is the one a peer reaches this side with through that GID (on soft0 it depends on the GID:
     * use this rather than {@code queryPort(port).lid()}).
     */
    public final QpEndpoint localEndpoint(int port, int gidIndex, int psn) {
        PortAttributes p = context.queryPort(port);
        Gid gid = context.gid(port, gidIndex).gid();
        return new QpEndpoint(context.endpointLid(port, gidIndex), qpNum(), psn, gid, p.activeMtu());
    }

    /** The current state, as ibv_query_qp reports it (the seeds' print_qp_state). */
    public final QpState queryState() {
        ensureOpen();
        return currentState();
    }

    /** RESET→INIT: the port, P_Key index 0, and which remote operations this QP accepts. */
    public final void modifyToInit(int port, Set<Access> remoteAccess) {
        QpAttributes a = new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(port).access(remoteAccess);
        if (config.type() == QpType.UD) a.qkey(0);
        modify(a, QpState.RESET, null);
        this.port = port;
    }

    /** INIT→RTR: connects the receive side to the remote QP. */
    public final void modifyToRtr(RtrAttributes r) {
        QpEndpoint remote = r.remote();
        PortAttributes portAttr = context.queryPort(r.port());
        if (portAttr.linkLayer() == PortAttributes.LinkLayer.ETHERNET && remote.gid().isZero()) {
            throw new VerbsException("the peer's GID is empty: RoCE addresses QPs by GID",
                    "the peer must choose a valid GID index (rdma-run gids)");
        }
        QpAttributes a = new QpAttributes().state(QpState.RTR).pathMtu(r.pathMtu()).destQpn(remote.qpn())
                .rqPsn(remote.psn())
                .addressVector(new AddressVector(remote.lid(), remote.gid(), r.sgidIndex(), r.port(), r.hopLimit(),
                        r.trafficClass(), r.serviceLevel()))
                .fabricKey(r.fabricKey()).connectTimeout(r.connectTimeout());
        if (config.type() == QpType.RC) a.maxDestRdAtomic(r.maxDestRdAtomic()).minRnrTimer(r.minRnrTimer());
        modify(a, QpState.INIT, errno -> "the local GID index " + r.sgidIndex()
                + " may be wrong or of another RoCE version/IP family than the peer's GID " + remote.gid() + "; "
                + Context.describeChoices(context.gidTable(r.port())));
    }

    /** RTR→RTS: enables the send side. */
    public final void modifyToRts(RtsAttributes r) {
        QpAttributes a = new QpAttributes().state(QpState.RTS).sqPsn(r.sqPsn());
        if (config.type() == QpType.RC) {
            a.timeout(r.timeout()).retryCount(r.retryCount()).rnrRetry(r.rnrRetry()).maxRdAtomic(r.maxRdAtomic());
        }
        modify(a, QpState.RTR, null);
    }

    /**
     * What kept this QP's provider from reaching its peer, in one sentence, when it knows more than
     * a completion status says (soft0: its first TCP connection never authenticated, or its port
     * evicted a flood of unauthenticated connections); null otherwise. For failure reports.
     */
    public String connectionTrouble() {
        return null;
    }

    /** Any state→ERR: outstanding work requests complete with WR_FLUSH_ERR. */
    public final void modifyToError() {
        modify(new QpAttributes().state(QpState.ERR), null, null);
    }

    /** Any state→RESET: the queues are emptied without completions. */
    public final void modifyToReset() {
        modify(new QpAttributes().state(QpState.RESET), null, null);
    }

    /**
     * ibv_modify_qp with exactly the attributes set in {@code attributes}. A transition the IB spec
     * does not allow, or one that lacks a required attribute or carries one it does not allow,
     * fails with EINVAL as the kernel's does.
     */
    public final void modify(QpAttributes attributes) {
        modify(attributes, null, null);
    }

    private interface Hint {
        String of(int errno);
    }

    /**
     * Runs the modify; on failure the message names the transition actually attempted and the
     * hint says why it likely failed: a typed transition from the wrong state, or [hint]'s cause.
     */
    private void modify(QpAttributes a, QpState expectedFrom, Hint hint) {
        ensureOpen();
        QpState from = currentState();
        int errno = applyModify(a);
        if (errno == 0) return;
        String why = expectedFrom != null && from != expectedFrom
                ? "a QP goes RESET→INIT→RTR→RTS one step at a time; this one is in " + from
                : hint == null ? null : hint.of(errno);
        throw VerbsException.of("ibv_modify_qp(QP " + qpnText(qpNum()) + ", " + a.describe(from) + ")", errno, why);
    }

    // ---- data path: allocation-free, one thread at a time ----

    /** SEND of [offset, offset+length) of mr; length 0 sends an empty message. */
    public final void postSend(long wrId, MemoryRegion mr, long offset, int length, int flags) {
        postSend(scratch.clear().wrId(wrId).opcode(WrOpcode.SEND).local(mr, offset, length).flags(flags));
    }

    /** SEND with 32-bit immediate data (host order; carried big-endian). */
    public final void postSendWithImm(long wrId, MemoryRegion mr, long offset, int length, int imm, int flags) {
        postSend(scratch.clear().wrId(wrId).opcode(WrOpcode.SEND_WITH_IMM).local(mr, offset, length).imm(imm).flags(flags));
    }

    /** RDMA WRITE of local [offset, offset+length) to remote address/rkey. */
    public final void postWrite(long wrId, MemoryRegion mr, long offset, int length, long remoteAddress, int rkey, int flags) {
        postSend(scratch.clear().wrId(wrId).opcode(WrOpcode.RDMA_WRITE).local(mr, offset, length)
                .remote(remoteAddress, rkey).flags(flags));
    }

    /** RDMA WRITE that also consumes a receive at the peer and delivers the immediate. */
    public final void postWriteWithImm(long wrId, MemoryRegion mr, long offset, int length, long remoteAddress, int rkey,
                                       int imm, int flags) {
        postSend(scratch.clear().wrId(wrId).opcode(WrOpcode.RDMA_WRITE_WITH_IMM).local(mr, offset, length)
                .remote(remoteAddress, rkey).imm(imm).flags(flags));
    }

    /** RDMA READ of remote address/rkey into local [offset, offset+length) (mr needs LOCAL_WRITE). */
    public final void postRead(long wrId, MemoryRegion mr, long offset, int length, long remoteAddress, int rkey, int flags) {
        postSend(scratch.clear().wrId(wrId).opcode(WrOpcode.RDMA_READ).local(mr, offset, length)
                .remote(remoteAddress, rkey).flags(flags));
    }

    /** 64-bit compare-and-swap at the remote address; the old value lands at local offset. */
    public final void postCompareAndSwap(long wrId, MemoryRegion mr, long offset, long remoteAddress, int rkey,
                                         long compare, long swap, int flags) {
        postSend(scratch.clear().wrId(wrId).opcode(WrOpcode.ATOMIC_CMP_AND_SWP).local(mr, offset, ATOMIC_SIZE)
                .remote(remoteAddress, rkey).atomic(compare, swap).flags(flags));
    }

    /** 64-bit fetch-and-add at the remote address; the old value lands at local offset. */
    public final void postFetchAndAdd(long wrId, MemoryRegion mr, long offset, long remoteAddress, int rkey, long add,
                                      int flags) {
        postSend(scratch.clear().wrId(wrId).opcode(WrOpcode.ATOMIC_FETCH_AND_ADD).local(mr, offset, ATOMIC_SIZE)
                .remote(remoteAddress, rkey).atomic(add, 0L).flags(flags));
    }

    /**
     * ibv_post_send of one work request, every operation's one way in: the methods above fill this
     * QP's own request and come here. The provider copies [wr] before this returns, so the caller
     * may refill it at once. Checks the local region's bounds, the inline size (and that only
     * SENDs and WRITEs inline: a READ or atomic has no payload, and rxe refuses the flag on them)
     * and an atomic's 8-byte length before the provider sees anything; the provider refuses a
     * misaligned atomic (EINVAL), and the exception's hint says so.
     */
    public final void postSend(SendWorkRequest wr) {
        Objects.requireNonNull(wr, "postSend needs a work request");
        ensureOpen();
        MemoryRegion mr = wr.mr();
        if (mr == null) throw new IllegalArgumentException("a send work request needs a local memory region (local(mr, offset, length))");
        int length = wr.length();
        mr.checkBounds(wr.offset(), length);
        WrOpcode opcode = wr.opcode();
        boolean atomic = opcode.isAtomic();
        if (atomic && length != ATOMIC_SIZE) {
            throw new IllegalArgumentException("an atomic's local region is the " + ATOMIC_SIZE
                    + "-byte word its old value lands in, not " + length + " bytes");
        }
        if ((wr.flags() & SendFlags.INLINE) != 0) {
            if (atomic || opcode == WrOpcode.RDMA_READ) {
                throw new IllegalArgumentException(opcode + " has no payload to inline: only SENDs and WRITEs take SendFlags.INLINE");
            }
            if (length > maxInlineData()) {
                throw new IllegalArgumentException("inline send of " + length + " bytes exceeds this QP's max inline data "
                        + maxInlineData());
            }
        }
        int rc = postSendRequest(wr);
        if (rc != 0) {
            String invalid = atomic && (wr.remoteAddress() & (ATOMIC_SIZE - 1)) != 0
                    ? "an atomic's remote address must be 8-byte aligned, not 0x" + Long.toHexString(wr.remoteAddress()) : null;
            throw postFailure("ibv_post_send", rc, config.maxSendWr(), "send", length, invalid);
        }
    }

    /** Posts a receive into [offset, offset+length) of mr (which needs LOCAL_WRITE). */
    public final void postReceive(long wrId, MemoryRegion mr, long offset, int length) {
        Objects.requireNonNull(mr, "postReceive needs a memory region to receive into");
        ensureOpen();
        mr.checkBounds(offset, length);
        int rc = postReceiveRequest(wrId, mr, offset, length);
        if (rc != 0) throw postFailure("ibv_post_recv", rc, config.maxRecvWr(), "receive", length, null);
    }

    /** [invalid]: why the request itself is invalid, when the caller can tell (EINVAL then says that). */
    private VerbsException postFailure(String call, int rc, int depth, String queue, int length, String invalid) {
        if (rc == Errno.EINVAL && invalid != null) return VerbsException.of(call + " on QP " + qpnText(qpNum()), rc, invalid);
        if (rc == Errno.EINVAL) {
            // Off the data path: only a failed post asks the port how long a message may be.
            long max = context.queryPort(port == 0 ? 1 : port).maxMessageSize();
            if (length > max) {
                return VerbsException.of(call + " on QP " + qpnText(qpNum()), rc, "a message of " + length
                        + " bytes is longer than the port's max_msg_sz (" + max + " bytes): split it into several work requests");
            }
        }
        String hint = switch (rc) {
            case Errno.ENOMEM -> "the " + queue + " queue is full (" + depth + " deep): wait for completions before posting more";
            case Errno.EINVAL -> "the QP is in a state that does not accept this work request (" + currentState() + ")";
            default -> null;
        };
        return VerbsException.of(call + " on QP " + qpnText(qpNum()), rc, hint);
    }

    // ---- what a provider implements ----

    /** ibv_query_qp's state. */
    protected abstract QpState currentState();

    /** ibv_modify_qp: 0 or an errno (EINVAL for a transition or mask the spec does not allow). */
    protected abstract int applyModify(QpAttributes attributes);

    /**
     * ibv_post_send of [wr] ({@link SendWorkRequest}: at most one SGE, none when its length is 0),
     * its bounds, inline size and atomic length already checked: 0 or an errno. Copies what it
     * needs before it returns (the caller reuses [wr]). Allocation-free.
     */
    protected abstract int postSendRequest(SendWorkRequest wr);

    /** ibv_post_recv of one receive into [offset, offset+length) of mr: 0 or an errno. Allocation-free. */
    protected abstract int postReceiveRequest(long wrId, MemoryRegion mr, long offset, int length);
}
