package dev.rdmarun.runtime.engine;

import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.PendingOperation;
import dev.rdmarun.runtime.PollingDispatcher;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.RemoteRegion;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.WorkCompletions;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Credits, both ways: how many receive-consuming work requests the peer can take (the counter it
 * RDMA-writes into this side's credit word), and telling the peer how many receives this side
 * re-posted, with a credit write of its own. Apart from the engine because this is the one
 * protocol between the two engines; the credit write also serves to signal unsignaled work after
 * the fact ({@link QpEngine#requestCompletionOf}).
 */
final class CreditFlow {
    private static final ValueLayout.OfLong BIG_ENDIAN_LONG = ValueLayout.JAVA_LONG.withOrder(ByteOrder.BIG_ENDIAN);

    private final QpEngine engine;
    private final SendWindow window;
    private final QpStats stats;
    private final int index;
    private final QueuePair qp;
    private final MemoryRegion recv;
    private final MemoryRegion creditWords;
    private final PollingDispatcher dispatcher;
    private QpEngine.Peer peer;
    private long lastPeerReposted;

    // ---- credits returned to the peer ----
    private final CreditWrite creditWrite = new CreditWrite();
    private final long creditSourceOffset;
    private final int creditBatch;
    private long reposted;
    private long reported;
    private boolean creditInFlight;
    private long creditCovers;
    private long flushWanted;
    private boolean creditsStopped;

    CreditFlow(QpEngine engine, SendWindow window, QpStats stats, QueuePair qp, MemoryRegion recv,
               MemoryRegion creditWords, EngineConfig config, PollingDispatcher dispatcher) {
        this.engine = engine;
        this.window = window;
        this.stats = stats;
        this.index = engine.index();
        this.qp = qp;
        this.recv = recv;
        this.creditWords = creditWords;
        this.dispatcher = dispatcher;
        this.creditSourceOffset = config.creditSourceOffset();
        this.creditBatch = Math.max(1, config.recvDepth() / 4);
    }

    void connect(QpEngine.Peer peer) {
        this.peer = peer;
    }

    // ---- sender side ----

    /** See {@link QpEngine#credits}. */
    long available() {
        if (peer == null || peer.creditWord() == null) return Long.MAX_VALUE;
        VarHandle.acquireFence(); // the HCA wrote it: read the current value
        long reposted = creditWords.segment().get(BIG_ENDIAN_LONG, index * 8L);
        if (reposted != lastPeerReposted) {
            if (reposted < lastPeerReposted || reposted > stats.messagesSent) {
                engine.fail(new EngineException(peer.name() + " reported " + reposted + " re-posted receives on QP " + index
                        + " after " + lastPeerReposted + ", but was sent only " + stats.messagesSent
                        + " messages: it is not a compatible rdma-run"));
                return 0;
            }
            lastPeerReposted = reposted;
        }
        return peer.recvDepth() + reposted - stats.messagesSent;
    }

    // ---- receiver side ----

    /** A receive was posted again: tells the peer once enough are unreported. */
    void reposted() {
        reposted++;
        returnCredits();
    }

    /** See {@link QpEngine#requestCompletionOf}: [seq] is posted, not signaled and not complete. */
    void requestCompletionOf(long seq) {
        if (peer == null || peer.creditWord() == null || creditsStopped) return;
        if (creditInFlight) {
            if (creditCovers < seq) flushWanted = Math.max(flushWanted, seq);
            return;
        }
        postCreditWrite();
    }

    private void postCreditWrite() {
        recv.segment().set(BIG_ENDIAN_LONG, creditSourceOffset, reposted);
        reported = reposted;
        creditCovers = window.posted();
        creditInFlight = true;
        long wrId = dispatcher.register(creditWrite);
        RemoteRegion target = peer.creditWord();
        try {
            qp.postWrite(wrId, recv, creditSourceOffset, 8, target.address(), target.rkey(),
                    SendFlags.SIGNALED | (maxInlineForCredit() ? SendFlags.INLINE : 0));
        } catch (RuntimeException e) {
            dispatcher.unregister(wrId);
            creditInFlight = false;
            throw e;
        }
    }

    private boolean maxInlineForCredit() {
        return qp.maxInlineData() >= 8;
    }

    /** After a re-post: tells the peer once enough receives are unreported and no credit write is in flight. */
    private void returnCredits() {
        if (creditInFlight || creditsStopped || peer == null || peer.creditWord() == null) return;
        if (reposted - reported >= creditBatch || flushWanted > window.completed() && flushWanted > window.lastSignaled()) postCreditWrite();
    }

    /** The credit write's completion; it also completes the user's work posted before it (RC completes in order). */
    private final class CreditWrite implements PendingOperation {
        @Override
        public void complete(WorkCompletions completions, int i) {
            creditInFlight = false;
            if (!completions.isSuccess(i)) {
                if (!creditsStopped) engine.failed(completions, i, "credit update");
                return;
            }
            window.completeThrough(creditCovers);
            returnCredits();
            engine.progress(Progress.WORK_COMPLETED);
        }

        @Override
        public void fail(Throwable cause) {
            engine.fail(EngineException.unchecked(cause)); // as Sender's: the dispatcher stopped
        }
    }

    void stop() {
        creditsStopped = true;
    }

    boolean writeInFlight() {
        return creditInFlight;
    }
}
