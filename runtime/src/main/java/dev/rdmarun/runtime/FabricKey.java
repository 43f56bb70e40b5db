package dev.rdmarun.runtime;

import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.spec.AlgorithmParameterSpec;
import java.security.SecureRandom;
import java.util.Arrays;
import javax.crypto.KDF;
import javax.crypto.spec.HKDFParameterSpec;

/**
 * The secret two peers share for the connection between their QPs on the software provider
 * (soft0): each soft0 TCP connection proves it (an HMAC challenge-response) before any of its
 * packets is accepted, and a QP accepts packets only from a connection that proved its own key.
 * The peers derive it from a secret they share and the exchange's fresh nonces ({@link #derive},
 * pingpong too); it never travels, and it has no text form to send. Hardware has no such thing and
 * ignores it: a RoCE fabric is trusted as a network is.
 */
public final class FabricKey {
    /** Key length in bytes: an HMAC-SHA256 key. */
    public static final int LENGTH = 32;
    private static final SecureRandom RANDOM = new SecureRandom();

    private final byte[] bytes;

    private FabricKey(byte[] bytes) {
        this.bytes = bytes;
    }

    /** A fresh key from a cryptographically strong generator. */
    public static FabricKey random() {
        byte[] b = new byte[LENGTH];
        RANDOM.nextBytes(b);
        return new FabricKey(b);
    }

    /**
     * The key both peers derive, each on its own, from a secret they share and values of their
     * exchange ({@code salt}: both sides' fresh nonces; {@code info}: what the key is for), with
     * HKDF-SHA256 (RFC 5869): the key itself never travels, and an observer of the exchange
     * cannot compute it without the secret.
     */
    public static FabricKey derive(byte[] secret, byte[] salt, byte[] info) {
        try {
            KDF hkdf = KDF.getInstance("HKDF-SHA256");
            AlgorithmParameterSpec spec = HKDFParameterSpec.ofExtract().addIKM(secret).addSalt(salt).thenExpand(info, LENGTH);
            return new FabricKey(hkdf.deriveData(spec));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HKDF-SHA256 is not available in this JDK", e);
        }
    }

    /** The key these {@value #LENGTH} bytes make (an application's own secret key material). */
    public static FabricKey of(byte[] bytes) {
        if (bytes == null || bytes.length != LENGTH) {
            throw new IllegalArgumentException("a fabric key has " + LENGTH + " bytes");
        }
        return new FabricKey(bytes.clone());
    }

    /** The key's bytes (a copy). */
    public byte[] toBytes() {
        return bytes.clone();
    }

    @Override
    public boolean equals(Object o) {
        // constant time: a key is a secret
        return o instanceof FabricKey k && MessageDigest.isEqual(bytes, k.bytes);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(bytes);
    }

    /** Never the key itself: it may end up in a log. */
    @Override
    public String toString() {
        return "FabricKey[redacted]";
    }
}
