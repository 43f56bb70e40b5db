package dev.rdmarun.runtime.os;

import java.lang.foreign.Arena;

/** Runs a control-path downcall with a scratch arena and an errno capture, unwrapping Throwable. */
public final class Calls {
    private Calls() {}

    public interface Body<T> {
        T run(Arena arena, Errno errno) throws Throwable;
    }

    public static <T> T control(Body<T> body) {
        try (Arena arena = Arena.ofConfined()) {
            return body.run(arena, new Errno(arena));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Rethrows a Throwable from invokeExact on the data path without wrapping runtime exceptions. */
    public static RuntimeException unchecked(Throwable t) {
        if (t instanceof RuntimeException r) return r;
        if (t instanceof Error e) throw e;
        return new IllegalStateException(t);
    }
}
