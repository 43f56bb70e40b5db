package dev.rdmarun.scripts

import dev.rdmarun.dsl.LiveTotals
import dev.rdmarun.dsl.ScenarioMonitor
import java.util.Locale

/**
 * Samples one side's totals while its scenarios run (a daemon thread reading the monitor, which
 * the data path does not know about): every [TICK_MS] for the peak bandwidth, and every
 * [intervalSeconds] (when given) for interval records, printed iperf3-style through [print].
 * [take] hands over what the scenario that just ended gave and starts afresh for the next one.
 */
internal class IntervalSampler(
    private val monitor: ScenarioMonitor,
    private val label: String,
    private val intervalSeconds: Double?,
    private val print: ((String) -> Unit)?,
) : AutoCloseable {
    private val lock = Any()
    private val intervals = ArrayList<IntervalRecord>()
    private var peak: Double? = null
    private var lastTick: LiveTotals? = null
    private var lastInterval: LiveTotals? = null
    private val thread = Thread.ofPlatform().daemon(true).name("rdma-run-sampler-$label").start {
        try {
            while (true) {
                Thread.sleep(TICK_MS)
                sample()
            }
        } catch (_: InterruptedException) {
            // closed
        }
    }

    private fun sample() {
        val t = monitor.totals()
        // Printed outside the lock: a slow terminal must not hold up take().
        val line = synchronized(lock) { record(t) } ?: return
        print?.invoke(line)
    }

    /** Takes reading [t] into the peak and, when an interval is complete, returns its line. */
    private fun record(t: LiveTotals?): String? {
        if (t == null) { // between scenarios: the next one starts from zero
            lastTick = null
            lastInterval = null
            return null
        }
        val previous = lastTick ?: LiveTotals(0, 0, 0, 0, 0)
        val dt = (t.elapsedNanos - previous.elapsedNanos) / 1e9
        if (dt >= TICK_MS / 2000.0) {
            val rate = busier(t, previous) / dt
            peak = maxOf(peak ?: 0.0, rate)
        }
        lastTick = t
        val every = intervalSeconds ?: return null
        val from = lastInterval ?: LiveTotals(0, 0, 0, 0, 0)
        if ((t.elapsedNanos - from.elapsedNanos) / 1e9 < every) return null
        val record = interval(from, t)
        intervals += record
        lastInterval = t
        return line(record)
    }

    /** The intervals and peak of the scenario that just ended; the next starts afresh. */
    fun take(): Pair<List<IntervalRecord>, Double?> = synchronized(lock) {
        val taken = intervals.toList() to peak
        intervals.clear()
        peak = null
        lastTick = null
        lastInterval = null
        taken
    }

    override fun close() {
        thread.interrupt()
    }

    private fun interval(from: LiveTotals, to: LiveTotals): IntervalRecord {
        val seconds = (to.elapsedNanos - from.elapsedNanos) / 1e9
        val bytes = busier(to, from)
        return IntervalRecord(
            startSeconds = round3(from.elapsedNanos / 1e9),
            endSeconds = round3(to.elapsedNanos / 1e9),
            bytesSent = to.bytesSent - from.bytesSent,
            bytesReceived = to.bytesReceived - from.bytesReceived,
            operations = to.operations - from.operations,
            messagesReceived = to.messagesReceived - from.messagesReceived,
            bwMBps = bytes / seconds / (1 shl 20),
            bwGbps = bytes * 8 / seconds / 1e9,
            msgRateMpps = ((to.operations - from.operations) + (to.messagesReceived - from.messagesReceived)) / seconds / 1e6,
        )
    }

    private fun line(r: IntervalRecord) = String.format(Locale.ROOT, "[%s] %7.2f-%-7.2f s  %12d bytes out  %12d bytes in  %10.2f MB/sec  %8.4f Mpps",
        label, r.startSeconds, r.endSeconds, r.bytesSent, r.bytesReceived, r.bwMBps, r.msgRateMpps)

    private fun busier(to: LiveTotals, from: LiveTotals): Double =
        maxOf(to.bytesSent - from.bytesSent, to.bytesReceived - from.bytesReceived).toDouble()

    private fun round3(x: Double) = Math.round(x * 1000) / 1000.0

    companion object {
        /** How often the totals are read for the peak bandwidth. */
        const val TICK_MS = 100L
    }
}
