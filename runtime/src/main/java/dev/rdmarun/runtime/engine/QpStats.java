package dev.rdmarun.runtime.engine;

import org.HdrHistogram.Histogram;

/**
 * What one QP's engine counted. The dispatcher thread writes; other threads (a progress line,
 * heartbeats) may read without synchronization and see values a little behind, which a display
 * does not mind and which costs the data path nothing.
 */
public final class QpStats {
    long posted;
    long operations;
    long bytesSent;
    long bytesReceived;
    long messagesSent;
    long messagesReceived;
    long messagesNotReceived;
    /** Post-to-completion latency of signaled work requests, in ns. */
    final Histogram latency = new Histogram(3);

    /** Work requests posted by the user. */
    public long posted() {
        return posted;
    }

    /** Work requests of the user completed. */
    public long operations() {
        return operations;
    }

    /** Bytes this side sent with sends and writes. */
    public long bytesSent() {
        return bytesSent;
    }

    /** Bytes that arrived here: received messages, READ data, atomic results. */
    public long bytesReceived() {
        return bytesReceived;
    }

    /** Messages posted to the peer: sends and writeWithImm, each of which takes a receive there. */
    public long messagesSent() {
        return messagesSent;
    }

    /** Messages that arrived here (sends and writeWithImm of the peer), whether a receive took them or not. */
    public long messagesReceived() {
        return messagesReceived;
    }

    /** Messages that arrived but no receive took before this side finished. */
    public long messagesNotReceived() {
        return messagesNotReceived;
    }

    /** A copy of the latency histogram (call it on the dispatcher thread, or once the engine is idle). */
    public Histogram latencyCopy() {
        return latency.copy();
    }

    /** A number that grows whenever this QP makes any progress: for telling a stuck peer from a slow one. */
    public long progress() {
        return posted + operations + messagesReceived;
    }
}
