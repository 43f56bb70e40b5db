package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.WrOpcode;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;

/** A soft0 TCP peer written by hand: the attacker, or a party that knows the key (either end of the handshake). */
final class RawPeer implements AutoCloseable {
    final Socket socket;
    final DataOutputStream out;
    final DataInputStream in;

    RawPeer(InetSocketAddress at) throws IOException {
        this(new Socket(at.getAddress(), at.getPort()));
    }

    private RawPeer(Socket s) throws IOException {
        socket = s;
        socket.setSoTimeout(30_000); // a safety net against hanging, not an assertion
        out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
        in = new DataInputStream(socket.getInputStream());
    }

    /** The connection a soft0 QP opens to this listener (which stands in for its peer's). */
    static RawPeer accept(ServerSocket listener) throws IOException {
        listener.setSoTimeout(30_000);
        return new RawPeer(listener.accept());
    }

    /** The connector's side of the handshake; true when the acceptor proved it knows the key. */
    boolean authenticate(FabricKey key, boolean proveIt) throws IOException {
        byte[] nonceC = new byte[32];
        new SecureRandom().nextBytes(nonceC);
        out.writeInt(TcpHandshake.MAGIC);
        out.writeShort(TcpHandshake.VERSION);
        out.write(TcpHandshake.keyIdBytes(key));
        out.write(nonceC);
        out.flush();
        byte[] reply = new byte[6 + 32 + 32];
        in.readFully(reply);
        byte[] nonceA = Arrays.copyOfRange(reply, 6, 38);
        byte[] mac = Arrays.copyOfRange(reply, 38, 70);
        boolean ok = Arrays.equals(mac, TcpHandshake.mac(key, TcpHandshake.ACCEPTOR_LABEL, nonceC, nonceA));
        out.write(proveIt ? TcpHandshake.mac(key, TcpHandshake.CONNECTOR_LABEL, nonceA, nonceC) : new byte[32]);
        out.flush();
        return ok;
    }

    /** The acceptor's side of the handshake; true when the connector asked for key and proved it. */
    boolean acceptAuthenticated(FabricKey key) throws IOException {
        byte[] hello = new byte[4 + 2 + 8 + 32];
        in.readFully(hello);
        ByteBuffer h = ByteBuffer.wrap(hello);
        if (h.getInt() != TcpHandshake.MAGIC || h.getShort() != TcpHandshake.VERSION) return false;
        if (!Arrays.equals(Arrays.copyOfRange(hello, 6, 14), TcpHandshake.keyIdBytes(key))) return false;
        byte[] nonceC = Arrays.copyOfRange(hello, 14, 46);
        byte[] nonceA = new byte[32];
        new SecureRandom().nextBytes(nonceA);
        out.writeInt(TcpHandshake.MAGIC);
        out.writeShort(TcpHandshake.VERSION);
        out.write(nonceA);
        out.write(TcpHandshake.mac(key, TcpHandshake.ACCEPTOR_LABEL, nonceC, nonceA));
        out.flush();
        byte[] proof = new byte[32];
        in.readFully(proof);
        return MessageDigest.isEqual(proof, TcpHandshake.mac(key, TcpHandshake.CONNECTOR_LABEL, nonceA, nonceC));
    }

    /** A packet to send (a fresh one, never pooled). */
    static Packet packet(int kind, int opcode, int dstQpn, int srcQpn, int srcLid, int psn) {
        Packet p = new Packet(new PacketPool(2));
        p.kind = kind;
        p.opcode = opcode;
        p.dstQpn = dstQpn;
        p.srcQpn = srcQpn;
        p.srcLid = srcLid;
        p.psn = psn;
        return p;
    }

    /** A WRITE request carrying payload to address, rkey. */
    static Packet writeRequest(int dstQpn, int srcQpn, int srcLid, int psn, long address, int rkey, byte[] payload) {
        Packet p = packet(Packet.REQUEST, WrOpcode.RDMA_WRITE.code(), dstQpn, srcQpn, srcLid, psn);
        p.remoteAddress = address;
        p.rkey = rkey;
        p.copyFrom(MemorySegment.ofArray(payload), 0, payload.length);
        return p;
    }

    void write(int dstQpn, int srcQpn, int srcLid, int psn, long address, int rkey, byte[] payload) throws IOException {
        send(writeRequest(dstQpn, srcQpn, srcLid, psn, address, rkey, payload));
    }

    /** Sends the frames of these packets back to back, in one write. */
    void send(Packet... packets) throws IOException {
        out.write(TcpTransportFuzzTest.frames(packets));
        out.flush();
    }

    /** The next frame, decoded (its header checked as soft0's reader checks it). */
    Packet readFrame() throws IOException {
        int length = in.readInt();
        byte[] frame = new byte[4 + length];
        ByteBuffer.wrap(frame).putInt(length);
        in.readFully(frame, 4, length);
        ByteBuffer b = ByteBuffer.wrap(frame);
        Packet p = new Packet(new PacketPool(2));
        int payload = TcpFrames.readHeader(b, p);
        if (payload < 0) throw new IOException("soft0 sent a frame its own reader refuses");
        p.payloadBuffer(payload).put(b);
        return p;
    }

    /** True when the other side closed the connection (everything it sent before is skipped). */
    boolean closedByPeer() {
        try {
            while (in.read() >= 0) {
                // what a closing peer still had to say
            }
            return true;
        } catch (java.net.SocketTimeoutException e) {
            return false; // still open after the safety net's 30 s
        } catch (IOException e) {
            return true; // reset: closed as well
        }
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
