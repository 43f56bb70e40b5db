package dev.rdmarun.runtime.conformance;

import dev.rdmarun.runtime.Context;
import org.junit.jupiter.api.Tag;

/** The dispatcher cases on a libibverbs device (rxe0 in the VM suite). */
@Tag("rdma")
class NativeDispatcherTest extends DispatcherConformance {
    @Override
    protected Context openContext() {
        return RdmaDevice.open();
    }
}
