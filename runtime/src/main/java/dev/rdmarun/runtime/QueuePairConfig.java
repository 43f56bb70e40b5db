package dev.rdmarun.runtime;

/**
 * What ibv_create_qp needs (ibv_qp_init_attr). Defaults suit a ping-pong: 1 SGE, 64-deep queues,
 * no inline data, selective signaling (each send says whether it wants a completion).
 */
public record QueuePairConfig(
        QpType type,
        CompletionQueue sendCq,
        CompletionQueue recvCq,
        int maxSendWr,
        int maxRecvWr,
        int maxSendSge,
        int maxRecvSge,
        int maxInlineData,
        boolean signalAll) {

    public QueuePairConfig {
        if (sendCq == null || recvCq == null) throw new IllegalArgumentException("a QP needs a send and a receive CQ");
        if (maxSendWr < 1 || maxRecvWr < 1) throw new IllegalArgumentException("queue depths must be at least 1");
        if (maxSendSge < 1 || maxRecvSge < 1) throw new IllegalArgumentException("SGE counts must be at least 1");
        if (maxInlineData < 0) throw new IllegalArgumentException("max inline data cannot be negative");
    }

    /** An RC QP whose sends and receives complete on one shared CQ (the seeds' layout). */
    public static QueuePairConfig rc(CompletionQueue cq) {
        return new QueuePairConfig(QpType.RC, cq, cq, 64, 64, 1, 1, 0, false);
    }

    public QueuePairConfig withType(QpType t) {
        return new QueuePairConfig(t, sendCq, recvCq, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData, signalAll);
    }

    public QueuePairConfig withCqs(CompletionQueue send, CompletionQueue recv) {
        return new QueuePairConfig(type, send, recv, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData, signalAll);
    }

    public QueuePairConfig withDepth(int sendWr, int recvWr) {
        return new QueuePairConfig(type, sendCq, recvCq, sendWr, recvWr, maxSendSge, maxRecvSge, maxInlineData, signalAll);
    }

    public QueuePairConfig withMaxInlineData(int bytes) {
        return new QueuePairConfig(type, sendCq, recvCq, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, bytes, signalAll);
    }

    public QueuePairConfig withSignalAll(boolean all) {
        return new QueuePairConfig(type, sendCq, recvCq, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData, all);
    }
}
