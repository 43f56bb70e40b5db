package dev.rdmarun.runtime.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.IdleMode;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.PendingOperation;
import dev.rdmarun.runtime.PollingDispatcher;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WcOpcode;
import dev.rdmarun.runtime.WorkCompletions;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The dispatcher completing real work in each idle mode (EVENT sleeps on the provider's completion
 * channel), and its data path allocating nothing, on every provider (see {@link VerbsConformance}).
 */
abstract class DispatcherConformance extends OnDevice {
    private static final int ROUNDS = 8000;

    /**
     * Ping-pong between two loopback QPs driven entirely by completions on the dispatcher thread:
     * A sends i, B's receive completes, B echoes i+1, A's receive completes, ... Reused operation
     * objects, so the steady state allocates nothing.
     */
    static final class PingPong implements PendingOperation {
        final PollingDispatcher dispatcher;
        final QueuePair a, b;
        final MemoryRegion mr;
        final int rounds;
        final CompletableFuture<Long> done = new CompletableFuture<>();
        int received;
        long expected;
        long bytesAtStart = -1;
        int measureFrom;

        PingPong(PollingDispatcher dispatcher, QueuePair a, QueuePair b, MemoryRegion mr, int rounds) {
            this.dispatcher = dispatcher;
            this.a = a;
            this.b = b;
            this.mr = mr;
            this.rounds = rounds;
        }

        void start() {
            measureFrom = rounds / 2; // the second half runs warm
            postReceive(a, 0);
            postReceive(b, 64);
            send(a, 128, 0);
        }

        private void postReceive(QueuePair qp, long offset) {
            qp.postReceive(dispatcher.register(this), mr, offset, 8);
        }

        private void send(QueuePair qp, long offset, long value) {
            mr.segment().set(ValueLayout.JAVA_LONG, offset, value);
            // Selective signaling, as perftest does: every 16th send completes, which also lets the
            // provider reclaim the send-queue slots of the unsignaled ones before it.
            if (value % 16 == 15) qp.postSend(dispatcher.register(this), mr, offset, 8, SendFlags.SIGNALED);
            else qp.postSend(-1L, mr, offset, 8, SendFlags.NONE);
        }

        @Override
        public void complete(WorkCompletions wc, int i) {
            if (!wc.isSuccess(i)) {
                done.completeExceptionally(wc.failure(i));
                return;
            }
            if (wc.opcode(i) != WcOpcode.RECV) return;
            boolean atB = wc.qpNum(i) == b.qpNum();
            long value = mr.segment().get(ValueLayout.JAVA_LONG, atB ? 64 : 0);
            if (value != expected) {
                done.completeExceptionally(new AssertionError("expected " + expected + ", got " + value));
                return;
            }
            received++;
            if (received == measureFrom) bytesAtStart = allocatedBytes();
            if (received == rounds) {
                done.complete(allocatedBytes() - bytesAtStart);
                return;
            }
            expected++;
            postReceive(atB ? b : a, atB ? 64 : 0);
            send(atB ? b : a, atB ? 192 : 128, expected);
        }

        @Override
        public void fail(Throwable cause) {
            done.completeExceptionally(cause);
        }
    }

    static long allocatedBytes() {
        return ((com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean()).getCurrentThreadAllocatedBytes();
    }

    @ParameterizedTest
    @EnumSource(IdleMode.class)
    void completesPingPongInEveryIdleModeWithoutAllocating(IdleMode mode) throws Exception {
        try (Loopback lo = new Loopback(context, Set.of(), 7)) {
            MemoryRegion mr = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            try (PollingDispatcher d = PollingDispatcher.start("pingpong-" + mode, mode, lo.channel)) {
                d.setUnmatchedCompletionHandler((wc, i) -> { });
                PingPong pp = new PingPong(d, lo.a, lo.b, mr, ROUNDS);
                d.execute(() -> {
                    d.addCompletionQueue(lo.cq);
                    pp.start();
                });
                long allocated = pp.done.get(120, TimeUnit.SECONDS);
                // The warm half of the messages through post, poll, slot table and callback. An object
                // per message costs at least 16 bytes each; the JIT's own one-off work (deoptimization
                // rematerializes eliminated objects) was seen at 1-2 bytes a message in the VM.
                int measured = ROUNDS / 2;
                assertTrue(allocated < 4L * measured, "the dispatcher thread allocated " + allocated
                        + " bytes for " + measured + " messages in steady state: the data path allocates");
            }
        }
    }

    @Test
    void closingTheDispatcherFailsPostedReceivesInsteadOfHanging() throws Exception {
        try (Loopback lo = new Loopback(context, Set.of(), 7)) {
            MemoryRegion mr = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            PollingDispatcher d = PollingDispatcher.start("flush", IdleMode.EVENT, lo.channel);
            CompletableFuture<Throwable> failed = new CompletableFuture<>();
            PendingOperation op = new PendingOperation() {
                @Override
                public void complete(WorkCompletions wc, int i) {
                    failed.completeExceptionally(new AssertionError("nothing was sent"));
                }

                @Override
                public void fail(Throwable cause) {
                    failed.complete(cause);
                }
            };
            CompletableFuture<Void> posted = new CompletableFuture<>();
            d.execute(() -> {
                d.addCompletionQueue(lo.cq);
                lo.a.postReceive(d.register(op), mr, 0, 64);
                posted.complete(null);
            });
            posted.get(30, TimeUnit.SECONDS);
            d.close();
            assertInstanceOf(VerbsException.class, failed.get(30, TimeUnit.SECONDS));
            assertTrue(lo.a.queryState() != null);
        }
    }
}
