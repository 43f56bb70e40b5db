package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Credits on soft0: a sender has the peer's recvDepth of them, spends one per receive-consuming
 * work request, and gets back exactly what the peer's engine re-posted, as the counter the peer
 * RDMA-writes into its credit word (once a batch of recvDepth / 4 is unreported).
 */
class CreditFlowTest {
    @Test
    void aSenderSpendsRecvDepthCreditsThenOnlyNonMessagesGo() throws Exception {
        try (EnginePair pair = new EnginePair(new EngineConfig(64, 8, 16, 4, 0, 1, 0))) {
            QpEngine sender = pair.sender;
            List<Long> seen = pair.onDispatcher(() -> {
                List<Long> s = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    s.add(sender.credits());
                    s.add(pair.post(OpKind.SEND, i, 8, 0, i));
                }
                s.add(sender.credits());
                return s;
            });
            assertEquals(List.of(4L, 1L, 3L, 2L, 2L, 3L, 1L, 4L, 0L), seen, "credits before each send, and its sequence number");
            pair.onDispatcher(() -> {
                assertEquals(QpEngine.BLOCKED_ON_CREDIT, sender.blockedOn(OpKind.SEND));
                assertEquals(QpEngine.BLOCKED_ON_CREDIT, pair.post(OpKind.SEND, 4, 8, 0, 4));
                assertEquals(QpEngine.BLOCKED_ON_CREDIT, pair.post(OpKind.SEND_WITH_IMM, 4, 8, 1, 4));
                assertEquals(QpEngine.BLOCKED_ON_CREDIT, pair.post(OpKind.WRITE_WITH_IMM, 4, 8, 1, 4), "it takes a receive too");
                assertEquals(4, sender.posted(), "a blocked post posts nothing");
                assertEquals(4, sender.stats().messagesSent());
                assertEquals(5, pair.post(OpKind.WRITE, 4, 8, 0, 4), "a WRITE takes no receive, so no credit");
                return null;
            });
            pair.awaitTrue("the four messages arrive", () -> pair.receiver.messagesWaiting() == 4 && sender.completedThrough() == 5);
            assertEquals(0L, pair.onDispatcher(sender::credits), "no credit while the receiver holds all four");
        }
    }

    @Test
    void creditsReturnInBatchesAndAreCountedExactly() throws Exception {
        // recvDepth 8: the receiver reports its re-posts two at a time; no inbox, so each take re-posts.
        try (EnginePair pair = new EnginePair(new EngineConfig(64, 8, 16, 8, 0, 1, 0))) {
            QpEngine sender = pair.sender;
            QpEngine receiver = pair.receiver;
            pair.sendAllAndAwaitThem(8, 8);

            pair.onDispatcher(() -> {
                pair.take();
                assertFalse(receiver.creditWriteInFlight(), "one re-post is less than a batch: nothing is written yet");
                pair.take();
                assertTrue(receiver.creditWriteInFlight(), "the second re-post completes a batch");
                return null;
            });
            pair.awaitTrue("the batch reaches the sender", () -> !receiver.creditWriteInFlight());
            assertEquals(List.of(2L, 2L), pair.onDispatcher(() -> List.of(pair.creditWordOfSender(), sender.credits())));

            pair.onDispatcher(() -> {
                while (receiver.hasMessage()) pair.take();
                return null;
            });
            pair.awaitTrue("all eight re-posts reach the sender", () -> pair.creditWordOfSender() == 8 && !receiver.creditWriteInFlight());
            assertEquals(8L, pair.onDispatcher(sender::credits), "recvDepth + reposted - sent");
            List<Long> posts = pair.onDispatcher(() -> {
                List<Long> seqs = new ArrayList<>();
                for (int i = 0; i < 9; i++) seqs.add(pair.post(OpKind.SEND, i % 8, 8, 0, i));
                return seqs;
            });
            assertEquals(List.of(9L, 10L, 11L, 12L, 13L, 14L, 15L, 16L, QpEngine.BLOCKED_ON_CREDIT), posts);
        }
    }

    @Test
    void theInboxHoldsInboxDepthMessagesBeyondTheReceives() throws Exception {
        // 4 receives, an inbox of 2: the sender gets 2 credits back without a single take.
        try (EnginePair pair = new EnginePair(new EngineConfig(64, 8, 16, 4, 2, 1, 0))) {
            QpEngine sender = pair.sender;
            QpEngine receiver = pair.receiver;
            int[] sent = {0};
            pair.awaitTrue("six messages are sent", () -> {
                while (pair.post(OpKind.SEND, sent[0] % 8, 8, 0, sent[0]) > 0) sent[0]++;
                return sent[0] >= 6;
            });
            pair.awaitTrue("the six wait and every credit write landed",
                    () -> receiver.messagesWaiting() == 6 && sender.completedThrough() == sent[0] && !receiver.creditWriteInFlight());
            assertEquals(6, sent[0], "4 receives + 2 in the inbox, no more");
            pair.onDispatcher(() -> {
                assertTrue(receiver.inboxFull());
                assertEquals(2, pair.creditWordOfSender(), "the two copied into the inbox were re-posted");
                assertEquals(0, sender.credits());
                assertEquals(QpEngine.BLOCKED_ON_CREDIT, pair.post(OpKind.SEND, 6, 8, 0, 6));
                pair.take();
                return null;
            });
            pair.awaitTrue("the take frees one slot", () -> pair.creditWordOfSender() == 3 && !receiver.creditWriteInFlight());
            assertEquals(1L, pair.onDispatcher(sender::credits), "one take, one credit: a held message moved into the inbox");
        }
    }

    @Test
    void aPeerThatReportsMoreReceivesThanItWasSentIsRefused() throws Exception {
        try (EnginePair pair = new EnginePair(new EngineConfig(64, 8, 16, 4, 0, 1, 0))) {
            QpEngine sender = pair.sender;
            pair.onDispatcher(() -> {
                assertEquals(1, pair.post(OpKind.SEND, 0, 8, 0, 0));
                pair.forgeCreditWordOfSender(2); // two re-posts of one message
                assertEquals(0, sender.credits());
                EngineException failure = assertInstanceOf(EngineException.class, sender.failure());
                assertTrue(failure.getMessage().contains("reported 2 re-posted receives on QP 0"), failure.getMessage());
                assertSame(failure, assertThrows(EngineException.class, () -> pair.post(OpKind.SEND, 1, 8, 0, 1)));
                return null;
            });
        }
    }
}
