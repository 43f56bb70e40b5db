package dev.rdmarun.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The one text form of a fabric key, as every exchange (control connection, pingpong, samples) reads it. */
class FabricKeyTest {
    @Test
    void hexRoundTrips() {
        FabricKey k = FabricKey.random();
        assertEquals(k, FabricKey.parseHex(k.toHex()));
        assertNotEquals(k, FabricKey.random());
        assertEquals("FabricKey[redacted]", k.toString());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "abc", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0",
            "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
            "0123456789abcdeg0123456789abcdef0123456789abcdef0123456789abcdef"})
    void onlyExactly64LowercaseHexDigitsAreAKey(String text) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> FabricKey.parseHex(text));
        assertFalse(!text.isEmpty() && e.getMessage().contains(text), "the message repeats the text");
    }

    @Test
    void noTextIsNoKey() {
        assertThrows(IllegalArgumentException.class, () -> FabricKey.parseHex(null));
    }
}
