package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.VerbsProvider;
import java.util.List;

/**
 * rdma-run's software verbs provider: one device, {@value SoftDevice#NAME}, on every machine. It
 * is listed after the libibverbs devices, so it is the default only where there is no RDMA device.
 */
public final class SoftProvider implements VerbsProvider {
    @Override
    public int order() {
        return 100;
    }

    @Override
    public Discovery discover() {
        return new Discovery(List.of(SoftDevice.INSTANCE), null, () -> { });
    }
}
