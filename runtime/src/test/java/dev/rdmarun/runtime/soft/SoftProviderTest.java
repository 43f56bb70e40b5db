package dev.rdmarun.runtime.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.Device;
import dev.rdmarun.runtime.DeviceList;
import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.GidEntry;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.QpState;
import dev.rdmarun.runtime.QpType;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.RtrAttributes;
import dev.rdmarun.runtime.RtsAttributes;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.SoftTransport;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WcOpcode;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WorkCompletions;
import java.io.OutputStream;
import java.lang.foreign.ValueLayout;
import java.net.Socket;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** What only the software provider has to show: listing, two contexts, lost peers, bad input on its fabric. */
class SoftProviderTest {
    private Context a;
    private Context b;

    @AfterEach
    void close() {
        System.clearProperty(SoftTransport.PROPERTY);
        if (a != null) a.close();
        if (b != null) b.close();
    }

    /** A QP of each context, connected to each other (as two processes would be). */
    private record Pair(QueuePair x, QueuePair y, CompletionQueue cqx, CompletionQueue cqy, MemoryRegion mx, MemoryRegion my) {}

    private Pair connect(int timeout, int retry) {
        FabricKey key = FabricKey.random();
        return connect(timeout, retry, key, key);
    }

    private Pair connect(int timeout, int retry, FabricKey keyX, FabricKey keyY) {
        var pdx = a.allocateProtectionDomain();
        var pdy = b.allocateProtectionDomain();
        var cqx = a.createCompletionQueue(64);
        var cqy = b.createCompletionQueue(64);
        QueuePair x = pdx.createQueuePair(QueuePairConfig.rc(cqx));
        QueuePair y = pdy.createQueuePair(QueuePairConfig.rc(cqy));
        Set<Access> remote = EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ);
        x.modifyToInit(1, remote);
        y.modifyToInit(1, remote);
        GidEntry gx = a.defaultGid(1);
        GidEntry gy = b.defaultGid(1);
        var ex = x.localEndpoint(1, gx.index(), 1);
        var ey = y.localEndpoint(1, gy.index(), 2);
        x.modifyToRtr(RtrAttributes.of(ey, 1, gx.index(), ey.mtu()).withFabricKey(keyX));
        y.modifyToRtr(RtrAttributes.of(ex, 1, gy.index(), ex.mtu()).withFabricKey(keyY));
        x.modifyToRts(RtsAttributes.of(1).withRetry(timeout, retry));
        y.modifyToRts(RtsAttributes.of(2).withRetry(timeout, retry));
        MemoryRegion mx = pdx.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ));
        MemoryRegion my = pdy.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ));
        return new Pair(x, y, cqx, cqy, mx, my);
    }

    static WcStatus pollOne(CompletionQueue cq) {
        try (WorkCompletions wc = new WorkCompletions(1)) {
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (cq.poll(wc) == 0) {
                if (System.nanoTime() > deadline) throw new AssertionError("no completion");
            }
            return wc.status(0);
        }
    }

    @Test
    void soft0IsListedAfterTheKernelDevicesAndSaysItIsSoftware() {
        try (DeviceList list = DeviceList.open()) {
            List<Device> all = list.devices();
            Device last = all.getLast();
            assertEquals(SoftDevice.NAME, last.name());
            assertTrue(last.isSoftware());
            assertEquals(list.kernelDevices().size() + 1, all.size());
            if (list.kernelDevices().isEmpty()) assertEquals(last, list.defaultDevice());
            VerbsException e = assertThrows(VerbsException.class, () -> list.find("mlx5_9"));
            assertTrue(e.hint().contains(SoftDevice.NAME), e.hint());
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"auto", "memory", "tcp"})
    void twoContextsMoveDataBothWays(String transport) {
        System.setProperty(SoftTransport.PROPERTY, transport);
        a = Context.open(SoftDevice.NAME);
        b = Context.open(SoftDevice.NAME);
        assertFalse(a.queryPort(1).lid() == b.queryPort(1).lid(), "each context has its own LID");
        Pair p = connect(14, 7);
        p.mx().segment().set(ValueLayout.JAVA_LONG, 0, 77L);
        p.x().postWrite(1, p.mx(), 0, 8, p.my().address() + 64, p.my().rkey(), SendFlags.SIGNALED);
        assertEquals(WcStatus.SUCCESS, pollOne(p.cqx()));
        assertEquals(77L, p.my().segment().get(ValueLayout.JAVA_LONG, 64));
        p.y().postRead(2, p.my(), 128, 8, p.mx().address(), p.mx().rkey(), SendFlags.SIGNALED);
        assertEquals(WcStatus.SUCCESS, pollOne(p.cqy()));
        assertEquals(77L, p.my().segment().get(ValueLayout.JAVA_LONG, 128));
    }

    /** A peer that is gone (its context closed: a process that died) answers nothing: RETRY_EXC_ERR after retry_cnt tries. */
    @ParameterizedTest
    @ValueSource(strings = {"memory", "tcp"})
    void aVanishedPeerEndsInRetryExceeded(String transport) {
        System.setProperty(SoftTransport.PROPERTY, transport);
        a = Context.open(SoftDevice.NAME);
        b = Context.open(SoftDevice.NAME);
        Pair p = connect(8, 2); // ~1 ms ACK timeout, 2 retries
        b.close();
        b = null;
        p.x().postWrite(1, p.mx(), 0, 8, 4096, 1, SendFlags.SIGNALED);
        assertEquals(WcStatus.RETRY_EXC_ERR, pollOne(p.cqx()));
        assertEquals(QpState.ERR, p.x().queryState());
    }

    /** The spec flushes work posted to a QP in ERR at once (rxe 6.1 leaves a receive queued there). */
    @Test
    void workPostedInErrorStateIsFlushed() {
        a = Context.open(SoftDevice.NAME);
        var pd = a.allocateProtectionDomain();
        var cq = a.createCompletionQueue(8);
        QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq));
        MemoryRegion mr = pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
        qp.modifyToInit(1, Set.of());
        qp.modifyToError();
        qp.postReceive(5, mr, 0, 64);
        assertEquals(WcStatus.WR_FLUSH_ERR, pollOne(cq));
        qp.postSend(6, mr, 0, 64, SendFlags.NONE);
        assertEquals(WcStatus.WR_FLUSH_ERR, pollOne(cq), "flushed even when unsignaled");
    }

    /** More completions than the CQ holds: the next poll fails with EOVERFLOW and says what to do. */
    @Test
    void cqOverflowIsReported() {
        a = Context.open(SoftDevice.NAME);
        var pd = a.allocateProtectionDomain();
        var cq = a.createCompletionQueue(2);
        QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq).withDepth(4, 8));
        MemoryRegion mr = pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
        qp.modifyToInit(1, Set.of());
        for (int i = 0; i < 4; i++) qp.postReceive(i, mr, 0, 64);
        qp.modifyToError(); // 4 flushed receives into a 2-entry CQ
        VerbsException e = assertThrows(VerbsException.class, () -> cq.poll(new WorkCompletions(4)));
        assertEquals(75, e.errno());
        assertTrue(e.hint().contains("overflowed"), e.hint());
    }

    /**
     * A thread that keeps polling an empty CQ naps between polls (its core goes to soft0's own
     * threads), and a completion pushed meanwhile still reaches it.
     */
    @Test
    void aPollerOfAnIdleCqNapsAndStillGetsTheNextCompletion() throws Exception {
        a = Context.open(SoftDevice.NAME);
        var cq = (SoftCompletionQueue) a.createCompletionQueue(8);
        long[] got = new long[1];
        Thread poller = Thread.ofPlatform().start(() -> {
            try (WorkCompletions wc = new WorkCompletions(1)) {
                long deadline = System.nanoTime() + 30_000_000_000L; // a safety net against hanging
                while (cq.poll(wc) == 0) assertTrue(System.nanoTime() < deadline, "no completion");
                got[0] = wc.wrId(0);
            }
        });
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!(LockSupport.getBlocker(poller) instanceof PollIdle)) {
            assertTrue(poller.isAlive() && System.nanoTime() < deadline, "the poller never napped");
            Thread.onSpinWait();
        }
        cq.push(42, WcStatus.SUCCESS, WcOpcode.RECV, 0, 1, 2, false, 0, false);
        poller.join();
        assertEquals(42, got[0]);
    }

    @Test
    void onlyRcQueuePairsAreEmulated() {
        a = Context.open(SoftDevice.NAME);
        var pd = a.allocateProtectionDomain();
        var cq = a.createCompletionQueue(8);
        VerbsException e = assertThrows(VerbsException.class, () -> pd.createQueuePair(QueuePairConfig.rc(cq).withType(QpType.UD)));
        assertEquals(22, e.errno());
    }

    /** Garbage on the fabric's TCP port closes that connection (unanswered) and nothing else. */
    @Test
    void garbageOnTheFabricPortIsDroppedAndTheContextKeepsWorking() throws Exception {
        System.setProperty(SoftTransport.PROPERTY, "tcp");
        a = Context.open(SoftDevice.NAME);
        b = Context.open(SoftDevice.NAME);
        GidEntry gid = b.defaultGid(1);
        int lid = b.allocateProtectionDomain().createQueuePair(QueuePairConfig.rc(b.createCompletionQueue(4)))
                .localEndpoint(1, gid.index(), 0).lid();
        try (Socket s = new Socket(SoftFabric.address(gid.gid()), lid)) {
            s.setSoTimeout(30_000);
            OutputStream out = s.getOutputStream();
            out.write("GET / HTTP/1.0\r\n\r\n".getBytes());
            out.flush();
            // Nothing is said to a connection that does not authenticate: it is closed.
            assertEquals(0, s.getInputStream().readAllBytes().length, "the connection is closed on garbage");
        }
        Pair p = connect(14, 7);
        p.x().postWrite(1, p.mx(), 0, 8, p.my().address(), p.my().rkey(), SendFlags.SIGNALED);
        assertEquals(WcStatus.SUCCESS, pollOne(p.cqx()));
    }
}
