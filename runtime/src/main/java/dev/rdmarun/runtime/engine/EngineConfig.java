package dev.rdmarun.runtime.engine;

/**
 * The shape of one QP's engine; both peers use the same (the DSL compares them in its handshake).
 *
 * @param bufferSize      bytes per data buffer and per receive slot (the largest message)
 * @param bufferCount     data buffers per QP
 * @param sendDepth       user work requests in flight; the QP needs one more send-queue entry for
 *                        the engine's own credit write ({@link #sendQueueDepth})
 * @param recvDepth       receives kept posted; the peer may have this many messages outstanding
 * @param inboxDepth      messages an engine holds for a later receive, beyond the posted receives
 * @param signalEvery     one work request in this many is signaled
 * @param inlineThreshold sends and writes up to this many bytes are posted inline (0: never)
 */
public record EngineConfig(int bufferSize, int bufferCount, int sendDepth, int recvDepth, int inboxDepth,
                           int signalEvery, int inlineThreshold) {
    public EngineConfig {
        if (bufferSize < 1) throw new IllegalArgumentException("bufferSize must be positive");
        if (bufferCount < 1) throw new IllegalArgumentException("bufferCount must be positive");
        if (sendDepth < 1) throw new IllegalArgumentException("sendDepth must be positive");
        if (recvDepth < 1) throw new IllegalArgumentException("recvDepth must be positive");
        if (inboxDepth < 0) throw new IllegalArgumentException("inboxDepth cannot be negative");
        if (signalEvery < 1 || signalEvery > sendDepth) {
            throw new IllegalArgumentException("signalEvery must be 1..sendDepth");
        }
        if (inlineThreshold < 0) throw new IllegalArgumentException("inlineThreshold cannot be negative");
    }

    /** Send-queue entries the QP needs: the user's window plus the engine's credit write. */
    public int sendQueueDepth() {
        return sendDepth + 1;
    }

    /** Bytes of one QP's data region. */
    public long dataBytes() {
        return (long) bufferSize * bufferCount;
    }

    /**
     * Bytes of one QP's receive region: the slots, then (8-byte aligned) the source word of credit
     * writes, then one 8-byte result word per send-window entry (where each atomic in flight
     * lands its old value).
     */
    public long receiveRegionBytes() {
        return resultWordsOffset() + 8L * sendDepth;
    }

    long resultWordsOffset() {
        return creditSourceOffset() + 8;
    }

    long creditSourceOffset() {
        return ((long) recvDepth * bufferSize + 7) / 8 * 8;
    }

    /**
     * Work requests whose kind, size and completion a QP keeps after posting them: a power of two,
     * at least 256 and 4 x sendDepth. One not awaited is forgotten once this many later ones are
     * posted (a loop that posts and never awaits costs no memory); it still counts as outstanding.
     */
    public int rememberedWork() {
        return Integer.highestOneBit(Math.max(256, 4 * sendDepth) - 1) << 1;
    }

    /** Completion-queue entries one QP can have outstanding. */
    public int completionQueueEntries() {
        return sendQueueDepth() + recvDepth;
    }
}
