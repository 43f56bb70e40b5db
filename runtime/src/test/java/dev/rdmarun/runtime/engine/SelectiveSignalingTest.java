package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.engine.EnginePair.Message;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The send window on soft0 with one work request in four signaled: every work request still
 * completes, once and in order, the window never holds more than sendDepth, and sequence numbers
 * run on past the window's ring (256 entries) with each entry reused.
 */
class SelectiveSignalingTest {
    /** sendDepth 8, signalEvery 4; 16 receives and 16 inbox entries, so ten sends never wait for credit. */
    private static final EngineConfig CONFIG = new EngineConfig(64, 16, 8, 16, 16, 4, 0);

    @Test
    void everyWorkRequestCompletesInOrderWhenOneInFourIsSignaled() throws Exception {
        try (EnginePair pair = new EnginePair(CONFIG)) {
            QpEngine sender = pair.sender;
            int[] next = {1};
            pair.awaitTrue("ten are posted (the window holds eight)", () -> {
                while (next[0] <= 10 && pair.post(next[0] % 2 == 0 ? OpKind.SEND : OpKind.WRITE, next[0], next[0], 0, next[0]) > 0) next[0]++;
                return next[0] > 10;
            });
            pair.awaitTrue("the signaled 8th completes", () -> sender.completedThrough() >= 8);
            pair.onDispatcher(() -> {
                assertEquals(8, sender.completedThrough(), "9 and 10 are unsignaled: nothing reports them yet");
                assertFalse(sender.creditWriteInFlight());
                return null;
            });
            // Await each in turn as the DSL does: a wait on an unsignaled one asks the engine to report it.
            List<String> awaited = new ArrayList<>();
            CompletedWork taken = new CompletedWork();
            pair.awaitTrue("all ten are awaited", () -> {
                long seq = sender.nextToAwait();
                if (seq == 0) return true;
                if (sender.takeCompletion(seq, taken)) {
                    awaited.add(taken.seq() + ":" + taken.kind() + ":" + taken.bytes());
                } else {
                    sender.requestCompletionOf(seq);
                }
                return false;
            });
            List<String> expected = new ArrayList<>();
            for (int i = 1; i <= 10; i++) expected.add(i + ":" + (i % 2 == 0 ? OpKind.SEND : OpKind.WRITE) + ":" + i);
            assertEquals(expected, awaited);
            pair.onDispatcher(() -> {
                assertEquals(10, sender.completedThrough());
                assertEquals(0, sender.outstanding());
                assertEquals(10, sender.stats().operations(), "each work request counted once");
                assertEquals(55, sender.stats().bytesSent(), "1 + 2 + ... + 10");
                return null;
            });
        }
    }

    @Test
    void theWindowNeverHoldsMoreThanSendDepthAcrossTheRing() throws Exception {
        int total = 2 * 256 + 5;
        try (EnginePair pair = new EnginePair(CONFIG)) {
            QpEngine sender = pair.sender;
            long[] next = {1};
            int[] blocked = {0};
            pair.awaitTrue(total + " writes are posted", () -> {
                while (next[0] <= total) {
                    long seq = pair.post(OpKind.WRITE, (int) (next[0] % 16), (int) (next[0] % 64) + 1, 0, (int) next[0]);
                    long inFlight = sender.posted() - sender.completedThrough();
                    assertTrue(inFlight <= 8, inFlight + " in flight after post " + next[0]);
                    if (seq < 0) {
                        assertEquals(QpEngine.BLOCKED_ON_WINDOW, seq);
                        assertEquals(8, inFlight, "blocked on the window only when it is full");
                        blocked[0]++;
                        return false;
                    }
                    assertEquals(next[0]++, seq, "sequence numbers are consecutive");
                }
                return true;
            });
            assertTrue(blocked[0] > 0, "the window filled at least once");
            pair.onDispatcher(() -> {
                sender.requestCompletionOf(total);
                return null;
            });
            pair.awaitTrue("every write completes", () -> sender.completedThrough() == total);
            pair.onDispatcher(() -> {
                assertEquals(total, sender.stats().operations());
                long bytes = 0;
                for (long seq = 1; seq <= total; seq++) bytes += seq % 64 + 1;
                assertEquals(bytes, sender.stats().bytesSent());
                assertEquals(total, sender.outstanding(), "nobody awaited them: each one counts, forgotten or not");
                assertEquals(total - 255, sender.nextToAwait(), "the ring remembers its last 256");
                CompletedWork last = new CompletedWork();
                assertTrue(sender.takeCompletion(total, last));
                assertEquals(total % 64 + 1, last.bytes());
                assertEquals(0, sender.outstanding(), "taking the last takes every one before it");
                return null;
            });
        }
    }

    @Test
    void messagesPastTheRingArriveInOrderThroughASmallInbox() throws Exception {
        // 4 receives and an inbox of 2: credits, the held ring and the inbox ring all wrap many times.
        int total = 600;
        try (EnginePair pair = new EnginePair(new EngineConfig(64, 16, 8, 4, 2, 4, 0))) {
            int[] sent = {0};
            List<Message> taken = new ArrayList<>();
            pair.awaitTrue(total + " messages are taken", () -> {
                while (sent[0] < total && pair.post(OpKind.SEND_WITH_IMM, sent[0] % 16, sent[0] % 65, sent[0], sent[0]) > 0) sent[0]++;
                while (pair.receiver.hasMessage()) taken.add(pair.take());
                return taken.size() >= total;
            });
            for (int id = 0; id < total; id++) assertEquals(Message.sent(id, id % 65, id), taken.get(id), "message " + id);
            assertEquals(total, taken.size());
            pair.onDispatcher(() -> {
                pair.sender.requestCompletionOf(total);
                return null;
            });
            pair.awaitTrue("every send completes", () -> pair.sender.completedThrough() == total);
        }
    }
}
