package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.os.Errno;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;

/**
 * Registered memory of soft0. The key (lkey = rkey) indexes the context's table, so the engine
 * checks every remote access against the region's bounds, flags and PD, as an RNIC does.
 */
final class SoftMemoryRegion extends MemoryRegion {
    private final SoftProtectionDomain pd;
    private final int accessBits;

    private SoftMemoryRegion(SoftProtectionDomain pd, Arena arena, MemorySegment buffer, Set<Access> access, int key) {
        super(pd, arena, buffer, access, key, key);
        this.pd = pd;
        this.accessBits = Access.bits(access);
    }

    static SoftMemoryRegion register(SoftProtectionDomain pd, long length, Set<Access> flags) {
        return allocate(length, (arena, buffer) -> {
            int key = pd.context.reserveMrKey();
            if (key < 0) {
                throw VerbsException.of("ibv_reg_mr(" + length + " bytes, " + flags + ")", Errno.ENOMEM,
                        "soft0 allows " + (SoftContext.MAX_MR - 1) + " memory regions");
            }
            SoftMemoryRegion mr = new SoftMemoryRegion(pd, arena, buffer, flags, key);
            pd.context.publishMr(key, mr);
            return mr;
        });
    }

    SoftProtectionDomain pd() {
        return pd;
    }

    boolean allows(Access a) {
        return (accessBits & a.bit()) != 0;
    }

    /** True when [address, address+length) lies inside this region. */
    boolean contains(long address, long length) {
        long start = address();
        return length >= 0 && address >= start && address - start <= length() - length;
    }


    @Override
    protected void deregister() {
        pd.context.removeMr(lkey());
    }
}
