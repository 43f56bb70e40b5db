package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.DeviceList;
import dev.rdmarun.runtime.GidEntry;
import dev.rdmarun.runtime.IdleMode;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.PollingDispatcher;
import dev.rdmarun.runtime.ProtectionDomain;
import dev.rdmarun.runtime.QpEndpoint;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.RemoteRegion;
import dev.rdmarun.runtime.RtrAttributes;
import dev.rdmarun.runtime.RtsAttributes;
import dev.rdmarun.runtime.SoftTransport;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The engine's send window, credits and inbox, on two connected QPs of one soft0 context (in
 * memory), both engines driven on one dispatcher thread as the DSL drives them. Every engine call
 * runs on that thread; what one dispatcher task posts is posted before any completion is polled,
 * so a blocked post is deterministic.
 */
class QpEngineTest {
    private static final long DEADLINE_SECONDS = 30;

    private Context context;
    private ProtectionDomain pd;
    private CompletionQueue cq;
    private PollingDispatcher dispatcher;
    private final List<QueuePair> qps = new ArrayList<>();
    private QpEngine sender;
    private QpEngine receiver;

    /** Two engines of {@code config}, connected to each other: {@link #sender} and {@link #receiver}. */
    private void connectPair(EngineConfig config) throws Exception {
        try (DeviceList list = DeviceList.open()) {
            context = list.find("soft0").open(SoftTransport.MEMORY);
        }
        pd = context.allocateProtectionDomain();
        cq = context.createCompletionQueue(2 * config.completionQueueEntries(), null);
        MemoryRegion credits = pd.registerMemory(16, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
        for (int i = 0; i < 2; i++) {
            qps.add(pd.createQueuePair(QueuePairConfig.rc(cq).withDepth(config.sendQueueDepth(), config.recvDepth())));
            qps.get(i).modifyToInit(1, EnumSet.of(Access.REMOTE_WRITE));
        }
        GidEntry gid = context.defaultGid(1);
        List<QpEndpoint> endpoints = List.of(qps.get(0).localEndpoint(1, gid.index(), 100), qps.get(1).localEndpoint(1, gid.index(), 200));
        List<MemoryRegion> data = new ArrayList<>();
        List<MemoryRegion> recv = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            data.add(pd.registerMemory(config.dataBytes(), EnumSet.of(Access.LOCAL_WRITE)));
            recv.add(pd.registerMemory(config.receiveRegionBytes(), EnumSet.of(Access.LOCAL_WRITE)));
        }
        dispatcher = PollingDispatcher.start("qp-engine-test", IdleMode.BACKOFF, null);
        List<QpEngine> engines = onDispatcher(() -> {
            dispatcher.addCompletionQueue(cq);
            List<QpEngine> e = List.of(new QpEngine(0, qps.get(0), data.get(0), recv.get(0), credits, config, dispatcher),
                    new QpEngine(1, qps.get(1), data.get(1), recv.get(1), credits, config, dispatcher));
            for (int i = 0; i < 2; i++) {
                MemoryRegion peerData = data.get(1 - i);
                e.get(i).postInitialReceives();
                e.get(i).connect(new QpEngine.Peer("the peer", config.recvDepth(),
                        new RemoteRegion(credits.address() + (1 - i) * 8L, 8, credits.rkey()),
                        new RemoteRegion[] {new RemoteRegion(peerData.address(), peerData.length(), peerData.rkey())},
                        EnumSet.noneOf(Access.class)));
            }
            return e;
        });
        for (int i = 0; i < 2; i++) {
            QpEndpoint remote = endpoints.get(1 - i);
            qps.get(i).modifyToRtr(RtrAttributes.of(remote, 1, gid.index(), remote.mtu()));
            qps.get(i).modifyToRts(RtsAttributes.of(endpoints.get(i).psn()));
        }
        sender = engines.get(0);
        receiver = engines.get(1);
    }

    @AfterEach
    void close() {
        if (dispatcher != null) dispatcher.close();
        qps.forEach(QueuePair::close);
        if (cq != null) cq.close();
        if (pd != null) pd.close();
        if (context != null) context.close();
    }

    /** Runs {@code body} on the dispatcher thread and returns what it returned. */
    private <T> T onDispatcher(Callable<T> body) throws Exception {
        CompletableFuture<T> result = new CompletableFuture<>();
        dispatcher.execute(() -> {
            try {
                result.complete(body.call());
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
        });
        return result.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
    }

    /** Checks {@code condition} on the dispatcher thread until it holds; fails when the deadline passes first. */
    private void awaitTrue(String what, BooleanSupplier condition) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(DEADLINE_SECONDS);
        while (!onDispatcher(() -> {
            assertNull(sender.failure(), "the sender failed");
            assertNull(receiver.failure(), "the receiver failed");
            return condition.getAsBoolean();
        })) {
            assertTrue(System.nanoTime() - deadline < 0, "not within " + DEADLINE_SECONDS + " s: " + what);
            Thread.onSpinWait();
        }
    }

    /** Posts an 8-byte SEND of buffer {@code buffer}, whose first byte is {@code value}. */
    private long send(int buffer, int value) {
        sender.dataRegion().segment().set(ValueLayout.JAVA_BYTE, (long) buffer * sender.config().bufferSize(), (byte) value);
        return sender.post(OpKind.SEND, 8, buffer, 0, 0, 0, 0, 0, 0);
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
