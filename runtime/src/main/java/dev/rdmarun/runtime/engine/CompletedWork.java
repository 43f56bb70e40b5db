package dev.rdmarun.runtime.engine;

/**
 * What one awaited work request was, filled by {@link QpEngine#takeCompletion}. A driver keeps one
 * and reuses it, so taking a completion allocates nothing; read it before the next take.
 */
public final class CompletedWork {
    private long seq;
    private OpKind kind;
    private int bytes;
    private long value;

    /** Its sequence number (1, 2, ... in the order posted). */
    public long seq() {
        return seq;
    }

    public OpKind kind() {
        return kind;
    }

    /** The bytes it moved: 8 for an atomic. */
    public int bytes() {
        return bytes;
    }

    /** An atomic's old value at the peer; 0 for the other kinds. */
    public long value() {
        return value;
    }

    void set(long seq, OpKind kind, int bytes, long value) {
        this.seq = seq;
        this.kind = kind;
        this.bytes = bytes;
        this.value = value;
    }
}
