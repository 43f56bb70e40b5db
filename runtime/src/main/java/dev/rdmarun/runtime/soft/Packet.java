package dev.rdmarun.runtime.soft;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * One message of the software fabric: a request (one whole work request: the emulation does not
 * split messages into MTU-sized packets, so one PSN per message) or a response (ACK, NAK, READ
 * data, atomic result). Packets are pooled and reused: a request becomes its own response at the
 * responder, so a message costs no allocation once the pool is warm.
 */
final class Packet {
    // kinds
    static final int REQUEST = 1, ACK = 2, NAK = 3, READ_RESPONSE = 4, ATOMIC_RESPONSE = 5;
    static final int MAX_KIND = ATOMIC_RESPONSE;
    // NAK syndromes (IB spec AETH: RNR NAK, and the NAK codes rdma-run meets)
    static final int NAK_RNR = 1, NAK_INVALID_REQUEST = 2, NAK_REMOTE_ACCESS = 3, NAK_REMOTE_OPERATIONAL = 4;
    static final int MAX_SYNDROME = NAK_REMOTE_OPERATIONAL;
    /** Payload bytes of a new packet: headers-only responses and small messages never grow it. */
    static final int INITIAL_CAPACITY = 256;

    /** The pool this packet returns to. */
    final PacketPool pool;

    int kind;
    /** REQUEST: ibv_wr_opcode code; NAK: syndrome. */
    int opcode;
    /** RNR NAK: the responder's min_rnr_timer (encoded, 0..31). */
    int rnrTimer;
    int dstQpn;
    int srcQpn;
    int psn;
    /** The requester's port LID: the responder checks it against the QP's address vector. */
    int srcLid;
    long remoteAddress;
    int rkey;
    int imm;
    /** Atomic request: compare/add operand; atomic response: the original value. */
    long compareAdd;
    long swap;
    /** READ request: how many bytes to read (its response carries them as payload). */
    int readLength;

    /**
     * Payload: SEND/WRITE data of a request, READ data of a response; [0, length) of a direct
     * buffer, so the TCP transport reads and writes it with no copy through the JDK's own
     * temporary direct buffers. {@link #payload} is the same memory, for copies to and from regions.
     */
    private ByteBuffer buffer = ByteBuffer.allocateDirect(INITIAL_CAPACITY);
    private MemorySegment payload = MemorySegment.ofBuffer(buffer);
    int length;

    /**
     * Request: the next request for the same QP had already arrived behind this one (the TCP reader
     * saw its header), so the responder may leave this one's ACK to a later, cumulative one.
     */
    boolean followed;

    /** Where a response to this packet goes (the link it arrived on); set by the receiving side. */
    Link replyLink;
    /** Outbound hop this packet waits for when its link was busy (see {@link Engine#send}). */
    Link via;

    Packet(PacketPool pool) {
        this.pool = pool;
    }

    /** Back to its pool; the caller must not touch it afterwards. */
    void release() {
        pool.release(this);
    }

    void reset() {
        kind = opcode = rnrTimer = dstQpn = srcQpn = psn = srcLid = rkey = imm = readLength = length = 0;
        remoteAddress = compareAdd = swap = 0L;
        followed = false;
        replyLink = via = null;
    }

    /** Grows the payload buffer to at least n bytes, doubling but never past max_msg_sz (a peer's frame sets n). */
    void ensureCapacity(int n) {
        if (buffer.capacity() < n) {
            buffer = ByteBuffer.allocateDirect((int) Math.max(n, Math.min(buffer.capacity() * 2L, SoftContext.MAX_MESSAGE)));
            payload = MemorySegment.ofBuffer(buffer);
        }
    }

    int capacity() {
        return buffer.capacity();
    }

    /** Gives a grown payload buffer up (the pool keeps only so much, {@link PacketPool#RETAINED_BYTES}). */
    void shrink() {
        if (buffer.capacity() > INITIAL_CAPACITY) {
            buffer = ByteBuffer.allocateDirect(INITIAL_CAPACITY);
            payload = MemorySegment.ofBuffer(buffer);
        }
    }

    /** The payload as a buffer positioned at 0 with limit length: what a frame carries after its header. */
    ByteBuffer payloadBuffer() {
        return buffer.clear().limit(length);
    }

    /** A buffer of n bytes at 0 to read a payload into (grown first); the payload is then n bytes long. */
    ByteBuffer payloadBuffer(int n) {
        ensureCapacity(n);
        length = n;
        return buffer.clear().limit(n);
    }

    /** Copies [offset, offset+n) of memory into the payload. */
    void copyFrom(MemorySegment memory, long offset, int n) {
        ensureCapacity(n);
        MemorySegment.copy(memory, offset, payload, 0, n);
        length = n;
    }

    /** Copies the payload into memory at offset. */
    void copyTo(MemorySegment memory, long offset) {
        MemorySegment.copy(payload, 0, memory, offset, length);
    }

    boolean isRequest() {
        return kind == REQUEST;
    }

    /** IB spec encoding of min_rnr_timer in microseconds (0 = 655.36 ms, 1 = 0.01 ms ... 31 = 491.52 ms). */
    private static final long[] RNR_DELAY_MICROS = {655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
            1_280, 1_920, 2_560, 3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
            163_840, 245_760, 327_680, 491_520};

    /** The back-off an RNR NAK's {@link #rnrTimer} asks for. */
    static long rnrDelayNanos(int timer) {
        return RNR_DELAY_MICROS[timer & 31] * 1000L;
    }
}
