package dev.rdmarun.runtime.conformance;

import dev.rdmarun.runtime.Context;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/** A conformance suite's device: each provider's subclass opens its context; every case gets a fresh one. */
abstract class OnDevice {
    protected Context context;

    /** The context the cases run on (or a skipped test where the device is missing). */
    protected abstract Context openContext();

    @BeforeEach
    void open() {
        context = openContext();
    }

    @AfterEach
    void close() {
        if (context != null) context.close();
    }
}
