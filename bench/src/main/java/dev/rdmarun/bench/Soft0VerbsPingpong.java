package dev.rdmarun.bench;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.GidEntry;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.ProtectionDomain;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.RtrAttributes;
import dev.rdmarun.runtime.RtsAttributes;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.SoftTransport;
import dev.rdmarun.runtime.WcOpcode;
import dev.rdmarun.runtime.WorkCompletions;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.Locale;

/**
 * soft0's in-memory round trip with nothing of rdma-run above the verbs (bench/soft0.sh's
 * {@code rtt_verbs}): two contexts in this JVM, one RC QP each, and two threads that post an 8-byte
 * SEND and spin on their CQ for the peer's, as {@code ibv_rc_pingpong} does. It splits the DSL's
 * round trip ({@code bench/scenarios/lat.main.kts}) into what soft0 costs and what the engine,
 * the dispatcher and the coroutines add on top.
 *
 * <p>{@code Soft0VerbsPingpong WARMUP N} prints {@code steady_us=}, the median one way (round
 * trip / 2) of the last N of WARMUP + N exchanges.
 */
public final class Soft0VerbsPingpong {
    private static final int SIZE = 8;
    private static final int RECEIVES = 16;

    private Soft0VerbsPingpong() {}

    /** One side: its context, QP, CQ and buffer (receive slots after the send slot). */
    private record Side(Context context, ProtectionDomain pd, CompletionQueue cq, QueuePair qp, MemoryRegion mr) implements AutoCloseable {
        static Side open() {
            Context c = Context.open("soft0");
            ProtectionDomain pd = c.allocateProtectionDomain();
            CompletionQueue cq = c.createCompletionQueue(4 * RECEIVES);
            QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq).withMaxInlineData(64));
            qp.modifyToInit(1, EnumSet.noneOf(Access.class));
            MemoryRegion mr = pd.registerMemory((RECEIVES + 1) * SIZE, EnumSet.of(Access.LOCAL_WRITE));
            return new Side(c, pd, cq, qp, mr);
        }

        void postReceive(long slot) {
            qp.postReceive(slot, mr, (slot + 1) * SIZE, SIZE);
        }

        /** Posts the SEND and spins until the peer's message arrives (its receive slot is posted again). */
        void send() {
            qp.postSend(RECEIVES, mr, 0, SIZE, SendFlags.SIGNALED | SendFlags.INLINE);
        }

        void awaitReceive(WorkCompletions wc) {
            while (true) {
                int n = cq.poll(wc);
                for (int i = 0; i < n; i++) {
                    if (!wc.isSuccess(i)) throw wc.failure(i);
                    if (wc.opcode(i) == WcOpcode.RECV) {
                        postReceive(wc.wrId(i));
                        return;
                    }
                }
                if (n == 0) Thread.onSpinWait();
            }
        }

        @Override
        public void close() {
            qp.close();
            mr.close();
            cq.close();
            pd.close();
            context.close();
        }
    }

    public static void main(String[] args) throws Exception {
        int warmup = Integer.parseInt(args[0]);
        int n = Integer.parseInt(args[1]);
        System.setProperty(SoftTransport.PROPERTY, "memory");
        try (Side a = Side.open(); Side b = Side.open()) {
            connect(a, b);
            int total = warmup + n;
            Thread echo = Thread.ofPlatform().name("echo").start(() -> {
                try (WorkCompletions wc = new WorkCompletions(8)) {
                    for (int i = 0; i < total; i++) {
                        b.awaitReceive(wc);
                        b.send();
                    }
                }
            });
            long[] rtt = new long[n];
            try (WorkCompletions wc = new WorkCompletions(8)) {
                for (int i = 0; i < total; i++) {
                    long t0 = System.nanoTime();
                    a.send();
                    a.awaitReceive(wc);
                    if (i >= warmup) rtt[i - warmup] = System.nanoTime() - t0;
                }
            }
            echo.join();
            Arrays.sort(rtt);
            System.out.printf(Locale.ROOT, "soft0 verbs pingpong iterations=%d steady_us=%.3f%n", n, rtt[n / 2] / 2 / 1000.0);
        }
    }

    private static void connect(Side a, Side b) {
        FabricKey key = FabricKey.random();
        GidEntry ga = a.context.defaultGid(1);
        GidEntry gb = b.context.defaultGid(1);
        var ea = a.qp.localEndpoint(1, ga.index(), 1);
        var eb = b.qp.localEndpoint(1, gb.index(), 2);
        a.qp.modifyToRtr(RtrAttributes.of(eb, 1, ga.index(), eb.mtu()).withFabricKey(key));
        b.qp.modifyToRtr(RtrAttributes.of(ea, 1, gb.index(), ea.mtu()).withFabricKey(key));
        a.qp.modifyToRts(RtsAttributes.of(1));
        b.qp.modifyToRts(RtsAttributes.of(2));
        for (int s = 0; s < RECEIVES; s++) {
            a.postReceive(s);
            b.postReceive(s);
        }
    }
}
