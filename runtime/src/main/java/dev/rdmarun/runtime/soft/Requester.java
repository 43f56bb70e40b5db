package dev.rdmarun.runtime.soft;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.QpAttr;
import dev.rdmarun.runtime.QpAttributes;
import dev.rdmarun.runtime.QpState;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.SendWorkRequest;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WrOpcode;
import dev.rdmarun.runtime.os.Errno;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The requester side of a {@link SoftQueuePair} (rxe's req and comp): its send queue, sending
 * work requests as packets, and completing them from ACKs, NAKs and responses, with the RNR
 * back-off and ACK timeout retries. The completer lives here, not apart, because it moves the
 * same send-queue indices and timers the sender does.
 *
 * <p>Every method runs under its QP's lock (the same object: {@code qp.lock}); those that take it
 * say so, the rest expect it held.
 */
final class Requester {
    private static final int INFINITE_RNR_RETRY = 7;

    private final SoftQueuePair qp;
    /** The QP's lock: this class guards nothing of its own. */
    private final Object lock;
    private final SoftContext context;
    private final SoftProtectionDomain pd;
    private final SoftCompletionQueue sendCq;
    private final int maxInline;
    private final boolean signalAll;

    // ---- attributes (guarded by lock) ----
    private int nextPsn;
    private long ackTimeoutNanos;
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

    // ---- timers (engine thread) ----
    private long rnrDeadline;
    /**
     * Armed when a request goes out with none running, left running while answers come (no clock
     * read per message), re-armed when it fires if one came since {@link #ackNextAtArm}: a loss is
     * seen one to two timeouts after the last answer.
     */
    private long ackDeadline;
    private long ackNextAtArm;
    private int rnrLeft;
    private int retriesLeft;

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

    Requester(SoftQueuePair qp, Object lock, SoftContext context, SoftProtectionDomain pd, QueuePairConfig config) {
        this.qp = qp;
        this.lock = lock;
        this.context = context;
        this.pd = pd;
        this.sendCq = (SoftCompletionQueue) config.sendCq();
        this.maxInline = config.maxInlineData();
        this.signalAll = config.signalAll();
        this.sq = new SendWqe[config.maxSendWr()];
        for (int i = 0; i < sq.length; i++) sq[i] = new SendWqe();
        this.inlineData = arena.allocate(Math.max(1L, (long) sq.length * maxInline));
    }

    int maxInline() {
        return maxInline;
    }

    /** The requester's attributes of a valid modify (lock held). */
    void apply(QpAttributes a) {
        if (a.has(QpAttr.SQ_PSN)) nextPsn = a.sqPsn() & SoftQueuePair.PSN_MASK;
        if (a.has(QpAttr.TIMEOUT)) ackTimeoutNanos = a.timeout() == 0 ? 0 : 4096L << a.timeout();
        if (a.has(QpAttr.RETRY_CNT)) retryCount = retriesLeft = a.retryCount();
        if (a.has(QpAttr.RNR_RETRY)) rnrRetry = rnrLeft = a.rnrRetry();
        if (a.has(QpAttr.MAX_QP_RD_ATOMIC)) maxRdAtomic = a.maxRdAtomic();
    }

    /** RESET: the send queue is emptied without completions (lock held). */
    void reset() {
        sqTail = sendNext = ackNext = 0;
        readAtomicInFlight = 0;
        rnrDeadline = ackDeadline = 0;
    }

    /** ERR: no more retries; every outstanding work request completes with WR_FLUSH_ERR (lock held). */
    void moveToError() {
        rnrDeadline = ackDeadline = 0;
        flushSendQueue();
    }

    /** Frees the inline data once the QP is destroyed (or was never registered). */
    void close() {
        arena.close();
    }

    // ---- posting (application thread) ----

    int post(SendWorkRequest r) {
        WrOpcode opcode = r.opcode();
        int length = r.length();
        synchronized (lock) {
            QpState state = qp.state;
            if (qp.destroyed || state == QpState.RESET || state == QpState.INIT || state == QpState.RTR) return Errno.EINVAL;
            if (opcode.isAtomic() && (r.remoteAddress() & 7) != 0) return Errno.EINVAL; // as rxe's provider checks at post
            if (length > SoftContext.MAX_MESSAGE) return Errno.EINVAL; // max_msg_sz, for SEND, WRITE and READ alike
            if (sqTail - ackNext >= sq.length) return Errno.ENOMEM;
            int slot = (int) (sqTail % sq.length);
            SendWqe w = sq[slot];
            MemoryRegion mr = r.mr();
            w.wrId = r.wrId();
            w.opcode = opcode;
            w.signaled = signalAll || (r.flags() & SendFlags.SIGNALED) != 0;
            w.localAddress = mr.address() + r.offset();
            w.length = length;
            w.lkey = mr.lkey();
            w.remoteAddress = r.remoteAddress();
            w.rkey = r.rkey();
            w.imm = r.imm();
            w.compareAdd = r.compareAdd();
            w.swap = r.swap();
            // Inline data is copied now: the caller may reuse its buffer as soon as the post returns.
            w.inline = (r.flags() & SendFlags.INLINE) != 0 && length > 0 && carriesPayload(opcode);
            if (w.inline) MemorySegment.copy(mr.segment(), r.offset(), inlineData, (long) slot * maxInline, length);
            sqTail++;
            if (state == QpState.ERR) {
                flushSendQueue();
                return 0;
            }
        }
        context.engine.ring(qp);
        return 0;
    }

    private static boolean carriesPayload(WrOpcode op) {
        return op == WrOpcode.SEND || op == WrOpcode.SEND_WITH_IMM || op == WrOpcode.RDMA_WRITE
                || op == WrOpcode.RDMA_WRITE_WITH_IMM;
    }

    // ---- sending (engine thread) ----

    /** Sends the posted work requests the QP may send now. */
    void transmit() {
        synchronized (lock) {
            if (qp.destroyed || qp.state != QpState.RTS || rnrDeadline != 0) return;
            while (sendNext < sqTail) {
                SendWqe w = sq[(int) (sendNext % sq.length)];
                boolean readOrAtomic = w.opcode == WrOpcode.RDMA_READ || w.opcode.isAtomic();
                if (readOrAtomic && readAtomicInFlight >= Math.max(1, maxRdAtomic)) return;
                Packet p = context.pool.acquire();
                p.kind = Packet.REQUEST;
                p.opcode = w.opcode.code();
                p.dstQpn = qp.destQpn;
                p.srcQpn = qp.qpn;
                p.srcLid = qp.srcLid;
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
                nextPsn = (nextPsn + 1) & SoftQueuePair.PSN_MASK;
                sendNext++;
                if (readOrAtomic) readAtomicInFlight++;
                if (ackDeadline == 0 && ackTimeoutNanos > 0) {
                    ackDeadline = System.nanoTime() + ackTimeoutNanos;
                    ackNextAtArm = ackNext;
                    context.engine.timerStarted(qp, ackDeadline);
                }
                context.engine.send(qp.link, p);
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
        try {
            if (carriesPayload(w.opcode)) p.copyFrom(mr.segment(), w.localAddress - mr.address(), w.length);
        } catch (IllegalStateException closed) {
            return WcStatus.LOC_PROT_ERR; // the region was closed under the posted work request
        }
        return null;
    }

    // ---- completer (engine thread) ----

    /** Engine thread: an ACK, NAK or response for this QP as requester. */
    void onResponse(Packet p) {
        synchronized (lock) {
            try {
                if (qp.destroyed || qp.state != QpState.RTS || ackNext == sendNext) return;
                if (!qp.fromPeer(p) || p.srcQpn != qp.destQpn || p.srcLid != qp.peerLid) return; // not our peer
                SendWqe w = sq[(int) (ackNext % sq.length)];
                if (p.psn != w.psn) {
                    // A response to a later request acknowledges the SENDs and WRITEs before it
                    // (a responder ACKs a burst once); else it is stale, from before a rewind.
                    if (!impliedAcks(SoftQueuePair.psnDiff(p.psn, w.psn))) return;
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
                rnrDeadline = System.nanoTime() + Packet.rnrDelayNanos(p.rnrTimer);
                context.engine.timerStarted(qp, rnrDeadline);
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
            sendCq.push(w.wrId, WcStatus.SUCCESS, w.opcode.completionOpcode(), byteLength, qp.qpn, 0,
                    w.opcode.carriesImmediate(), 0, false);
        }
        if (w.opcode == WrOpcode.RDMA_READ || w.opcode.isAtomic()) readAtomicInFlight--;
        ackNext++;
        rnrLeft = rnrRetry;
        retriesLeft = retryCount;
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
            if (qp.destroyed || qp.state != QpState.RTS) {
                rnrDeadline = ackDeadline = 0;
                return 0;
            }
            if (rnrDeadline != 0 && now - rnrDeadline >= 0) {
                rnrDeadline = 0;
                send = true;
            }
            if (ackDeadline != 0 && now - ackDeadline >= 0) {
                if (ackNext == sendNext) {
                    ackDeadline = 0; // every request was answered
                } else if (ackNext != ackNextAtArm || qp.waitsForConnection(now)
                        || qp.peerStalled(now, ackDeadline - ackTimeoutNanos)) {
                    // Answered since armed, queued on the connection, or a stalled peer: nothing lost.
                    ackDeadline = now + ackTimeoutNanos;
                    ackNextAtArm = ackNext;
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
            return rnrDeadline == 0 || ackDeadline != 0 && ackDeadline - rnrDeadline < 0 ? ackDeadline : rnrDeadline;
        }
    }

    // ---- errors and flushing (lock held) ----

    /** The oldest outstanding request failed: it completes with that status, the QP goes to ERR. */
    private void completeWithError(SendWqe w, WcStatus status) {
        sendCq.push(w.wrId, status, w.opcode.completionOpcode(), 0, qp.qpn, 0, false, 0, false);
        ackNext++;
        qp.moveToError();
    }

    private void flushSendQueue() {
        while (ackNext < sqTail) {
            SendWqe w = sq[(int) (ackNext % sq.length)];
            sendCq.push(w.wrId, WcStatus.WR_FLUSH_ERR, w.opcode.completionOpcode(), 0, qp.qpn, 0, false, 0, false);
            ackNext++;
        }
        sendNext = ackNext;
        readAtomicInFlight = 0;
    }
}
