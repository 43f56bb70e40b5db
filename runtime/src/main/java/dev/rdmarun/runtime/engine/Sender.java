package dev.rdmarun.runtime.engine;

import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.PendingOperation;
import dev.rdmarun.runtime.PollingDispatcher;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.RemoteRegion;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.SendWorkRequest;
import dev.rdmarun.runtime.WorkCompletions;

/**
 * Hands a work request that may go now to the device, and takes the completions of the signaled
 * ones. Apart from the engine's checks and waits because this is the one place that talks to the
 * QP's send queue; apart from {@link SendWindow} because the window's bookkeeping holds without a
 * device.
 */
final class Sender {
    private static final long UNSIGNALED = -1L;

    private final QpEngine engine;
    private final SendWindow window;
    private final BuffersInFlight buffers;
    private final QpStats stats;
    private final QueuePair qp;
    private final MemoryRegion data;
    private final MemoryRegion recv;
    private final PollingDispatcher dispatcher;
    private final int bufferSize;
    private final int maxInline;
    /** The work request every post fills and hands to the QP (the providers copy it). */
    private final SendWorkRequest wr = new SendWorkRequest();
    /** The pending operation of each ring entry: a signaled work request's completion. */
    private final SendCompletion[] ringOps;

    Sender(QpEngine engine, SendWindow window, BuffersInFlight buffers, QpStats stats, QueuePair qp, MemoryRegion data,
           MemoryRegion recv, EngineConfig config, PollingDispatcher dispatcher) {
        this.engine = engine;
        this.window = window;
        this.buffers = buffers;
        this.stats = stats;
        this.qp = qp;
        this.data = data;
        this.recv = recv;
        this.dispatcher = dispatcher;
        this.bufferSize = config.bufferSize();
        this.maxInline = Math.min(config.inlineThreshold(), qp.maxInlineData());
        ringOps = new SendCompletion[window.capacity()];
        for (int i = 0; i < ringOps.length; i++) ringOps[i] = new SendCompletion();
    }

    /**
     * Posts what {@link QpEngine#post} checked may go now ([bytes]: its effective size) and returns
     * its sequence number.
     */
    long post(OpKind kind, int bytes, int buffer, QpEngine.Peer peer, int remoteQp, int remoteBuffer, long remoteOffset,
              int imm, long compareAdd, long swap) {
        long seq = window.posted() + 1;
        boolean signaled = window.signals(seq);
        long localOffset = (long) buffer * bufferSize;
        long remoteAddress = 0;
        int rkey = 0;
        if (kind.peerAccess() != null) {
            RemoteRegion r = peer.data()[remoteQp];
            remoteAddress = r.address() + (long) remoteBuffer * bufferSize + remoteOffset;
            rkey = r.rkey();
        }
        SendCompletion op = ringOps[window.slot(seq)];
        op.seq = seq;
        long wrId = signaled ? dispatcher.register(op) : UNSIGNALED;
        boolean inline = kind.mayInline() && bytes > 0 && bytes <= maxInline;
        int flags = (signaled ? SendFlags.SIGNALED : SendFlags.NONE) | (inline ? SendFlags.INLINE : 0);
        long resultWord = window.resultWordOf(seq);
        window.record(seq, kind, bytes, localOffset, signaled);
        try {
            // One request, refilled per post: the providers copy it before postSend returns.
            SendWorkRequest r = wr.clear().wrId(wrId).flags(flags).opcode(kind.opcode()).imm(imm);
            // An atomic's local side is its own result word; the providers ignore what the opcode does not read.
            // Fetch-and-add has no swap operand: 0 goes out whatever the caller passed, as before.
            if (kind.isAtomic()) r.local(recv, resultWord, QueuePair.ATOMIC_SIZE).atomic(compareAdd, kind == OpKind.FETCH_AND_ADD ? 0L : swap);
            else r.local(data, localOffset, bytes);
            if (kind.peerAccess() != null) r.remote(remoteAddress, rkey);
            qp.postSend(r);
        } catch (RuntimeException e) {
            if (signaled) dispatcher.unregister(wrId);
            throw e;
        }
        window.posted(seq, signaled);
        if (bytes > 0) buffers.posted(kind, buffer, seq, inline);
        stats.posted++;
        stats.bytesPosted += bytes;
        if (kind.consumesPeerReceive()) stats.messagesSent++;
        return seq;
    }

    /** A signaled work request's completion: it completes every earlier one too (RC completes in order). */
    private final class SendCompletion implements PendingOperation {
        long seq;

        @Override
        public void complete(WorkCompletions completions, int i) {
            if (!completions.isSuccess(i)) {
                engine.failed(completions, i, window.kindOf(seq).label());
                return;
            }
            long now = System.nanoTime();
            stats.lastActivityNanos = now;
            long latency = Math.max(0, now - window.postNanosOf(seq));
            stats.latency.recordValue(latency);
            stats.latencyInWarmup(seq, latency);
            window.completeThrough(seq);
            engine.progress(Progress.WORK_COMPLETED);
        }

        @Override
        public void fail(Throwable cause) {
            // The dispatcher stopped with this in flight: it never completes. The listener hears FAILED (once).
            engine.fail(EngineException.unchecked(cause));
        }
    }
}
