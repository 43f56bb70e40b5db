package dev.rdmarun.runtime;

/** enum ibv_qp_type: the transports rdma-run creates. */
public enum QpType {
    RC(2), UC(3), UD(4);

    private final int code;

    QpType(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }
}
