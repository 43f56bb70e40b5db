package dev.rdmarun.runtime.engine;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.RemoteRegion;

/**
 * An operation's arguments against this side's buffers and what the peer granted, with the
 * sentence that names the call when they do not fit. Apart from the engine because it only reads
 * the shape of both sides and decides nothing about the window, credits or receives.
 */
final class OpChecks {
    private final int index;
    private final int bufferSize;
    private final int bufferCount;
    private QpEngine.Peer peer;
    private int grantedBits;

    OpChecks(int index, EngineConfig config) {
        this.index = index;
        this.bufferSize = config.bufferSize();
        this.bufferCount = config.bufferCount();
    }

    void connect(QpEngine.Peer peer) {
        this.peer = peer;
        this.grantedBits = Access.bits(peer.granted());
    }

    /** See {@link QpEngine#effectiveSize}. */
    static int effectiveSize(OpKind kind, int size, int bufferSize) {
        return kind.isAtomic() ? QueuePair.ATOMIC_SIZE : size < 0 ? bufferSize : size;
    }

    /** See {@link QpEngine#check}; the peer is connected. */
    void check(OpKind kind, int size, int buffer, int remoteQp, int remoteBuffer, long remoteOffset) {
        if (size < -1 && !kind.isAtomic()) {
            throw EngineException.ofCall(kind.label() + "() on QP " + index + ": size " + size + " cannot be negative (-1: the whole buffer)");
        }
        int bytes = effectiveSize(kind, size, bufferSize);
        if (bytes > bufferSize) {
            throw EngineException.ofCall(kind.label() + "()" + " of " + bytes + " bytes on QP " + index + " is larger than bufferSize "
                    + bufferSize, "raise bufferSize(...) before connect");
        }
        if (buffer < 0 || buffer >= bufferCount) {
            throw EngineException.ofCall(kind.label() + "()" + " on QP " + index + ": buffer " + buffer + " is outside 0.."
                    + (bufferCount - 1) + " (bufferCount " + bufferCount + ")", QpEngine.BUFFER_COUNT_HINT);
        }
        Access needed = kind.peerAccess();
        if (needed == null) return;
        if ((grantedBits & needed.bit()) == 0) {
            String declaration = switch (needed) {
                case REMOTE_WRITE -> "WRITE";
                case REMOTE_READ -> "READ";
                default -> "ATOMIC";
            };
            throw EngineException.ofCall(kind.label() + "()" + " on QP " + index + " needs " + peer.name() + " to declare remoteAccess("
                    + declaration + ")", "remoteAccess(...) before connect says what the peer may do to that side's buffers");
        }
        RemoteRegion[] regions = peer.data();
        if (remoteQp < 0 || remoteQp >= regions.length) {
            throw EngineException.ofCall(kind.label() + "()" + " on QP " + index + ": remoteQp " + remoteQp + " is outside 0.."
                    + (regions.length - 1), "qps(n) before connect gives each side n QPs");
        }
        long regionLength = regions[remoteQp].length();
        long buffers = regionLength / bufferSize;
        if (remoteBuffer < 0 || remoteBuffer >= buffers) {
            throw EngineException.ofCall(kind.label() + "()" + " on QP " + index + ": remoteBuffer " + remoteBuffer + " is outside 0.."
                    + (buffers - 1), "bufferCount(n) before connect, on " + peer.name() + "'s side too, gives each QP n buffers");
        }
        if (kind.isAtomic() && (remoteOffset & 7) != 0) {
            throw EngineException.ofCall(kind.label() + "()" + " on QP " + index + ": remoteOffset " + remoteOffset
                    + " is not 8-byte aligned (atomics work on aligned 64-bit words)", "use a multiple of 8, such as "
                    + Math.clamp(remoteOffset & ~7L, 0L, Math.max(0L, bufferSize - 8L)));
        }
        if (remoteOffset < 0 || remoteOffset > (long) bufferSize - bytes) { // not offset + bytes: it overflows
            throw EngineException.ofCall(kind.label() + "()" + " of " + bytes + " bytes on QP " + index + " at remoteOffset " + remoteOffset
                    + " does not fit the peer's " + bufferSize + "-byte buffer");
        }
    }
}
