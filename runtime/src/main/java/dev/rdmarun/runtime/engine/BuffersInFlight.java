package dev.rdmarun.runtime.engine;

/**
 * Per data buffer, the last work request (sequence number) that reads it, fills it or gets an
 * atomic's old value in it, so that no post spoils a buffer posted work still uses. Apart from
 * the window because it is indexed by buffer, not by sequence number.
 */
final class BuffersInFlight {
    /** ... reads it after the post (a send or write that is not inline) */
    private final long[] readFrom;
    /** ... fills it (a READ) */
    private final long[] readInto;
    /** ... gets an atomic's old value at its completion */
    private final long[] atomicInto;

    BuffersInFlight(int bufferCount) {
        readFrom = new long[bufferCount];
        readInto = new long[bufferCount];
        atomicInto = new long[bufferCount];
    }

    /** See {@link QpEngine#bufferBusyUntil}; {@code completed}: the window's completed-through. */
    long busyUntil(OpKind kind, int buffer, long completed) {
        long until = switch (kind) {
            case SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM -> Math.max(readInto[buffer], atomicInto[buffer]);
            case READ -> Math.max(readFrom[buffer], atomicInto[buffer]);
            case COMPARE_AND_SWAP, FETCH_AND_ADD -> 0;
        };
        return until > completed ? until : 0;
    }

    /** See {@link QpEngine#localWriteBusyUntil}. */
    long localWriteBusyUntil(int buffer, long completed) {
        long until = Math.max(readFrom[buffer], Math.max(readInto[buffer], atomicInto[buffer]));
        return until > completed ? until : 0;
    }

    /** Work request [seq] of [kind] was posted on [buffer]. */
    void posted(OpKind kind, int buffer, long seq, boolean inline) {
        switch (kind) {
            case SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM -> {
                if (!inline) readFrom[buffer] = seq; // inline data was copied at the post
            }
            case READ -> readInto[buffer] = seq;
            case COMPARE_AND_SWAP, FETCH_AND_ADD -> atomicInto[buffer] = seq;
        }
    }
}
