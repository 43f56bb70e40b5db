package dev.rdmarun.runtime.conformance;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.soft.SoftDevice;

/** The dispatcher cases on soft0: every build. */
class SoftDispatcherTest extends DispatcherConformance {
    @Override
    protected Context openContext() {
        return Context.open(SoftDevice.NAME);
    }
}
