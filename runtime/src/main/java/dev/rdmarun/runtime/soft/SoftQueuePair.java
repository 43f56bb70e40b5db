package dev.rdmarun.runtime.soft;

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
import dev.rdmarun.runtime.SendWorkRequest;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.os.Errno;
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
 *       RNR_RETRY_EXC_ERR; no answer for one to two ACK timeouts retries retry_cnt times, then
 *       RETRY_EXC_ERR (over TCP, a timeout with a peer silent on the connection is a stall, not a
 *       retry: {@link #peerStalled}); a NAK ends the QP (REM_ACCESS_ERR, REM_INV_REQ_ERR, REM_OP_ERR);</li>
 *   <li>responder: SEND, SEND_WITH_IMM and WRITE_WITH_IMM consume the oldest posted receive (none:
 *       RNR NAK); WRITE, READ and atomics check the QP's access flags (else invalid request), and
 *       the rkey's region: same PD, access flag, bounds (else remote access error); a message
 *       longer than the receive is an invalid request; atomics need 8-byte alignment; such errors
 *       put the responder in ERR too (class C);</li>
 *   <li>responder over TCP: a SEND or WRITE whose successor for this QP has already arrived is
 *       acknowledged with that successor's answer (at most {@value Responder#ACK_EVERY} requests and
 *       {@value Responder#ACK_EVERY_BYTES} bytes per ACK; the last of a burst is answered at once);</li>
 *   <li>ERR flushes every outstanding work request with WR_FLUSH_ERR; RESET empties the queues.</li>
 * </ul>
 *
 * <p>A QP accepts requests and responses only from the link bound to its connected peer: in
 * memory, packets of this JVM (none from TCP); over TCP, packets from a connection that proved
 * the QP's {@link FabricKey} (required at RTR then); and only with the peer's QPN and LID.
 * Messages longer than max_msg_sz ({@value SoftContext#MAX_MESSAGE} bytes) fail at post with EINVAL.
 *
 * <p>As in rxe, the work is split where the spec splits it: this class is the verbs-facing QP (its
 * state, attributes and connection, and the entry points, which delegate); {@link Requester} has
 * the send queue, sending, retries and completing; {@link Responder} the receive queue and the
 * execution of incoming requests.
 *
 * <p>Threads: posting (the application's dispatcher), modify (any), and the engine (packets,
 * doorbells, timers) all take this QP's lock, the one object its requester and responder also
 * lock; completions go to the CQs, which lock themselves.
 */
final class SoftQueuePair extends QueuePair {
    static final int PSN_MASK = 0xffffff;
    /** The connect timeout of a QP whose RTR named none: the DSL's default scenario timeout. */
    static final long DEFAULT_CONNECT_TIMEOUT_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(30);

    private final SoftContext context;
    final int qpn;
    /** Set while the QP waits in the engine's doorbell queue. */
    final AtomicBoolean scheduled = new AtomicBoolean();
    /** The one lock of this QP: its requester and responder take this same object. */
    private final Object lock = new Object();
    private final Requester requester;
    private final Responder responder;

    // ---- state and connection (guarded by lock; the requester and responder read them) ----
    QpState state = QpState.RESET;
    boolean destroyed;
    Link link;
    private AddressVector av;
    /** The key this QP registered with its context (its peer is over TCP), or null. */
    private FabricKey fabricKey;
    /** The key a TCP connection must have proved for its packets to reach this QP; null when the peer is not over TCP. */
    private volatile FabricKey tcpKey;
    /** The LID this QP's packets carry, and the one it expects on its peer's. */
    int srcLid;
    int peerLid;
    int destQpn;
    /** How long ACK timeouts do not count as retries while the first TCP connection to the peer is made. */
    private long connectTimeoutNanos = DEFAULT_CONNECT_TIMEOUT_NANOS;
    /** When this QP stops waiting for its first TCP connection (0: it has not waited yet). */
    private long connectDeadline;

    private SoftQueuePair(SoftProtectionDomain pd, QueuePairConfig config) {
        super(pd, config);
        this.context = pd.context;
        this.requester = new Requester(this, lock, context, pd, config);
        this.responder = new Responder(this, lock, context, pd, config);
        int n = context.addQp(this);
        if (n < 0) {
            requester.close();
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
        return new SoftQueuePair(pd, c);
    }

    @Override
    public int qpNum() {
        return qpn;
    }

    @Override
    public int maxInlineData() {
        return requester.maxInline();
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
                String call = "ibv_modify_qp(QP " + QueuePair.qpnText(qpn) + ", " + from + "→" + to + ") failed";
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
            responder.apply(a);
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
            requester.apply(a);
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
        requester.reset();
        link = null;
        av = null;
        releaseKey();
        responder.reset();
    }

    /** ERR (lock held): every outstanding work request completes with WR_FLUSH_ERR, sends first. */
    void moveToError() {
        state = QpState.ERR;
        requester.moveToError();
        responder.moveToError();
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
    boolean fromPeer(Packet p) {
        if (link instanceof LocalLink) return p.replyLink == null;
        return p.replyLink instanceof TcpConnection c && acceptsOver(c.key());
    }

    @Override
    protected void destroy() {
        synchronized (lock) {
            destroyed = true;
            releaseKey();
            context.removeQp(qpn, this);
        }
        requester.close();
    }

    // ---- data path: the application's posts, the engine's packets, doorbells and timers ----

    @Override
    protected int postSendRequest(SendWorkRequest wr) {
        return requester.post(wr);
    }

    @Override
    protected int postReceiveRequest(long wrId, MemoryRegion mr, long offset, int length) {
        return responder.post(wrId, mr, offset, length);
    }

    /** Engine thread: sends the posted work requests the QP may send now. */
    void transmit() {
        requester.transmit();
    }

    /** Engine thread: an ACK, NAK or response for this QP as requester. */
    void onResponse(Packet p) {
        requester.onResponse(p);
    }

    /** Engine thread: a request for this QP as responder. Consumes p. */
    void onRequest(Packet p) {
        responder.onRequest(p);
    }

    /** Engine thread: fires a due RNR back-off or ACK timeout; returns the next deadline, or 0 for none. */
    long runTimer(long now) {
        return requester.runTimer(now);
    }

    /**
     * Whether an ACK timeout is no retry: the first TCP connection to the peer is still being made
     * (its listener may be slow to answer, or busy with a flood) and the connect timeout has not
     * passed since the first such timeout (lock held).
     */
    boolean waitsForConnection(long now) {
        if (!(link instanceof TcpConnection c) || !c.connecting()) return false;
        if (connectDeadline == 0) connectDeadline = now + connectTimeoutNanos;
        return now - connectDeadline < 0;
    }

    /**
     * Whether an ACK timeout is no retry because the peer's soft0 is stalled, not losing packets:
     * over TCP nothing is lost while the connection lives, and the responder is the peer's
     * process, which a loaded host, a collection or the JIT can hold for longer than an ACK
     * timeout (eight JVMs on two cores at start, say) where a NIC would have answered. So while
     * the peer has sent nothing at all on this QP's connection since {@code since}, and for less
     * than the connect timeout, the QP waits instead (lock held). A peer that answers others
     * but not this QP (its QP is gone) still runs out of retries at the ACK timeout's pace.
     */
    boolean peerStalled(long now, long since) {
        if (!(link instanceof TcpConnection c) || !c.carrying()) return false;
        long heard = c.lastRead();
        return (heard - since < 0 || heard == c.authenticatedAt()) && now - heard < connectTimeoutNanos;
    }

    @Override
    public String connectionTrouble() {
        Link l;
        long timeout;
        synchronized (lock) {
            l = link;
            timeout = connectTimeoutNanos;
        }
        String outbound = l instanceof TcpConnection c ? c.trouble(timeout) : null;
        long evicted = context.transport.listeners.evictedConnections();
        String inbound = evicted == 0 ? null : "this side's soft0 port evicted " + evicted
                + " unauthenticated connections (a flood?)";
        if (outbound == null) return inbound;
        return inbound == null ? outbound : outbound + "; " + inbound;
    }

    /** 24-bit PSN distance: negative when a is before b, positive when after. */
    static int psnDiff(int a, int b) {
        return ((a - b) << 8) >> 8;
    }
}
