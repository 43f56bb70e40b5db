package dev.rdmarun.runtime.device;

import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.DeviceList;
import dev.rdmarun.runtime.VerbsException;

/**
 * Finds the RDMA device the device tests run on: $RDMA_TEST_DEVICE, else the first one. Where there
 * is none the tests are skipped, except under RDMA_RUN_REQUIRE_DEVICE=1 (the Soft-RoCE VM suite),
 * where a missing device is a failure, so that suite can never pass by skipping.
 */
final class RdmaDevice {
    private RdmaDevice() {}

    static Context open() {
        String wanted = System.getenv("RDMA_TEST_DEVICE");
        boolean required = "1".equals(System.getenv("RDMA_RUN_REQUIRE_DEVICE"));
        try (DeviceList list = DeviceList.open()) {
            if (list.devices().isEmpty()) return none(required, "no RDMA device");
            return wanted == null ? list.devices().get(0).open() : list.find(wanted).open();
        } catch (VerbsException | UnsatisfiedLinkError e) {
            return none(required, e.getMessage());
        }
    }

    private static Context none(boolean required, String why) {
        if (required) fail("RDMA_RUN_REQUIRE_DEVICE=1 but " + why);
        assumeTrue(false, "device tests need an RDMA device (" + why + "); they run in the Soft-RoCE VM suite");
        return null;
    }
}
