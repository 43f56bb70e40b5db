package dev.rdmarun.runtime.ffi;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.util.ArrayList;
import java.util.List;

/** Builds struct layouts the way a C compiler on x86-64 / aarch64 lays them out: natural alignment, tail padding. */
final class CStruct {
    private CStruct() {}

    static StructLayout of(String name, MemoryLayout... fields) {
        List<MemoryLayout> members = new ArrayList<>();
        long offset = 0;
        long maxAlign = 1;
        for (MemoryLayout field : fields) {
            long align = field.byteAlignment();
            long pad = (align - offset % align) % align;
            if (pad > 0) {
                members.add(MemoryLayout.paddingLayout(pad));
                offset += pad;
            }
            members.add(field);
            offset += field.byteSize();
            maxAlign = Math.max(maxAlign, align);
        }
        long tail = (maxAlign - offset % maxAlign) % maxAlign;
        if (tail > 0) {
            members.add(MemoryLayout.paddingLayout(tail));
        }
        return MemoryLayout.structLayout(members.toArray(MemoryLayout[]::new)).withName(name);
    }
}
