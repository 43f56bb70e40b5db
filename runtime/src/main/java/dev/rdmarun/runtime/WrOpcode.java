package dev.rdmarun.runtime;

/** enum ibv_wr_opcode: the send-queue operations rdma-run posts. */
public enum WrOpcode {
    RDMA_WRITE(0), RDMA_WRITE_WITH_IMM(1), SEND(2), SEND_WITH_IMM(3), RDMA_READ(4),
    ATOMIC_CMP_AND_SWP(5), ATOMIC_FETCH_AND_ADD(6);

    private static final WrOpcode[] BY_CODE = values();
    private final int code;

    WrOpcode(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    /** Allocation-free lookup; null for a code rdma-run does not post. */
    public static WrOpcode of(int code) {
        return code >= 0 && code < BY_CODE.length ? BY_CODE[code] : null;
    }

    public boolean isAtomic() {
        return this == ATOMIC_CMP_AND_SWP || this == ATOMIC_FETCH_AND_ADD;
    }

    /** Consumes a receive at the responder. */
    public boolean consumesReceive() {
        return this == SEND || this == SEND_WITH_IMM || this == RDMA_WRITE_WITH_IMM;
    }

    public boolean carriesImmediate() {
        return this == SEND_WITH_IMM || this == RDMA_WRITE_WITH_IMM;
    }

    /** The completion opcode of this work request on the requester (ibv_wc.opcode). */
    public WcOpcode completionOpcode() {
        return switch (this) {
            case RDMA_WRITE, RDMA_WRITE_WITH_IMM -> WcOpcode.RDMA_WRITE;
            case SEND, SEND_WITH_IMM -> WcOpcode.SEND;
            case RDMA_READ -> WcOpcode.RDMA_READ;
            case ATOMIC_CMP_AND_SWP -> WcOpcode.COMP_SWAP;
            case ATOMIC_FETCH_AND_ADD -> WcOpcode.FETCH_ADD;
        };
    }
}
