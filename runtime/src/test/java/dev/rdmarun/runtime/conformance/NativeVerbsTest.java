package dev.rdmarun.runtime.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.GidEntry;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The conformance cases on a libibverbs device: rxe0 in the Soft-RoCE VM suite (skipped elsewhere). */
@Tag("rdma")
class NativeVerbsTest extends VerbsConformance {
    @Override
    protected Context openContext() {
        return RdmaDevice.open();
    }

    /** The VM's rxe0 GID table as softroce-vm.sh sets it up. */
    @Test
    void defaultGidIsTheVmsRoceV2Ipv4Address() {
        String expectedIndex = System.getenv("SOFTROCE_GID_INDEX");
        if (expectedIndex == null) return;
        GidEntry chosen = context.defaultGid(1);
        assertEquals(Integer.parseInt(expectedIndex), chosen.index());
        assertEquals(System.getenv("SOFTROCE_IP"), chosen.ipv4());
        assertEquals(System.getenv("SOFTROCE_NETDEV"), chosen.netdev());
    }
}
