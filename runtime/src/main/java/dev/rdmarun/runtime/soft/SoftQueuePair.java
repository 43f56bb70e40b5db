package dev.rdmarun.runtime.soft;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.AddressVector;
import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.Mtu;
import dev.rdmarun.runtime.QpAttr;
import dev.rdmarun.runtime.QpAttributes;
import dev.rdmarun.runtime.QpState;
import dev.rdmarun.runtime.QpType;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WcOpcode;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WrOpcode;
import dev.rdmarun.runtime.os.Errno;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * An RC queue pair of soft0, with the behaviour the IB spec gives RC (and rxe's choices where the
 * spec leaves one):
 *
 * <ul>
 *   <li>the state machine of {@link QpTransitions}; a wrong modify is EINVAL;</li>
 *   <li>requester: work requests go out in order, one PSN each; ACKs complete them in order (only
 *       signaled ones, and errors, make completions), and as RC's ACKs are cumulative, an answer
 *       to a request also acknowledges the SENDs and WRITEs before it; an RNR NAK rewinds to that request and
 *       retries after the responder's min_rnr_timer, rnr_retry times (7: forever), then
 *       RNR_RETRY_EXC_ERR; no answer within the ACK timeout retries retry_cnt times, then
 *       RETRY_EXC_ERR; a NAK ends the QP (REM_ACCESS_ERR, REM_INV_REQ_ERR, REM_OP_ERR);</li>
 *   <li>responder: SEND, SEND_WITH_IMM and WRITE_WITH_IMM consume the oldest posted receive (none:
 *       RNR NAK); WRITE, READ and atomics check the QP's access flags (else invalid request), and
 *       the rkey's region: same PD, access flag, bounds (else remote access error); a message
 *       longer than the receive is an invalid request; atomics need 8-byte alignment; such errors
 *       put the responder in ERR too (class C);</li>
 *   <li>responder over TCP: a SEND or WRITE whose successor for this QP has already arrived is
 *       acknowledged with that successor's answer (at most {@value #ACK_EVERY} requests and
 *       {@value #ACK_EVERY_BYTES} bytes per ACK; the last of a burst is answered at once);</li>
 *   <li>ERR flushes every outstanding work request with WR_FLUSH_ERR; RESET empties the queues.</li>
 * </ul>
 *
 * <p>A QP accepts requests and responses only from the link bound to its connected peer: in
 * memory, packets of this JVM (none from TCP); over TCP, packets from a connection that proved
 * the QP's {@link FabricKey} (required at RTR then); and only with the peer's QPN and LID.
 * Messages longer than max_msg_sz ({@value SoftContext#MAX_MESSAGE} bytes) fail at post with EINVAL.
 *
 * <p>Threads: posting (the application's dispatcher), modify (any), and the engine (packets,
 * doorbells, timers) all take this QP's lock; completions go to the CQs, which lock themselves.
 */
final class SoftQueuePair extends QueuePair {
    private static final int PSN_MASK = 0xffffff;
    private static final int INFINITE_RNR_RETRY = 7;
    /**
     * At most this many requests, and this many payload bytes, share one ACK: a burst still moves
     * the requester's window along, and its ACK timeout (which counts from its last completion)
     * sees at most that much more data between two ACKs than with an ACK per request.
     */
    static final int ACK_EVERY = 16;
    static final int ACK_EVERY_BYTES = 1 << 18;
    /** The connect timeout of a QP whose RTR named none: the DSL's default scenario timeout. */
    static final long DEFAULT_CONNECT_TIMEOUT_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(30);

    private final SoftContext context;
    private final SoftProtectionDomain pd;
    private final SoftCompletionQueue sendCq;
    private final SoftCompletionQueue recvCq;
    private final int qpn;
    private final int maxInline;
    private final boolean signalAll;
    /** Set while the QP waits in the engine's doorbell queue. */
    final AtomicBoolean scheduled = new AtomicBoolean();
    private final Object lock = new Object();

    // ---- state and attributes (guarded by lock) ----
    private QpState state = QpState.RESET;
    private boolean destroyed;
    private Set<Access> access = Set.of();
    private Link link;
    private AddressVector av;
    /** The key this QP registered with its context (its peer is over TCP), or null. */
    private FabricKey fabricKey;
    /** The key a TCP connection must have proved for its packets to reach this QP; null when the peer is not over TCP. */
    private volatile FabricKey tcpKey;
    /** The LID this QP's packets carry, and the one it expects on its peer's. */
    private int srcLid;
    private int peerLid;
    private int destQpn;
    private int expectedPsn;
    private int minRnrTimer;
    private int maxDestRdAtomic;
    private int nextPsn;
    private long ackTimeoutNanos;
    /** How long ACK timeouts do not count as retries while the first TCP connection to the peer is made. */
    private long connectTimeoutNanos = DEFAULT_CONNECT_TIMEOUT_NANOS;
    private int retryCount;
    private int rnrRetry;
    private int maxRdAtomic;

    // ---- send queue: a ring of preallocated WQEs; posted < sqTail, sent < sendNext, done < ackNext ----
    private final SendWqe[] sq;
    private long sqTail;
    private long sendNext;
    private long ackNext;
    private int readAtomicInFlight;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment inlineData;

    // ---- receive queue ----
    private final RecvWqe[] rq;
    private long rqHead;
    private long rqTail;

    // ---- requester timers (engine thread) ----
    private long rnrDeadline;
    private long ackDeadline;
    private int rnrLeft;
    private int retriesLeft;
    /** When this QP stops waiting for its first TCP connection (0: it has not waited yet). */
    private long connectDeadline;

    // ---- responder: the last atomic, replayed for a duplicate of it ----
    private int lastAtomicPsn = -1;
    private long lastAtomicOriginal;

    // ---- responder: an ACK left to a later one (the next request had already arrived) ----
    private int deferredAcks;
    private long deferredBytes;
    private int deferredPsn;
    /** The link the deferred ACK goes back on; null when no ACK is deferred. */
    private Link deferredLink;

    private static final class SendWqe {
        long wrId;
        WrOpcode opcode;
        boolean signaled;
        boolean inline;
        long localAddress;
        int length;
        int lkey;
        long remoteAddress;
        int rkey;
        int imm;
        long compareAdd;
        long swap;
        int psn;
    }

    private static final class RecvWqe {
        long wrId;
        long address;
        int length;
        int lkey;
    }

    private SoftQueuePair(SoftProtectionDomain pd, QueuePairConfig config, int maxInline) {
        super(pd, config);
        this.context = pd.context;
        this.pd = pd;
        this.sendCq = (SoftCompletionQueue) config.sendCq();
        this.recvCq = (SoftCompletionQueue) config.recvCq();
        this.maxInline = maxInline;
        this.signalAll = config.signalAll();
        this.sq = new SendWqe[config.maxSendWr()];
        for (int i = 0; i < sq.length; i++) sq[i] = new SendWqe();
        this.rq = new RecvWqe[config.maxRecvWr()];
        for (int i = 0; i < rq.length; i++) rq[i] = new RecvWqe();
        this.inlineData = arena.allocate(Math.max(1L, (long) sq.length * maxInline));
        int n = context.addQp(this);
        if (n < 0) {
            arena.close();
            throw VerbsException.of("ibv_create_qp(RC)", Errno.ENOMEM, "soft0 allows " + SoftContext.MAX_QP + " QPs");
        }
        this.qpn = n;
    }

    static SoftQueuePair create(SoftProtectionDomain pd, QueuePairConfig c) {
        String call = "ibv_create_qp(" + c.type() + ")";
        if (c.type() != QpType.RC) {
            throw VerbsException.of(call, Errno.EINVAL, "soft0 emulates RC queue pairs only");
        }
        if (c.maxSendWr() > SoftContext.MAX_QP_WR || c.maxRecvWr() > SoftContext.MAX_QP_WR
                || c.maxSendSge() > 1 || c.maxRecvSge() > 1 || c.maxInlineData() > SoftContext.MAX_INLINE) {
            throw VerbsException.of(call, Errno.EINVAL, "soft0 allows max_qp_wr=" + SoftContext.MAX_QP_WR
                    + ", max_sge=1, max_inline_data=" + SoftContext.MAX_INLINE);
        }
        return new SoftQueuePair(pd, c, c.maxInlineData());
    }

    @Override
    public int qpNum() {
        return qpn;
    }

    @Override
    public int maxInlineData() {
        return maxInline;
    }

    @Override
    protected QpState currentState() {
        synchronized (lock) {
            return state;
        }
    }

    // ---- control path ----

    @Override
    protected int applyModify(QpAttributes a) {
        synchronized (lock) {
            if (destroyed) return Errno.EINVAL;
            QpState from = state;
            if (a.has(QpAttr.CUR_STATE) && a.currentState() != from) return Errno.EINVAL;
            QpState to = a.has(QpAttr.STATE) ? a.state() : from;
            QpTransitions.Rule rule = QpTransitions.rc(from, to);
            if (rule == null || !rule.allows(a.mask())) return Errno.EINVAL;
            int invalid = checkValues(a);
            if (invalid != 0) return invalid;
            Link resolved = null;
            int resolvedSrcLid = 0;
            if (a.has(QpAttr.AV)) {
                AddressVector v = a.addressVector();
                String call = "ibv_modify_qp(QP " + qpn + ", " + from + "→" + to + ") failed";
                // The key counts as used before the link is resolved, so its connection is not swept meanwhile.
                FabricKey key = a.fabricKey();
                if (key != null) context.keyUsed(key);
                try {
                    resolved = SoftFabric.linkTo(context, v.dgid(), v.dlid(), key, call);
                    resolvedSrcLid = resolved instanceof LocalLink ? context.memoryLid()
                            : context.endpointLid(SoftContext.PORT, v.sgidIndex());
                } catch (RuntimeException e) {
                    if (key != null) context.keyReleased(key);
                    if (e instanceof VerbsException v2) throw v2;
                    return Errno.EINVAL;
                }
                if (key != null && resolved instanceof LocalLink) context.keyReleased(key);
            }
            // Valid: apply.
            if (a.has(QpAttr.ACCESS_FLAGS)) access = a.access().isEmpty() ? Set.of() : EnumSet.copyOf(a.access());
            if (a.has(QpAttr.AV)) {
                av = a.addressVector();
                link = resolved;
                srcLid = resolvedSrcLid;
                peerLid = resolved instanceof LocalLink l ? l.target().memoryLid() : av.dlid();
                FabricKey key = resolved instanceof LocalLink ? null : a.fabricKey();
                releaseKey();
                fabricKey = key;
                tcpKey = key;
                connectDeadline = 0;
                connectTimeoutNanos = a.connectTimeout() == null ? DEFAULT_CONNECT_TIMEOUT_NANOS
                        : Math.max(0, a.connectTimeout().toNanos());
            }
            if (a.has(QpAttr.DEST_QPN)) destQpn = a.destQpn();
            if (a.has(QpAttr.RQ_PSN)) expectedPsn = a.rqPsn() & PSN_MASK;
            if (a.has(QpAttr.MIN_RNR_TIMER)) minRnrTimer = a.minRnrTimer();
            if (a.has(QpAttr.MAX_DEST_RD_ATOMIC)) maxDestRdAtomic = a.maxDestRdAtomic();
            if (a.has(QpAttr.SQ_PSN)) nextPsn = a.sqPsn() & PSN_MASK;
            if (a.has(QpAttr.TIMEOUT)) ackTimeoutNanos = a.timeout() == 0 ? 0 : 4096L << a.timeout();
            if (a.has(QpAttr.RETRY_CNT)) retryCount = retriesLeft = a.retryCount();
            if (a.has(QpAttr.RNR_RETRY)) rnrRetry = rnrLeft = a.rnrRetry();
            if (a.has(QpAttr.MAX_QP_RD_ATOMIC)) maxRdAtomic = a.maxRdAtomic();
            switch (to) {
                case ERR -> moveToError();
                case RESET -> reset();
                default -> state = to;
            }
            if (to == QpState.RTS) context.engine.ring(this);
            return 0;
        }
    }

    /** The values the kernel refuses: ports, P_Key index, GID index, MTU and RD atomic depths out of range. */
    private int checkValues(QpAttributes a) {
        if (a.has(QpAttr.PORT) && a.port() != SoftContext.PORT) return Errno.EINVAL;
        if (a.has(QpAttr.PKEY_INDEX) && a.pkeyIndex() != 0) return Errno.EINVAL;
        if (a.has(QpAttr.AV)) {
            AddressVector v = a.addressVector();
            if (v.port() != SoftContext.PORT) return Errno.EINVAL;
            boolean known = false;
            for (var g : context.gidTable(SoftContext.PORT)) known |= g.index() == v.sgidIndex();
            if (!known) return Errno.ENODATA;
            if (!v.dgid().isIpv4Mapped()) return Errno.EINVAL;
        }
        if (a.has(QpAttr.PATH_MTU) && a.pathMtu().code() > Mtu.MTU_4096.code()) return Errno.EINVAL;
        if (a.has(QpAttr.MAX_DEST_RD_ATOMIC) && a.maxDestRdAtomic() > SoftContext.MAX_RD_ATOMIC) return Errno.EINVAL;
        if (a.has(QpAttr.MAX_QP_RD_ATOMIC) && a.maxRdAtomic() > SoftContext.MAX_RD_ATOMIC) return Errno.EINVAL;
        if (a.has(QpAttr.DEST_QPN) && (a.destQpn() & ~PSN_MASK) != 0) return Errno.EINVAL;
        return 0;
    }

    /** Back to RESET: the queues are emptied without completions, the connection is forgotten. */
    private void reset() {
        state = QpState.RESET;
        sqTail = sendNext = ackNext = 0;
        rqHead = rqTail = 0;
        readAtomicInFlight = 0;
        rnrDeadline = ackDeadline = 0;
        link = null;
        av = null;
        releaseKey();
        access = Set.of();
        lastAtomicPsn = -1;
        deferredAcks = 0;
        deferredBytes = 0;
        deferredLink = null;
    }

    private void releaseKey() {
        if (fabricKey != null) context.keyReleased(fabricKey);
        fabricKey = null;
        tcpKey = null;
    }

    /**
     * Reader threads: whether a packet from a TCP connection that proved key may reach this QP
     * (only when its peer is over TCP with that key). Allocation-free; the engine checks again.
     */
    boolean acceptsOver(FabricKey key) {
        FabricKey k = tcpKey;
        return k != null && key != null && k.equals(key);
    }

    /** Whether p came over the link bound to this QP's peer (lock held). */
    private boolean fromPeer(Packet p) {
        if (link instanceof LocalLink) return p.replyLink == null;
        return p.replyLink instanceof TcpTransport.Connection c && acceptsOver(c.key());
    }

    @Override
    protected void destroy() {
        synchronized (lock) {
            destroyed = true;
            releaseKey();
            context.removeQp(qpn, this);
        }
        arena.close();
    }

    // ---- data path (application thread) ----

    @Override
    protected int postSendRequest(long wrId, WrOpcode opcode, MemoryRegion mr, long offset, int length, int flags,
                                  int imm, long remoteAddress, int rkey, long compareAdd, long swap) {
        synchronized (lock) {
            if (destroyed || state == QpState.RESET || state == QpState.INIT || state == QpState.RTR) return Errno.EINVAL;
            if (opcode.isAtomic() && (remoteAddress & 7) != 0) return Errno.EINVAL; // as rxe's provider checks at post
            if (length > SoftContext.MAX_MESSAGE) return Errno.EINVAL; // max_msg_sz, for SEND, WRITE and READ alike
            if (sqTail - ackNext >= sq.length) return Errno.ENOMEM;
            int slot = (int) (sqTail % sq.length);
            SendWqe w = sq[slot];
            w.wrId = wrId;
            w.opcode = opcode;
            w.signaled = signalAll || (flags & SendFlags.SIGNALED) != 0;
            w.localAddress = mr.address() + offset;
            w.length = length;
            w.lkey = mr.lkey();
            w.remoteAddress = remoteAddress;
            w.rkey = rkey;
            w.imm = imm;
            w.compareAdd = compareAdd;
            w.swap = swap;
            // Inline data is copied now: the caller may reuse its buffer as soon as the post returns.
            w.inline = (flags & SendFlags.INLINE) != 0 && length > 0 && carriesPayload(opcode);
            if (w.inline) MemorySegment.copy(mr.segment(), offset, inlineData, (long) slot * maxInline, length);
            sqTail++;
            if (state == QpState.ERR) {
                flushSendQueue();
                return 0;
            }
        }
        context.engine.ring(this);
        return 0;
    }

    @Override
    protected int postReceiveRequest(long wrId, MemoryRegion mr, long offset, int length) {
        synchronized (lock) {
            if (destroyed || state == QpState.RESET) return Errno.EINVAL;
            if (length > SoftContext.MAX_MESSAGE) return Errno.EINVAL;
            if (rqTail - rqHead >= rq.length) return Errno.ENOMEM;
            RecvWqe r = rq[(int) (rqTail % rq.length)];
            r.wrId = wrId;
            r.address = mr.address() + offset;
            r.length = length;
            r.lkey = mr.lkey();
            rqTail++;
            if (state == QpState.ERR) flushReceiveQueue();
            return 0;
        }
    }

    private static boolean carriesPayload(WrOpcode op) {
        return op == WrOpcode.SEND || op == WrOpcode.SEND_WITH_IMM || op == WrOpcode.RDMA_WRITE
                || op == WrOpcode.RDMA_WRITE_WITH_IMM;
    }

    // ---- requester (engine thread) ----

    /** Sends the posted work requests the QP may send now. */
    void transmit() {
        synchronized (lock) {
            if (destroyed || state != QpState.RTS || rnrDeadline != 0) return;
            while (sendNext < sqTail) {
                SendWqe w = sq[(int) (sendNext % sq.length)];
                boolean readOrAtomic = w.opcode == WrOpcode.RDMA_READ || w.opcode.isAtomic();
                if (readOrAtomic && readAtomicInFlight >= Math.max(1, maxRdAtomic)) return;
                Packet p = context.pool.acquire();
                p.kind = Packet.REQUEST;
                p.opcode = w.opcode.code();
                p.dstQpn = destQpn;
                p.srcQpn = qpn;
                p.srcLid = srcLid;
                p.psn = w.psn = nextPsn;
                p.remoteAddress = w.remoteAddress;
                p.rkey = w.rkey;
                p.imm = w.imm;
                p.compareAdd = w.compareAdd;
                p.swap = w.swap;
                p.readLength = w.opcode == WrOpcode.RDMA_READ ? w.length : 0;
                WcStatus local = loadPayload(w, p);
                if (local != null) {
                    p.release();
                    completeWithError(w, local);
                    return;
                }
                nextPsn = (nextPsn + 1) & PSN_MASK;
                sendNext++;
                if (readOrAtomic) readAtomicInFlight++;
                if (ackDeadline == 0 && ackTimeoutNanos > 0) {
                    ackDeadline = System.nanoTime() + ackTimeoutNanos;
                    context.engine.timerStarted(this, ackDeadline);
                }
                context.engine.send(link, p);
            }
        }
    }

    /**
     * Checks the local side of a work request as an RNIC does when it fetches it (lkey, PD,
     * bounds, and LOCAL_WRITE where a READ or atomic result lands) and copies a payload into the
     * packet. Returns the error status, or null.
     */
    private WcStatus loadPayload(SendWqe w, Packet p) {
        p.length = 0;
        if (w.inline) {
            p.copyFrom(inlineData, (long) (int) (sendNext % sq.length) * maxInline, w.length);
            return null;
        }
        boolean writesLocal = w.opcode == WrOpcode.RDMA_READ || w.opcode.isAtomic();
        if (w.length == 0) return null;
        SoftMemoryRegion mr = context.mr(w.lkey);
        if (mr == null || mr.pd() != pd || !mr.contains(w.localAddress, w.length)
                || writesLocal && !mr.allows(Access.LOCAL_WRITE)) {
            return WcStatus.LOC_PROT_ERR;
        }
        if (carriesPayload(w.opcode)) p.copyFrom(mr.segment(), w.localAddress - mr.address(), w.length);
        return null;
    }

    /** Engine thread: an ACK, NAK or response for this QP as requester. */
    void onResponse(Packet p) {
        synchronized (lock) {
            try {
                if (destroyed || state != QpState.RTS || ackNext == sendNext) return;
                if (!fromPeer(p) || p.srcQpn != destQpn || p.srcLid != peerLid) return; // not our peer
                SendWqe w = sq[(int) (ackNext % sq.length)];
                if (p.psn != w.psn) {
                    // A response to a later request acknowledges the SENDs and WRITEs before it
                    // (a responder ACKs a burst once); else it is stale, from before a rewind.
                    if (!impliedAcks(psnDiff(p.psn, w.psn))) return;
                    w = sq[(int) (ackNext % sq.length)];
                }
                switch (p.kind) {
                    case Packet.ACK -> {
                        if (w.opcode == WrOpcode.RDMA_READ || w.opcode.isAtomic()) completeWithError(w, WcStatus.BAD_RESP_ERR);
                        else completed(w, 0);
                    }
                    case Packet.READ_RESPONSE -> {
                        if (w.opcode != WrOpcode.RDMA_READ || p.length != w.length) {
                            completeWithError(w, WcStatus.BAD_RESP_ERR);
                        } else if (storeLocal(w, p, 0)) {
                            completed(w, w.length);
                        }
                    }
                    case Packet.ATOMIC_RESPONSE -> {
                        if (!w.opcode.isAtomic()) completeWithError(w, WcStatus.BAD_RESP_ERR);
                        else if (storeLocal(w, null, p.compareAdd)) completed(w, QueuePair.ATOMIC_SIZE);
                    }
                    case Packet.NAK -> nak(w, p);
                    default -> completeWithError(w, WcStatus.BAD_RESP_ERR);
                }
            } finally {
                p.release();
            }
        }
        transmit();
    }

    /**
     * The n oldest outstanding requests succeeded, as a response to the one after them says: they
     * complete, if they are all SENDs and WRITEs (whose only answer is an ACK). False, with nothing
     * completed, when n is not inside the requests sent, or a READ or atomic is among them (its
     * own response never came: the packet is stale).
     */
    private boolean impliedAcks(int n) {
        if (n <= 0 || n >= sendNext - ackNext) return false;
        for (int i = 0; i < n; i++) {
            WrOpcode op = sq[(int) ((ackNext + i) % sq.length)].opcode;
            if (op == WrOpcode.RDMA_READ || op.isAtomic()) return false;
        }
        for (int i = 0; i < n; i++) completed(sq[(int) (ackNext % sq.length)], 0);
        return true;
    }

    /** Writes READ data or an atomic's original value into the local region; false after an error completion. */
    private boolean storeLocal(SendWqe w, Packet read, long atomicOriginal) {
        SoftMemoryRegion mr = context.mr(w.lkey);
        if (mr == null || mr.pd() != pd || !mr.contains(w.localAddress, w.length) || !mr.allows(Access.LOCAL_WRITE)) {
            completeWithError(w, WcStatus.LOC_PROT_ERR);
            return false;
        }
        long offset = w.localAddress - mr.address();
        if (read != null) read.copyTo(mr.segment(), offset);
        else mr.segment().set(JAVA_LONG_UNALIGNED, offset, atomicOriginal);
        return true;
    }

    private void nak(SendWqe w, Packet p) {
        switch (p.opcode) {
            case Packet.NAK_RNR -> {
                if (rnrRetry != INFINITE_RNR_RETRY && rnrLeft-- <= 0) {
                    completeWithError(w, WcStatus.RNR_RETRY_EXC_ERR);
                    return;
                }
                rewind();
                rnrDeadline = System.nanoTime() + rnrDelayNanos(p.rnrTimer);
                context.engine.timerStarted(this, rnrDeadline);
            }
            case Packet.NAK_REMOTE_ACCESS -> completeWithError(w, WcStatus.REM_ACCESS_ERR);
            case Packet.NAK_REMOTE_OPERATIONAL -> completeWithError(w, WcStatus.REM_OP_ERR);
            default -> completeWithError(w, WcStatus.REM_INV_REQ_ERR);
        }
    }

    /** The oldest outstanding request succeeded. */
    private void completed(SendWqe w, int byteLength) {
        if (w.signaled) {
            // rxe flags the requester's completion of a *_WITH_IMM request as WITH_IMM (immediate 0): so does soft0.
            sendCq.push(w.wrId, WcStatus.SUCCESS, w.opcode.completionOpcode(), byteLength, qpn, 0,
                    w.opcode.carriesImmediate(), 0, false);
        }
        if (w.opcode == WrOpcode.RDMA_READ || w.opcode.isAtomic()) readAtomicInFlight--;
        ackNext++;
        rnrLeft = rnrRetry;
        retriesLeft = retryCount;
        ackDeadline = ackNext < sendNext && ackTimeoutNanos > 0 ? System.nanoTime() + ackTimeoutNanos : 0;
    }

    /** Sends again from the oldest unacknowledged request (go-back-N). */
    private void rewind() {
        sendNext = ackNext;
        readAtomicInFlight = 0;
        ackDeadline = 0;
        if (ackNext < sqTail) nextPsn = sq[(int) (ackNext % sq.length)].psn;
    }

    /** Engine thread: fires a due RNR back-off or ACK timeout; returns the next deadline, or 0 for none. */
    long runTimer(long now) {
        boolean send = false;
        synchronized (lock) {
            if (destroyed || state != QpState.RTS) {
                rnrDeadline = ackDeadline = 0;
                return 0;
            }
            if (rnrDeadline != 0 && now - rnrDeadline >= 0) {
                rnrDeadline = 0;
                send = true;
            }
            if (ackDeadline != 0 && now - ackDeadline >= 0) {
                if (waitsForConnection(now)) {
                    // Its requests are still queued on the connection: nothing was lost, nothing to resend.
                    ackDeadline = now + ackTimeoutNanos;
                } else if (retriesLeft-- > 0) {
                    rewind();
                    send = true;
                } else {
                    completeWithError(sq[(int) (ackNext % sq.length)], WcStatus.RETRY_EXC_ERR);
                }
            }
        }
        if (send) transmit();
        synchronized (lock) {
            if (rnrDeadline == 0) return ackDeadline;
            return ackDeadline == 0 || rnrDeadline - ackDeadline < 0 ? rnrDeadline : ackDeadline;
        }
    }

    /**
     * Whether an ACK timeout is no retry: the first TCP connection to the peer is still being made
     * (its listener may be slow to answer, or busy with a flood) and the connect timeout has not
     * passed since the first such timeout (lock held).
     */
    private boolean waitsForConnection(long now) {
        if (!(link instanceof TcpTransport.Connection c) || !c.connecting()) return false;
        if (connectDeadline == 0) connectDeadline = now + connectTimeoutNanos;
        return now - connectDeadline < 0;
    }

    @Override
    public String connectionTrouble() {
        Link l;
        long timeout;
        synchronized (lock) {
            l = link;
            timeout = connectTimeoutNanos;
        }
        String outbound = l instanceof TcpTransport.Connection c ? c.trouble(timeout) : null;
        long evicted = context.transport.evictedConnections();
        String inbound = evicted == 0 ? null : "this side's soft0 port evicted " + evicted
                + " unauthenticated connections (a flood?)";
        if (outbound == null) return inbound;
        return inbound == null ? outbound : outbound + "; " + inbound;
    }

    /** IB spec encoding of min_rnr_timer in microseconds (0 = 655.36 ms, 1 = 0.01 ms ... 31 = 491.52 ms). */
    private static final long[] RNR_DELAY_MICROS = {655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
            1_280, 1_920, 2_560, 3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
            163_840, 245_760, 327_680, 491_520};

    static long rnrDelayNanos(int timer) {
        return RNR_DELAY_MICROS[timer & 31] * 1000L;
    }

    // ---- responder (engine thread) ----

    /** Engine thread: a request for this QP as responder. Consumes p (sends it back as the response, or drops it). */
    void onRequest(Packet p) {
        synchronized (lock) {
            if (destroyed || state != QpState.RTR && state != QpState.RTS
                    || !fromPeer(p) || p.srcQpn != destQpn || p.srcLid != peerLid) {
                p.release(); // not for a connected QP: a real RNIC drops it silently too
                sendDeferredAck();
                return;
            }
            WrOpcode op = WrOpcode.of(p.opcode);
            int diff = psnDiff(p.psn, expectedPsn);
            if (diff > 0) {
                p.release(); // out of sequence (after an RNR NAK): the requester rewinds to the expected PSN
                sendDeferredAck();
                return;
            }
            if (diff < 0) {
                duplicate(p, op);
                sendDeferredAck(); // the duplicate's answer is for an older PSN: it acknowledges none of the deferred
                return;
            }
            Access needed = switch (op) {
                case RDMA_WRITE, RDMA_WRITE_WITH_IMM -> Access.REMOTE_WRITE;
                case RDMA_READ -> Access.REMOTE_READ;
                case ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD -> Access.REMOTE_ATOMIC;
                default -> null;
            };
            if (needed != null && !access.contains(needed)
                    || (op == WrOpcode.RDMA_READ || op.isAtomic()) && maxDestRdAtomic == 0) {
                fail(p, Packet.NAK_INVALID_REQUEST, null, null);
                return;
            }
            RecvWqe r = null;
            if (op.consumesReceive()) {
                if (rqHead == rqTail) {
                    p.kind = Packet.NAK;
                    p.opcode = Packet.NAK_RNR;
                    p.rnrTimer = minRnrTimer;
                    p.length = 0; // the answer reuses the request's packet: not its payload
                    respond(p);
                    return;
                }
                r = rq[(int) (rqHead % rq.length)];
            }
            switch (op) {
                case SEND, SEND_WITH_IMM -> receiveSend(p, op, r);
                case RDMA_WRITE, RDMA_WRITE_WITH_IMM -> receiveWrite(p, op, r);
                case RDMA_READ -> receiveRead(p);
                case ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD -> receiveAtomic(p, op);
            }
        }
    }

    private void receiveSend(Packet p, WrOpcode op, RecvWqe r) {
        if (p.length > 0) {
            // A message that does not fit the receive, or a receive whose region the data cannot go
            // to: the receive is malformed for this message. The IB spec would say LOC_LEN_ERR for
            // the first; rxe (and so soft0) reports both as a class A error: REM_OP_ERR to the
            // requester, LOC_QP_OP_ERR on the receive.
            SoftMemoryRegion mr = context.mr(r.lkey);
            if (p.length > r.length || mr == null || mr.pd() != pd || !mr.contains(r.address, p.length)
                    || !mr.allows(Access.LOCAL_WRITE)) {
                fail(p, Packet.NAK_REMOTE_OPERATIONAL, r, WcStatus.LOC_QP_OP_ERR);
                return;
            }
            p.copyTo(mr.segment(), r.address - mr.address());
        }
        rqHead++;
        recvCq.push(r.wrId, WcStatus.SUCCESS, WcOpcode.RECV, p.length, qpn, p.srcQpn,
                op == WrOpcode.SEND_WITH_IMM, p.imm, false);
        ack(p);
    }

    private void receiveWrite(Packet p, WrOpcode op, RecvWqe r) {
        if (p.length > 0) {
            SoftMemoryRegion mr = remoteRegion(p.rkey, p.remoteAddress, p.length, Access.REMOTE_WRITE);
            if (mr == null) {
                fail(p, Packet.NAK_REMOTE_ACCESS, r, WcStatus.REM_ACCESS_ERR);
                return;
            }
            p.copyTo(mr.segment(), p.remoteAddress - mr.address());
        }
        if (r != null) {
            rqHead++;
            recvCq.push(r.wrId, WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM, p.length, qpn, p.srcQpn, true, p.imm, false);
        }
        ack(p);
    }

    private void receiveRead(Packet p) {
        int n = p.readLength;
        if (n > 0) {
            SoftMemoryRegion mr = remoteRegion(p.rkey, p.remoteAddress, n, Access.REMOTE_READ);
            if (mr == null) {
                fail(p, Packet.NAK_REMOTE_ACCESS, null, null);
                return;
            }
            p.copyFrom(mr.segment(), p.remoteAddress - mr.address(), n);
        } else {
            p.length = 0;
        }
        expectedPsn = (expectedPsn + 1) & PSN_MASK;
        p.kind = Packet.READ_RESPONSE;
        respond(p);
    }

    /** (segment, offset) → the aligned 64-bit word, with the atomic access modes. */
    private static final VarHandle LONGS = ValueLayout.JAVA_LONG.varHandle();

    private void receiveAtomic(Packet p, WrOpcode op) {
        SoftMemoryRegion mr = remoteRegion(p.rkey, p.remoteAddress, QueuePair.ATOMIC_SIZE, Access.REMOTE_ATOMIC);
        if (mr == null) {
            fail(p, Packet.NAK_REMOTE_ACCESS, null, null);
            return;
        }
        if ((p.remoteAddress & 7) != 0) {
            fail(p, Packet.NAK_INVALID_REQUEST, null, null);
            return;
        }
        MemorySegment memory = mr.segment();
        long offset = p.remoteAddress - mr.address();
        // Atomic with respect to every other access through VarHandles (other QPs, other contexts of this JVM).
        long original;
        if (op == WrOpcode.ATOMIC_FETCH_AND_ADD) {
            original = (long) LONGS.getAndAdd(memory, offset, p.compareAdd);
        } else {
            original = (long) LONGS.compareAndExchange(memory, offset, p.compareAdd, p.swap);
        }
        lastAtomicPsn = p.psn;
        lastAtomicOriginal = original;
        expectedPsn = (expectedPsn + 1) & PSN_MASK;
        p.kind = Packet.ATOMIC_RESPONSE;
        p.compareAdd = original;
        p.length = 0;
        respond(p);
    }

    /** The region an rkey names, if it may be accessed this way: same PD, access flag granted, inside its bounds. */
    private SoftMemoryRegion remoteRegion(int rkey, long address, long length, Access needed) {
        SoftMemoryRegion mr = context.mr(rkey);
        if (mr == null || mr.pd() != pd || !mr.allows(needed) || !mr.contains(address, length)) return null;
        return mr;
    }

    /** A request seen before (the requester retried): acknowledge or answer it again, without executing it twice. */
    private void duplicate(Packet p, WrOpcode op) {
        if (op == WrOpcode.RDMA_READ) {
            int n = p.readLength;
            SoftMemoryRegion mr = n > 0 ? remoteRegion(p.rkey, p.remoteAddress, n, Access.REMOTE_READ) : null;
            if (n > 0 && mr == null) {
                p.release();
                return;
            }
            if (n > 0) p.copyFrom(mr.segment(), p.remoteAddress - mr.address(), n);
            else p.length = 0;
            p.kind = Packet.READ_RESPONSE;
        } else if (op.isAtomic()) {
            if (p.psn != lastAtomicPsn) {
                p.release();
                return;
            }
            p.kind = Packet.ATOMIC_RESPONSE;
            p.compareAdd = lastAtomicOriginal;
            p.length = 0;
        } else {
            p.kind = Packet.ACK;
            p.length = 0;
        }
        respond(p);
    }

    /**
     * Acknowledges a request that succeeded. When the next request for this QP had already arrived
     * (TCP), the ACK is left to the answer to that one, which acknowledges both (RC's ACKs are
     * cumulative): a burst costs one ACK per {@value #ACK_EVERY} requests, and its last one, whose
     * successor is not there, is always answered at once.
     */
    private void ack(Packet p) {
        expectedPsn = (expectedPsn + 1) & PSN_MASK;
        if (p.followed && p.replyLink != null && deferredAcks < ACK_EVERY - 1
                && deferredBytes + p.length < ACK_EVERY_BYTES) {
            deferredAcks++;
            deferredBytes += p.length;
            deferredPsn = p.psn;
            deferredLink = p.replyLink;
            p.release();
            return;
        }
        p.kind = Packet.ACK;
        p.length = 0;
        respond(p);
    }

    /** Sends the ACK left for a later request now (that request brought no answer that covers it). */
    private void sendDeferredAck() {
        Link back = deferredLink;
        if (back == null) return;
        deferredLink = null;
        deferredAcks = 0;
        deferredBytes = 0;
        if (destroyed || state != QpState.RTR && state != QpState.RTS) return;
        Packet a = context.pool.acquire();
        a.kind = Packet.ACK;
        a.psn = deferredPsn;
        a.srcQpn = qpn;
        a.dstQpn = destQpn;
        a.srcLid = srcLid;
        context.engine.send(back, a);
    }

    /**
     * A class A/C error: NAK the request, complete the receive it consumed (if any) with the
     * responder's status, and put this QP in ERR, as rxe does.
     */
    private void fail(Packet p, int syndrome, RecvWqe consumed, WcStatus receiveStatus) {
        p.kind = Packet.NAK;
        p.opcode = syndrome;
        p.length = 0;
        respond(p);
        if (consumed != null) {
            rqHead++;
            recvCq.push(consumed.wrId, receiveStatus, WcOpcode.RECV, 0, qpn, 0, false, 0, false);
        }
        moveToError();
    }

    /** Turns a request into its response (same PSN) and sends it back the way it came. */
    private void respond(Packet p) {
        // An answer to this PSN (or a later one) acknowledges every request before it.
        if (deferredLink != null && psnDiff(p.psn, deferredPsn) > 0) {
            deferredLink = null;
            deferredAcks = 0;
            deferredBytes = 0;
        }
        int requester = p.srcQpn;
        p.srcQpn = qpn;
        p.dstQpn = requester;
        p.srcLid = srcLid;
        Link back = p.replyLink != null ? p.replyLink : link;
        p.replyLink = null;
        context.engine.send(back, p);
    }

    /** 24-bit PSN distance: negative when a is before b, positive when after. */
    private static int psnDiff(int a, int b) {
        return ((a - b) << 8) >> 8;
    }

    // ---- errors and flushing (lock held) ----

    /** The oldest outstanding request failed: it completes with that status, the QP goes to ERR. */
    private void completeWithError(SendWqe w, WcStatus status) {
        sendCq.push(w.wrId, status, w.opcode.completionOpcode(), 0, qpn, 0, false, 0, false);
        ackNext++;
        moveToError();
    }

    /** ERR: every outstanding work request completes with WR_FLUSH_ERR. */
    private void moveToError() {
        state = QpState.ERR;
        deferredLink = null; // a QP in error answers nothing more
        deferredAcks = 0;
        deferredBytes = 0;
        rnrDeadline = ackDeadline = 0;
        flushSendQueue();
        flushReceiveQueue();
    }

    private void flushSendQueue() {
        while (ackNext < sqTail) {
            SendWqe w = sq[(int) (ackNext % sq.length)];
            sendCq.push(w.wrId, WcStatus.WR_FLUSH_ERR, w.opcode.completionOpcode(), 0, qpn, 0, false, 0, false);
            ackNext++;
        }
        sendNext = ackNext;
        readAtomicInFlight = 0;
    }

    private void flushReceiveQueue() {
        while (rqHead < rqTail) {
            RecvWqe r = rq[(int) (rqHead % rq.length)];
            recvCq.push(r.wrId, WcStatus.WR_FLUSH_ERR, WcOpcode.RECV, 0, qpn, 0, false, 0, false);
            rqHead++;
        }
    }
}
