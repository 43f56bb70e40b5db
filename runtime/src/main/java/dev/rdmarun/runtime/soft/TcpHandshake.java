package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.FabricKey;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The authentication of a soft0 TCP connection, both roles: what each side sends and checks
 * before any frame. Apart from the connection so that the bytes a stranger can send before it
 * proved the key are read in one small place.
 *
 * <p>All big-endian; {@code HMAC} is HMAC-SHA256 keyed by the fabric key, nonces from
 * SecureRandom, MACs compared in constant time:
 * <ol>
 *   <li>connector: {@value #MAGIC_TEXT} (u32), version {@value #VERSION} (u16), key id (8 bytes: the
 *       first 8 of SHA-256("rdma-run soft0 key id" ‖ key), never the key), nonce C (32 bytes);</li>
 *   <li>acceptor (knows the key: a QP of its context uses it over TCP; else it closes):
 *       magic, version, nonce A (32), HMAC("rdma-run soft0 acceptor" ‖ C ‖ A) (32);</li>
 *   <li>connector checks that MAC (else closes) and sends HMAC("rdma-run soft0 connector" ‖ A ‖ C) (32);
 *       the acceptor checks it (else closes).</li>
 * </ol>
 * A connection must finish this within {@value #AUTH_DEADLINE_MS} ms ({@link #readExactly}).
 */
final class TcpHandshake {
    static final String MAGIC_TEXT = "RDSW";
    static final int MAGIC = 0x52445357;
    static final int VERSION = 2;
    static final int KEY_ID_LENGTH = 8;
    static final int NONCE_LENGTH = 32;
    static final int MAC_LENGTH = 32;
    static final int AUTH_DEADLINE_MS = 2000;
    private static final byte[] KEY_ID_LABEL = "rdma-run soft0 key id".getBytes(StandardCharsets.US_ASCII);
    static final byte[] ACCEPTOR_LABEL = "rdma-run soft0 acceptor".getBytes(StandardCharsets.US_ASCII);
    static final byte[] CONNECTOR_LABEL = "rdma-run soft0 connector".getBytes(StandardCharsets.US_ASCII);
    private static final SecureRandom RANDOM = new SecureRandom();

    private TcpHandshake() {
    }

    /**
     * Acceptor: steps 1 to 3 on an accepted connection. The key the connector proved, or null when
     * it sent garbage, a key no QP here uses, or a wrong proof (the caller then closes it).
     */
    static FabricKey accept(TcpConnection c, SoftContext context, InputStream in, OutputStream o) throws IOException {
        byte[] hello = readExactly(c, in, 4 + 2 + KEY_ID_LENGTH + NONCE_LENGTH);
        if (!startsRight(hello)) return null;
        FabricKey k = context.keyById(HexFormat.of().formatHex(hello, 6, 6 + KEY_ID_LENGTH));
        if (k == null) return null; // no QP here uses that key
        byte[] nonceC = java.util.Arrays.copyOfRange(hello, 6 + KEY_ID_LENGTH, hello.length);
        byte[] nonceA = new byte[NONCE_LENGTH];
        RANDOM.nextBytes(nonceA);
        byte[] reply = start(4 + 2 + NONCE_LENGTH + MAC_LENGTH);
        System.arraycopy(nonceA, 0, reply, 6, NONCE_LENGTH);
        System.arraycopy(mac(k, ACCEPTOR_LABEL, nonceC, nonceA), 0, reply, 6 + NONCE_LENGTH, MAC_LENGTH);
        o.write(reply);
        o.flush();
        byte[] proof = readExactly(c, in, MAC_LENGTH);
        if (!MessageDigest.isEqual(proof, mac(k, CONNECTOR_LABEL, nonceA, nonceC))) return null;
        return k;
    }

    /**
     * Connector: steps 1 to 3 on a new outbound connection, proving key; throws when the listener
     * is no soft0 one or does not know the key. Notes on c when the hello went out and when it was
     * answered ({@link TcpConnection#trouble} tells a listener that closed before answering).
     */
    static void connect(TcpConnection c, FabricKey key, InputStream in, OutputStream o) throws IOException {
        byte[] nonceC = new byte[NONCE_LENGTH];
        RANDOM.nextBytes(nonceC);
        byte[] hello = start(4 + 2 + KEY_ID_LENGTH + NONCE_LENGTH);
        System.arraycopy(keyIdBytes(key), 0, hello, 6, KEY_ID_LENGTH);
        System.arraycopy(nonceC, 0, hello, 6 + KEY_ID_LENGTH, NONCE_LENGTH);
        o.write(hello);
        o.flush();
        c.helloSent = true;
        byte[] reply = readExactly(c, in, 4 + 2 + NONCE_LENGTH + MAC_LENGTH);
        c.answered = true;
        if (!startsRight(reply)) {
            throw new IOException("not a soft0 listener");
        }
        byte[] nonceA = java.util.Arrays.copyOfRange(reply, 6, 6 + NONCE_LENGTH);
        byte[] theirs = java.util.Arrays.copyOfRange(reply, 6 + NONCE_LENGTH, reply.length);
        if (!MessageDigest.isEqual(theirs, mac(key, ACCEPTOR_LABEL, nonceC, nonceA))) {
            throw new IOException("the listener does not know the key");
        }
        o.write(mac(key, CONNECTOR_LABEL, nonceA, nonceC));
        o.flush();
    }

    /**
     * Reads n bytes before the authentication deadline (the sweeper closes the socket when it
     * passes; the read timeout only keeps one read from waiting past it).
     */
    private static byte[] readExactly(TcpConnection c, InputStream in, int n) throws IOException {
        byte[] b = new byte[n];
        int got = 0;
        SocketChannel channel = c.socket;
        Socket s = channel == null ? null : channel.socket();
        while (got < n) {
            long left = TimeUnit.NANOSECONDS.toMillis(c.openedAt + TimeUnit.MILLISECONDS.toNanos(AUTH_DEADLINE_MS)
                    - System.nanoTime());
            if (left <= 0 || s == null) throw new SocketTimeoutException("authentication deadline");
            s.setSoTimeout((int) left);
            int r = in.read(b, got, n - got);
            if (r < 0) throw new EOFException();
            c.heard = true;
            got += r;
        }
        s.setSoTimeout(0);
        return b;
    }

    /** The key id sent in the clear: a truncated hash, so the key itself never crosses the wire. */
    static String keyId(FabricKey key) {
        return HexFormat.of().formatHex(keyIdBytes(key));
    }

    static byte[] keyIdBytes(FabricKey key) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update(KEY_ID_LABEL);
            byte[] digest = sha.digest(key.toBytes());
            byte[] id = new byte[KEY_ID_LENGTH];
            System.arraycopy(digest, 0, id, 0, KEY_ID_LENGTH);
            return id;
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("the JDK has no SHA-256", e);
        }
    }

    static byte[] mac(FabricKey key, byte[] label, byte[] first, byte[] second) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key.toBytes(), "HmacSHA256"));
            mac.update(label);
            mac.update(first);
            return mac.doFinal(second);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("the JDK has no HmacSHA256", e);
        }
    }

    /** A message of n bytes that starts with the magic and the version, as both roles' first ones do. */
    private static byte[] start(int n) {
        byte[] b = new byte[n];
        writeInt(b, 0, MAGIC);
        b[4] = (byte) (VERSION >>> 8);
        b[5] = (byte) VERSION;
        return b;
    }

    /** Whether a first message starts with the magic and this version. */
    private static boolean startsRight(byte[] b) {
        return readInt(b, 0) == MAGIC && ((b[4] & 0xff) << 8 | b[5] & 0xff) == VERSION;
    }

    private static int readInt(byte[] b, int at) {
        return (b[at] & 0xff) << 24 | (b[at + 1] & 0xff) << 16 | (b[at + 2] & 0xff) << 8 | b[at + 3] & 0xff;
    }

    private static void writeInt(byte[] b, int at, int v) {
        b[at] = (byte) (v >>> 24);
        b[at + 1] = (byte) (v >>> 16);
        b[at + 2] = (byte) (v >>> 8);
        b[at + 3] = (byte) v;
    }
}
