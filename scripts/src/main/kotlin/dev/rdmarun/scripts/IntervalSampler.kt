package dev.rdmarun.scripts

import dev.rdmarun.dsl.LiveTotals
import dev.rdmarun.dsl.ScenarioMonitor
import dev.rdmarun.dsl.ScenarioResult
import java.util.Locale

/**
 * Samples one side's totals while its scenarios run (a daemon thread reading the monitor, which
 * the data path does not know about): every [TICK_MS] for the peak bandwidth, and every
 * [intervalSeconds] (when given) for interval records, printed iperf3-style through [print].
 * [take] hands over what the scenario that just ended gave, closing its last, partial interval
 * with the results themselves, so that a run's intervals add up to its totals exactly; then it
 * starts afresh for the next one. The intervals cover the measured phase only: when a warm-up
 * ends (`measureFromHere`), those before are dropped and counting starts again from 0 s.
 */
internal class IntervalSampler(
    private val monitor: ScenarioMonitor,
    private val label: String,
    private val intervalSeconds: Double?,
    private val print: ((String) -> Unit)?,
    /** `--report_gbits`: the lines give Gb/sec instead of MB/sec (the run's one unit). */
    private val gbits: Boolean = false,
) : AutoCloseable {
    private val lock = Any()
    private val intervals = ArrayList<IntervalRecord>()
    private var peak: Double? = null
    private var lastTick: LiveTotals? = null
    private var lastInterval: LiveTotals? = null
    /** The monitor's run and phase that the records so far are of. */
    private var run = 0
    private var phase = 0
    /** Runs handed over by [take]: a reading of one of them, read just before it stopped, is stale. */
    private var takenRuns = 0
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
        val lines = synchronized(lock) { record(t) }
        lines.forEach { print?.invoke(it) }
    }

    /** Takes reading [t] into the peak and, when an interval is complete, returns its lines. */
    private fun record(t: LiveTotals?): List<String> {
        if (t == null) { // between scenarios: no rate until two readings; take() still closes the last interval
            lastTick = null
            return emptyList()
        }
        if (t.run <= takenRuns) return emptyList()
        val lines = ArrayList<String>(2)
        if (t.run != run || t.phase != phase) {
            // A new scenario, or a warm-up ended: its figures start again from 0.
            if (t.run == run && intervals.isNotEmpty()) lines += warmupOver()
            intervals.clear()
            peak = null
            lastTick = null
            lastInterval = null
            run = t.run
            phase = t.phase
        }
        val previous = lastTick ?: LiveTotals(0, 0, 0, 0, 0)
        val dt = (t.elapsedNanos - previous.elapsedNanos) / 1e9
        if (dt >= TICK_MS / 2000.0) {
            val rate = busier(t, previous) / dt
            peak = maxOf(peak ?: 0.0, rate)
        }
        lastTick = t
        val every = intervalSeconds ?: return lines
        val from = lastInterval ?: LiveTotals(0, 0, 0, 0, 0)
        if ((t.elapsedNanos - from.elapsedNanos) / 1e9 < every) return lines
        val record = interval(from, t)
        intervals += record
        lastInterval = t
        return lines + line(record)
    }

    /**
     * The intervals and peak of the scenario that just ended with [result]; with intervals, the
     * last one runs from the last sample to the end of [result] and holds what is left of its
     * totals. The next scenario starts afresh.
     */
    fun take(result: ScenarioResult): Pair<List<IntervalRecord>, Double?> {
        val (taken, last) = synchronized(lock) {
            val stopped = monitor.lastTotals
            // Records of another run or of a phase that a warm-up's end closed after the last sample are not this result's.
            val current = stopped != null && stopped.run == run && stopped.phase == phase
            val from = (if (current) lastInterval else null) ?: LiveTotals(0, 0, 0, 0, 0)
            val records = if (current) intervals.toList() else emptyList()
            // A warm-up that ended after the last sample: the lines printed for it are not this result's either.
            val over = if (stopped != null && stopped.run == run && stopped.phase != phase && intervals.isNotEmpty()) warmupOver() else null
            val end = result.total.let { LiveTotals(result.durationNanos, it.bytesSent, it.bytesReceived, it.operations, it.messagesReceived) }
            // The partial last interval, even an idle one; none when the last sample already covered the end.
            val last = if (intervalSeconds != null && (end.elapsedNanos > from.elapsedNanos || !sameCounts(from, end))) interval(from, end) else null
            val taken = (records + listOfNotNull(last)) to (if (current) peak else null)
            intervals.clear()
            peak = null
            lastTick = null
            lastInterval = null
            takenRuns = maxOf(takenRuns, monitor.runs)
            Triple(taken, last, over)
        }.let { (t, l, o) ->
            o?.let { print?.invoke(it) }
            t to l
        }
        last?.let { print?.invoke(line(it)) }
        return taken
    }

    private fun warmupOver() = "[$label] warm-up over: the ${intervals.size} interval${if (intervals.size == 1) "" else "s"} above " +
        "${if (intervals.size == 1) "is" else "are"} not counted; intervals start again from 0"

    private fun sameCounts(a: LiveTotals, b: LiveTotals) = a.bytesSent == b.bytesSent && a.bytesReceived == b.bytesReceived &&
        a.operations == b.operations && a.messagesReceived == b.messagesReceived

    override fun close() {
        thread.interrupt()
    }

    private fun interval(from: LiveTotals, to: LiveTotals): IntervalRecord {
        // A last sample read just after the run's end may be later than it: such a last interval lasts 0 s (rates 0).
        val end = maxOf(to.elapsedNanos, from.elapsedNanos)
        val seconds = (end - from.elapsedNanos) / 1e9
        fun per(x: Double) = if (seconds > 0) x / seconds else 0.0
        val bytes = busier(to, from)
        return IntervalRecord(
            startSeconds = round3(from.elapsedNanos / 1e9),
            endSeconds = round3(end / 1e9),
            bytesSent = to.bytesSent - from.bytesSent,
            bytesReceived = to.bytesReceived - from.bytesReceived,
            operations = to.operations - from.operations,
            messagesReceived = to.messagesReceived - from.messagesReceived,
            bwMBps = per(bytes) / (1 shl 20),
            bwGbps = per(bytes * 8) / 1e9,
            msgRateMpps = per(((to.operations - from.operations) + (to.messagesReceived - from.messagesReceived)).toDouble()) / 1e6,
        )
    }

    private fun line(r: IntervalRecord) = String.format(Locale.ROOT, "[%s] %7.2f-%-7.2f s  %12d bytes out  %12d bytes in  %10.2f %s  %8.4f Mpps",
        label, r.startSeconds, r.endSeconds, r.bytesSent, r.bytesReceived, if (gbits) r.bwGbps else r.bwMBps, if (gbits) "Gb/sec" else "MB/sec",
        r.msgRateMpps)

    private fun busier(to: LiveTotals, from: LiveTotals): Double =
        maxOf(to.bytesSent - from.bytesSent, to.bytesReceived - from.bytesReceived).toDouble()

    private fun round3(x: Double) = Math.round(x * 1000) / 1000.0

    companion object {
        /** How often the totals are read for the peak bandwidth. */
        const val TICK_MS = 100L
    }
}
