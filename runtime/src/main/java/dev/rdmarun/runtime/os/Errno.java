package dev.rdmarun.runtime.os;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.VarHandle;

/**
 * The errno a downcall left behind. Control-path downcalls are linked with
 * {@code captureCallState("errno")} and take one of these as their first argument.
 */
public final class Errno {
    public static final int ENOENT = 2;
    public static final int EINTR = 4;
    public static final int EAGAIN = 11;
    public static final int ENOMEM = 12;
    public static final int EFAULT = 14;
    public static final int EINVAL = 22;
    public static final int ENOSYS = 38;
    public static final int ENODATA = 61;
    public static final int EOVERFLOW = 75;
    public static final int ENETUNREACH = 101;
    public static final int ETIMEDOUT = 110;

    static final Linker.Option CAPTURE = Linker.Option.captureCallState("errno");
    private static final StructLayout LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private final MemorySegment state;

    public Errno(Arena arena) {
        this.state = arena.allocate(LAYOUT);
    }

    public MemorySegment segment() {
        return state;
    }

    public int value() {
        return (int) ERRNO.get(state, 0L);
    }
}
