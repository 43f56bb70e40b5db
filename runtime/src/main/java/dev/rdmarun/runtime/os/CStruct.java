package dev.rdmarun.runtime.os;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Builds struct layouts the way a C compiler on x86-64 / aarch64 lays them out: natural alignment, tail padding. */
public final class CStruct {
    private CStruct() {}

    public static StructLayout of(String name, MemoryLayout... fields) {
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

    /** The byte offset of the member at {@code path} (nested names), resolved by name so no offset is a bare number. */
    public static long offset(MemoryLayout layout, String... path) {
        return layout.byteOffset(Arrays.stream(path).map(MemoryLayout.PathElement::groupElement)
                .toArray(MemoryLayout.PathElement[]::new));
    }
}
