package dev.rdmarun.runtime.device;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.GidEntry;
import dev.rdmarun.runtime.GidType;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.PortAttributes;
import dev.rdmarun.runtime.QpState;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.RtrAttributes;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WorkCompletions;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The verbs objects against a real device (rxe0 in the Soft-RoCE VM suite). */
@Tag("rdma")
class NativeVerbsTest {
    private static final long POLL_LIMIT_NANOS = 30_000_000_000L;
    private Context context;

    @BeforeEach
    void open() {
        context = RdmaDevice.open();
    }

    @AfterEach
    void close() {
        if (context != null) context.close();
    }

    /** Polls until n completions arrived (bounded, so a lost completion fails instead of hanging). */
    static List<String> pollN(CompletionQueue cq, WorkCompletions wc, int n, List<Long> wrIds) {
        List<String> seen = new ArrayList<>();
        long deadline = System.nanoTime() + POLL_LIMIT_NANOS;
        while (seen.size() < n) {
            if (System.nanoTime() > deadline) throw new AssertionError("only " + seen.size() + " of " + n + " completions: " + seen);
            int got = cq.poll(wc);
            for (int i = 0; i < got; i++) {
                seen.add(wc.opcode(i) + ":" + wc.status(i));
                if (wrIds != null) wrIds.add(wc.wrId(i));
            }
        }
        return seen;
    }

    @Test
    void portAndGidTableDescribeARoCEv2Device() {
        PortAttributes port = context.queryPort(1);
        assertEquals(PortAttributes.PortState.ACTIVE, port.state());
        List<GidEntry> gids = context.gidTable();
        assertFalse(gids.isEmpty());
        GidEntry chosen = context.defaultGid(1);
        if (port.linkLayer() == PortAttributes.LinkLayer.ETHERNET) {
            assertEquals(GidType.ROCE_V2, chosen.type());
        }
        String expectedIndex = System.getenv("SOFTROCE_GID_INDEX");
        if (expectedIndex != null) {
            assertEquals(Integer.parseInt(expectedIndex), chosen.index());
            assertEquals(System.getenv("SOFTROCE_IP"), chosen.ipv4());
            assertEquals(System.getenv("SOFTROCE_NETDEV"), chosen.netdev());
        }
        VerbsException empty = assertThrows(VerbsException.class, () -> context.gid(1, 200));
        assertTrue(empty.hint().contains(String.valueOf(chosen.index())), empty.hint());
    }

    @Test
    void queuePairWalksResetInitRtrRtsAndRefusesSkippingStates() {
        try (var pd = context.allocateProtectionDomain(); var cq = context.createCompletionQueue(16)) {
            QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq));
            QueuePair peer = pd.createQueuePair(QueuePairConfig.rc(cq));
            assertEquals(QpState.RESET, qp.queryState());
            GidEntry gid = context.defaultGid(1);
            var remote = peer.localEndpoint(1, gid.index(), 7);
            // RESET→RTR skips INIT: the kernel refuses with EINVAL.
            VerbsException skip = assertThrows(VerbsException.class,
                    () -> qp.modifyToRtr(RtrAttributes.of(remote, 1, gid.index(), remote.mtu())));
            assertEquals(22, skip.errno());
            assertEquals(QpState.RESET, qp.queryState());
            qp.modifyToInit(1, Set.of());
            assertEquals(QpState.INIT, qp.queryState());
            qp.modifyToRtr(RtrAttributes.of(remote, 1, gid.index(), remote.mtu()));
            assertEquals(QpState.RTR, qp.queryState());
            qp.modifyToRts(dev.rdmarun.runtime.RtsAttributes.of(9));
            assertEquals(QpState.RTS, qp.queryState());
            qp.modifyToError();
            assertEquals(QpState.ERR, qp.queryState());
            qp.modifyToReset();
            assertEquals(QpState.RESET, qp.queryState());
        }
    }

    @Test
    void wrongGidIndexAtRtrNamesTheValidOnes() {
        try (var pd = context.allocateProtectionDomain(); var cq = context.createCompletionQueue(16)) {
            QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq));
            GidEntry gid = context.defaultGid(1);
            var remote = qp.localEndpoint(1, gid.index(), 1);
            qp.modifyToInit(1, Set.of());
            VerbsException e = assertThrows(VerbsException.class,
                    () -> qp.modifyToRtr(RtrAttributes.of(remote, 1, 77, remote.mtu())));
            assertNotNull(e.hint());
            assertTrue(e.hint().contains("GID index 77"), e.hint());
            assertTrue(e.hint().contains(gid.index() + " ("), e.hint());
        }
    }

    @Test
    void sendWithImmediateMovesBytesAndCompletesBothSides() {
        try (Loopback lo = new Loopback(context, Set.of(), 7);
             WorkCompletions wc = new WorkCompletions(8)) {
            MemoryRegion mr = lo.pd.registerMemory(8192, EnumSet.of(Access.LOCAL_WRITE));
            byte[] payload = "hello over rxe".getBytes(StandardCharsets.UTF_8);
            mr.segment().asSlice(0, payload.length).copyFrom(java.lang.foreign.MemorySegment.ofArray(payload));
            lo.b.postReceive(21, mr, 4096, 4096);
            lo.a.postSendWithImm(11, mr, 0, payload.length, 0xCAFE, SendFlags.SIGNALED);
            List<Long> ids = new ArrayList<>();
            List<String> seen = pollN(lo.cq, wc, 2, ids);
            assertTrue(seen.containsAll(List.of("SEND:SUCCESS", "RECV:SUCCESS")), seen.toString());
            assertTrue(ids.containsAll(List.of(11L, 21L)));
            assertArrayEquals(payload, mr.segment().asSlice(4096, payload.length).toArray(ValueLayout.JAVA_BYTE));
        }
    }

    @Test
    void sendWithoutPostedReceiveFailsWithRnrAndFlushesTheRest() {
        try (Loopback lo = new Loopback(context, Set.of(), 0);
             WorkCompletions wc = new WorkCompletions(8)) {
            MemoryRegion mr = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            // A receive on the sender's own QP: it is flushed when that QP goes to ERR. (B has none,
            // so A's send meets RNR; with rnr_retry 0 that is final.)
            lo.a.postReceive(3, mr, 1024, 64);
            lo.a.postSend(1, mr, 0, 64, SendFlags.SIGNALED);
            lo.a.postSend(2, mr, 0, 64, SendFlags.SIGNALED);
            List<Long> ids = new ArrayList<>();
            List<String> seen = pollN(lo.cq, wc, 3, ids);
            java.util.Map<Long, String> statusById = new java.util.TreeMap<>();
            for (int i = 0; i < ids.size(); i++) statusById.put(ids.get(i), seen.get(i).split(":")[1]);
            // Only the status of a failed completion is defined (not its opcode).
            assertEquals(java.util.Map.of(
                    1L, WcStatus.RNR_RETRY_EXC_ERR.name(),
                    2L, WcStatus.WR_FLUSH_ERR.name(),
                    3L, WcStatus.WR_FLUSH_ERR.name()), statusById);
            assertEquals(QpState.ERR, lo.a.queryState());
            assertTrue(WcStatus.RNR_RETRY_EXC_ERR.hint().contains("no receive posted"));
        }
    }

    @Test
    void rdmaWriteReadAndAtomicsHonourRemoteAccess() {
        try (Loopback lo = new Loopback(context, EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC), 7);
             WorkCompletions wc = new WorkCompletions(8)) {
            MemoryRegion local = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            MemoryRegion target = lo.pd.registerMemory(4096,
                    EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC));
            var remote = target.toRemote();
            local.segment().set(ValueLayout.JAVA_LONG, 0, 0x1122334455667788L);
            lo.a.postWrite(1, local, 0, 8, remote.addressAt(64, 8), remote.rkey(), SendFlags.SIGNALED);
            assertEquals(List.of("RDMA_WRITE:SUCCESS"), pollN(lo.cq, wc, 1, null));
            assertEquals(0x1122334455667788L, target.segment().get(ValueLayout.JAVA_LONG, 64));

            target.segment().set(ValueLayout.JAVA_LONG, 128, 42L);
            lo.a.postRead(2, local, 256, 8, remote.addressAt(128, 8), remote.rkey(), SendFlags.SIGNALED);
            assertEquals(List.of("RDMA_READ:SUCCESS"), pollN(lo.cq, wc, 1, null));
            assertEquals(42L, local.segment().get(ValueLayout.JAVA_LONG, 256));

            lo.a.postFetchAndAdd(3, local, 512, remote.addressAt(128, 8), remote.rkey(), 8, SendFlags.SIGNALED);
            assertEquals(List.of("FETCH_ADD:SUCCESS"), pollN(lo.cq, wc, 1, null));
            assertEquals(42L, local.segment().get(ValueLayout.JAVA_LONG, 512), "the old value comes back");
            assertEquals(50L, target.segment().get(ValueLayout.JAVA_LONG, 128));

            lo.a.postCompareAndSwap(4, local, 520, remote.addressAt(128, 8), remote.rkey(), 50, 7, SendFlags.SIGNALED);
            assertEquals(List.of("COMP_SWAP:SUCCESS"), pollN(lo.cq, wc, 1, null));
            assertEquals(50L, local.segment().get(ValueLayout.JAVA_LONG, 520));
            assertEquals(7L, target.segment().get(ValueLayout.JAVA_LONG, 128));

            // Least privilege is enforced by the responder: a read-only region refuses a WRITE.
            MemoryRegion readOnly = lo.pd.registerMemory(4096, EnumSet.of(Access.REMOTE_READ));
            lo.a.postWrite(5, local, 0, 8, readOnly.address(), readOnly.rkey(), SendFlags.SIGNALED);
            assertEquals(WcStatus.REM_ACCESS_ERR.name(), pollN(lo.cq, wc, 1, null).get(0).split(":")[1]);
        }
    }

    @Test
    void closingTheContextReleasesChildrenAndUseAfterCloseIsAnException() {
        var pd = context.allocateProtectionDomain();
        var cq = context.createCompletionQueue(16);
        MemoryRegion mr = pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
        QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq));
        context.close();
        assertTrue(qp.isClosed() && mr.isClosed() && cq.isClosed() && pd.isClosed());
        assertThrows(IllegalStateException.class, mr::segment);
        assertThrows(IllegalStateException.class, () -> qp.postSend(1, mr, 0, 8, SendFlags.SIGNALED));
        assertThrows(IllegalStateException.class, () -> cq.poll(new WorkCompletions(1)));
        context.close(); // idempotent
        context = null;
    }

    @Test
    void postOutsideTheMemoryRegionIsRefusedBeforeReachingTheDevice() {
        try (Loopback lo = new Loopback(context, Set.of(), 7)) {
            MemoryRegion mr = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            assertThrows(IndexOutOfBoundsException.class, () -> lo.a.postSend(1, mr, 4000, 200, SendFlags.SIGNALED));
            assertThrows(IllegalArgumentException.class, () -> lo.pd.registerMemory(4096, EnumSet.of(Access.REMOTE_WRITE)));
        }
    }
}
