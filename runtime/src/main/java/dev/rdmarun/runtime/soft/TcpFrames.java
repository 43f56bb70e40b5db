package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.WrOpcode;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;

/**
 * soft0's frame codec over TCP: a packet's header to and from bytes, and the reader's stream
 * handling around it (buffer fills, payloads read in place, frames skipped unread). Apart from
 * the connection so that what a peer's bytes can do is in one place, which the fuzz test drives
 * without sockets or threads.
 *
 * <p>Frames: a u32 length, a {@value #HEADER}-byte header (kind, opcode, rnr timer, QPNs, PSN, LID,
 * remote address, rkey, immediate, atomic operands, READ length, payload length) and the payload.
 * The header is read and checked first (kind, opcode, 24-bit QPNs and PSNs, lengths up to
 * max_msg_sz; a frame longer than max_msg_sz plus the header closes the connection); a frame for
 * no QP, or for a QP whose peer is not behind its connection's key, is skipped unread into memory.
 */
final class TcpFrames {
    static final int HEADER = 60;
    /** A frame's length field and header: what a reader needs before it can judge the frame. */
    static final int FRAME_HEADER = 4 + HEADER;
    /**
     * A reader's buffer: small frames (ACKs) are taken many per read from it, while most of a
     * large payload is read straight into its packet (only what came with its header is copied).
     */
    static final int READ_BUFFER = 8192;
    /** The largest payload of a next request that lets the responder defer the ACK of the one before. */
    static final int FOLLOWING_PAYLOAD = 1 << 16;

    private TcpFrames() {
    }

    /**
     * Fills payload: what came with the header is copied from the buffer; the rest is read
     * straight into the payload, and what follows it (the next frames' start) into the buffer.
     */
    static void readPayload(SocketChannel s, ByteBuffer in, ByteBuffer[] scatter, ByteBuffer payload)
            throws IOException {
        int buffered = Math.min(payload.remaining(), in.remaining());
        payload.put(0, in, in.position(), buffered).position(buffered);
        in.position(in.position() + buffered);
        if (!payload.hasRemaining()) return;
        in.clear(); // it was all this payload's
        scatter[0] = payload;
        try {
            while (payload.hasRemaining()) {
                if (s.read(scatter) < 0) throw new EOFException();
            }
        } finally {
            scatter[0] = null;
            in.flip();
        }
    }

    /**
     * Whether the buffer holds the whole header of a request for qpn (the next frame, already
     * received) whose payload is at most {@value #FOLLOWING_PAYLOAD} bytes (so it is soon here too).
     */
    static boolean nextRequestFor(ByteBuffer in, int qpn) {
        int at = in.position();
        return in.remaining() >= FRAME_HEADER && in.get(at + 4) == Packet.REQUEST && in.getInt(at + 8) == qpn
                && in.getInt(at) - HEADER <= FOLLOWING_PAYLOAD;
    }

    /** Reads until at least n bytes (at most READ_BUFFER) are unparsed in the reader's buffer. */
    static void fill(SocketChannel s, ByteBuffer in, int n) throws IOException {
        if (in.remaining() >= n) return;
        in.compact();
        while (in.position() < n) {
            if (s.read(in) < 0) throw new EOFException();
        }
        in.flip();
    }

    /** Consumes n bytes of the stream through the reader's buffer, keeping none of them. */
    static void skip(SocketChannel s, ByteBuffer in, int n) throws IOException {
        int buffered = Math.min(n, in.remaining());
        in.position(in.position() + buffered);
        n -= buffered;
        if (n == 0) return;
        while (n > 0) {
            in.clear().limit(Math.min(n, in.capacity()));
            int r = s.read(in);
            if (r < 0) throw new EOFException();
            n -= r;
        }
        in.clear().limit(0); // all of it was this frame's
    }

    /** Puts a frame's length and header for p at b's position ({@value #FRAME_HEADER} bytes, big-endian); its payload follows. */
    static void writeHeader(ByteBuffer b, Packet p) {
        b.putInt(HEADER + p.length);
        b.put((byte) p.kind);
        b.put((byte) p.opcode);
        b.put((byte) p.rnrTimer);
        b.put((byte) 0);
        b.putInt(p.dstQpn);
        b.putInt(p.srcQpn);
        b.putInt(p.psn);
        b.putInt(p.srcLid);
        b.putLong(p.remoteAddress);
        b.putInt(p.rkey);
        b.putInt(p.imm);
        b.putLong(p.compareAdd);
        b.putLong(p.swap);
        b.putInt(p.readLength);
        b.putInt(p.length);
    }

    /**
     * The length of the frame that starts at b's position (its first 4 bytes, not consumed), or -1
     * when no valid frame is that long (shorter than a header, or a payload longer than max_msg_sz).
     */
    static int frameLength(ByteBuffer b) {
        int frame = b.getInt(b.position());
        return frame < HEADER || frame - HEADER > SoftContext.MAX_MESSAGE ? -1 : frame;
    }

    /**
     * Reads one frame's length and header ({@value #FRAME_HEADER} bytes at b's position) into p;
     * returns the payload length still to read, or -1 when the frame is not a valid packet (too long
     * for max_msg_sz included). Nothing is allocated: the payload is read only after this accepted it.
     */
    static int readHeader(ByteBuffer b, Packet p) {
        int frame = frameLength(b);
        if (frame < 0) return -1;
        b.getInt();
        p.kind = b.get() & 0xff;
        p.opcode = b.get() & 0xff;
        p.rnrTimer = b.get() & 0xff;
        b.get();
        p.dstQpn = b.getInt();
        p.srcQpn = b.getInt();
        p.psn = b.getInt();
        p.srcLid = b.getInt();
        p.remoteAddress = b.getLong();
        p.rkey = b.getInt();
        p.imm = b.getInt();
        p.compareAdd = b.getLong();
        p.swap = b.getLong();
        p.readLength = b.getInt();
        int length = b.getInt();
        if (length != frame - HEADER || !valid(p)) return -1;
        return length;
    }

    private static boolean valid(Packet p) {
        if (p.kind < Packet.REQUEST || p.kind > Packet.MAX_KIND) return false;
        if (p.kind == Packet.REQUEST && WrOpcode.of(p.opcode) == null) return false;
        if (p.kind == Packet.NAK && (p.opcode < 1 || p.opcode > Packet.MAX_SYNDROME)) return false;
        if (p.rnrTimer > 31 || p.readLength < 0 || p.readLength > SoftContext.MAX_MESSAGE) return false;
        if ((p.dstQpn & ~0xffffff) != 0 || (p.srcQpn & ~0xffffff) != 0 || (p.psn & ~0xffffff) != 0) return false;
        return (p.srcLid & ~0xffff) == 0;
    }
}
