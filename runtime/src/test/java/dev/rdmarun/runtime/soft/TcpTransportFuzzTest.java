package dev.rdmarun.runtime.soft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.rdmarun.runtime.WrOpcode;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * soft0's packet decoder against whatever an authenticated peer may send, fed as the reader
 * feeds it: {@link TcpFrames#frameLength} once 4 bytes are there, {@link
 * TcpFrames#readHeader} once a whole header is, then the payload into {@link
 * Packet#payloadBuffer(int)}. They give a packet inside the documented ranges, or -1 (the
 * connection ends), or the stream ends inside a frame, and nothing else; they allocate at most
 * what max_msg_sz allows. In a normal build this runs the seed corpus in
 * TcpTransportFuzzTestInputs/; e2e/fuzz.sh fuzzes it.
 */
class TcpTransportFuzzTest {
    private static final PacketPool POOL = new PacketPool(2);

    @FuzzTest(maxDuration = "60s")
    void read(byte[] input) {
        ByteBuffer in = ByteBuffer.wrap(input);
        // One packet for the whole stream, as the reader loop reuses pooled packets (never released: a fresh one per input).
        Packet p = new Packet(POOL);
        int offset = 0;
        while (true) {
            if (in.remaining() < 4) return; // the stream ended inside a frame: the documented outcome
            if (TcpFrames.frameLength(in) < 0) return;
            if (in.remaining() < TcpFrames.FRAME_HEADER) return;
            int length = TcpFrames.readHeader(in, p);
            if (length < 0) return;
            if (in.remaining() < length) return;
            p.payloadBuffer(length).put(in.slice(in.position(), length));
            in.position(in.position() + length);
            assertTrue(p.capacity() <= Math.max(256, SoftContext.MAX_MESSAGE), "payload buffer of " + p.capacity() + " bytes");
            assertTrue(p.kind >= Packet.REQUEST && p.kind <= Packet.MAX_KIND, "kind " + p.kind);
            assertTrue((p.dstQpn | p.srcQpn | p.psn) >>> 24 == 0, "24-bit QPNs and PSN");
            assertTrue(p.srcLid >>> 16 == 0, "16-bit LID");
            assertTrue(p.rnrTimer <= 31, "RNR timer " + p.rnrTimer);
            assertTrue(p.readLength >= 0 && p.readLength <= SoftContext.MAX_MESSAGE, "READ length " + p.readLength);
            assertTrue(p.length >= 0 && p.length <= SoftContext.MAX_MESSAGE, "payload length " + p.length);
            // A valid frame is exactly what the encoder writes for that packet (the reserved byte aside).
            byte[] encoded = frames(p);
            byte[] consumed = Arrays.copyOfRange(input, offset, offset + encoded.length);
            consumed[7] = 0; // after the u32 length: kind, opcode, rnr timer, reserved
            assertArrayEquals(consumed, encoded);
            offset += encoded.length;
        }
    }

    /** A frame just over half of max_msg_sz after a smaller one: the buffer grows to the frame, not to twice the old one. */
    @Test
    void payloadBufferNeverGrowsPastMaxMessage() {
        Packet p = new Packet(POOL);
        p.ensureCapacity(9 << 20);
        p.ensureCapacity(10 << 20);
        assertEquals(SoftContext.MAX_MESSAGE, p.capacity());
    }

    /** Rewrites the generated seeds; run with -Drdmarun.fuzz.writeSeeds=true after changing the wire format. */
    @Test
    @EnabledIfSystemProperty(named = "rdmarun.fuzz.writeSeeds", matches = "true")
    void writeSeeds() throws IOException {
        Path dir = Path.of("src/test/resources/dev/rdmarun/runtime/soft/TcpTransportFuzzTestInputs/read");
        Files.createDirectories(dir);
        Packet send = packet(Packet.REQUEST, WrOpcode.SEND_WITH_IMM.code(), "hello soft0");
        send.imm = 0x01020304;
        Packet read = packet(Packet.REQUEST, WrOpcode.RDMA_READ.code(), "");
        read.remoteAddress = 0x7f00_0000_1000L;
        read.rkey = 0x42;
        read.readLength = 4096;
        Packet cas = packet(Packet.REQUEST, WrOpcode.ATOMIC_CMP_AND_SWP.code(), "");
        cas.compareAdd = 1;
        cas.swap = 2;
        Packet ack = packet(Packet.ACK, 0, "");
        Packet rnr = packet(Packet.NAK, Packet.NAK_RNR, "");
        rnr.rnrTimer = 14;
        Packet readResponse = packet(Packet.READ_RESPONSE, 0, "x".repeat(300));
        Files.write(dir.resolve("send-with-imm"), frames(send));
        Files.write(dir.resolve("read-request"), frames(read));
        Files.write(dir.resolve("atomic-cas"), frames(cas));
        Files.write(dir.resolve("ack-then-rnr-nak"), frames(ack, rnr));
        Files.write(dir.resolve("read-response"), frames(readResponse));
        byte[] whole = frames(send);
        Files.write(dir.resolve("send-truncated"), Arrays.copyOf(whole, whole.length - 3));
        byte[] badKind = frames(ack);
        badKind[4] = 9;
        Files.write(dir.resolve("bad-kind"), badKind);
        byte[] lengthMismatch = frames(send);
        lengthMismatch[3]++;
        Files.write(dir.resolve("length-mismatch"), lengthMismatch);
        Files.write(dir.resolve("frame-too-big"), new byte[] {0x7f, -1, -1, -1, 1, 2, 0, 0});
    }

    private static Packet packet(int kind, int opcode, String payload) {
        Packet p = new Packet(POOL);
        p.kind = kind;
        p.opcode = opcode;
        p.dstQpn = 0x000101;
        p.srcQpn = 0x000202;
        p.psn = 0xabcdef;
        p.srcLid = 40000;
        byte[] bytes = payload.getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        p.copyFrom(MemorySegment.ofArray(bytes), 0, bytes.length);
        return p;
    }

    /** The frames the transport's writer sends for these packets, back to back. */
    static byte[] frames(Packet... packets) {
        var out = new ByteArrayOutputStream();
        for (Packet p : packets) {
            ByteBuffer frame = ByteBuffer.allocate(TcpFrames.FRAME_HEADER + p.length);
            TcpFrames.writeHeader(frame, p);
            frame.put(p.payloadBuffer());
            out.write(frame.array(), 0, frame.capacity());
        }
        return out.toByteArray();
    }
}
