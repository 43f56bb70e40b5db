package dev.rdmarun.runtime;

/** enum ibv_wc_status, each with the likely cause where the verbs spec and experience name one. */
public enum WcStatus {
    SUCCESS("success", null),
    LOC_LEN_ERR("local length error", "a receive buffer is smaller than the message, or a send is longer than the port's max_msg_sz"),
    LOC_QP_OP_ERR("local QP operation error", "the work request is not valid for this QP (opcode, SGE count, or inline data"
            + " too large), or the link under the device went down (rxe reports that so; rdma link show)"),
    LOC_EEC_OP_ERR("local EE context operation error", null),
    LOC_PROT_ERR("local protection error", "an SGE is outside its memory region, or its lkey is wrong"),
    WR_FLUSH_ERR("Work Request Flushed Error", "the QP went to the error state (an earlier completion says why) and flushed this work request"),
    MW_BIND_ERR("memory management operation error", null),
    BAD_RESP_ERR("bad response error", "the responder sent an unexpected response"),
    LOC_ACCESS_ERR("local access error", "the local memory region lacks the access needed (LOCAL_WRITE for receives and reads)"),
    REM_INV_REQ_ERR("remote invalid request error", "the peer rejected the request: message larger than its receive buffer, or an opcode its QP does not allow"),
    REM_ACCESS_ERR("remote access error", "the peer's memory region does not grant this access (REMOTE_WRITE/READ/ATOMIC), or rkey/address/length is wrong"),
    REM_OP_ERR("remote operation error", "the peer could not complete the operation"),
    RETRY_EXC_ERR("transport retry counter exceeded", "no ACK from the peer: its QP is gone or not in RTR, the GID index or address is wrong, or UDP 4791 is blocked"),
    RNR_RETRY_EXC_ERR("RNR retry counter exceeded", "receiver not ready: the peer had no receive posted when the send arrived; post receives first, or raise rnr_retry"),
    LOC_RDD_VIOL_ERR("local RDD violation error", null),
    REM_INV_RD_REQ_ERR("remote invalid RD request", null),
    REM_ABORT_ERR("aborted error", null),
    INV_EECN_ERR("invalid EE context number", null),
    INV_EEC_STATE_ERR("invalid EE context state", null),
    FATAL_ERR("fatal error", "the device reported a fatal error"),
    RESP_TIMEOUT_ERR("response timeout error", null),
    GENERAL_ERR("general error", null),
    TM_ERR("TM error", null),
    TM_RNDV_INCOMPLETE("TM software rendezvous", null),
    UNKNOWN("unknown", null);

    private static final WcStatus[] ALL = values();
    private final String text;
    private final String hint;

    WcStatus(String text, String hint) {
        this.text = text;
        this.hint = hint;
    }

    /** What ibv_wc_status_str says (the same words, so logs read alike with either provider). */
    public String text() {
        return text;
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

    /** The hint for a completion of this provider kind: soft0 moves packets over TCP, not RoCE's UDP 4791. */
    public String hint(boolean software) {
        if (software && this == RETRY_EXC_ERR) {
            return "no ACK from the peer: its QP is gone or not in RTR, the GID index or address is wrong, the peer's"
                    + " soft0 TCP port (its LID) is unreachable, or the two sides' fabric keys differ";
        }
        return hint;
    }
}
