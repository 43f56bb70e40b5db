package dev.rdmarun.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class CompletionSlotsTest {
    static final class Op implements PendingOperation {
        Throwable failed;

        @Override
        public void complete(WorkCompletions completions, int index) {}

        @Override
        public void fail(Throwable cause) {
            failed = cause;
        }
    }

    @Test
    void releaseReturnsTheRegisteredOperationOnce() {
        CompletionSlots slots = new CompletionSlots(4);
        Op op = new Op();
        long wrId = slots.acquire(op);
        assertEquals(1, slots.size());
        assertSame(op, slots.release(wrId));
        assertNull(slots.release(wrId), "a second completion for the same wr_id is stale");
        assertEquals(0, slots.size());
    }

    @Test
    void aReusedSlotDoesNotMatchTheOldWrId() {
        CompletionSlots slots = new CompletionSlots(1);
        long first = slots.acquire(new Op());
        slots.release(first);
        Op second = new Op();
        long again = slots.acquire(second);
        assertEquals((int) first, (int) again, "the single slot is reused");
        assertNotEquals(first, again, "with a new generation");
        assertNull(slots.release(first));
        assertSame(second, slots.release(again));
    }

    @Test
    void growsBeyondInitialCapacityWithDistinctWrIds() {
        CompletionSlots slots = new CompletionSlots(2);
        List<Op> ops = new ArrayList<>();
        Set<Long> ids = new HashSet<>();
        List<Long> order = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            Op op = new Op();
            ops.add(op);
            long id = slots.acquire(op);
            ids.add(id);
            order.add(id);
        }
        assertEquals(100, ids.size());
        for (int i = 0; i < 100; i++) assertSame(ops.get(i), slots.release(order.get(i)));
    }

    @Test
    void foreignWrIdsAreIgnored() {
        CompletionSlots slots = new CompletionSlots(4);
        slots.acquire(new Op());
        assertNull(slots.release(3), "wr_id = QP index style ids are not slots in use");
        assertNull(slots.release(-1));
        assertNull(slots.release(1L << 40));
        assertEquals(1, slots.size());
    }

    @Test
    void failAllFailsEveryPendingOperation() {
        CompletionSlots slots = new CompletionSlots(4);
        Op a = new Op(), b = new Op(), done = new Op();
        slots.acquire(a);
        long d = slots.acquire(done);
        slots.acquire(b);
        slots.release(d);
        RuntimeException cause = new RuntimeException("stop");
        slots.failAll(cause);
        assertSame(cause, a.failed);
        assertSame(cause, b.failed);
        assertNull(done.failed);
        assertEquals(0, slots.size());
    }
}
