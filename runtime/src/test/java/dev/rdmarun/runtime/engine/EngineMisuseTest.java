package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/**
 * What a driver of its own may get wrong, found by a stranger's pass over the engine's public API:
 * each is refused at the call or reported to the listener, never a wrong result or a silent engine.
 */
class EngineMisuseTest {
    private static final EngineConfig CONFIG = new EngineConfig(64, 16, 8, 16, 16, 1, 0);

    @Test
    void aRemoteOffsetWhoseEndOverflowsIsRefusedAtThePost() throws Exception {
        try (EnginePair pair = new EnginePair(CONFIG)) {
            pair.onDispatcher(() -> {
                for (long offset : new long[] {Long.MAX_VALUE, Long.MAX_VALUE - 3, 57}) {
                    EngineException e = assertThrows(EngineException.class,
                            () -> pair.sender.post(OpKind.WRITE, 8, 0, 0, 0, offset, 0, 0, 0));
                    assertTrue(e.getMessage().contains("remoteOffset " + offset), e.getMessage());
                }
                assertEquals(0, pair.sender.posted(), "nothing went out");
                assertNull(pair.sender.failure());
                return null;
            });
        }
    }

    @Test
    void aWorkRequestNotPostedOrTakenAlreadyCannotBeTakenWithItsFigures() throws Exception {
        try (EnginePair pair = new EnginePair(CONFIG)) {
            CompletedWork taken = new CompletedWork();
            pair.onDispatcher(() -> {
                assertThrows(IllegalArgumentException.class, () -> pair.sender.takeCompletion(0, taken));
                assertThrows(IllegalArgumentException.class, () -> pair.sender.takeCompletion(Long.MIN_VALUE, taken));
                assertEquals(1, pair.post(OpKind.WRITE, 0, 24, 0, 0));
                return null;
            });
            pair.awaitTrue("the write completes", () -> pair.sender.completedThrough() == 1);
            pair.onDispatcher(() -> {
                assertTrue(pair.sender.takeCompletion(1, taken));
                IllegalArgumentException again = assertThrows(IllegalArgumentException.class, () -> pair.sender.takeCompletion(1, taken));
                assertTrue(again.getMessage().contains("taken already"), again.getMessage());
                assertTrue(pair.sender.takeCompletion(1, null), "without figures: everything through 1 completed");
                return null;
            });
        }
    }

    @Test
    void aListenerThatThrowsLeavesTheDispatcherPollingForEveryQp() throws Exception {
        try (EnginePair pair = new EnginePair(CONFIG)) {
            pair.onDispatcher(() -> {
                pair.sender.setListener((e, what) -> {
                    throw new IllegalStateException("a listener's own bug");
                });
                assertEquals(1, pair.post(OpKind.SEND, 0, 8, 0, 0));
                return null;
            });
            pair.awaitTrue("the first send completes", () -> pair.sender.completedThrough() == 1);
            // The dispatcher still runs tasks and polls: the next send completes and arrives.
            pair.onDispatcher(() -> pair.post(OpKind.SEND, 1, 8, 0, 1));
            pair.awaitTrue("the second send completes", () -> pair.sender.completedThrough() == 2);
            pair.awaitTrue("both arrive", () -> pair.receiver.stats().messagesReceived() == 2);
        }
    }

    @Test
    void aPostWhoseCreditCheckFailsTheEngineThrowsThatFailure() throws Exception {
        try (EnginePair pair = new EnginePair(CONFIG)) {
            pair.forgeCreditWordOfSender(1000); // more re-posts than the peer has receives
            pair.onDispatcher(() -> {
                RuntimeException e = assertThrows(RuntimeException.class, () -> pair.sender.post(OpKind.SEND, 8, 0, 0, 0, 0, 0, 0, 0));
                assertNotNull(pair.sender.failure());
                assertSame(pair.sender.failure(), e, "the same call says it, not the next post");
                return null;
            });
        }
    }

    @Test
    void aMessagesFieldsWhenNoneWaitsAreAnErrorNotTheLastOnes() throws Exception {
        try (EnginePair pair = new EnginePair(CONFIG)) {
            pair.onDispatcher(() -> pair.post(OpKind.SEND_WITH_IMM, 0, 8, 5, 0));
            pair.awaitTrue("the message arrives", () -> pair.receiver.hasMessage());
            pair.onDispatcher(() -> {
                assertEquals(8, pair.receiver.messageLength());
                pair.receiver.releaseMessage();
                assertThrows(IllegalStateException.class, () -> pair.receiver.messageLength());
                assertThrows(IllegalStateException.class, () -> pair.receiver.messageImmediate());
                assertThrows(IllegalStateException.class, () -> pair.receiver.messageIsWrite());
                return null;
            });
        }
    }

    @Test
    void closingTheDispatcherWithWorkInFlightTellsTheListenerOnce() throws Exception {
        // No ACK timeout (0: none) and a peer in RESET, which drops what it gets: the SEND never completes.
        try (EnginePair pair = new EnginePair(CONFIG, rts -> rts.withRetry(0, 7))) {
            List<Progress> heard = new CopyOnWriteArrayList<>();
            pair.onDispatcher(() -> {
                pair.sender.setListener((e, what) -> heard.add(what));
                pair.qp(1).modifyToReset();
                assertEquals(1, pair.post(OpKind.SEND, 0, 8, 0, 0));
                return null;
            });
            pair.closeDispatcher();
            assertEquals(List.of(Progress.FAILED), heard);
            assertNotNull(pair.sender.failure());
        }
    }
}
