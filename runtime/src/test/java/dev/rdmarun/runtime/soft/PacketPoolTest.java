package dev.rdmarun.runtime.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What the free packets of a soft0 context keep between uses. */
class PacketPoolTest {
    private static final int LARGE = 256 << 10;

    /** {@code n} packets of {@code pool}, each grown to {@link #LARGE} bytes, as large messages grow them. */
    private static List<Packet> grown(PacketPool pool, int n) {
        List<Packet> packets = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Packet p = pool.acquire();
            p.ensureCapacity(LARGE);
            packets.add(p);
        }
        return packets;
    }

    @Test
    void freePacketsKeepAtMostTheBudgetOfPayload() {
        PacketPool pool = new PacketPool(64, 1 << 20);
        grown(pool, 16).forEach(pool::release);
        // 4 x 256 KiB fit the 1 MiB budget; the other 12 gave their buffers up.
        assertEquals(4L * LARGE + 12L * Packet.INITIAL_CAPACITY, pool.retainedBytes());
        long large = 0;
        for (int i = 0; i < 16; i++) {
            if (pool.acquire().capacity() == LARGE) large++;
        }
        assertEquals(4, large);
        assertEquals(0, pool.retainedBytes(), "the count follows the packets out");
    }

    @Test
    void aStreamWithinTheBudgetReusesItsBuffers() {
        PacketPool pool = new PacketPool(64, 1 << 20);
        List<Packet> inFlight = grown(pool, 4);
        inFlight.forEach(pool::release);
        for (int i = 0; i < 4; i++) {
            Packet p = pool.acquire();
            assertSame(inFlight.get(i), p);
            assertEquals(LARGE, p.capacity(), "a buffer within the budget is kept");
        }
    }
}
