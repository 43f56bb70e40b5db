package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The listener hears what moved: each arrival as MESSAGE_ARRIVED on the receiving engine, completed
 * work as WORK_COMPLETED on the posting one, and a failure as FAILED, once however often the peer
 * breaks the protocol afterwards. takeCompletion takes the completion of a work request and all
 * before it, and nothing before it completed.
 */
class ProgressEventsTest {
    private static final EngineConfig CONFIG = new EngineConfig(64, 16, 8, 16, 16, 1, 0);

    @Test
    void eachCallbackReportsWhatMovedAndAFailureOnce() throws Exception {
        try (EnginePair pair = new EnginePair(CONFIG)) {
            List<Progress> atSender = new ArrayList<>(); // written and read on the dispatcher thread only
            List<Progress> atReceiver = new ArrayList<>();
            pair.onDispatcher(() -> {
                pair.sender.setListener((e, what) -> atSender.add(what));
                pair.receiver.setListener((e, what) -> atReceiver.add(what));
                return null;
            });
            pair.sendAllAndAwaitThem(3, 16);
            pair.onDispatcher(() -> {
                assertEquals(3, Collections.frequency(atReceiver, Progress.MESSAGE_ARRIVED), atReceiver.toString());
                assertEquals(3, Collections.frequency(atSender, Progress.WORK_COMPLETED), "one per signaled send: " + atSender);
                assertFalse(atSender.contains(Progress.MESSAGE_ARRIVED), atSender.toString());
                assertFalse(atSender.contains(Progress.FAILED) || atReceiver.contains(Progress.FAILED));

                pair.forgeCreditWordOfSender(1000); // more re-posts than messages: the engine fails
                pair.sender.credits();
                pair.forgeCreditWordOfSender(2000); // and lies again
                pair.sender.credits();
                assertNotNull(pair.sender.failure());
                assertEquals(1, Collections.frequency(atSender, Progress.FAILED), atSender.toString());
                assertEquals(Progress.FAILED, atSender.getLast());
                return null;
            });
        }
    }

    @Test
    void takeCompletionTakesOnlyWhatCompletedAndEverythingBeforeIt() throws Exception {
        try (EnginePair pair = new EnginePair(CONFIG)) {
            QpEngine sender = pair.sender;
            CompletedWork taken = new CompletedWork();
            pair.onDispatcher(() -> {
                assertEquals(1, pair.post(OpKind.WRITE, 0, 24, 0, 0));
                assertEquals(2, pair.post(OpKind.SEND_WITH_IMM, 1, 40, 7, 1));
                // Posted a moment ago on this thread, which alone polls the CQ: not complete yet.
                assertFalse(sender.takeCompletion(2, taken));
                assertEquals(2, sender.outstanding(), "a failed take changes nothing");
                return null;
            });
            pair.awaitTrue("both complete", () -> sender.completedThrough() == 2);
            pair.onDispatcher(() -> {
                assertTrue(sender.takeCompletion(2, taken));
                assertEquals(2, taken.seq());
                assertEquals(OpKind.SEND_WITH_IMM, taken.kind());
                assertEquals(40, taken.bytes());
                assertEquals(0, taken.value());
                assertEquals(0, sender.outstanding(), "the WRITE before it is taken with it");
                assertEquals(0, sender.nextToAwait());
                return null;
            });
        }
    }
}
