package dev.rdmarun.runtime.conformance;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.soft.SoftDevice;

/** The conformance cases on soft0, its QPs connected in memory: every build. */
class SoftVerbsTest extends VerbsConformance {
    @Override
    protected Context openContext() {
        return Context.open(SoftDevice.NAME);
    }
}
