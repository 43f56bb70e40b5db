package dev.rdmarun.runtime;

/** enum ibv_mtu: the path MTU of a QP, negotiated as the smaller of both ports' active MTUs. */
public enum Mtu {
    MTU_256(1, 256), MTU_512(2, 512), MTU_1024(3, 1024), MTU_2048(4, 2048), MTU_4096(5, 4096);

    private final int code;
    private final int bytes;

    Mtu(int code, int bytes) {
        this.code = code;
        this.bytes = bytes;
    }

    public int code() {
        return code;
    }

    public int bytes() {
        return bytes;
    }

    public static Mtu ofCode(int code) {
        for (Mtu m : values()) if (m.code == code) return m;
        throw new IllegalArgumentException("unknown ibv_mtu " + code);
    }

    public static Mtu ofBytes(int bytes) {
        for (Mtu m : values()) if (m.bytes == bytes) return m;
        throw new IllegalArgumentException("MTU must be 256, 512, 1024, 2048 or 4096, not " + bytes);
    }

    public static Mtu min(Mtu a, Mtu b) {
        return a.code <= b.code ? a : b;
    }
}
