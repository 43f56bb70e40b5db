package dev.rdmarun.runtime;

import java.util.Locale;

/**
 * How a software device (soft0) reaches the contexts its QPs' address vectors name, chosen when a
 * context opens ({@link Device#open(SoftTransport)}). A libibverbs device's fabric is the wire: it
 * has no such choice.
 */
public enum SoftTransport {
    /**
     * In memory to a context of this JVM, over TCP to any other. A context listens only once a
     * QP's local endpoint asks for a LID, only on the address of that GID, on an ephemeral port.
     */
    AUTO,
    /** Never opens a socket: only QPs of this JVM are reachable (both peers of a loopback run). */
    MEMORY,
    /** As {@link #AUTO}, but QPs of this JVM talk over TCP too, to test the path between processes in one. */
    TCP;

    /** The system property that chooses for {@link Device#open()}: {@code auto}, {@code memory} or {@code tcp}. */
    public static final String PROPERTY = "rdmarun.soft.transport";

    /**
     * What {@link #PROPERTY} says, {@link #AUTO} when it is unset.
     *
     * @throws VerbsException when it is set to anything else
     */
    public static SoftTransport configured() {
        String value = System.getProperty(PROPERTY, "auto").trim().toLowerCase(Locale.ROOT);
        return switch (value) {
            case "", "auto" -> AUTO;
            case "memory" -> MEMORY;
            case "tcp" -> TCP;
            default -> throw new VerbsException("the system property " + PROPERTY + " is not one of auto, memory, tcp",
                    "leave it unset (auto), or set memory for peers in one JVM");
        };
    }
}
