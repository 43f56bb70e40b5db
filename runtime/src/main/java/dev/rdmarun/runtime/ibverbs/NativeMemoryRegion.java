package dev.rdmarun.runtime.ibverbs;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.ibverbs.ffi.Structs;
import dev.rdmarun.runtime.os.Calls;
import dev.rdmarun.runtime.os.Errno;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;

/** ibv_mr over memory this object owns. */
final class NativeMemoryRegion extends MemoryRegion {
    private final NativeProtectionDomain pd;
    private final MemorySegment handle;

    private NativeMemoryRegion(NativeProtectionDomain pd, Arena arena, MemorySegment buffer, MemorySegment handle,
                               Set<Access> access) {
        super(pd, arena, buffer, access, handle.get(JAVA_INT, Structs.MR_LKEY), handle.get(JAVA_INT, Structs.MR_RKEY));
        this.pd = pd;
        this.handle = handle;
    }

    static NativeMemoryRegion register(NativeProtectionDomain pd, long length, Set<Access> flags) {
        return allocate(length, (arena, buffer) -> Calls.control((scratch, errno) -> {
            MemorySegment mr = (MemorySegment) pd.context.lib.regMr.invokeExact(
                    errno.segment(), pd.handle, buffer, length, Access.bits(flags));
            if (mr.equals(MemorySegment.NULL)) {
                int e = errno.value();
                String hint = e == Errno.ENOMEM || e == Errno.EFAULT
                        ? "too little locked memory" + memlockLimit() + ": raise the memlock limit (ulimit -l unlimited, "
                                + "or memlock in /etc/security/limits.conf)"
                        : null;
                throw VerbsException.of("ibv_reg_mr(" + length + " bytes, " + flags + ")", e, hint);
            }
            return new NativeMemoryRegion(pd, arena, buffer, mr.reinterpret(Structs.IBV_MR.byteSize()), flags);
        }));
    }

    /** " (the limit is 64 KiB)" from /proc/self/limits, or "" when it cannot be read. */
    private static String memlockLimit() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/limits"))) {
                if (!line.startsWith("Max locked memory")) continue;
                String soft = line.substring("Max locked memory".length()).trim().split("\\s+")[0];
                return soft.equals("unlimited") ? "" : " (the limit is " + Long.parseLong(soft) / 1024 + " KiB)";
            }
        } catch (IOException | RuntimeException e) {
            // the hint without the figure
        }
        return "";
    }

    @Override
    protected void deregister() {
        Calls.control((scratch, errno) -> {
            int rc = (int) pd.context.lib.deregMr.invokeExact(errno.segment(), handle);
            if (rc != 0) throw VerbsException.of("ibv_dereg_mr", rc > 0 ? rc : errno.value(), null);
            return null;
        });
    }
}
