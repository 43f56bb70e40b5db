package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.engine.EnginePair.Message;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;

/**
 * The receive side on soft0: messages wait in the order sent with their sizes and immediates, a
 * message not yet taken keeps its receive slot (and the peer's credit), and taking one re-posts
 * its receive.
 */
class InboxTest {
    @Test
    void messagesWaitInOrderWithTheirSizesAndImmediates() throws Exception {
        try (EnginePair pair = new EnginePair(new EngineConfig(64, 8, 16, 8, 8, 1, 0))) {
            int[] sizes = {0, 1, 17, 64, 0, 64, 33};
            Integer[] imms = {null, null, 0xDEADBEEF, null, 0, -1, 7};
            List<Message> expected = new ArrayList<>();
            pair.onDispatcher(() -> {
                for (int i = 0; i < sizes.length; i++) {
                    OpKind kind = imms[i] == null ? OpKind.SEND : OpKind.SEND_WITH_IMM;
                    assertEquals(i + 1, pair.post(kind, i, sizes[i], imms[i] == null ? 0 : imms[i], i));
                    expected.add(Message.sent(i, sizes[i], imms[i]));
                }
                return null;
            });
            pair.awaitTrue("seven messages arrive", () -> pair.receiver.messagesWaiting() == sizes.length);
            List<Message> taken = pair.onDispatcher(() -> {
                List<Message> m = new ArrayList<>();
                while (pair.receiver.hasMessage()) m.add(pair.take());
                return m;
            });
            assertEquals(expected, taken);
            assertEquals(sizes.length, pair.receiver.stats().messagesReceived());
            assertEquals(179, pair.receiver.stats().bytesReceived(), "the sum of the sizes");
        }
    }

    @Test
    void aWriteWithImmTakesAReceiveAndItsDataIsInTheBuffer() throws Exception {
        try (EnginePair pair = new EnginePair(new EngineConfig(64, 4, 16, 4, 4, 1, 0))) {
            // In one dispatcher task: no completion (nor returned credit) comes between the post and the count.
            assertEquals(List.of(1L, 3L), pair.onDispatcher(() -> List.of(pair.post(OpKind.WRITE_WITH_IMM, 2, 24, 42, 9), pair.sender.credits())),
                    "it took one of the four receives");
            pair.awaitTrue("the write's message arrives", pair.receiver::hasMessage);
            assertEquals(new Message(24, true, 42, true, "00".repeat(24)), pair.onDispatcher(pair::take),
                    "a write's message carries its length and immediate; its payload is not in the message");
            byte[] buffer2 = pair.receiver.dataRegion().segment().asSlice(2L * 64, 24).toArray(ValueLayout.JAVA_BYTE);
            assertEquals(Message.sent(9, 24, null).payload(), HexFormat.of().formatHex(buffer2),
                    "the data went straight into buffer 2 of the receiver");
        }
    }

    @Test
    void aHeldMessageKeepsItsSlotUntilTaken() throws Exception {
        // No inbox: every message waits in its receive slot; a take re-posts exactly that slot.
        try (EnginePair pair = new EnginePair(new EngineConfig(64, 8, 16, 4, 0, 1, 0))) {
            QpEngine receiver = pair.receiver;
            pair.sendAll(1, 4, 64);
            pair.awaitTrue("four messages fill the four slots", () -> receiver.messagesWaiting() == 4 && pair.sender.completedThrough() == 4);
            pair.onDispatcher(() -> {
                assertTrue(receiver.inboxFull());
                assertEquals(0, pair.creditWordOfSender(), "nothing taken, nothing re-posted");
                assertEquals(Message.sent(1, 64, null), pair.take());
                return null;
            });
            pair.awaitTrue("the take's re-post reaches the sender", () -> pair.creditWordOfSender() == 1 && pair.sender.credits() == 1);
            assertEquals(5L, pair.onDispatcher(() -> pair.post(OpKind.SEND, 5, 64, 0, 5)));
            pair.awaitTrue("the fifth message arrives in the re-posted slot", () -> receiver.messagesWaiting() == 4);
            List<Message> rest = pair.onDispatcher(() -> {
                List<Message> m = new ArrayList<>();
                while (receiver.hasMessage()) m.add(pair.take());
                return m;
            });
            assertEquals(List.of(Message.sent(2, 64, null), Message.sent(3, 64, null), Message.sent(4, 64, null), Message.sent(5, 64, null)),
                    rest, "the held messages were not overwritten by the fifth");
            pair.awaitTrue("every slot goes back to the sender", () -> pair.creditWordOfSender() == 5 && !receiver.creditWriteInFlight());
            assertEquals(4L, pair.onDispatcher(pair.sender::credits));
        }
    }

    @Test
    void dropTakesOnlyTheOldestAndAnEmptyInboxRefusesARelease() throws Exception {
        try (EnginePair pair = new EnginePair(new EngineConfig(64, 8, 16, 8, 4, 1, 0))) {
            pair.sendAllAndAwaitThem(5, 8);
            assertEquals(2, pair.onDispatcher(() -> pair.receiver.dropWaitingMessages(2)));
            assertEquals(Message.sent(2, 8, null), pair.onDispatcher(pair::take), "the two oldest were dropped");
            assertEquals(2, pair.onDispatcher(() -> pair.receiver.dropWaitingMessages(10)), "only what waits");
            assertFalse(pair.onDispatcher(pair.receiver::hasMessage));
            ExecutionException e = assertThrows(ExecutionException.class, () -> pair.onDispatcher(() -> {
                pair.receiver.releaseMessage();
                return null;
            }));
            assertInstanceOf(IllegalStateException.class, e.getCause(), "a release with nothing waiting");
        }
    }

    @Test
    void afterFinishReceivingArrivalsAreCountedAndTheirReceivesRepostedAtOnce() throws Exception {
        try (EnginePair pair = new EnginePair(new EngineConfig(64, 8, 16, 4, 0, 1, 0))) {
            QpEngine receiver = pair.receiver;
            pair.sendAllAndAwaitThem(4, 8);
            pair.onDispatcher(() -> {
                receiver.finishReceiving();
                assertFalse(receiver.hasMessage());
                assertEquals(4, receiver.stats().messagesNotReceived());
                return null;
            });
            pair.awaitTrue("the four slots go back to the sender", () -> pair.sender.credits() == 4 && !receiver.creditWriteInFlight());
            pair.sendAll(4, 4, 8);
            pair.awaitTrue("later arrivals are dropped and their slots return",
                    () -> receiver.stats().messagesReceived() == 8 && pair.creditWordOfSender() == 8 && !receiver.creditWriteInFlight());
            assertEquals(8L, pair.onDispatcher(() -> receiver.stats().messagesNotReceived()));
            assertFalse(pair.onDispatcher(receiver::hasMessage));
        }
    }
}
