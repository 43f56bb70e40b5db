package dev.rdmarun.runtime;

/** enum ibv_gid_type, as reported by the GID table. */
public enum GidType {
    IB("IB"), ROCE_V1("RoCE v1"), ROCE_V2("RoCE v2");

    private final String label;

    GidType(String label) {
        this.label = label;
    }

    public static GidType of(int code) {
        return switch (code) {
            case 0 -> IB;
            case 1 -> ROCE_V1;
            case 2 -> ROCE_V2;
            default -> throw new IllegalArgumentException("unknown GID type " + code);
        };
    }

    public String label() {
        return label;
    }
}
