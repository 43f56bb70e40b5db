package dev.rdmarun.runtime.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;

/** The warm-up's share of a QP's counters, kept without a branch on the boundary (see QpStats). */
class QpStatsTest {

    /** Completes work request {@code seq} as SendWindow does: the totals, then the warm-up's share. */
    private static void complete(QpStats s, long seq, boolean toLocal, int bytes, long latencyNanos) {
        s.operations++;
        if (toLocal) s.bytesReceived += bytes;
        else s.bytesSent += bytes;
        s.latency.recordValue(latencyNanos);
        s.latencyInWarmup(seq, latencyNanos);
        s.completedInWarmup(seq, toLocal, bytes);
    }

    @Test
    void workRequestsOfTheWarmupCompletingAfterItsEndStayInTheWarmup() {
        QpStats s = new QpStats();
        complete(s, 1, false, 8, 1_000);
        complete(s, 2, true, 16, 2_000);
        s.startMeasuring(4, 0, 0, 1); // work requests 3 and 4 were posted in the warm-up, still in flight
        complete(s, 3, false, 8, 3_000);
        complete(s, 4, true, 16, 4_000);
        complete(s, 5, false, 32, 50_000);
        complete(s, 6, true, 64, 60_000);

        QpStats.Measured m = s.measured();
        assertEquals(2, m.operations());
        assertEquals(32, m.bytesSent());
        assertEquals(64, m.bytesReceived());
        Histogram measured = s.measuredLatency();
        assertEquals(2, measured.getTotalCount());
        assertEquals(50_000, measured.getMinValue(), 50);
        assertEquals(60_000, measured.getMaxValue(), 60);
    }

    @Test
    void withoutAWarmupEverythingIsMeasured() {
        QpStats s = new QpStats();
        for (long seq = 1; seq <= 3; seq++) complete(s, seq, false, 8, 1_000 * seq);
        assertEquals(3, s.measured().operations());
        assertEquals(24, s.measured().bytesSent());
        assertEquals(3, s.measuredLatency().getTotalCount());
    }

    @Test
    void messagesWaitingAtTheBoundaryLeaveTheWarmupOneByOneAndNoFurther() {
        QpStats s = new QpStats();
        s.startMeasuring(0, 2, 20, 1); // two messages of the warm-up still wait for a receive()
        s.messageReleased();
        s.messageDropped(10); // the second, dropped at the end: the warm-up's
        assertEquals(1, s.warmupMessagesNotReceived);
        s.messageReleased();
        s.messageReleased(); // one of the measured phase: the warm-up has none left
        assertEquals(0, s.warmupWaiting);
        s.messageDropped(10);
        assertEquals(1, s.warmupMessagesNotReceived);
    }
}
