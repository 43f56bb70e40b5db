package dev.rdmarun.runtime.conformance;

import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.Device;
import dev.rdmarun.runtime.DeviceList;
import java.util.List;

/**
 * Finds the libibverbs device the native cases run on: $RDMA_TEST_DEVICE, else the first one.
 * Where there is none the cases are skipped, except under RDMA_RUN_REQUIRE_DEVICE=1 (the
 * Soft-RoCE VM suite), where a missing device is a failure, so that suite can never pass by skipping.
 */
final class RdmaDevice {
    private RdmaDevice() {}

    static Context open() {
        String wanted = System.getenv("RDMA_TEST_DEVICE");
        boolean required = "1".equals(System.getenv("RDMA_RUN_REQUIRE_DEVICE"));
        try (DeviceList list = DeviceList.open()) {
            List<Device> kernel = list.kernelDevices();
            if (kernel.isEmpty()) {
                String why = list.unavailable().isEmpty() ? "no RDMA device" : list.unavailable().get(0).getMessage();
                return none(required, why);
            }
            return wanted == null ? kernel.get(0).open() : list.find(wanted).open();
        }
    }

    private static Context none(boolean required, String why) {
        if (required) fail("RDMA_RUN_REQUIRE_DEVICE=1 but " + why);
        assumeTrue(false, "native device tests need an RDMA device (" + why + "); they run in the Soft-RoCE VM suite");
        return null;
    }
}
