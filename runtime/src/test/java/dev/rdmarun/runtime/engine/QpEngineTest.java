package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The engine's send window, credits and inbox, on two connected QPs of one soft0 context (in
 * memory), both engines driven on one dispatcher thread as the DSL drives them ({@link EnginePair}).
 */
class QpEngineTest {
    private static final long DEADLINE_SECONDS = EnginePair.DEADLINE_SECONDS;

    private EnginePair pair;
    private QpEngine sender;
    private QpEngine receiver;

    /** Two engines of {@code config}, connected to each other: {@link #sender} and {@link #receiver}. */
    private void connectPair(EngineConfig config) throws Exception {
        pair = new EnginePair(config);
        sender = pair.sender;
        receiver = pair.receiver;
    }

    @AfterEach
    void close() {
        if (pair != null) pair.close();
    }

    private <T> T onDispatcher(Callable<T> body) throws Exception {
        return pair.onDispatcher(body);
    }

    private void awaitTrue(String what, BooleanSupplier condition) throws Exception {
        pair.awaitTrue(what, condition);
    }

    private long send(int buffer, int value) {
        return pair.send(buffer, value);
    }

    @Test
    void theWindowHoldsSendDepthWorkRequests() throws Exception {
        connectPair(new EngineConfig(64, 1, 4, 16, 16, 1, 0));
        List<Long> posts = onDispatcher(() -> {
            List<Long> seqs = new ArrayList<>();
            for (int i = 0; i < 5; i++) seqs.add(send(0, i));
            return seqs;
        });
        assertEquals(List.of(1L, 2L, 3L, 4L, QpEngine.BLOCKED_ON_WINDOW), posts);
        awaitTrue("the four sends complete", () -> sender.completedThrough() == 4);
        assertEquals(5L, onDispatcher(() -> send(0, 4)), "a completion frees the window");
        awaitTrue("five messages arrive", () -> receiver.messagesWaiting() == 5);
    }

    @Test
    void aSenderWaitsForCreditsInsteadOfAReceiverNotReady() throws Exception {
        // No inbox: a message the receiver has not taken keeps its receive, and its credit.
        connectPair(new EngineConfig(64, 8, 16, 4, 0, 1, 0));
        List<Long> posts = onDispatcher(() -> {
            List<Long> seqs = new ArrayList<>();
            for (int i = 0; i < 5; i++) seqs.add(send(i, i));
            return seqs;
        });
        assertEquals(List.of(1L, 2L, 3L, 4L, QpEngine.BLOCKED_ON_CREDIT), posts);
        awaitTrue("the four sends complete", () -> sender.completedThrough() == 4 && receiver.messagesWaiting() == 4);
        assertTrue(onDispatcher(() -> receiver.inboxFull()));
        assertEquals(QpEngine.BLOCKED_ON_CREDIT, onDispatcher(() -> sender.blockedOn(OpKind.SEND)), "no credit while all four are held");

        onDispatcher(() -> {
            receiver.releaseMessage();
            receiver.releaseMessage();
            return null;
        });
        awaitTrue("two credits return", () -> sender.credits() == 2);
        assertEquals(List.of(5L, 6L, QpEngine.BLOCKED_ON_CREDIT), onDispatcher(() -> List.of(send(4, 4), send(5, 5), send(6, 6))));
        awaitTrue("the two sends arrive", () -> sender.completedThrough() == 6 && receiver.messagesWaiting() == 4);
    }

    @Test
    void theInboxTakesArrivalsBeyondThePostedReceivesInOrder() throws Exception {
        // 4 receives and an inbox of 8: 12 messages may wait before the sender runs out of credit.
        connectPair(new EngineConfig(64, 16, 16, 4, 8, 1, 0));
        int sent = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(DEADLINE_SECONDS);
        while (sent < 12) {
            int next = sent;
            long seq = onDispatcher(() -> send(next, 100 + next));
            if (seq > 0) {
                sent++;
            } else {
                assertEquals(QpEngine.BLOCKED_ON_CREDIT, seq);
                assertTrue(System.nanoTime() - deadline < 0, "the receiver never returned a credit");
                Thread.onSpinWait();
            }
        }
        awaitTrue("all twelve wait", () -> receiver.messagesWaiting() == 12 && sender.completedThrough() == 12);
        assertTrue(onDispatcher(() -> receiver.inboxFull()), "8 in the inbox, 4 holding their receives");
        assertEquals(QpEngine.BLOCKED_ON_CREDIT, onDispatcher(() -> send(12, 112)));

        List<Integer> firstBytes = onDispatcher(() -> {
            List<Integer> values = new ArrayList<>();
            byte[] message = new byte[64];
            while (receiver.hasMessage()) {
                assertEquals(8, receiver.messageLength());
                receiver.copyMessage(message, 0);
                values.add((int) message[0]);
                receiver.releaseMessage();
            }
            return values;
        });
        List<Integer> expected = new ArrayList<>();
        for (int i = 0; i < 12; i++) expected.add(100 + i);
        assertEquals(expected, firstBytes, "every message, once, in the order sent");
        assertFalse(onDispatcher(() -> receiver.inboxFull()));
        awaitTrue("credits return once the messages are taken", () -> sender.blockedOn(OpKind.SEND) == 0);
    }
}
