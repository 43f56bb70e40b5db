package dev.rdmarun.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** A fabric key is a secret: it compares by value, never prints, and is only ever 32 bytes. */
class FabricKeyTest {
    @Test
    void keysCompareByValueAndNeverPrint() {
        FabricKey k = FabricKey.random();
        assertEquals(k, FabricKey.of(k.toBytes()));
        assertNotEquals(k, FabricKey.random());
        assertEquals("FabricKey[redacted]", k.toString());
    }

    @Test
    void onlyExactly32BytesAreAKey() {
        assertThrows(IllegalArgumentException.class, () -> FabricKey.of(new byte[31]));
        assertThrows(IllegalArgumentException.class, () -> FabricKey.of(null));
    }
}
