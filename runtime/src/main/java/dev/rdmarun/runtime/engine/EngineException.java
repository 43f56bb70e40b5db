package dev.rdmarun.runtime.engine;

/**
 * An operation that cannot be posted as asked (a size outside the buffer, access the peer did not
 * grant, a peer that breaks the credit protocol): one sentence that names the QP and the call.
 */
public final class EngineException extends RuntimeException {
    private final String hint;
    private final boolean callError;

    public EngineException(String message) {
        this(message, null);
    }

    public EngineException(String message, String hint) {
        this(message, hint, false);
    }

    private EngineException(String message, String hint, boolean callError) {
        super(message);
        this.hint = hint;
        this.callError = callError;
    }

    /** An operation whose own arguments do not fit (see {@link #isCallError}). */
    static EngineException ofCall(String message) {
        return ofCall(message, null);
    }

    static EngineException ofCall(String message, String hint) {
        return new EngineException(message, hint, true);
    }

    /**
     * True when the call's arguments were wrong (a size, a buffer, an offset, access the peer did
     * not grant), thrown before anything was posted: the caller's line is the one to blame. False
     * for the engine's or the peer's failures.
     */
    public boolean isCallError() {
        return callError;
    }

    /** [cause] as the engine's failure: a pending operation's {@code fail} hands over a Throwable. */
    static RuntimeException unchecked(Throwable cause) {
        if (cause instanceof RuntimeException r) return r;
        EngineException e = new EngineException(String.valueOf(cause.getMessage()));
        e.initCause(cause);
        return e;
    }

    /** A likely fix, or null. */
    public String hint() {
        return hint;
    }
}
