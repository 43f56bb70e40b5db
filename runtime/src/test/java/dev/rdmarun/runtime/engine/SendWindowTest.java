package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The send window's bookkeeping without a device: signaling, the window limit, the ring's
 * wrap-around and in-order completion. No atomics, so no result words are read (the regions are
 * null).
 */
class SendWindowTest {
    /** sendDepth 4, signalEvery 2: a ring of 256 entries. */
    private static final EngineConfig CONFIG = new EngineConfig(64, 4, 4, 4, 4, 2, 0);

    private final QpStats stats = new QpStats();
    private final SendWindow window = new SendWindow(CONFIG, stats, null, null);

    private long post(OpKind kind, int bytes) {
        long seq = window.posted() + 1;
        boolean signaled = window.signals(seq);
        window.record(seq, kind, bytes, 0, signaled);
        window.posted(seq, signaled);
        return seq;
    }

    @Test
    void signalsOneInSignalEveryAndFillsAtSendDepth() {
        assertFalse(window.signals(1));
        assertTrue(window.signals(2));
        for (int i = 0; i < 4; i++) {
            assertFalse(window.full());
            post(OpKind.SEND, 8);
        }
        assertTrue(window.full());
        assertEquals(4, window.lastSignaled());
        window.completeThrough(2);
        assertFalse(window.full());
    }

    @Test
    void aCompletionCompletesEveryEarlierWorkRequestOnce() {
        post(OpKind.SEND, 10);
        post(OpKind.READ, 20);
        post(OpKind.WRITE, 30);
        window.completeThrough(2);
        window.completeThrough(1); // an older completion changes nothing
        assertEquals(2, window.completed());
        assertEquals(2, stats.operations());
        assertEquals(10, stats.bytesSent());
        assertEquals(20, stats.bytesReceived());
        window.completeThrough(3);
        assertEquals(3, stats.operations());
        assertEquals(40, stats.bytesSent());
    }

    @Test
    void workNobodyAwaitsIsForgottenWhenTheRingWrapsYetStillCounted() {
        int ring = window.capacity();
        assertEquals(256, ring);
        assertEquals(ring, CONFIG.rememberedWork());
        for (int i = 1; i <= ring + 44; i++) {
            post(i % 2 == 0 ? OpKind.WRITE : OpKind.SEND, i);
            window.completeThrough(i);
        }
        // Outstanding counts what the driver has not awaited, the 44 forgotten ones too; the
        // oldest one remembered is what a driver can take next.
        assertEquals(ring + 44, window.outstanding());
        assertEquals(45, window.nextToAwait());
        // The entries of the last ring's worth are what was posted last, not what they overwrote.
        assertEquals(OpKind.WRITE, window.kindOf(ring + 44));
        assertEquals(ring + 43, window.sizeOf(ring + 43));
        assertEquals(window.slot(44), window.slot(ring + 44));
        window.markAwaited(ring + 44); // what awaiting all of them does
        assertEquals(0, window.outstanding());
        assertEquals(0, window.nextToAwait());
    }

    @Test
    void theRingRemembersFourSendDepthsWhenThatIsMoreThan256() {
        assertEquals(256, new EngineConfig(64, 1, 64, 4, 4, 1, 0).rememberedWork());
        assertEquals(512, new EngineConfig(64, 1, 128, 4, 4, 1, 0).rememberedWork());
        assertEquals(512, new EngineConfig(64, 1, 65, 4, 4, 1, 0).rememberedWork());
    }

    @Test
    void markAwaitedNeverPassesWhatWasPosted() {
        post(OpKind.SEND, 1);
        post(OpKind.SEND, 1);
        window.markAwaited(10);
        assertEquals(0, window.outstanding());
        assertEquals(0, window.nextToAwait());
        window.markAwaited(1); // older: nothing changes
        assertEquals(0, window.outstanding());
        post(OpKind.SEND, 1);
        assertEquals(3, window.nextToAwait());
    }

    @Test
    void atomicsInFlightNeverShareAResultWord() {
        long base = window.resultWordOf(4);
        for (long seq = 5; seq < 8; seq++) assertNotEquals(base, window.resultWordOf(seq));
        assertEquals(base, window.resultWordOf(8));
        assertEquals(CONFIG.resultWordsOffset(), base);
    }
}
