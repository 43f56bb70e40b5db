package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.QpAttr;
import dev.rdmarun.runtime.QpAttributes;
import dev.rdmarun.runtime.QpState;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.WcOpcode;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WrOpcode;
import dev.rdmarun.runtime.os.Errno;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.EnumSet;
import java.util.Set;

/**
 * The responder side of a {@link SoftQueuePair} (rxe's resp): its receive queue, and executing
 * the requests its peer sends, after the QP's access flags and the rkey's region allow them.
 * Apart from the requester because the two share nothing but the QP's state and connection.
 *
 * <p>Every method runs under its QP's lock (the same object: {@code qp.lock}); those that take it
 * say so, the rest expect it held.
 */
final class Responder {
    /**
     * At most this many requests, and this many payload bytes, share one ACK: a burst still moves
     * the requester's window along, and its ACK timeout (which counts from its last completion)
     * sees at most that much more data between two ACKs than with an ACK per request.
     */
    static final int ACK_EVERY = 16;
    static final int ACK_EVERY_BYTES = 1 << 18;

    private final SoftQueuePair qp;
    /** The QP's lock: this class guards nothing of its own. */
    private final Object lock;
    private final SoftContext context;
    private final SoftProtectionDomain pd;
    private final SoftCompletionQueue recvCq;

    // ---- attributes (guarded by lock) ----
    private Set<Access> access = Set.of();
    private int expectedPsn;
    private int minRnrTimer;
    private int maxDestRdAtomic;

    // ---- receive queue ----
    private final RecvWqe[] rq;
    private long rqHead;
    private long rqTail;

    // ---- the last atomic, replayed for a duplicate of it ----
    private int lastAtomicPsn = -1;
    private long lastAtomicOriginal;

    // ---- an ACK left to a later one (the next request had already arrived) ----
    private int deferredAcks;
    private long deferredBytes;
    private int deferredPsn;
    /** The link the deferred ACK goes back on; null when no ACK is deferred. */
    private Link deferredLink;

    private static final class RecvWqe {
        long wrId;
        long address;
        int length;
        int lkey;
    }

    Responder(SoftQueuePair qp, Object lock, SoftContext context, SoftProtectionDomain pd, QueuePairConfig config) {
        this.qp = qp;
        this.lock = lock;
        this.context = context;
        this.pd = pd;
        this.recvCq = (SoftCompletionQueue) config.recvCq();
        this.rq = new RecvWqe[config.maxRecvWr()];
        for (int i = 0; i < rq.length; i++) rq[i] = new RecvWqe();
    }

    /** The responder's attributes of a valid modify (lock held). */
    void apply(QpAttributes a) {
        if (a.has(QpAttr.ACCESS_FLAGS)) access = a.access().isEmpty() ? Set.of() : EnumSet.copyOf(a.access());
        if (a.has(QpAttr.RQ_PSN)) expectedPsn = a.rqPsn() & SoftQueuePair.PSN_MASK;
        if (a.has(QpAttr.MIN_RNR_TIMER)) minRnrTimer = a.minRnrTimer();
        if (a.has(QpAttr.MAX_DEST_RD_ATOMIC)) maxDestRdAtomic = a.maxDestRdAtomic();
    }

    /** RESET: the receive queue is emptied without completions, the access flags and replay state forgotten (lock held). */
    void reset() {
        rqHead = rqTail = 0;
        access = Set.of();
        lastAtomicPsn = -1;
        forgetDeferredAck();
    }

    /** ERR: a QP in error answers nothing more; every posted receive completes with WR_FLUSH_ERR (lock held). */
    void moveToError() {
        forgetDeferredAck();
        flushReceiveQueue();
    }

    // ---- posting (application thread) ----

    int post(long wrId, MemoryRegion mr, long offset, int length) {
        synchronized (lock) {
            if (qp.destroyed || qp.state == QpState.RESET) return Errno.EINVAL;
            if (length > SoftContext.MAX_MESSAGE) return Errno.EINVAL;
            if (rqTail - rqHead >= rq.length) return Errno.ENOMEM;
            RecvWqe r = rq[(int) (rqTail % rq.length)];
            r.wrId = wrId;
            r.address = mr.address() + offset;
            r.length = length;
            r.lkey = mr.lkey();
            rqTail++;
            if (qp.state == QpState.ERR) flushReceiveQueue();
            return 0;
        }
    }

    // ---- requests (engine thread) ----

    /** Engine thread: a request for this QP as responder. Consumes p (sends it back as the response, or drops it). */
    void onRequest(Packet p) {
        synchronized (lock) {
            if (qp.destroyed || qp.state != QpState.RTR && qp.state != QpState.RTS
                    || !qp.fromPeer(p) || p.srcQpn != qp.destQpn || p.srcLid != qp.peerLid) {
                p.release(); // not for a connected QP: a real RNIC drops it silently too
                sendDeferredAck();
                return;
            }
            WrOpcode op = WrOpcode.of(p.opcode);
            int diff = SoftQueuePair.psnDiff(p.psn, expectedPsn);
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
        recvCq.push(r.wrId, WcStatus.SUCCESS, WcOpcode.RECV, p.length, qp.qpn, p.srcQpn,
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
            recvCq.push(r.wrId, WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM, p.length, qp.qpn, p.srcQpn, true, p.imm, false);
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
        expectedPsn = (expectedPsn + 1) & SoftQueuePair.PSN_MASK;
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
        expectedPsn = (expectedPsn + 1) & SoftQueuePair.PSN_MASK;
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

    // ---- answers (lock held) ----

    /**
     * Acknowledges a request that succeeded. When the next request for this QP had already arrived
     * (TCP), the ACK is left to the answer to that one, which acknowledges both (RC's ACKs are
     * cumulative): a burst costs one ACK per {@value #ACK_EVERY} requests, and its last one, whose
     * successor is not there, is always answered at once.
     */
    private void ack(Packet p) {
        expectedPsn = (expectedPsn + 1) & SoftQueuePair.PSN_MASK;
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
        forgetDeferredAck();
        if (qp.destroyed || qp.state != QpState.RTR && qp.state != QpState.RTS) return;
        Packet a = context.pool.acquire();
        a.kind = Packet.ACK;
        a.psn = deferredPsn;
        a.srcQpn = qp.qpn;
        a.dstQpn = qp.destQpn;
        a.srcLid = qp.srcLid;
        context.engine.send(back, a);
    }

    private void forgetDeferredAck() {
        deferredLink = null;
        deferredAcks = 0;
        deferredBytes = 0;
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
            recvCq.push(consumed.wrId, receiveStatus, WcOpcode.RECV, 0, qp.qpn, 0, false, 0, false);
        }
        qp.moveToError();
    }

    /** Turns a request into its response (same PSN) and sends it back the way it came. */
    private void respond(Packet p) {
        // An answer to this PSN (or a later one) acknowledges every request before it.
        if (deferredLink != null && SoftQueuePair.psnDiff(p.psn, deferredPsn) > 0) forgetDeferredAck();
        int requester = p.srcQpn;
        p.srcQpn = qp.qpn;
        p.dstQpn = requester;
        p.srcLid = qp.srcLid;
        Link back = p.replyLink != null ? p.replyLink : qp.link;
        p.replyLink = null;
        context.engine.send(back, p);
    }

    private void flushReceiveQueue() {
        while (rqHead < rqTail) {
            RecvWqe r = rq[(int) (rqHead % rq.length)];
            recvCq.push(r.wrId, WcStatus.WR_FLUSH_ERR, WcOpcode.RECV, 0, qp.qpn, 0, false, 0, false);
            rqHead++;
        }
    }
}
