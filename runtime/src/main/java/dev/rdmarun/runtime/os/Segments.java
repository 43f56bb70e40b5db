package dev.rdmarun.runtime.os;

import java.lang.foreign.MemorySegment;

/** Segment helpers for the fast path. */
public final class Segments {
    private Segments() {}

    /**
     * The same memory as {@code owned}, in the global scope. A segment of a shared arena costs an
     * atomic acquire and release on every downcall it is passed to (about 60 ns of a 70 ns poll of
     * an empty CQ, bench/jmh.sh DowncallBench); the view costs nothing. The arena still owns and
     * frees the memory: the object holding the view must refuse use after its close, and must not
     * be closed while another thread uses it.
     */
    public static MemorySegment unscoped(MemorySegment owned) {
        return MemorySegment.ofAddress(owned.address()).reinterpret(owned.byteSize());
    }
}
