package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** Which work request a post has to wait for, per buffer, by what posted work does to it. */
class BuffersInFlightTest {
    private final BuffersInFlight buffers = new BuffersInFlight(2);

    @Test
    void sendsAndWritesOfOneBufferGoThroughButAReadWaitsForThem() {
        buffers.posted(OpKind.SEND, 0, 1, false);
        buffers.posted(OpKind.WRITE, 0, 2, false);
        assertEquals(0, buffers.busyUntil(OpKind.SEND, 0, 0));
        assertEquals(2, buffers.busyUntil(OpKind.READ, 0, 0));
        assertEquals(0, buffers.busyUntil(OpKind.READ, 0, 2));
        assertEquals(0, buffers.busyUntil(OpKind.READ, 1, 0));
    }

    @Test
    void inlineDataIsCopiedAtThePost() {
        buffers.posted(OpKind.SEND, 0, 1, true);
        assertEquals(0, buffers.busyUntil(OpKind.READ, 0, 0));
        assertEquals(0, buffers.localWriteBusyUntil(0, 0));
    }

    @Test
    void readsAndAtomicsFillTheBuffer() {
        buffers.posted(OpKind.READ, 0, 3, false);
        buffers.posted(OpKind.FETCH_AND_ADD, 1, 4, false);
        assertEquals(0, buffers.busyUntil(OpKind.READ, 0, 0));
        assertEquals(3, buffers.busyUntil(OpKind.SEND, 0, 0));
        assertEquals(4, buffers.busyUntil(OpKind.WRITE_WITH_IMM, 1, 3));
        assertEquals(4, buffers.busyUntil(OpKind.READ, 1, 0));
        assertEquals(0, buffers.busyUntil(OpKind.COMPARE_AND_SWAP, 1, 0));
        assertEquals(4, buffers.localWriteBusyUntil(1, 0));
        assertEquals(0, buffers.localWriteBusyUntil(1, 4));
    }
}
