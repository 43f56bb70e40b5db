package dev.rdmarun.runtime;

/** enum ibv_qp_state. */
public enum QpState {
    RESET, INIT, RTR, RTS, SQD, SQE, ERR, UNKNOWN;

    public int code() {
        return ordinal();
    }

    public static QpState of(int code) {
        QpState[] all = values();
        return code >= 0 && code < all.length ? all[code] : UNKNOWN;
    }
}
