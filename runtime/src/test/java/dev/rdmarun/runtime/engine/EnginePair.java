package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.UnaryOperator;

/**
 * Two engines of one config on two connected QPs of one soft0 context (in memory), both driven on
 * one dispatcher thread as the DSL drives them: {@link #sender} (QP 0) and {@link #receiver} (QP 1).
 * Every engine call goes through {@link #onDispatcher}; what one dispatcher task posts is posted
 * before any completion is polled, so a blocked post is deterministic. Each side grants the other
 * REMOTE_WRITE to its data buffers (for writeWithImm).
 */
final class EnginePair implements AutoCloseable {
    /** How long any one wait may take before the test fails; a passing wait takes milliseconds. */
    static final long DEADLINE_SECONDS = 20;
    private static final ValueLayout.OfLong BIG_ENDIAN_LONG = ValueLayout.JAVA_LONG.withOrder(ByteOrder.BIG_ENDIAN);

    private Context context;
    private ProtectionDomain pd;
    private CompletionQueue cq;
    private PollingDispatcher dispatcher;
    private final List<QueuePair> qps = new ArrayList<>();
    private MemoryRegion creditWords;
    QpEngine sender;
    QpEngine receiver;

    /** Connects {@link #sender} and {@link #receiver}, both of {@code config}. */
    EnginePair(EngineConfig config) throws Exception {
        this(config, UnaryOperator.identity());
    }

    /** As above, with {@code rts} changing both QPs' RTS attributes (retries, timeouts). */
    EnginePair(EngineConfig config, UnaryOperator<RtsAttributes> rts) throws Exception {
        try (DeviceList list = DeviceList.open()) {
            context = list.find("soft0").open(SoftTransport.MEMORY);
        }
        pd = context.allocateProtectionDomain();
        cq = context.createCompletionQueue(2 * config.completionQueueEntries(), null);
        creditWords = pd.registerMemory(16, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
        for (int i = 0; i < 2; i++) {
            qps.add(pd.createQueuePair(QueuePairConfig.rc(cq).withDepth(config.sendQueueDepth(), config.recvDepth())));
            qps.get(i).modifyToInit(1, EnumSet.of(Access.REMOTE_WRITE));
        }
        GidEntry gid = context.defaultGid(1);
        List<QpEndpoint> endpoints = List.of(qps.get(0).localEndpoint(1, gid.index(), 100), qps.get(1).localEndpoint(1, gid.index(), 200));
        List<MemoryRegion> data = new ArrayList<>();
        List<MemoryRegion> recv = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            data.add(pd.registerMemory(config.dataBytes(), EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE)));
            recv.add(pd.registerMemory(config.receiveRegionBytes(), EnumSet.of(Access.LOCAL_WRITE)));
        }
        dispatcher = PollingDispatcher.start("qp-engine-test", IdleMode.BACKOFF, null);
        List<QpEngine> engines = onDispatcher(() -> {
            dispatcher.addCompletionQueue(cq);
            List<QpEngine> e = List.of(new QpEngine(0, qps.get(0), data.get(0), recv.get(0), creditWords, config, dispatcher),
                    new QpEngine(1, qps.get(1), data.get(1), recv.get(1), creditWords, config, dispatcher));
            for (int i = 0; i < 2; i++) {
                MemoryRegion peerData = data.get(1 - i);
                e.get(i).postInitialReceives();
                e.get(i).connect(new QpEngine.Peer("the peer", config.recvDepth(),
                        new RemoteRegion(creditWords.address() + (1 - i) * 8L, 8, creditWords.rkey()),
                        new RemoteRegion[] {new RemoteRegion(peerData.address(), peerData.length(), peerData.rkey())},
                        EnumSet.of(Access.REMOTE_WRITE)));
            }
            return e;
        });
        for (int i = 0; i < 2; i++) {
            QpEndpoint remote = endpoints.get(1 - i);
            qps.get(i).modifyToRtr(RtrAttributes.of(remote, 1, gid.index(), remote.mtu()));
            qps.get(i).modifyToRts(rts.apply(RtsAttributes.of(endpoints.get(i).psn())));
        }
        sender = engines.get(0);
        receiver = engines.get(1);
    }

    @Override
    public void close() {
        if (dispatcher != null) dispatcher.close();
        qps.forEach(QueuePair::close);
        if (cq != null) cq.close();
        if (pd != null) pd.close();
        if (context != null) context.close();
    }

    /** The sender's (0) or the receiver's (1) QP. */
    QueuePair qp(int i) {
        return qps.get(i);
    }

    /** Closes the dispatcher both engines run on (as {@link #close} does first). */
    void closeDispatcher() {
        dispatcher.close();
    }

    /** Runs {@code body} on the dispatcher thread and returns what it returned. */
    <T> T onDispatcher(Callable<T> body) throws Exception {
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

    /**
     * Checks {@code condition} on the dispatcher thread (it may post, take messages) until it holds;
     * fails when either engine failed, or when the deadline passes first.
     */
    void awaitTrue(String what, BooleanSupplier condition) throws Exception {
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

    /**
     * What the receiver last told the sender in its credit write: how many receives it re-posted
     * (the sender's credit word, big-endian, as the peer RDMA-wrote it).
     */
    long creditWordOfSender() {
        return creditWords.segment().get(BIG_ENDIAN_LONG, sender.index() * 8L);
    }

    /** Overwrites the sender's credit word, as a peer that breaks the protocol would. */
    void forgeCreditWordOfSender(long reposted) {
        creditWords.segment().set(BIG_ENDIAN_LONG, sender.index() * 8L, reposted);
    }

    /** {@code size} bytes that tell message {@code id} from its neighbours. */
    static byte[] payload(int id, int size) {
        byte[] bytes = new byte[size];
        for (int i = 0; i < size; i++) bytes[i] = (byte) (id * 31 + i);
        return bytes;
    }

    /** Posts {@code kind} of {@link #payload}({@code id}, {@code size}) from the sender's buffer {@code buffer}. */
    long post(OpKind kind, int buffer, int size, int imm, int id) {
        MemorySegment bufferBytes = sender.dataRegion().segment()
                .asSlice((long) buffer * sender.config().bufferSize(), sender.config().bufferSize());
        MemorySegment.copy(payload(id, size), 0, bufferBytes, ValueLayout.JAVA_BYTE, 0, size);
        return sender.post(kind, size, buffer, 0, buffer, 0, imm, 0, 0);
    }

    /**
     * In one dispatcher task, SENDs messages {@code firstId} .. {@code firstId + count - 1} of
     * {@code size} bytes (message id from buffer id mod bufferCount); fails unless each is posted at once.
     */
    void sendAll(int firstId, int count, int size) throws Exception {
        onDispatcher(() -> {
            for (int id = firstId; id < firstId + count; id++) {
                long expected = sender.posted() + 1;
                assertEquals(expected, post(OpKind.SEND, id % sender.config().bufferCount(), size, 0, id), "message " + id + " is posted");
            }
            return null;
        });
    }

    /** {@link #sendAll}({@code 0, count, size}) to a receiver with none waiting; returns once all wait there and completed here. */
    void sendAllAndAwaitThem(int count, int size) throws Exception {
        sendAll(0, count, size);
        awaitTrue(count + " messages wait at the receiver",
                () -> receiver.messagesWaiting() == count && sender.completedThrough() == sender.posted());
    }

    /** Posts an 8-byte SEND of buffer {@code buffer}, whose first byte is {@code value}. */
    long send(int buffer, int value) {
        sender.dataRegion().segment().set(ValueLayout.JAVA_BYTE, (long) buffer * sender.config().bufferSize(), (byte) value);
        return sender.post(OpKind.SEND, 8, buffer, 0, 0, 0, 0, 0, 0);
    }

    /** The receiver's oldest waiting message, as a receive() sees it (its payload in hex). */
    record Message(int length, boolean hasImmediate, int immediate, boolean isWrite, String payload) {
        /** A message of {@link #payload}({@code id}, {@code size}). */
        static Message sent(int id, int size, Integer imm) {
            return new Message(size, imm != null, imm == null ? 0 : imm, false, HexFormat.of().formatHex(EnginePair.payload(id, size)));
        }
    }

    /** Takes the receiver's oldest waiting message as a receive() does: reads it, then releases it. */
    Message take() {
        int length = receiver.messageLength();
        byte[] bytes = new byte[length];
        receiver.copyMessage(bytes, 0);
        boolean hasImmediate = receiver.messageHasImmediate();
        Message m = new Message(length, hasImmediate, hasImmediate ? receiver.messageImmediate() : 0, receiver.messageIsWrite(),
                HexFormat.of().formatHex(bytes));
        receiver.releaseMessage();
        return m;
    }
}
