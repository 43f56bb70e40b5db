package dev.rdmarun.runtime.conformance;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rdmarun.runtime.Access;
import dev.rdmarun.runtime.AddressVector;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.FabricKey;
import dev.rdmarun.runtime.GidEntry;
import dev.rdmarun.runtime.GidType;
import dev.rdmarun.runtime.MemoryRegion;
import dev.rdmarun.runtime.PortAttributes;
import dev.rdmarun.runtime.QpAttributes;
import dev.rdmarun.runtime.QpEndpoint;
import dev.rdmarun.runtime.QpState;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.QueuePairConfig;
import dev.rdmarun.runtime.RtrAttributes;
import dev.rdmarun.runtime.RtsAttributes;
import dev.rdmarun.runtime.SendFlags;
import dev.rdmarun.runtime.SendWorkRequest;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WcOpcode;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WorkCompletions;
import dev.rdmarun.runtime.WrOpcode;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * The verbs-level conformance cases: the same cases, the same expected status codes and data,
 * for every provider. Subclasses say which device they run on: soft0 on every build (in memory
 * and over TCP), rxe0 in the Soft-RoCE VM suite. Where a case's outcome is the provider's
 * choice (rxe's, for instance, of the status a receive gets when a message does not fit), the
 * software provider was made to choose as rxe does, and the case pins that down.
 */
abstract class VerbsConformance extends OnDevice {
    /** The secret of the QPs these cases connect (soft0 over TCP needs one; hardware ignores it). */
    static final FabricKey KEY = FabricKey.random();

    static final int EINVAL = 22;
    private static final long POLL_LIMIT_NANOS = 30_000_000_000L;
    private static final Set<Access> ALL_REMOTE = EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);

    /** One completion as the cases compare them. */
    record Completion(long wrId, WcStatus status, WcOpcode opcode, int byteLength, Integer immediate, int qpNum) {}

    /** Polls until n completions arrived (bounded, so a lost completion fails instead of hanging). */
    static List<Completion> pollN(CompletionQueue cq, int n) {
        List<Completion> seen = new ArrayList<>();
        try (WorkCompletions wc = new WorkCompletions(8)) {
            long deadline = System.nanoTime() + POLL_LIMIT_NANOS;
            while (seen.size() < n) {
                if (System.nanoTime() > deadline) throw new AssertionError("only " + seen.size() + " of " + n + " completions: " + seen);
                int got = cq.poll(wc);
                for (int i = 0; i < got; i++) {
                    seen.add(new Completion(wc.wrId(i), wc.status(i), wc.opcode(i), wc.byteLength(i),
                            wc.hasImmediate(i) ? wc.immediate(i) : null, wc.qpNum(i)));
                }
            }
        }
        return seen;
    }

    /** wr_id → status of n completions (only the status of a failed completion is defined, not its opcode). */
    static Map<Long, WcStatus> statuses(CompletionQueue cq, int n) {
        Map<Long, WcStatus> m = new TreeMap<>();
        for (Completion c : pollN(cq, n)) m.put(c.wrId(), c.status());
        return m;
    }

    static void fill(MemoryRegion mr, long offset, byte[] bytes) {
        MemorySegment.copy(bytes, 0, mr.segment(), ValueLayout.JAVA_BYTE, offset, bytes.length);
    }

    static byte[] read(MemoryRegion mr, long offset, int n) {
        return mr.segment().asSlice(offset, n).toArray(ValueLayout.JAVA_BYTE);
    }

    // ---- device, port, GIDs ----

    @Test
    void portAndGidTableDescribeARoCEv2Port() {
        PortAttributes port = context.queryPort(1);
        assertEquals(PortAttributes.PortState.ACTIVE, port.state());
        assertEquals(PortAttributes.LinkLayer.ETHERNET, port.linkLayer());
        List<GidEntry> gids = context.gidTable();
        assertFalse(gids.isEmpty());
        GidEntry chosen = context.defaultGid(1);
        assertEquals(GidType.ROCE_V2, chosen.type());
        assertTrue(chosen.gid().isIpv4Mapped(), chosen.toString());
        VerbsException empty = assertThrows(VerbsException.class, () -> context.gid(1, 200));
        assertTrue(empty.hint().contains(String.valueOf(chosen.index())), empty.hint());
        assertThrows(VerbsException.class, () -> context.queryPort(9));
    }

    // ---- the QP state machine ----

    @Test
    void queuePairWalksEveryTransitionOfTheRcLifecycle() {
        try (var pd = context.allocateProtectionDomain(); var cq = context.createCompletionQueue(16)) {
            QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq));
            QueuePair peer = pd.createQueuePair(QueuePairConfig.rc(cq));
            GidEntry gid = context.defaultGid(1);
            QpEndpoint remote = peer.localEndpoint(1, gid.index(), 7);
            assertEquals(QpState.RESET, qp.queryState());
            qp.modifyToInit(1, Set.of());
            assertEquals(QpState.INIT, qp.queryState());
            qp.modify(new QpAttributes().state(QpState.INIT).access(EnumSet.of(Access.REMOTE_WRITE))); // INIT→INIT
            assertEquals(QpState.INIT, qp.queryState());
            qp.modifyToRtr(RtrAttributes.of(remote, 1, gid.index(), remote.mtu()).withFabricKey(KEY));
            assertEquals(QpState.RTR, qp.queryState());
            qp.modifyToRts(RtsAttributes.of(9));
            assertEquals(QpState.RTS, qp.queryState());
            qp.modify(new QpAttributes().state(QpState.RTS).minRnrTimer(14)); // RTS→RTS
            assertEquals(QpState.RTS, qp.queryState());
            qp.modifyToError();
            assertEquals(QpState.ERR, qp.queryState());
            qp.modifyToReset();
            assertEquals(QpState.RESET, qp.queryState());
            // A reset QP starts over.
            qp.modifyToInit(1, Set.of());
            qp.modifyToError(); // INIT→ERR
            assertEquals(QpState.ERR, qp.queryState());
            qp.modifyToReset();
            assertEquals(QpState.RESET, qp.queryState());
        }
    }

    /** A transition the spec does not have, or a mask without a required attribute: EINVAL, state unchanged. */
    @Test
    void wrongModifiesFailWithEinvalAndChangeNothing() {
        try (var pd = context.allocateProtectionDomain(); var cq = context.createCompletionQueue(16)) {
            QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq));
            QueuePair peer = pd.createQueuePair(QueuePairConfig.rc(cq));
            GidEntry gid = context.defaultGid(1);
            QpEndpoint remote = peer.localEndpoint(1, gid.index(), 7);
            Consumer<QpAttributes> refused = a -> {
                QpState before = qp.queryState();
                VerbsException e = assertThrows(VerbsException.class, () -> qp.modify(a));
                assertEquals(EINVAL, e.errno(), e.getMessage());
                assertEquals(before, qp.queryState());
            };
            // RESET→RTR and RESET→RTS skip states.
            VerbsException skip = assertThrows(VerbsException.class,
                    () -> qp.modifyToRtr(RtrAttributes.of(remote, 1, gid.index(), remote.mtu()).withFabricKey(KEY)));
            assertEquals(EINVAL, skip.errno());
            assertTrue(skip.hint().contains("one step at a time"), skip.hint());
            refused.accept(new QpAttributes().state(QpState.RTS).sqPsn(1).timeout(14).retryCount(7).rnrRetry(7).maxRdAtomic(1));
            // RESET→INIT without ACCESS_FLAGS, and with SQ_PSN, which INIT does not take.
            refused.accept(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1));
            refused.accept(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).access(Set.of()).sqPsn(5));
            // A port the device does not have.
            refused.accept(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(2).access(Set.of()));
            // RESET→ERR: the kernel's table has no such transition.
            refused.accept(new QpAttributes().state(QpState.ERR));
            qp.modifyToInit(1, Set.of());
            // INIT→RTR without DEST_QPN; INIT→RTS.
            refused.accept(new QpAttributes().state(QpState.RTR).pathMtu(remote.mtu()).rqPsn(7).maxDestRdAtomic(1)
                    .minRnrTimer(12).addressVector(new AddressVector(remote.lid(), remote.gid(), gid.index(), 1, 1, 0, 0)));
            refused.accept(new QpAttributes().state(QpState.RTS).sqPsn(1).timeout(14).retryCount(7).rnrRetry(7).maxRdAtomic(1));
            qp.modifyToRtr(RtrAttributes.of(remote, 1, gid.index(), remote.mtu()).withFabricKey(KEY));
            // RTR→RTS without RETRY_CNT.
            refused.accept(new QpAttributes().state(QpState.RTS).sqPsn(1).timeout(14).rnrRetry(7).maxRdAtomic(1));
            assertEquals(QpState.RTR, qp.queryState());
        }
    }

    @Test
    void wrongGidIndexAtRtrNamesTheValidOnes() {
        try (var pd = context.allocateProtectionDomain(); var cq = context.createCompletionQueue(16)) {
            QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq));
            GidEntry gid = context.defaultGid(1);
            QpEndpoint remote = qp.localEndpoint(1, gid.index(), 1);
            qp.modifyToInit(1, Set.of());
            VerbsException e = assertThrows(VerbsException.class,
                    () -> qp.modifyToRtr(RtrAttributes.of(remote, 1, 77, remote.mtu()).withFabricKey(KEY)));
            assertEquals(wrongGidErrno(), e.errno(), e.getMessage());
            assertNotNull(e.hint());
            assertTrue(e.hint().contains("GID index 77"), e.hint());
            assertTrue(e.hint().contains(gid.index() + " ("), e.hint());
            assertEquals(QpState.INIT, qp.queryState());
        }
    }

    /** What the kernel answers an RTR with an empty source GID index: ENODATA (no GID attribute there). */
    int wrongGidErrno() {
        return 61;
    }

    // ---- send, receive, immediate data ----

    @Test
    void sendWithImmediateMovesBytesAndCompletesBothSides() {
        try (Loopback lo = new Loopback(context, Set.of(), 7)) {
            MemoryRegion mr = lo.pd.registerMemory(8192, EnumSet.of(Access.LOCAL_WRITE));
            byte[] payload = "hello over RC".getBytes(StandardCharsets.UTF_8);
            fill(mr, 0, payload);
            lo.b.postReceive(21, mr, 4096, 4096);
            lo.a.postSendWithImm(11, mr, 0, payload.length, 0xCAFE, SendFlags.SIGNALED);
            List<Completion> seen = pollN(lo.cq, 2);
            Completion send = seen.stream().filter(c -> c.wrId() == 11).findFirst().orElseThrow();
            Completion recv = seen.stream().filter(c -> c.wrId() == 21).findFirst().orElseThrow();
            // rxe flags the sender's completion WITH_IMM too (immediate 0); soft0 does the same.
            assertEquals(new Completion(11, WcStatus.SUCCESS, WcOpcode.SEND, send.byteLength(), 0, lo.a.qpNum()), send);
            assertEquals(new Completion(21, WcStatus.SUCCESS, WcOpcode.RECV, payload.length, 0xCAFE, lo.b.qpNum()), recv);
            assertArrayEquals(payload, read(mr, 4096, payload.length));
        }
    }

    @Test
    void writeWithImmediateConsumesAReceiveAndDeliversTheImmediate() {
        try (Loopback lo = new Loopback(context, ALL_REMOTE, 7)) {
            MemoryRegion local = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            MemoryRegion target = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
            byte[] payload = new byte[300];
            for (int i = 0; i < payload.length; i++) payload[i] = (byte) (i * 7);
            fill(local, 0, payload);
            lo.b.postReceive(5, local, 2048, 0);
            lo.a.postWriteWithImm(6, local, 0, payload.length, target.toRemote().addressAt(100, 300), target.rkey(),
                    0x12345678, SendFlags.SIGNALED);
            List<Completion> seen = pollN(lo.cq, 2);
            Completion recv = seen.stream().filter(c -> c.wrId() == 5).findFirst().orElseThrow();
            assertEquals(new Completion(5, WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM, 300, 0x12345678, lo.b.qpNum()), recv);
            Completion write = seen.stream().filter(c -> c.wrId() == 6).findFirst().orElseThrow();
            assertEquals(WcStatus.SUCCESS, write.status());
            assertEquals(WcOpcode.RDMA_WRITE, write.opcode());
            assertArrayEquals(payload, read(target, 100, 300));
        }
    }

    @Test
    void unsignaledSendsCompleteSilentlyAndTheSignaledOneCoversThem() {
        try (Loopback lo = new Loopback(context, Set.of(), 7)) {
            MemoryRegion mr = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            for (int i = 0; i < 4; i++) lo.b.postReceive(100 + i, mr, 1024 + i * 64L, 64);
            for (int i = 0; i < 3; i++) lo.a.postSend(i, mr, 0, 16, SendFlags.NONE);
            lo.a.postSend(3, mr, 0, 16, SendFlags.SIGNALED);
            Map<Long, WcStatus> seen = statuses(lo.cq, 5);
            assertEquals(Map.of(3L, WcStatus.SUCCESS, 100L, WcStatus.SUCCESS, 101L, WcStatus.SUCCESS,
                    102L, WcStatus.SUCCESS, 103L, WcStatus.SUCCESS), seen);
        }
    }

    @Test
    void inlineSendCarriesTheBytesPostedEvenIfTheBufferChangesAfterwards() {
        try (var pd = context.allocateProtectionDomain(); var cq = context.createCompletionQueue(64)) {
            Loopback lo = new Loopback(context, pd, cq, QueuePairConfig.rc(cq).withMaxInlineData(64), Set.of(), 7);
            MemoryRegion mr = pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            assertTrue(lo.a.maxInlineData() >= 64, "max inline " + lo.a.maxInlineData());
            byte[] first = "inline payload..".getBytes(StandardCharsets.UTF_8);
            fill(mr, 0, first);
            lo.b.postReceive(2, mr, 1024, 64);
            lo.a.postSend(1, mr, 0, first.length, SendFlags.SIGNALED | SendFlags.INLINE);
            fill(mr, 0, "overwritten!!!!!".getBytes(StandardCharsets.UTF_8));
            assertEquals(Map.of(1L, WcStatus.SUCCESS, 2L, WcStatus.SUCCESS), statuses(cq, 2));
            assertArrayEquals(first, read(mr, 1024, first.length));
            assertThrows(IllegalArgumentException.class,
                    () -> lo.a.postSend(3, mr, 0, lo.a.maxInlineData() + 1, SendFlags.SIGNALED | SendFlags.INLINE));
        }
    }

    // ---- receiver not ready ----

    @Test
    void sendWithoutPostedReceiveFailsWithRnrAndFlushesTheRest() {
        try (Loopback lo = new Loopback(context, Set.of(), 0)) {
            MemoryRegion mr = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            // A receive on the sender's own QP: it is flushed when that QP goes to ERR. (B has none,
            // so A's send meets RNR; with rnr_retry 0 that is final.)
            lo.a.postReceive(3, mr, 1024, 64);
            lo.a.postSend(1, mr, 0, 64, SendFlags.SIGNALED);
            lo.a.postSend(2, mr, 0, 64, SendFlags.SIGNALED);
            assertEquals(Map.of(1L, WcStatus.RNR_RETRY_EXC_ERR, 2L, WcStatus.WR_FLUSH_ERR, 3L, WcStatus.WR_FLUSH_ERR),
                    statuses(lo.cq, 3));
            assertEquals(QpState.ERR, lo.a.queryState());
            assertEquals(QpState.RTS, lo.b.queryState(), "an RNR NAK does not disturb the responder");
            assertTrue(WcStatus.RNR_RETRY_EXC_ERR.hint().contains("no receive posted"));
        }
    }

    @Test
    void sendRetriesAfterRnrUntilAReceiveIsPosted() {
        try (Loopback lo = new Loopback(context, Set.of(), 7, 1)) { // min_rnr_timer 1: 10 us back-off
            MemoryRegion mr = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            fill(mr, 0, "late receiver".getBytes(StandardCharsets.UTF_8));
            lo.a.postSend(1, mr, 0, 13, SendFlags.SIGNALED);
            try (WorkCompletions wc = new WorkCompletions(4)) {
                for (int i = 0; i < 1000; i++) assertEquals(0, lo.cq.poll(wc), "nothing completes while B has no receive");
            }
            lo.b.postReceive(2, mr, 2048, 64);
            assertEquals(Map.of(1L, WcStatus.SUCCESS, 2L, WcStatus.SUCCESS), statuses(lo.cq, 2));
            assertEquals("late receiver", new String(read(mr, 2048, 13), StandardCharsets.UTF_8));
        }
    }

    // ---- RDMA WRITE, READ, atomics and remote access ----

    @Test
    void rdmaWriteReadAndAtomicsMoveTheRightBytes() {
        try (Loopback lo = new Loopback(context, ALL_REMOTE, 7)) {
            MemoryRegion local = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            MemoryRegion target = lo.pd.registerMemory(4096,
                    EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC));
            var remote = target.toRemote();
            local.segment().set(ValueLayout.JAVA_LONG, 0, 0x1122334455667788L);
            lo.a.postWrite(1, local, 0, 8, remote.addressAt(64, 8), remote.rkey(), SendFlags.SIGNALED);
            assertEquals(List.of(WcOpcode.RDMA_WRITE + ":SUCCESS"), opcodes(pollN(lo.cq, 1)));
            assertEquals(0x1122334455667788L, target.segment().get(ValueLayout.JAVA_LONG, 64));

            target.segment().set(ValueLayout.JAVA_LONG, 128, 42L);
            lo.a.postRead(2, local, 256, 8, remote.addressAt(128, 8), remote.rkey(), SendFlags.SIGNALED);
            List<Completion> read = pollN(lo.cq, 1);
            assertEquals(List.of(WcOpcode.RDMA_READ + ":SUCCESS"), opcodes(read));
            assertEquals(8, read.get(0).byteLength());
            assertEquals(42L, local.segment().get(ValueLayout.JAVA_LONG, 256));

            lo.a.postFetchAndAdd(3, local, 512, remote.addressAt(128, 8), remote.rkey(), 8, SendFlags.SIGNALED);
            assertEquals(List.of(WcOpcode.FETCH_ADD + ":SUCCESS"), opcodes(pollN(lo.cq, 1)));
            assertEquals(42L, local.segment().get(ValueLayout.JAVA_LONG, 512), "the old value comes back");
            assertEquals(50L, target.segment().get(ValueLayout.JAVA_LONG, 128));

            lo.a.postCompareAndSwap(4, local, 520, remote.addressAt(128, 8), remote.rkey(), 50, 7, SendFlags.SIGNALED);
            assertEquals(List.of(WcOpcode.COMP_SWAP + ":SUCCESS"), opcodes(pollN(lo.cq, 1)));
            assertEquals(50L, local.segment().get(ValueLayout.JAVA_LONG, 520));
            assertEquals(7L, target.segment().get(ValueLayout.JAVA_LONG, 128));

            // A compare that does not match swaps nothing and still returns the current value.
            lo.a.postCompareAndSwap(5, local, 528, remote.addressAt(128, 8), remote.rkey(), 999, 1, SendFlags.SIGNALED);
            assertEquals(List.of(WcOpcode.COMP_SWAP + ":SUCCESS"), opcodes(pollN(lo.cq, 1)));
            assertEquals(7L, local.segment().get(ValueLayout.JAVA_LONG, 528));
            assertEquals(7L, target.segment().get(ValueLayout.JAVA_LONG, 128));

            // A large READ: many MTUs on a real fabric.
            for (int i = 0; i < 3000; i++) target.segment().set(ValueLayout.JAVA_BYTE, 1000 + i, (byte) (i % 251));
            lo.a.postRead(6, local, 1000, 3000, remote.addressAt(1000, 3000), remote.rkey(), SendFlags.SIGNALED);
            assertEquals(List.of(WcOpcode.RDMA_READ + ":SUCCESS"), opcodes(pollN(lo.cq, 1)));
            assertArrayEquals(read(target, 1000, 3000), read(local, 1000, 3000));
        }
    }

    static List<String> opcodes(List<Completion> cs) {
        return cs.stream().map(c -> c.opcode() + ":" + c.status()).toList();
    }

    /** Least privilege is enforced by the responder: the region's flags, its rkey and its bounds. */
    @Test
    void remoteAccessOutsideWhatTheRegionGrantsFailsWithRemAccessErr() {
        record Case(String what, long address, int rkey) {}
        List<Case> cases = new ArrayList<>();
        // Each case needs fresh QPs: the error puts both in ERR.
        try (var pd = context.allocateProtectionDomain()) {
            MemoryRegion readOnly = pd.registerMemory(4096, EnumSet.of(Access.REMOTE_READ));
            MemoryRegion writable = pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
            cases.add(new Case("a read-only region", readOnly.address(), readOnly.rkey()));
            cases.add(new Case("beyond the region's end", writable.address() + 4090, writable.rkey()));
            cases.add(new Case("an rkey of no region", writable.address(), writable.rkey() ^ 0x5a5a00));
            for (Case c : cases) {
                try (var cq = context.createCompletionQueue(16)) {
                    Loopback lo = new Loopback(context, pd, cq, QueuePairConfig.rc(cq), ALL_REMOTE, 7);
                    MemoryRegion local = pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
                    lo.b.postReceive(9, local, 2048, 64);
                    lo.a.postWrite(1, local, 0, 8, c.address(), c.rkey(), SendFlags.SIGNALED);
                    Map<Long, WcStatus> seen = statuses(cq, 2);
                    assertEquals(Map.of(1L, WcStatus.REM_ACCESS_ERR, 9L, WcStatus.WR_FLUSH_ERR), seen,
                            c.what() + ": the requester fails, and the responder goes to ERR (class C)");
                    assertEquals(QpState.ERR, lo.a.queryState(), c.what());
                    assertEquals(QpState.ERR, lo.b.queryState(), c.what());
                    lo.close();
                    local.close();
                }
            }
        }
    }

    /** The QP's own access flags gate remote operations before any rkey is looked at. */
    @Test
    void writeToAQpThatDoesNotAcceptWritesIsAnInvalidRequest() {
        try (Loopback lo = new Loopback(context, EnumSet.of(Access.REMOTE_READ), 7)) {
            MemoryRegion local = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            MemoryRegion target = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
            lo.a.postWrite(1, local, 0, 8, target.address(), target.rkey(), SendFlags.SIGNALED);
            assertEquals(Map.of(1L, WcStatus.REM_INV_REQ_ERR), statuses(lo.cq, 1));
            assertEquals(QpState.ERR, lo.b.queryState());
        }
    }

    /** rxe's provider checks an atomic's alignment when it is posted: EINVAL, nothing sent. */
    @Test
    void misalignedAtomicIsRefusedWhenPosted() {
        try (Loopback lo = new Loopback(context, ALL_REMOTE, 7)) {
            MemoryRegion local = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            MemoryRegion target = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_ATOMIC));
            VerbsException e = assertThrows(VerbsException.class,
                    () -> lo.a.postFetchAndAdd(1, local, 0, target.address() + 4, target.rkey(), 1, SendFlags.SIGNALED));
            assertEquals(EINVAL, e.errno());
            assertEquals(0L, target.segment().get(ValueLayout.JAVA_LONG, 0), "nothing was added");
            assertEquals(QpState.RTS, lo.a.queryState());
        }
    }

    /**
     * One {@link SendWorkRequest}, refilled and posted again: each post takes what the request held
     * at the call (the provider copies it), and an atomic whose local word is not 8 bytes is refused
     * before the provider sees it.
     */
    @Test
    void oneSendWorkRequestRefilledCarriesEachOperation() {
        try (Loopback lo = new Loopback(context, ALL_REMOTE, 7)) {
            MemoryRegion local = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            MemoryRegion target = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE,
                    Access.REMOTE_READ, Access.REMOTE_ATOMIC));
            var remote = target.toRemote();
            SendWorkRequest wr = new SendWorkRequest();
            local.segment().set(ValueLayout.JAVA_LONG, 0, 40L);
            lo.a.postSend(wr.clear().wrId(1).opcode(WrOpcode.RDMA_WRITE).local(local, 0, 8)
                    .remote(remote.addressAt(64, 8), target.rkey()).flags(SendFlags.SIGNALED));
            // Refilled at once (the write may not have gone yet): it must still write 8 bytes to 64.
            lo.a.postSend(wr.clear().wrId(2).opcode(WrOpcode.ATOMIC_FETCH_AND_ADD).local(local, 8, 8)
                    .remote(remote.addressAt(64, 8), target.rkey()).atomic(2, 0).flags(SendFlags.SIGNALED));
            List<Completion> seen = pollN(lo.cq, 2);
            assertEquals(List.of(1L, 2L), seen.stream().map(Completion::wrId).toList());
            assertEquals(List.of(WcOpcode.RDMA_WRITE + ":SUCCESS", WcOpcode.FETCH_ADD + ":SUCCESS"), opcodes(seen));
            assertEquals(40L, local.segment().get(ValueLayout.JAVA_LONG, 8), "the add saw the written value");
            assertEquals(42L, target.segment().get(ValueLayout.JAVA_LONG, 64));

            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> lo.a.postSend(
                    wr.clear().wrId(3).opcode(WrOpcode.ATOMIC_CMP_AND_SWP).local(local, 16, 4)
                            .remote(remote.addressAt(64, 8), target.rkey()).atomic(42, 0).flags(SendFlags.SIGNALED)));
            assertTrue(e.getMessage().contains("8-byte word"), e.getMessage());
            assertEquals(42L, target.segment().get(ValueLayout.JAVA_LONG, 64), "nothing was swapped");
            assertEquals(QpState.RTS, lo.a.queryState());
        }
    }

    /**
     * A message longer than the receive buffer. The IB spec calls it a length error; rxe treats it
     * as a malformed receive (class A): the sender gets REM_OP_ERR, the receive LOC_QP_OP_ERR, and
     * the responder goes to ERR. soft0 answers as rxe does.
     */
    @Test
    void messageLongerThanTheReceiveBufferFailsBothSides() {
        try (Loopback lo = new Loopback(context, Set.of(), 7)) {
            MemoryRegion mr = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            lo.b.postReceive(7, mr, 2048, 64);
            lo.b.postReceive(8, mr, 3072, 64);
            lo.a.postSend(1, mr, 0, 128, SendFlags.SIGNALED);
            assertEquals(Map.of(1L, WcStatus.REM_OP_ERR, 7L, WcStatus.LOC_QP_OP_ERR, 8L, WcStatus.WR_FLUSH_ERR),
                    statuses(lo.cq, 3));
            assertEquals(QpState.ERR, lo.a.queryState());
            assertEquals(QpState.ERR, lo.b.queryState());
        }
    }

    /** A closed region is refused by the runtime itself, before its stale lkey could reach the device. */
    @Test
    void postingFromAClosedRegionIsRefused() {
        try (Loopback lo = new Loopback(context, Set.of(), 7)) {
            MemoryRegion recv = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            MemoryRegion gone = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            lo.b.postReceive(2, recv, 0, 64);
            gone.close();
            assertThrows(IllegalStateException.class, () -> lo.a.postSend(1, gone, 0, 8, SendFlags.SIGNALED));
        }
    }

    // ---- flush ----

    @Test
    void errorStateFlushesEveryOutstandingWorkRequest() {
        try (Loopback lo = new Loopback(context, Set.of(), 7)) {
            MemoryRegion mr = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            for (int i = 0; i < 5; i++) lo.b.postReceive(10 + i, mr, i * 64L, 64);
            lo.b.modifyToError();
            Map<Long, WcStatus> seen = statuses(lo.cq, 5);
            assertEquals(5, seen.size());
            assertTrue(seen.values().stream().allMatch(s -> s == WcStatus.WR_FLUSH_ERR), seen.toString());
        }
    }

    @Test
    void postingBeyondTheQueueDepthIsRefusedWithEnomem() {
        try (var pd = context.allocateProtectionDomain(); var cq = context.createCompletionQueue(64)) {
            QueuePair qp = pd.createQueuePair(QueuePairConfig.rc(cq).withDepth(4, 4));
            MemoryRegion mr = pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            qp.modifyToInit(1, Set.of());
            int posted = 0;
            VerbsException full = null;
            while (full == null && posted < 64) {
                try {
                    qp.postReceive(posted, mr, 0, 64);
                    posted++;
                } catch (VerbsException e) {
                    full = e;
                }
            }
            assertNotNull(full, "the receive queue never filled");
            assertEquals(12, full.errno(), full.getMessage());
            assertTrue(posted >= 4, "at least the requested depth fits: " + posted);
            assertTrue(full.hint().contains("queue is full"), full.hint());
        }
    }

    // ---- lifetimes ----

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
            // offset + length overflows to a negative sum that a naive check lets through
            assertThrows(IndexOutOfBoundsException.class, () -> lo.a.postSend(1, mr, Long.MAX_VALUE - 2, 8, SendFlags.SIGNALED));
            assertThrows(IndexOutOfBoundsException.class, () -> lo.a.postSend(new SendWorkRequest().local(mr, 8, Integer.MAX_VALUE)));
            assertEquals("postSend needs a work request", assertThrows(NullPointerException.class, () -> lo.a.postSend(null)).getMessage());
            assertThrows(IllegalArgumentException.class, () -> lo.pd.registerMemory(4096, EnumSet.of(Access.REMOTE_WRITE)));
        }
    }

    @Test
    void postsTheDeviceWouldRefuseSayWhyAtTheCall() {
        try (Loopback lo = new Loopback(context, Set.of(), 7)) {
            MemoryRegion mr = lo.pd.registerMemory(4096, EnumSet.of(Access.LOCAL_WRITE));
            // The range is named by offset and length: their sum may overflow.
            assertEquals("8 bytes at offset 9223372036854775805 are outside the 4096-byte memory region",
                    assertThrows(IndexOutOfBoundsException.class, () -> lo.a.postSend(1, mr, Long.MAX_VALUE - 2, 8, SendFlags.SIGNALED)).getMessage());
            VerbsException misaligned = assertThrows(VerbsException.class, () -> lo.a.postFetchAndAdd(1, mr, 0, 0x1003, 1, 1, SendFlags.SIGNALED));
            assertEquals(EINVAL, misaligned.errno());
            assertEquals("an atomic's remote address must be 8-byte aligned, not 0x1003", misaligned.hint());
            assertEquals("RDMA_READ has no payload to inline: only SENDs and WRITEs take SendFlags.INLINE",
                    assertThrows(IllegalArgumentException.class, () -> lo.a.postRead(1, mr, 0, 16, 0x1000, 1, SendFlags.INLINE)).getMessage());
            assertEquals("postReceive needs a memory region to receive into",
                    assertThrows(NullPointerException.class, () -> lo.b.postReceive(1, null, 0, 8)).getMessage());
        }
    }
}
