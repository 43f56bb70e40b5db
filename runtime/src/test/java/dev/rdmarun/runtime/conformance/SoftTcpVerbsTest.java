package dev.rdmarun.runtime.conformance;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.SoftTransport;
import dev.rdmarun.runtime.soft.SoftDevice;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The conformance cases on soft0 with every packet over its TCP transport (the path two
 * processes use), forced by the provider's transport property: every build.
 */
class SoftTcpVerbsTest extends VerbsConformance {
    @BeforeAll
    static void forceTcp() {
        System.setProperty(SoftTransport.PROPERTY, "tcp");
    }

    @AfterAll
    static void restore() {
        System.clearProperty(SoftTransport.PROPERTY);
    }

    @Override
    protected Context openContext() {
        return Context.open(SoftDevice.NAME);
    }
}
