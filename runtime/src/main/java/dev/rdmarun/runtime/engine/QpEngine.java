package dev.rdmarun.runtime.engine;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.PendingOperation;
import dev.rdmarun.runtime.PollingDispatcher;
import dev.rdmarun.runtime.PortAttributes;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.RemoteRegion;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WcOpcode;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WorkCompletions;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
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
 * buffer and {@link #resultOf} reports it.
 *
 * <p><b>Credits.</b> Each side keeps {@code recvDepth} receives posted per QP and tells the peer, with
 * an RDMA WRITE of a counter into the peer's credit word, how many it re-posted; a sender posts a
 * receive-consuming work request only while {@code recvDepth + reposted - sent > 0}.
 *
 * <p><b>Receiving.</b> A message that arrives is copied into a bounded inbox ({@code inboxDepth}
 * messages) and its receive re-posted at once, so a peer can send before this side asks; with the
 * inbox full it stays in its receive slot and its credit is withheld until a receive takes one.
 *
 * <p>Nothing here allocates in steady state. Completions and arrivals are reported to the
 * {@link Listener}, which is how drivers (the DSL's coroutines, a blocking Java loop) wake up.
 */
public final class QpEngine {
    /** {@link #post}: the peer has no receive free for this message yet. */
    public static final long BLOCKED_ON_CREDIT = -1;
    /** {@link #post}: {@code sendDepth} work requests are in flight. */
    public static final long BLOCKED_ON_WINDOW = -2;
    /** {@link #post}: work in flight still uses the buffer in a way this work request would spoil ({@link #bufferBusyUntil}). */
    public static final long BLOCKED_ON_BUFFER = -3;

    private static final long UNSIGNALED = -1L;
    private static final ValueLayout.OfLong BIG_ENDIAN_LONG = ValueLayout.JAVA_LONG.withOrder(ByteOrder.BIG_ENDIAN);
    private static final int INBOX_CHUNK = 16;

    /** Told about progress on the dispatcher thread: completions, arrivals, credits, failures. */
    public interface Listener {
        void onProgress(QpEngine engine);
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
    private final MemoryRegion recv;
    private final MemoryRegion creditWords;
    private final EngineConfig config;
    private final PollingDispatcher dispatcher;
    private final QpStats stats = new QpStats();
    private final int bufferSize;
    private final int maxInline;
    private Listener listener = e -> { };
    private Peer peer;
    private int grantedBits;
    private RuntimeException failure;

    // ---- send window: a ring of R >= 4 x sendDepth entries, indexed by sequence number ----
    private final int ringMask;
    private final byte[] ringKind;
    private final int[] ringSize;
    private final long[] ringLocalOffset;
    private final long[] ringPostNanos;
    private final long[] ringResult;
    private final SendCompletion[] ringOps;
    private long posted;
    private long completed;
    private long awaited;
    private long lastSignaled;
    private long lastPeerReposted;

    // ---- buffers in flight: per data buffer, the last work request (sequence number) that ...
    /** ... reads it after the post (a send or write that is not inline) */
    private final long[] readFrom;
    /** ... fills it (a READ) */
    private final long[] readInto;
    /** ... gets an atomic's old value at its completion */
    private final long[] atomicInto;
    private final long resultWords;

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

    // ---- receiving: posted slots, slots held while the inbox is full, the inbox ----
    private final ReceiveSlot[] slots;
    private final int[] heldSlot;
    private final int[] heldLength;
    private final int[] heldImm;
    private final byte[] heldFlags;
    private int heldHead;
    private int heldSize;
    private final int inboxDepth;
    private final MemorySegment[] inboxChunks;
    private final int[] inboxLength;
    private final int[] inboxImm;
    private final byte[] inboxFlags;
    private int inboxHead;
    private int inboxSize;
    private boolean sink;

    private static final byte HAS_IMM = 1;
    private static final byte RDMA_WRITE = 2;

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
        this.recv = recv;
        this.creditWords = creditWords;
        this.config = config;
        this.dispatcher = dispatcher;
        this.bufferSize = config.bufferSize();
        this.maxInline = Math.min(config.inlineThreshold(), qp.maxInlineData());
        if (data.length() < config.dataBytes()) throw new IllegalArgumentException("the data region is too small");
        if (recv.length() < config.receiveRegionBytes()) throw new IllegalArgumentException("the receive region is too small");
        int ring = Integer.highestOneBit(Math.max(256, 4 * config.sendDepth()) - 1) << 1;
        ringMask = ring - 1;
        ringKind = new byte[ring];
        ringSize = new int[ring];
        ringLocalOffset = new long[ring];
        ringPostNanos = new long[ring];
        ringResult = new long[ring];
        ringOps = new SendCompletion[ring];
        for (int i = 0; i < ring; i++) ringOps[i] = new SendCompletion();
        creditSourceOffset = config.creditSourceOffset();
        resultWords = config.resultWordsOffset();
        readFrom = new long[config.bufferCount()];
        readInto = new long[config.bufferCount()];
        atomicInto = new long[config.bufferCount()];
        creditBatch = Math.max(1, config.recvDepth() / 4);
        int depth = config.recvDepth();
        slots = new ReceiveSlot[depth];
        for (int i = 0; i < depth; i++) slots[i] = new ReceiveSlot(i);
        heldSlot = new int[depth];
        heldLength = new int[depth];
        heldImm = new int[depth];
        heldFlags = new byte[depth];
        inboxDepth = config.inboxDepth();
        inboxChunks = new MemorySegment[(inboxDepth + INBOX_CHUNK - 1) / INBOX_CHUNK];
        inboxLength = new int[inboxDepth];
        inboxImm = new int[inboxDepth];
        inboxFlags = new byte[inboxDepth];
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
        for (int i = 0; i < slots.length; i++) postReceive(i);
    }

    /** What the peer told about its QP; call once, before posting. */
    public void connect(Peer peer) {
        this.peer = peer;
        this.grantedBits = Access.bits(peer.granted());
    }

    /** The failure that ended this engine (an error completion, a lying peer), or null. */
    public RuntimeException failure() {
        return failure;
    }

    private void fail(RuntimeException e) {
        if (failure == null) failure = e;
        listener.onProgress(this);
    }

    private void ensureUsable() {
        if (failure != null) throw failure;
        if (peer == null) throw new IllegalStateException("QP " + index + " is not connected yet");
    }

    // ---- posting ----

    /**
     * The size an operation moves: 8 for atomics, the buffer size for {@code size == -1}, else size.
     */
    public int effectiveSize(OpKind kind, int size) {
        return kind.isAtomic() ? QueuePair.ATOMIC_SIZE : size < 0 ? bufferSize : size;
    }

    /**
     * Checks an operation's arguments without posting it; throws an {@link EngineException}
     * naming the call when they do not fit the buffers or what the peer granted.
     */
    public void check(OpKind kind, int size, int buffer, int remoteQp, int remoteBuffer, long remoteOffset) {
        ensureUsable();
        if (size < -1 && !kind.isAtomic()) {
            throw new EngineException(kind.label() + "() on QP " + index + ": size " + size + " cannot be negative (-1: the whole buffer)");
        }
        int bytes = effectiveSize(kind, size);
        if (bytes > bufferSize) {
            throw new EngineException(kind.label() + "()" + " of " + bytes + " bytes on QP " + index + " is larger than bufferSize "
                    + bufferSize, "raise bufferSize(...) before connect");
        }
        if (buffer < 0 || buffer >= config.bufferCount()) {
            throw new EngineException(kind.label() + "()" + " on QP " + index + ": buffer " + buffer + " is outside 0.."
                    + (config.bufferCount() - 1) + " (bufferCount " + config.bufferCount() + ")");
        }
        Access needed = kind.peerAccess();
        if (needed == null) return;
        if ((grantedBits & needed.bit()) == 0) {
            String declaration = switch (needed) {
                case REMOTE_WRITE -> "WRITE";
                case REMOTE_READ -> "READ";
                default -> "ATOMIC";
            };
            throw new EngineException(kind.label() + "()" + " on QP " + index + " needs " + peer.name() + " to declare remoteAccess("
                    + declaration + ")", "remoteAccess(...) before connect says what the peer may do to that side's buffers");
        }
        RemoteRegion[] regions = peer.data();
        if (remoteQp < 0 || remoteQp >= regions.length) {
            throw new EngineException(kind.label() + "()" + " on QP " + index + ": remoteQp " + remoteQp + " is outside 0.."
                    + (regions.length - 1));
        }
        long regionLength = regions[remoteQp].length();
        long buffers = regionLength / bufferSize;
        if (remoteBuffer < 0 || remoteBuffer >= buffers) {
            throw new EngineException(kind.label() + "()" + " on QP " + index + ": remoteBuffer " + remoteBuffer + " is outside 0.."
                    + (buffers - 1));
        }
        if (kind.isAtomic() && (remoteOffset & 7) != 0) {
            throw new EngineException(kind.label() + "()" + " on QP " + index + ": remoteOffset " + remoteOffset
                    + " is not 8-byte aligned (atomics work on aligned 64-bit words)");
        }
        if (remoteOffset < 0 || remoteOffset + bytes > bufferSize) {
            throw new EngineException(kind.label() + "()" + " of " + bytes + " bytes on QP " + index + " at remoteOffset " + remoteOffset
                    + " does not fit the peer's " + bufferSize + "-byte buffer");
        }
    }

    /**
     * Why {@link #post} of this kind would wait now: 0 (it would not), {@link #BLOCKED_ON_CREDIT}
     * or {@link #BLOCKED_ON_WINDOW}.
     */
    public long blockedOn(OpKind kind) {
        if (kind.consumesPeerReceive() && credits() <= 0) return BLOCKED_ON_CREDIT;
        if (posted - completed >= config.sendDepth()) return BLOCKED_ON_WINDOW;
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
        long until = switch (kind) {
            case SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM -> Math.max(readInto[buffer], atomicInto[buffer]);
            case READ -> Math.max(readFrom[buffer], atomicInto[buffer]);
            case COMPARE_AND_SWAP, FETCH_AND_ADD -> 0;
        };
        return until > completed ? until : 0;
    }

    /**
     * The work request that has to complete before this side may change [buffer] itself (copy a
     * message into it), or 0 when no posted work reads or fills it any more.
     */
    public long localWriteBusyUntil(int buffer) {
        long until = Math.max(readFrom[buffer], Math.max(readInto[buffer], atomicInto[buffer]));
        return until > completed ? until : 0;
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
        if (blocked != 0) return blocked;
        int bytes = effectiveSize(kind, size);
        if (bytes > 0 && bufferBusyUntil(kind, buffer) != 0) return BLOCKED_ON_BUFFER;
        long seq = posted + 1;
        int at = (int) (seq & ringMask);
        boolean signaled = seq % config.signalEvery() == 0;
        long localOffset = (long) buffer * bufferSize;
        long remoteAddress = 0;
        int rkey = 0;
        if (kind.peerAccess() != null) {
            RemoteRegion r = peer.data()[remoteQp];
            remoteAddress = r.address() + (long) remoteBuffer * bufferSize + remoteOffset;
            rkey = r.rkey();
        }
        SendCompletion op = ringOps[at];
        op.seq = seq;
        long wrId = signaled ? dispatcher.register(op) : UNSIGNALED;
        boolean inline = kind.mayInline() && bytes > 0 && bytes <= maxInline;
        int flags = (signaled ? SendFlags.SIGNALED : SendFlags.NONE) | (inline ? SendFlags.INLINE : 0);
        long resultWord = resultWordOf(seq);
        ringKind[at] = (byte) kind.ordinal();
        ringSize[at] = bytes;
        ringLocalOffset[at] = localOffset;
        ringResult[at] = 0;
        if (signaled) ringPostNanos[at] = System.nanoTime();
        try {
            switch (kind) {
                case SEND -> qp.postSend(wrId, data, localOffset, bytes, flags);
                case SEND_WITH_IMM -> qp.postSendWithImm(wrId, data, localOffset, bytes, imm, flags);
                case WRITE -> qp.postWrite(wrId, data, localOffset, bytes, remoteAddress, rkey, flags);
                case WRITE_WITH_IMM -> qp.postWriteWithImm(wrId, data, localOffset, bytes, remoteAddress, rkey, imm, flags);
                case READ -> qp.postRead(wrId, data, localOffset, bytes, remoteAddress, rkey, flags);
                case COMPARE_AND_SWAP -> qp.postCompareAndSwap(wrId, recv, resultWord, remoteAddress, rkey, compareAdd, swap, flags);
                case FETCH_AND_ADD -> qp.postFetchAndAdd(wrId, recv, resultWord, remoteAddress, rkey, compareAdd, flags);
            }
        } catch (RuntimeException e) {
            if (signaled) dispatcher.unregister(wrId);
            throw e;
        }
        posted = seq;
        if (bytes > 0) {
            switch (kind) {
                case SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM -> {
                    if (!inline) readFrom[buffer] = seq; // inline data was copied at the post
                }
                case READ -> readInto[buffer] = seq;
                case COMPARE_AND_SWAP, FETCH_AND_ADD -> atomicInto[buffer] = seq;
            }
        }
        stats.posted++;
        stats.bytesPosted += bytes;
        if (signaled) lastSignaled = seq;
        if (kind.consumesPeerReceive()) stats.messagesSent++;
        // Work requests nobody awaits are forgotten once the ring wraps.
        if (posted - awaited > ringMask + 1) awaited = posted - ringMask - 1;
        return seq;
    }

    // ---- completions of posted work ----

    /** The last sequence number posted. */
    public long posted() {
        return posted;
    }

    /** Every work request up to this sequence number has completed. */
    public long completedThrough() {
        return completed;
    }

    /** Posted and not yet awaited ({@link #nextToAwait}). */
    public int outstanding() {
        return (int) (posted - awaited);
    }

    /** The oldest work request not yet awaited, or 0 when there is none. */
    public long nextToAwait() {
        return awaited < posted ? awaited + 1 : 0;
    }

    /** Marks every work request up to [seq] as awaited. */
    public void markAwaited(long seq) {
        if (seq > awaited) awaited = Math.min(seq, posted);
    }

    /** What work request [seq] was; valid while it is among the last posted (the ring). */
    public OpKind kindOf(long seq) {
        return OpKind.of(ringKind[(int) (seq & ringMask)]);
    }

    public int sizeOf(long seq) {
        return ringSize[(int) (seq & ringMask)];
    }

    /** An atomic's old value at the peer, read when it completed (0 for other kinds). */
    public long resultOf(long seq) {
        return ringResult[(int) (seq & ringMask)];
    }

    /**
     * Makes sure work request [seq] will report its completion: when no signaled work request at or
     * after it is posted, the engine posts its own signaled credit write behind it (now, or when the
     * one in flight completes). Without a peer credit word there is nothing to post: with selective
     * signaling, a wait then depends on a later signaled post.
     */
    public void requestCompletionOf(long seq) {
        if (seq <= completed || seq <= lastSignaled || seq > posted) return;
        if (peer == null || peer.creditWord() == null || creditsStopped) return;
        if (creditInFlight) {
            if (creditCovers < seq) flushWanted = Math.max(flushWanted, seq);
            return;
        }
        postCreditWrite();
    }

    /**
     * The result word of work request [seq]: at most sendDepth are in flight, numbered
     * consecutively, so seq mod sendDepth names a word no other one in flight uses.
     */
    private long resultWordOf(long seq) {
        return resultWords + (seq % config.sendDepth()) * 8;
    }

    private void completeThrough(long seq) {
        for (long s = completed + 1; s <= seq; s++) {
            int at = (int) (s & ringMask);
            OpKind kind = OpKind.of(ringKind[at]);
            stats.operations++;
            if (kind.writesLocalBuffer()) {
                stats.bytesReceived += ringSize[at];
                if (kind.isAtomic()) {
                    long old = recv.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, resultWordOf(s));
                    ringResult[at] = old;
                    // In completion order: the buffer ends with the old value of the last atomic aimed at it.
                    data.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, ringLocalOffset[at], old);
                }
            } else {
                stats.bytesSent += ringSize[at];
            }
            stats.completedInWarmup(s, kind.writesLocalBuffer(), ringSize[at]);
        }
        if (seq > completed) completed = seq;
    }

    private final class SendCompletion implements PendingOperation {
        long seq;

        @Override
        public void complete(WorkCompletions completions, int i) {
            if (!completions.isSuccess(i)) {
                failed(completions, i, kindOf(seq).label());
                return;
            }
            long now = System.nanoTime();
            long latency = Math.max(0, now - ringPostNanos[(int) (seq & ringMask)]);
            stats.latency.recordValue(latency);
            stats.latencyInWarmup(seq, latency);
            completeThrough(seq);
            listener.onProgress(QpEngine.this);
        }

        @Override
        public void fail(Throwable cause) {
            // the dispatcher shut down: whoever waits hears it from the session
        }
    }

    private void failed(WorkCompletions completions, int i, String what) {
        WcStatus status = completions.status(i);
        if (status == WcStatus.WR_FLUSH_ERR && failure != null) return;
        VerbsException v = completions.failure(i);
        String down = portDown();
        String trouble = status == WcStatus.RETRY_EXC_ERR ? qp.connectionTrouble() : null;
        String hint = down != null ? PORT_DOWN_HINT : trouble != null ? CONNECTION_HINT : v.hint();
        fail(new VerbsException(what + " on QP " + index + " (qpn " + qp.qpNum() + ") failed with " + status.name()
                + ": " + status.text() + (down == null ? "" : "; " + down) + (trouble == null ? "" : "; " + trouble), hint));
    }

    /** When the provider said why the QP could not reach its peer: the GID is not the question then. */
    private static final String CONNECTION_HINT = "the peer's soft0 listener must answer this side within the"
            + " scenario's --timeout: check that the peer still runs and that its address is reachable from here (a"
            + " flood of connections to a soft0 port is named above when one was seen)";

    private static final String PORT_DOWN_HINT =
            "the link under the device went down: bring it up (ip link set DEV up; rdma link show) and run again";

    /**
     * "port 1 of rxe0 is DOWN" when the QP's port is not active, else null: a device fails work
     * requests when its link goes down, and the status alone (rxe says LOC_QP_OP_ERR) does not tell.
     * The port's state may change only after the failure (rxe updates it asynchronously), so this
     * adds what was seen; the status's hint covers the rest.
     */
    private String portDown() {
        try {
            Context context = qp.protectionDomain().context();
            PortAttributes p = context.queryPort(qp.port());
            if (p.state() == PortAttributes.PortState.ACTIVE) return null;
            return "port " + qp.port() + " of " + context.deviceName() + " is " + p.state();
        } catch (RuntimeException e) {
            return null; // the device is gone too: the status says what there is to say
        }
    }

    // ---- credits: sender side ----

    /** Receive-consuming work requests the peer can take now. */
    public long credits() {
        if (peer == null || peer.creditWord() == null) return Long.MAX_VALUE;
        VarHandle.acquireFence(); // the HCA wrote it: read the current value
        long reposted = creditWords.segment().get(BIG_ENDIAN_LONG, index * 8L);
        if (reposted != lastPeerReposted) {
            if (reposted < lastPeerReposted || reposted > stats.messagesSent) {
                fail(new EngineException(peer.name() + " reported " + reposted + " re-posted receives on QP " + index
                        + " after " + lastPeerReposted + ", but was sent only " + stats.messagesSent
                        + " messages: it is not a compatible rdma-run"));
                return 0;
            }
            lastPeerReposted = reposted;
        }
        return peer.recvDepth() + reposted - stats.messagesSent;
    }

    // ---- credits: receiver side ----

    private void postCreditWrite() {
        recv.segment().set(BIG_ENDIAN_LONG, creditSourceOffset, reposted);
        reported = reposted;
        creditCovers = posted;
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
        if (reposted - reported >= creditBatch || flushWanted > completed && flushWanted > lastSignaled) postCreditWrite();
    }

    private final class CreditWrite implements PendingOperation {
        @Override
        public void complete(WorkCompletions completions, int i) {
            creditInFlight = false;
            if (!completions.isSuccess(i)) {
                if (!creditsStopped) failed(completions, i, "credit update");
                return;
            }
            completeThrough(creditCovers);
            returnCredits();
            listener.onProgress(QpEngine.this);
        }

        @Override
        public void fail(Throwable cause) {
        }
    }

    /** Ends credit updates (both sides finished: nothing more will be sent). */
    public void stopCredits() {
        creditsStopped = true;
    }

    /** A credit write is still in flight. */
    public boolean creditWriteInFlight() {
        return creditInFlight;
    }

    // ---- receiving ----

    private void postReceive(int slot) {
        long wrId = dispatcher.register(slots[slot]);
        try {
            qp.postReceive(wrId, recv, (long) slot * bufferSize, bufferSize);
        } catch (RuntimeException e) {
            dispatcher.unregister(wrId);
            throw e;
        }
    }

    private void repost(int slot) {
        postReceive(slot);
        reposted++;
        returnCredits();
    }

    private final class ReceiveSlot implements PendingOperation {
        final int slot;

        ReceiveSlot(int slot) {
            this.slot = slot;
        }

        @Override
        public void complete(WorkCompletions completions, int i) {
            if (!completions.isSuccess(i)) {
                failed(completions, i, "receive");
                return;
            }
            int length = completions.byteLength(i);
            stats.messagesReceived++;
            stats.bytesReceived += length;
            if (sink) {
                stats.messagesNotReceived++;
                repost(slot);
                listener.onProgress(QpEngine.this);
                return;
            }
            int at = (heldHead + heldSize) % heldSlot.length;
            heldSlot[at] = slot;
            heldLength[at] = length;
            boolean imm = completions.hasImmediate(i);
            heldImm[at] = imm ? completions.immediate(i) : 0;
            heldFlags[at] = (byte) ((imm ? HAS_IMM : 0) | (completions.opcode(i) == WcOpcode.RECV_RDMA_WITH_IMM ? RDMA_WRITE : 0));
            heldSize++;
            // A receive() already waiting takes the message straight from its slot (one copy);
            // only what is left then goes to the inbox.
            listener.onProgress(QpEngine.this);
            moveHeldToInbox();
        }

        @Override
        public void fail(Throwable cause) {
        }
    }

    /** Copies held messages into the inbox while it has room, re-posting their receives. */
    private void moveHeldToInbox() {
        while (heldSize > 0 && inboxSize < inboxDepth) {
            int h = heldHead;
            int at = (inboxHead + inboxSize) % inboxDepth;
            int length = heldLength[h];
            if (length > 0 && (heldFlags[h] & RDMA_WRITE) == 0) {
                MemorySegment.copy(recv.segment(), (long) heldSlot[h] * bufferSize, inboxChunk(at),
                        (long) (at % INBOX_CHUNK) * bufferSize, length);
            }
            inboxLength[at] = length;
            inboxImm[at] = heldImm[h];
            inboxFlags[at] = heldFlags[h];
            inboxSize++;
            heldHead = (heldHead + 1) % heldSlot.length;
            heldSize--;
            repost(heldSlot[h]);
        }
    }

    /** The chunk holding inbox entry [at]; grown on first use, so an inbox that stays empty costs nothing. */
    private MemorySegment inboxChunk(int at) {
        int chunk = at / INBOX_CHUNK;
        MemorySegment c = inboxChunks[chunk];
        if (c == null) {
            c = Arena.ofAuto().allocate((long) INBOX_CHUNK * bufferSize, 8);
            inboxChunks[chunk] = c;
        }
        return c;
    }

    /** A message is waiting for a receive. */
    public boolean hasMessage() {
        return inboxSize > 0 || heldSize > 0;
    }

    /** Messages waiting for a receive (in the inbox and in their receive slots). */
    public int messagesWaiting() {
        return inboxSize + heldSize;
    }

    /** The inbox is full: arrivals keep their receive slot and the peer gets no credit for them. */
    public boolean inboxFull() {
        return inboxSize >= inboxDepth && heldSize > 0;
    }

    /** Length of the oldest waiting message. */
    public int messageLength() {
        return inboxSize > 0 ? inboxLength[inboxHead] : heldLength[heldHead];
    }

    public boolean messageHasImmediate() {
        return ((inboxSize > 0 ? inboxFlags[inboxHead] : heldFlags[heldHead]) & HAS_IMM) != 0;
    }

    /** The immediate data of the oldest waiting message (host order). */
    public int messageImmediate() {
        return inboxSize > 0 ? inboxImm[inboxHead] : heldImm[heldHead];
    }

    /** The oldest waiting message is a writeWithImm (its data went straight into this side's buffer). */
    public boolean messageIsWrite() {
        return ((inboxSize > 0 ? inboxFlags[inboxHead] : heldFlags[heldHead]) & RDMA_WRITE) != 0;
    }

    /** Copies the oldest waiting message's payload (empty for a writeWithImm) into dst at offset. */
    public void copyMessage(byte[] dst, int offset) {
        if (messageIsWrite()) return;
        int length = messageLength();
        if (inboxSize > 0) {
            int at = inboxHead;
            MemorySegment c = inboxChunks[at / INBOX_CHUNK];
            MemorySegment.copy(c, ValueLayout.JAVA_BYTE, (long) (at % INBOX_CHUNK) * bufferSize, dst, offset, length);
        } else {
            MemorySegment.copy(recv.segment(), ValueLayout.JAVA_BYTE, (long) heldSlot[heldHead] * bufferSize, dst, offset, length);
        }
    }

    /** Takes the oldest waiting message off the queue (its receive slot goes back to the peer). */
    public void releaseMessage() {
        if (hasMessage()) stats.messageReleased();
        if (inboxSize > 0) {
            inboxHead = (inboxHead + 1) % inboxDepth;
            inboxSize--;
        } else if (heldSize > 0) {
            int slot = heldSlot[heldHead];
            heldHead = (heldHead + 1) % heldSlot.length;
            heldSize--;
            repost(slot);
        } else {
            throw new IllegalStateException("no message is waiting on QP " + index);
        }
        moveHeldToInbox();
    }

    /**
     * Takes every waiting message without a receive: the leftovers of a warm-up round whose loop
     * takes none (each side only sends), which would otherwise fill the inbox before the
     * measurement starts: the oldest {@code max} at most (later ones may be the peer's measured
     * messages). Their receive slots go back to the peer. Returns how many.
     */
    public int dropWaitingMessages(long max) {
        int n = 0;
        while (n < max && hasMessage()) {
            releaseMessage();
            n++;
        }
        return n;
    }

    /**
     * This side will call no more receives: waiting messages are counted as not received and
     * dropped, and later arrivals are counted and their receives re-posted at once.
     */
    public void finishReceiving() {
        sink = true;
        while (hasMessage()) {
            stats.messagesNotReceived++;
            stats.messageDropped(messageLength());
            releaseMessage();
        }
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
        long waitingBytes = 0;
        for (int i = 0; i < inboxSize; i++) waitingBytes += inboxLength[(inboxHead + i) % inboxDepth];
        for (int i = 0; i < heldSize; i++) waitingBytes += heldLength[(heldHead + i) % heldSlot.length];
        stats.startMeasuring(posted, messagesWaiting(), waitingBytes, nanos, peerWarmupWaiting);
    }

    // ---- data buffers ----

    /** This QP's data region (bufferCount x bufferSize bytes). */
    public MemoryRegion dataRegion() {
        return data;
    }
}
