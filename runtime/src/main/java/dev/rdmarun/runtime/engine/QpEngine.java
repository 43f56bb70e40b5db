package dev.rdmarun.runtime.engine;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.PollingDispatcher;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.RemoteRegion;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WorkCompletions;
import java.util.Set;

/**
 * The data path of one connected RC QP, for the thread of the {@link PollingDispatcher} that polls
 * its CQ (every method, unless it says otherwise): a send window, selective signaling, credits
 * that make RNR impossible, and the receive side with an inbox.
 *
 * <p><b>Posting.</b> {@link #post} hands one work request to the device at the call (an inline
 * payload is copied then) and returns its sequence number, or {@link #BLOCKED_ON_CREDIT} /
 * {@link #BLOCKED_ON_WINDOW} when it has to wait: for the peer to re-post receives, or for room in
 * the send queue ({@code sendDepth} user work requests in flight). With {@code signalEvery(n)} one
 * work request in n is signaled; its completion completes every earlier one (RC completes in
 * order). {@link #requestCompletionOf} signals a work request after the fact by posting the
 * engine's credit write behind it, so a wait never depends on a later post.
 *
 * <p><b>Buffers in flight.</b> A data buffer is read by the device until the work request that
 * sends or writes from it completes, and written until a READ into it completes. {@link #post}
 * never posts a work request that would change a buffer posted work still reads, or read one
 * posted work still fills: it returns {@link #BLOCKED_ON_BUFFER} and {@link #bufferBusyUntil}
 * says which work request has to complete first. Work that only reads a buffer (sends and writes
 * of one buffer in a loop) and READs into one buffer in a loop go through. An atomic's old value
 * lands in a result word of its own (one per send-window entry, in the receive region), so atomics
 * in flight never share one; at its completion the engine copies it to offset 0 of the atomic's
 * buffer and {@link #takeCompletion} reports it.
 *
 * <p><b>Credits.</b> Each side keeps {@code recvDepth} receives posted per QP and tells the peer, with
 * an RDMA WRITE of a counter into the peer's credit word, how many it re-posted; a sender posts a
 * receive-consuming work request only while {@code recvDepth + reposted - sent > 0}.
 *
 * <p><b>Receiving.</b> A message that arrives is copied into a bounded inbox ({@code inboxDepth}
 * messages) and its receive re-posted at once, so a peer can send before this side asks; with the
 * inbox full it stays in its receive slot and its credit is withheld until a receive takes one.
 *
 * <p>Nothing here allocates in steady state. Completions, arrivals and the failure are reported to
 * the {@link Listener} as {@link Progress} events, which is how drivers (the DSL's coroutines, a
 * blocking Java loop) wake up; a driver takes a completion with {@link #takeCompletion}.
 *
 * <p>This class is a façade (it holds the peer and the failure, and decides whether a post waits)
 * over package-private parts, one per paragraph above: {@code Sender} and {@code SendWindow},
 * {@code BuffersInFlight}, {@code CreditFlow}, {@code Inbox}; and {@code OpChecks}.
 */
public final class QpEngine {
    /** The hint of every "buffer i is outside" sentence, the engine's and the DSL's. */
    public static final String BUFFER_COUNT_HINT = "bufferCount(n) before connect gives each QP n buffers";
    /** {@link #post}: the peer has no receive free for this message yet. */
    public static final long BLOCKED_ON_CREDIT = -1;
    /** {@link #post}: {@code sendDepth} work requests are in flight. */
    public static final long BLOCKED_ON_WINDOW = -2;
    /** {@link #post}: work in flight still uses the buffer in a way this work request would spoil ({@link #bufferBusyUntil}). */
    public static final long BLOCKED_ON_BUFFER = -3;

    /** Told about progress on the dispatcher thread once the engine's state for it is complete ({@link Progress}); what it throws goes to that thread's uncaught-exception handler, and polling goes on. */
    public interface Listener {
        void onProgress(QpEngine engine, Progress what);
    }

    /** What the engine needs of the peer's QP (from the out-of-band exchange). */
    public record Peer(
            /** The peer's label in sentences ("the server"). */
            String name,
            /** Receives the peer keeps posted on this QP. */
            int recvDepth,
            /** The peer's credit word for this QP, or null when the peer is not an engine (no flow control). */
            RemoteRegion creditWord,
            /** The peer's data regions, by peer QP index (any QP may target any of them). */
            RemoteRegion[] data,
            /** The access the peer granted to its data regions. */
            Set<Access> granted) {
    }

    private final int index;
    private final QueuePair qp;
    private final MemoryRegion data;
    private final EngineConfig config;
    private final QpStats stats = new QpStats();
    private final int bufferSize;
    private Listener listener = (e, what) -> { };
    private Peer peer;
    private RuntimeException failure;

    private final SendWindow window;
    private final BuffersInFlight buffers;
    private final Sender sender;
    private final OpChecks checks;
    private final CreditFlow credits;
    private final Inbox inbox;

    /**
     * An engine over a QP in INIT (or later) whose CQs {@code dispatcher} polls. {@code data} is
     * bufferCount x bufferSize bytes; {@code recv} is {@link EngineConfig#receiveRegionBytes} with
     * LOCAL_WRITE; {@code creditWords} holds one 8-byte word per QP (this one's at {@code index * 8})
     * with LOCAL_WRITE and REMOTE_WRITE: the peer writes there how many receives it re-posted.
     */
    public QpEngine(int index, QueuePair qp, MemoryRegion data, MemoryRegion recv, MemoryRegion creditWords,
                    EngineConfig config, PollingDispatcher dispatcher) {
        this.index = index;
        this.qp = qp;
        this.data = data;
        this.config = config;
        this.bufferSize = config.bufferSize();
        if (data.length() < config.dataBytes()) throw new IllegalArgumentException("the data region is too small");
        if (recv.length() < config.receiveRegionBytes()) throw new IllegalArgumentException("the receive region is too small");
        window = new SendWindow(config, stats, recv, data);
        buffers = new BuffersInFlight(config.bufferCount());
        sender = new Sender(this, window, buffers, stats, qp, data, recv, config, dispatcher);
        checks = new OpChecks(index, config);
        credits = new CreditFlow(this, window, stats, qp, recv, creditWords, config, dispatcher);
        inbox = new Inbox(this, credits, stats, qp, recv, config, dispatcher);
    }

    public int index() {
        return index;
    }

    public QueuePair queuePair() {
        return qp;
    }

    public EngineConfig config() {
        return config;
    }

    public QpStats stats() {
        return stats;
    }

    public void setListener(Listener listener) {
        this.listener = listener;
    }

    /** Posts every receive; do it before the peer can send (before the QPs are connected). */
    public void postInitialReceives() {
        inbox.postInitialReceives();
    }

    /** What the peer told about its QP; call once, before posting. */
    public void connect(Peer peer) {
        this.peer = peer;
        checks.connect(peer);
        credits.connect(peer);
    }

    /** The failure that ended this engine (an error completion, a lying peer), or null. */
    public RuntimeException failure() {
        return failure;
    }

    void fail(RuntimeException e) {
        if (failure != null) return;
        failure = e;
        listener.onProgress(this, Progress.FAILED);
    }

    /** Reports progress to the listener: the parts call it last in every callback. */
    void progress(Progress what) {
        listener.onProgress(this, what);
    }

    /** An error completion of [what]; a flush after the first failure says nothing new. */
    void failed(WorkCompletions completions, int i, String what) {
        if (completions.status(i) == WcStatus.WR_FLUSH_ERR && failure != null) return;
        fail(CompletionFailure.of(qp, index, completions, i, what));
    }

    private void ensureUsable() {
        if (failure != null) throw failure;
        if (peer == null) throw new IllegalStateException("QP " + index + " is not connected yet");
    }

    // ---- posting ----

    /** The size an operation moves: 8 for atomics, the buffer size for {@code size == -1}, else size. */
    public int effectiveSize(OpKind kind, int size) {
        return OpChecks.effectiveSize(kind, size, bufferSize);
    }

    /**
     * Checks an operation's arguments without posting it; throws an {@link EngineException}
     * naming the call when they do not fit the buffers or what the peer granted.
     */
    public void check(OpKind kind, int size, int buffer, int remoteQp, int remoteBuffer, long remoteOffset) {
        ensureUsable();
        checks.check(kind, size, buffer, remoteQp, remoteBuffer, remoteOffset);
    }

    /**
     * Why {@link #post} of this kind would wait now: 0 (it would not), {@link #BLOCKED_ON_CREDIT}
     * or {@link #BLOCKED_ON_WINDOW}.
     */
    public long blockedOn(OpKind kind) {
        if (kind.consumesPeerReceive() && credits() <= 0) return BLOCKED_ON_CREDIT;
        if (window.full()) return BLOCKED_ON_WINDOW;
        return 0;
    }

    /**
     * The work request that has to complete before [kind] may use [buffer], or 0 when it may now:
     * a send or write waits for a READ or an atomic still filling the buffer (it would send
     * half-arrived data); a READ waits for a send or write still reading it (it would change what
     * they send) and for an atomic whose old value would land over its data. Atomics never wait:
     * their old value lands in a word of their own.
     */
    public long bufferBusyUntil(OpKind kind, int buffer) {
        return buffers.busyUntil(kind, buffer, window.completed());
    }

    /**
     * The work request that has to complete before this side may change [buffer] itself (copy a
     * message into it), or 0 when no posted work reads or fills it any more.
     */
    public long localWriteBusyUntil(int buffer) {
        return buffers.localWriteBusyUntil(buffer, window.completed());
    }

    /**
     * Posts one work request and returns its sequence number (1, 2, ...), or a BLOCKED_ON_ value
     * when it has to wait (nothing was posted then). [size] &lt; 0 means the whole buffer; remote
     * operations address the peer's buffer [remoteBuffer] of its QP [remoteQp] at [remoteOffset].
     */
    public long post(OpKind kind, int size, int buffer, int remoteQp, int remoteBuffer, long remoteOffset, int imm,
                     long compareAdd, long swap) {
        check(kind, size, buffer, remoteQp, remoteBuffer, remoteOffset);
        long blocked = blockedOn(kind);
        if (blocked != 0 && failure != null) throw failure; // its credit check failed the engine (a forged word): say so now
        if (blocked != 0) return blocked;
        int bytes = effectiveSize(kind, size);
        if (bytes > 0 && bufferBusyUntil(kind, buffer) != 0) return BLOCKED_ON_BUFFER;
        return sender.post(kind, bytes, buffer, peer, remoteQp, remoteBuffer, remoteOffset, imm, compareAdd, swap);
    }

    // ---- completions of posted work ----

    /** The last sequence number posted. */
    public long posted() { return window.posted(); }

    /** Every work request up to this sequence number has completed. */
    public long completedThrough() { return window.completed(); }

    /** The last signaled work request posted: unsignaled ones after it report no completion until a later signaled one does. */
    public long lastSignaled() { return window.lastSignaled(); }

    /** Posted and not yet awaited, with those the ring forgot ({@link EngineConfig#rememberedWork}). */
    public int outstanding() {
        return window.outstanding();
    }

    /** The oldest work request not yet awaited that the ring remembers, or 0 when there is none. */
    public long nextToAwait() {
        return window.nextToAwait();
    }

    /**
     * Takes the completion of work request [seq]: when it has completed, marks it and every one
     * before it awaited, fills [into] (when not null) with what [seq] was and returns true; else
     * changes nothing and returns false ({@link #requestCompletionOf} makes sure it will be
     * reported). With [into], [seq] must not be taken yet (at least {@link #nextToAwait}; older
     * ones, and those the ring forgot, throw); without, true says every one through [seq] completed.
     */
    public boolean takeCompletion(long seq, CompletedWork into) {
        if (into != null) window.checkNotTaken(seq);
        if (window.completed() < seq) return false;
        window.markAwaited(seq);
        if (into != null) into.set(seq, window.kindOf(seq), window.sizeOf(seq), window.resultOf(seq));
        return true;
    }

    /** What work request [seq] was, for messages; valid while it is among the last posted (the ring). */
    public OpKind kindOf(long seq) {
        return window.kindOf(seq);
    }

    /**
     * Makes sure work request [seq] will report its completion: when no signaled work request at or
     * after it is posted, the engine posts its own signaled credit write behind it (now, or when the
     * one in flight completes). Without a peer credit word there is nothing to post: with selective
     * signaling, a wait then depends on a later signaled post.
     */
    public void requestCompletionOf(long seq) {
        if (seq <= window.completed() || seq <= window.lastSignaled() || seq > window.posted()) return;
        credits.requestCompletionOf(seq);
    }

    // ---- credits ----

    /** Receive-consuming work requests the peer can take now. */
    public long credits() {
        return credits.available();
    }

    /** Ends credit updates (both sides finished: nothing more will be sent). */
    public void stopCredits() {
        credits.stop();
    }

    /** A credit write is still in flight. */
    public boolean creditWriteInFlight() {
        return credits.writeInFlight();
    }

    // ---- receiving ----

    /** A message is waiting for a receive. */
    public boolean hasMessage() {
        return inbox.hasMessage();
    }

    /** Messages waiting for a receive (in the inbox and in their receive slots). */
    public int messagesWaiting() {
        return inbox.messagesWaiting();
    }

    /** The inbox is full: arrivals keep their receive slot and the peer gets no credit for them. */
    public boolean inboxFull() {
        return inbox.full();
    }

    /** Length of the oldest waiting message; these getters throw IllegalStateException when none waits ({@link #hasMessage}). */
    public int messageLength() {
        return inbox.messageLength();
    }

    public boolean messageHasImmediate() {
        return inbox.messageHasImmediate();
    }

    /** The immediate data of the oldest waiting message (host order). */
    public int messageImmediate() {
        return inbox.messageImmediate();
    }

    /** The oldest waiting message is a writeWithImm (its data went straight into this side's buffer). */
    public boolean messageIsWrite() {
        return inbox.messageIsWrite();
    }

    /** Copies the oldest waiting message's payload (empty for a writeWithImm) into dst at offset. */
    public void copyMessage(byte[] dst, int offset) {
        inbox.copyMessage(dst, offset);
    }

    /** Takes the oldest waiting message off the queue (its receive slot goes back to the peer). */
    public void releaseMessage() {
        inbox.releaseMessage();
    }

    /**
     * Takes every waiting message without a receive: the leftovers of a warm-up round whose loop
     * takes none (each side only sends), which would otherwise fill the inbox before the
     * measurement starts: the oldest {@code max} at most (later ones may be the peer's measured
     * messages). Their receive slots go back to the peer. Returns how many.
     */
    public int dropWaitingMessages(long max) {
        return inbox.drop(max);
    }


    /**
     * This side will call no more receives: waiting messages are counted as not received and
     * dropped, and later arrivals are counted and their receives re-posted at once.
     */
    public void finishReceiving() {
        inbox.finish();
    }

    /**
     * Ends a warm-up here: every work request posted so far belongs to it (its completion, bytes
     * and latency, whenever it completes), and so does every message a receive() took; what is
     * posted or taken from now on is measured ({@link QpStats#measured}). [nanos] is when the
     * measured phase started (System.nanoTime()).
     */
    public void measureFromHere(long nanos) {
        measureFromHere(nanos, messagesWaiting());
    }

    /**
     * {@link #measureFromHere(long)} when the peer's warm-up is known to have sent only the oldest
     * {@code peerWarmupWaiting} of the waiting messages (an agreed warm-up): a later one that no
     * receive takes counts as the measured phase's, not the warm-up's.
     */
    public void measureFromHere(long nanos, long peerWarmupWaiting) {
        stats.startMeasuring(window.posted(), messagesWaiting(), inbox.waitingBytes(), nanos, peerWarmupWaiting);
    }

    // ---- data buffers ----

    /** This QP's data region (bufferCount x bufferSize bytes). */
    public MemoryRegion dataRegion() {
        return data;
    }
}
