package dev.rdmarun.runtime;

/**
 * enum ibv_qp_attr_mask: which attributes an {@link QpAttributes} carries. A modify names exactly
 * the attributes it sets; each transition requires some and allows others (IB spec, table of
 * QP state transitions), and anything else is refused with EINVAL.
 */
public enum QpAttr {
    STATE(1),
    CUR_STATE(1 << 1),
    ACCESS_FLAGS(1 << 3),
    PKEY_INDEX(1 << 4),
    PORT(1 << 5),
    QKEY(1 << 6),
    AV(1 << 7),
    PATH_MTU(1 << 8),
    TIMEOUT(1 << 9),
    RETRY_CNT(1 << 10),
    RNR_RETRY(1 << 11),
    RQ_PSN(1 << 12),
    MAX_QP_RD_ATOMIC(1 << 13),
    MIN_RNR_TIMER(1 << 15),
    SQ_PSN(1 << 16),
    MAX_DEST_RD_ATOMIC(1 << 17),
    DEST_QPN(1 << 20);

    private final int bit;

    QpAttr(int bit) {
        this.bit = bit;
    }

    public int bit() {
        return bit;
    }
}
