package dev.rdmarun.scripts

import dev.rdmarun.dsl.LiveTotals
import dev.rdmarun.dsl.ScenarioMonitor
import dev.rdmarun.dsl.ScenarioResult

/**
 * Samples one side's totals while its scenarios run (a daemon thread reading the monitor, which
 * the data path does not know about): every [TICK_MS] for the peak bandwidth, and every
 * [intervalSeconds] (when given) for interval records, printed in iperf3's form ([IntervalRows])
 * through [output]. [take] hands over what the scenario that just ended gave, closing its last,
 * partial interval with the results themselves, so that a run's intervals add up to its totals
 * exactly; then it starts afresh for the next one. The intervals cover the measured phase only:
 * when a warm-up ends (`measureFromHere`), those before are dropped and counting starts again
 * from 0 s. A side that moved nothing in a run prints, instead of rows, one note ([NOTHING_MOVED]).
 */
internal class IntervalSampler(
    private val monitor: ScenarioMonitor,
    private val label: String,
    private val intervalSeconds: Double?,
    /** Where the lines go; null: records only. */
    private val output: IntervalOutput?,
    /** The rows' stream ([IntervalRows]): `SUM` for a side, a pair's number. */
    private val id: String = "SUM",
    /** The rows' side: the server's (`S`), else the client's (`C`). */
    private val server: Boolean = label == "server",
) : AutoCloseable {
    private val lock = Any()
    private val intervals = ArrayList<IntervalRecord>()
    private var rows = IntervalRows(id, server)
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
        if (lines.isNotEmpty()) output?.print(lines)
    }

    /** Takes reading [t] into the peak and, when an interval is complete, returns the lines to print. */
    private fun record(t: LiveTotals?): List<IntervalLine> {
        if (t == null) { // between scenarios: no rate until two readings; take() still closes the last interval
            lastTick = null
            return emptyList()
        }
        if (t.run <= takenRuns) return emptyList()
        val lines = ArrayList<IntervalLine>(3)
        if (t.run != run || t.phase != phase) {
            // A new scenario, or a warm-up ended: its figures start again from 0.
            if (t.run == run) warmupOver()?.let { lines += it }
            intervals.clear()
            rows = IntervalRows(id, server)
            peak = null
            lastTick = null
            lastInterval = null
            run = t.run
            phase = t.phase
        }
        // The measured time starts at the first post or arrival: before it, nothing to sample.
        if (!t.started) return lines
        sampleRate(lastTick ?: LiveTotals(0, 0, 0, 0, 0), t)?.let { peak = maxOf(peak ?: 0.0, it) }
        lastTick = t
        val every = intervalSeconds ?: return lines
        val from = lastInterval ?: LiveTotals(0, 0, 0, 0, 0)
        if ((t.elapsedNanos - from.elapsedNanos) / 1e9 < every) return lines
        val record = interval(from, t)
        intervals += record
        lastInterval = t
        return lines + rows.add(record, seconds(from, t), t).map { IntervalLine(it, row = true) }
    }

    /**
     * The intervals and peak of the scenario that just ended with [result]; with intervals, the
     * last one runs from the last sample to the end of [result] and holds what is left of its
     * totals. The next scenario starts afresh.
     */
    fun take(result: ScenarioResult): Pair<List<IntervalRecord>, Double?> {
        val (taken, lines, nothingMoved) = synchronized(lock) {
            val stopped = monitor.lastTotals
            // Records of another run or of a phase that a warm-up's end closed after the last sample are not this result's.
            val current = stopped != null && stopped.run == run && stopped.phase == phase
            val from = (if (current) lastInterval else null) ?: LiveTotals(0, 0, 0, 0, 0)
            val records = if (current) intervals.toList() else emptyList()
            val lines = ArrayList<IntervalLine>(3)
            // A warm-up that ended after the last sample: the lines printed for it are not this result's either.
            if (stopped != null && stopped.run == run && stopped.phase != phase) warmupOver()?.let { lines += it }
            val rows = if (current) rows else IntervalRows(id, server)
            val end = result.total.let { LiveTotals(result.durationNanos, it.bytesSent, it.bytesReceived, it.operations, it.messagesReceived) }
            // The partial last interval, even an idle one; none when the last sample already covered the end.
            val last = if (intervalSeconds != null && (end.elapsedNanos > from.elapsedNanos || !sameCounts(from, end))) interval(from, end) else null
            if (last != null) lines += rows.add(last, seconds(from, end), end).map { IntervalLine(it, row = true) }
            val taken = (records + listOfNotNull(last)) to (if (current) peak else null)
            intervals.clear()
            this.rows = IntervalRows(id, server)
            peak = null
            lastTick = null
            lastInterval = null
            takenRuns = maxOf(takenRuns, monitor.runs)
            Triple(taken, lines, intervalSeconds != null && !rows.moved)
        }
        if (lines.isNotEmpty()) output?.print(lines)
        if (nothingMoved) output?.once(label, "[$label] $NOTHING_MOVED")
        return taken
    }

    /** The note that the [IntervalRows.printed] rows above were of a warm-up; null when none were printed. */
    private fun warmupOver(): IntervalLine? {
        val n = rows.printed
        if (n == 0) return null
        return IntervalLine("[$label] warm-up over: the $n interval${if (n == 1) "" else "s"} above " +
            "${if (n == 1) "is" else "are"} not counted; intervals start again from 0", row = false)
    }

    private fun sameCounts(a: LiveTotals, b: LiveTotals) = a.bytesSent == b.bytesSent && a.bytesReceived == b.bytesReceived &&
        a.operations == b.operations && a.messagesReceived == b.messagesReceived

    override fun close() {
        thread.interrupt()
    }

    /** How long the interval from [from] to [to] lasted. */
    private fun seconds(from: LiveTotals, to: LiveTotals): Double =
        // A last sample read just after the run's end may be later than it: such a last interval lasts 0 s (rates 0).
        (maxOf(to.elapsedNanos, from.elapsedNanos) - from.elapsedNanos) / 1e9

    private fun interval(from: LiveTotals, to: LiveTotals): IntervalRecord {
        val end = maxOf(to.elapsedNanos, from.elapsedNanos)
        val seconds = seconds(from, to)
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

    private fun round3(x: Double) = Math.round(x * 1000) / 1000.0

    companion object {
        /** How often the totals are read for the peak bandwidth. */
        const val TICK_MS = 100L

        /** The shortest span between two readings that counts for the peak (the clock of a reading lags its tick a little). */
        const val MIN_PEAK_SECONDS = TICK_MS * 0.9 / 1000

        /**
         * The rate, bytes per second in the busier direction, from reading [previous] to [t]; null
         * for a span shorter than [MIN_PEAK_SECONDS] (the sliver a reading after the traffic's end
         * closes), whose rate is no peak.
         */
        fun sampleRate(previous: LiveTotals, t: LiveTotals): Double? {
            val dt = (t.elapsedNanos - previous.elapsedNanos) / 1e9
            return if (dt >= MIN_PEAK_SECONDS) busier(t, previous) / dt else null
        }

        private fun busier(to: LiveTotals, from: LiveTotals): Double =
            maxOf(to.bytesSent - from.bytesSent, to.bytesReceived - from.bytesReceived).toDouble()

        /**
         * Said once per side instead of the rows of a run in which it moved nothing: no completion, no
         * message. That is what the target of RDMA WRITEs, READs and atomics sees (the operations
         * complete on the peer's CPU only), so their traffic is in the peer's lines.
         */
        const val NOTHING_MOVED = "no interval lines: this side moved nothing itself; the target of the peer's one-sided " +
            "operations (RDMA WRITE, READ, atomics) sees none of them: their traffic is in the peer's lines"
    }
}
