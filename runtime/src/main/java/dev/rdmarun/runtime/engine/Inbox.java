package dev.rdmarun.runtime.engine;

import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.PendingOperation;
import dev.rdmarun.runtime.PollingDispatcher;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.WcOpcode;
import dev.rdmarun.runtime.WorkCompletions;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The receive side of one QP: the posted receive slots, the messages held in their slots while
 * the inbox is full, and the inbox, a bounded copy of arrived messages so that a peer can send
 * before this side asks. Apart from the engine because receiving shares nothing with the send
 * window; it tells {@link CreditFlow} each receive it posts again.
 */
final class Inbox {
    private static final int INBOX_CHUNK = 16;
    private static final byte HAS_IMM = 1;
    private static final byte RDMA_WRITE = 2;

    private final QpEngine engine;
    private final CreditFlow credits;
    private final QpStats stats;
    private final int index;
    private final QueuePair qp;
    private final MemoryRegion recv;
    private final PollingDispatcher dispatcher;
    private final int bufferSize;

    // ---- posted slots, slots held while the inbox is full, the inbox ----
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

    Inbox(QpEngine engine, CreditFlow credits, QpStats stats, QueuePair qp, MemoryRegion recv, EngineConfig config,
          PollingDispatcher dispatcher) {
        this.engine = engine;
        this.credits = credits;
        this.stats = stats;
        this.index = engine.index();
        this.qp = qp;
        this.recv = recv;
        this.dispatcher = dispatcher;
        this.bufferSize = config.bufferSize();
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

    void postInitialReceives() {
        for (int i = 0; i < slots.length; i++) postReceive(i);
    }

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
        credits.reposted();
    }

    /** A posted receive: its completion holds the message in the slot, or (sink) drops it. */
    private final class ReceiveSlot implements PendingOperation {
        final int slot;

        ReceiveSlot(int slot) {
            this.slot = slot;
        }

        @Override
        public void complete(WorkCompletions completions, int i) {
            if (!completions.isSuccess(i)) {
                engine.failed(completions, i, "receive");
                return;
            }
            int length = completions.byteLength(i);
            stats.arrived(completions.polledNanos(), length);
            if (sink) {
                stats.messagesNotReceived++;
                repost(slot);
                engine.progress(Progress.MESSAGE_ARRIVED);
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
            engine.progress(Progress.MESSAGE_ARRIVED);
            moveHeldToInbox();
        }

        @Override
        public void fail(Throwable cause) {
            engine.fail(EngineException.unchecked(cause)); // as Sender's: the dispatcher stopped
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

    boolean hasMessage() {
        return inboxSize > 0 || heldSize > 0;
    }

    int messagesWaiting() {
        return inboxSize + heldSize;
    }

    boolean full() {
        return inboxSize >= inboxDepth && heldSize > 0;
    }

    int messageLength() {
        waiting();
        return inboxSize > 0 ? inboxLength[inboxHead] : heldLength[heldHead];
    }

    boolean messageHasImmediate() {
        waiting();
        return ((inboxSize > 0 ? inboxFlags[inboxHead] : heldFlags[heldHead]) & HAS_IMM) != 0;
    }

    int messageImmediate() {
        waiting();
        return inboxSize > 0 ? inboxImm[inboxHead] : heldImm[heldHead];
    }

    boolean messageIsWrite() {
        waiting();
        return ((inboxSize > 0 ? inboxFlags[inboxHead] : heldFlags[heldHead]) & RDMA_WRITE) != 0;
    }

    void copyMessage(byte[] dst, int offset) {
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

    /** The oldest message's fields are read only while one waits: else they are the last one's. */
    private void waiting() {
        if (!hasMessage()) throw new IllegalStateException("no message is waiting on QP " + index);
    }

    void releaseMessage() {
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

    /** See {@link QpEngine#dropWaitingMessages}. */
    int drop(long max) {
        int n = 0;
        while (n < max && hasMessage()) {
            releaseMessage();
            n++;
        }
        return n;
    }

    /** See {@link QpEngine#finishReceiving}. */
    void finish() {
        sink = true;
        while (hasMessage()) {
            stats.messagesNotReceived++;
            stats.messageDropped(messageLength());
            releaseMessage();
        }
    }

    /** Bytes of the messages waiting for a receive. */
    long waitingBytes() {
        long waitingBytes = 0;
        for (int i = 0; i < inboxSize; i++) waitingBytes += inboxLength[(inboxHead + i) % inboxDepth];
        for (int i = 0; i < heldSize; i++) waitingBytes += heldLength[(heldHead + i) % heldSlot.length];
        return waitingBytes;
    }
}
