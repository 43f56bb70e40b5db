package dev.rdmarun.runtime;

import java.util.EnumSet;
import java.util.Set;

/** enum ibv_access_flags that rdma-run grants: memory regions get exactly the ones a scenario needs. */
public enum Access {
    LOCAL_WRITE(1), REMOTE_WRITE(2), REMOTE_READ(4), REMOTE_ATOMIC(8);

    private final int bit;

    Access(int bit) {
        this.bit = bit;
    }

    public int bit() {
        return bit;
    }

    public static int bits(Set<Access> access) {
        int bits = 0;
        for (Access a : access) bits |= a.bit;
        return bits;
    }

    public static EnumSet<Access> of(int bits) {
        EnumSet<Access> set = EnumSet.noneOf(Access.class);
        for (Access a : values()) if ((bits & a.bit) != 0) set.add(a);
        return set;
    }
}
