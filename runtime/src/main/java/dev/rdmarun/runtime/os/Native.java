package dev.rdmarun.runtime.os;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/** Linking helpers shared by the libibverbs and libc bindings. */
public final class Native {
    public static final Linker LINKER = Linker.nativeLinker();

    private Native() {}

    public static MethodHandle bind(SymbolLookup lookup, String name, FunctionDescriptor fd, Linker.Option... options) {
        MemorySegment symbol = lookup.find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("symbol " + name + " not found"));
        return LINKER.downcallHandle(symbol, fd, options);
    }

    public static MethodHandle bindWithErrno(SymbolLookup lookup, String name, FunctionDescriptor fd) {
        return bind(lookup, name, fd, Errno.CAPTURE);
    }

    /** NULL-terminated C string at {@code address}, or null for NULL. */
    public static String string(MemorySegment address) {
        return address.equals(MemorySegment.NULL) ? null : address.reinterpret(Long.MAX_VALUE).getString(0);
    }

    public static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) return r;
        if (t instanceof Error e) throw e;
        return new IllegalStateException(t);
    }
}
