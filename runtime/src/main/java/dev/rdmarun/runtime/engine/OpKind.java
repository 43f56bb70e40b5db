package dev.rdmarun.runtime.engine;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.WrOpcode;

/**
 * The work requests an engine posts, with what each needs from the two peers: whether it consumes
 * a receive at the peer (and so a credit), which access the peer's buffer must grant, and whether
 * the HCA writes into this side's buffer (READ data, atomic results).
 */
public enum OpKind {
    SEND("send", WrOpcode.SEND, true, null, false),
    SEND_WITH_IMM("sendWithImm", WrOpcode.SEND_WITH_IMM, true, null, false),
    WRITE("write", WrOpcode.RDMA_WRITE, false, Access.REMOTE_WRITE, false),
    WRITE_WITH_IMM("writeWithImm", WrOpcode.RDMA_WRITE_WITH_IMM, true, Access.REMOTE_WRITE, false),
    READ("read", WrOpcode.RDMA_READ, false, Access.REMOTE_READ, true),
    COMPARE_AND_SWAP("compareAndSwap", WrOpcode.ATOMIC_CMP_AND_SWP, false, Access.REMOTE_ATOMIC, true),
    FETCH_AND_ADD("fetchAndAdd", WrOpcode.ATOMIC_FETCH_AND_ADD, false, Access.REMOTE_ATOMIC, true);

    private static final OpKind[] VALUES = values();

    private final String label;
    private final WrOpcode opcode;
    private final boolean consumesPeerReceive;
    private final Access peerAccess;
    private final boolean writesLocalBuffer;

    OpKind(String label, WrOpcode opcode, boolean consumesPeerReceive, Access peerAccess, boolean writesLocalBuffer) {
        this.label = label;
        this.opcode = opcode;
        this.consumesPeerReceive = consumesPeerReceive;
        this.peerAccess = peerAccess;
        this.writesLocalBuffer = writesLocalBuffer;
    }

    /** The DSL's name for it: "send", "fetchAndAdd", ... */
    public String label() {
        return label;
    }

    /** The verbs opcode ({@code ibv_wr_opcode}) of its work request. */
    public WrOpcode opcode() {
        return opcode;
    }

    public boolean consumesPeerReceive() {
        return consumesPeerReceive;
    }

    /** The access the peer's buffer must grant, or null (sends touch no peer buffer). */
    public Access peerAccess() {
        return peerAccess;
    }

    public boolean writesLocalBuffer() {
        return writesLocalBuffer;
    }

    public boolean isAtomic() {
        return this == COMPARE_AND_SWAP || this == FETCH_AND_ADD;
    }

    /** Carries a payload that may be posted inline (sends and writes). */
    public boolean mayInline() {
        return !writesLocalBuffer;
    }

    static OpKind of(int ordinal) {
        return VALUES[ordinal];
    }
}
