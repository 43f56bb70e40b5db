package dev.rdmarun.runtime;

/** enum ibv_wc_status, each with the likely cause where the verbs spec and experience name one. */
public enum WcStatus {
    SUCCESS(null),
    LOC_LEN_ERR("a receive buffer is smaller than the message, or a send is longer than the port's max_msg_sz"),
    LOC_QP_OP_ERR("the work request is not valid for this QP (opcode, SGE count, or inline data too large)"),
    LOC_EEC_OP_ERR(null),
    LOC_PROT_ERR("an SGE is outside its memory region, or its lkey is wrong"),
    WR_FLUSH_ERR("the QP went to the error state (an earlier completion says why) and flushed this work request"),
    MW_BIND_ERR(null),
    BAD_RESP_ERR("the responder sent an unexpected response"),
    LOC_ACCESS_ERR("the local memory region lacks the access needed (LOCAL_WRITE for receives and reads)"),
    REM_INV_REQ_ERR("the peer rejected the request: message larger than its receive buffer, or an opcode its QP does not allow"),
    REM_ACCESS_ERR("the peer's memory region does not grant this access (REMOTE_WRITE/READ/ATOMIC), or rkey/address/length is wrong"),
    REM_OP_ERR("the peer could not complete the operation"),
    RETRY_EXC_ERR("no ACK from the peer: its QP is gone or not in RTR, the GID index or address is wrong, or UDP 4791 is blocked"),
    RNR_RETRY_EXC_ERR("receiver not ready: the peer had no receive posted when the send arrived; post receives first, or raise rnr_retry"),
    LOC_RDD_VIOL_ERR(null),
    REM_INV_RD_REQ_ERR(null),
    REM_ABORT_ERR(null),
    INV_EECN_ERR(null),
    INV_EEC_STATE_ERR(null),
    FATAL_ERR("the device reported a fatal error"),
    RESP_TIMEOUT_ERR(null),
    GENERAL_ERR(null),
    TM_ERR(null),
    TM_RNDV_INCOMPLETE(null),
    UNKNOWN(null);

    private static final WcStatus[] ALL = values();
    private final String hint;

    WcStatus(String hint) {
        this.hint = hint;
    }

    /** Allocation-free lookup, for the polling loop. */
    public static WcStatus of(int code) {
        return code >= 0 && code < ALL.length - 1 ? ALL[code] : UNKNOWN;
    }

    public int code() {
        return ordinal();
    }

    /** Likely cause and fix, or null. */
    public String hint() {
        return hint;
    }
}
