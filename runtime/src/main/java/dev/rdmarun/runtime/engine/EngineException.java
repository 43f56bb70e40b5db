package dev.rdmarun.runtime.engine;

/**
 * An operation that cannot be posted as asked (a size outside the buffer, access the peer did not
 * grant, a peer that breaks the credit protocol): one sentence that names the QP and the call.
 */
public final class EngineException extends RuntimeException {
    private final String hint;

    public EngineException(String message) {
        this(message, null);
    }

    public EngineException(String message, String hint) {
        super(message);
        this.hint = hint;
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
