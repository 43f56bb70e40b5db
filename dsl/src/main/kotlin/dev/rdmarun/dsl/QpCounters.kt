package dev.rdmarun.dsl

import dev.rdmarun.runtime.engine.QpStats
import org.HdrHistogram.Histogram

/**
 * One QP's results: the engine's counters ([stats]; none for an empty result) and the
 * `measure(name) { }` sections, which only the DSL knows. Read when the run ends.
 */
internal class QpCounters(private val stats: QpStats? = null) {
    val sections = HashMap<String, Histogram>()

    /**
     * What this QP measured so far was a warm-up: its sections start again from here (the engine
     * splits its own counters at the same point, [dev.rdmarun.runtime.engine.QpEngine.measureFromHere]).
     */
    fun measureFromHere() {
        // Emptied in place, not removed: a section's next sample would otherwise take the path of a
        // new one, which the JIT compiled as never taken during the warm-up, and the measured loop
        // would start back in the interpreter. Empty sections are left out of the results.
        sections.values.forEach { it.reset() }
        sectionBytes.replaceAll { _, _ -> 0L }
    }

    /** Whether any section has a sample since the last [measureFromHere]. */
    fun measuredAny(): Boolean = sections.values.any { it.totalCount != 0L }

    /** Bytes the work requests posted inside each section (all its samples). */
    val sectionBytes = HashMap<String, Long>()

    /** Sections recorded with measureRoundTrip: reported one way. */
    val roundTrips = HashSet<String>()

    fun recordSection(name: String, nanos: Long, roundTrip: Boolean, bytes: Long = 0) {
        val h = sections[name] ?: Histogram(3).also {
            sections[name] = it
            if (roundTrip) roundTrips += name
        }
        if ((name in roundTrips) != roundTrip) {
            if (h.totalCount != 0L) {
                throw ScenarioException("section $name is measured both with measure and with measureRoundTrip: give them different names")
            }
            if (roundTrip) roundTrips += name else roundTrips -= name // emptied by measureFromHere: a new section
        }
        h.recordValue(nanos.coerceAtLeast(0))
        sectionBytes.merge(name, bytes, Long::plus)
    }

    private class Totals {
        var bytesSent = 0L
        var bytesReceived = 0L
        var operations = 0L
        var messagesReceived = 0L
        var messagesNotReceived = 0L
        var latency: Histogram? = null

        /** Adds the measured phase of [s]: work requests posted and messages taken after the last warm-up. */
        fun add(s: QpStats) {
            val m = s.measured()
            bytesSent += m.bytesSent
            bytesReceived += m.bytesReceived
            operations += m.operations
            messagesReceived += m.messagesReceived
            messagesNotReceived += m.messagesNotReceived
            val h = s.measuredLatency()
            if (h.totalCount > 0) (latency ?: Histogram(3).also { latency = it }).add(h)
        }

        fun toResult(qp: Int?, seconds: Double) = TrafficResult(
            qp = qp,
            bytesSent = bytesSent,
            bytesReceived = bytesReceived,
            operations = operations,
            messagesReceived = messagesReceived,
            messagesNotReceived = messagesNotReceived,
            sentGbps = if (seconds > 0) bytesSent * 8 / seconds / 1e9 else 0.0,
            receivedGbps = if (seconds > 0) bytesReceived * 8 / seconds / 1e9 else 0.0,
            mpps = if (seconds > 0) (operations + messagesReceived) / seconds / 1e6 else 0.0,
            latency = latency?.let { LatencySummary.of(it) },
        )
    }

    companion object {
        fun result(role: Role, device: String, durationNanos: Long, perQp: List<QpCounters>): ScenarioResult {
            val seconds = durationNanos / 1e9
            val total = Totals()
            val sections = HashMap<String, Histogram>()
            val roundTrips = HashSet<String>()
            val bytes = HashMap<String, Long>()
            val each = perQp.mapIndexed { i, c ->
                val t = Totals()
                c.stats?.let { t.add(it); total.add(it) }
                for ((name, h) in c.sections) sections.getOrPut(name) { Histogram(3) }.add(h)
                roundTrips += c.roundTrips
                c.sectionBytes.forEach { (name, b) -> bytes.merge(name, b, Long::plus) }
                t.toResult(i, seconds)
            }
            return ScenarioResult(
                role = role,
                device = device,
                durationNanos = durationNanos,
                qps = each,
                total = total.toResult(null, seconds),
                sections = sections.mapNotNull { (k, h) ->
                    LatencySummary.of(h)?.let { k to it.copy(roundTrip = k in roundTrips, bytesPerSample = (bytes[k] ?: 0) / it.count) }
                }.toMap(),
            )
        }
    }
}
