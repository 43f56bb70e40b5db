package dev.rdmarun.dsl

import dev.rdmarun.runtime.engine.QpStats
import org.HdrHistogram.Histogram

/**
 * One QP's results: the engine's counters ([stats]; none for an empty result) and the
 * `measure(name) { }` sections, which only the DSL knows. Read when the run ends.
 */
internal class QpCounters(private val stats: QpStats? = null, private val kinds: SectionKinds = SectionKinds()) {
    /** One `measure` or `measureRoundTrip` section of this QP: its samples and the bytes posted in them. */
    class Section(val roundTrip: Boolean) {
        val histogram = Histogram(3)
        var bytes = 0L
    }

    val sections = HashMap<String, Section>()

    /** The engine's posted work requests and their bytes at the last [measureFromHere]: the measured ones came after. */
    private var postedBefore = 0L
    private var bytesPostedBefore = 0L

    /**
     * What this QP measured so far was a warm-up: its sections start again from here (the engine
     * splits its own counters at the same point, [dev.rdmarun.runtime.engine.QpEngine.measureFromHere]).
     */
    fun measureFromHere() {
        stats?.let {
            postedBefore = it.posted()
            bytesPostedBefore = it.bytesPosted()
        }
        // Emptied in place, not removed: a section's next sample would otherwise take the path of a
        // new one, which the JIT compiled as never taken during the warm-up, and the measured loop
        // would start back in the interpreter. Empty sections are left out of the results.
        for (s in sections.values) {
            s.histogram.reset()
            s.bytes = 0
        }
    }

    /** Whether any section has a sample since the last [measureFromHere]. */
    fun measuredAny(): Boolean = sections.values.any { it.histogram.totalCount != 0L }

    /**
     * Section [name] of this QP, before its block runs: a name used with the other kind, here or
     * on another QP, fails at the script's call ([SectionKinds]), so its block does not run.
     */
    fun section(name: String, roundTrip: Boolean): Section {
        sections[name]?.let { if (it.roundTrip == roundTrip) return it }
        if (name.isBlank()) {
            throw ScriptCallException("${if (roundTrip) "measureRoundTrip" else "measure"}(\"$name\"): a section needs a name the results can show")
        }
        kinds.claim(name, roundTrip)
        return Section(roundTrip).also { sections[name] = it }
    }

    /** Records one sample of [section]: [nanos] long, [bytes] posted in it. */
    fun record(section: Section, nanos: Long, bytes: Long) {
        section.histogram.recordValue(nanos.coerceAtLeast(0))
        section.bytes += bytes
    }

    private class Totals {
        var bytesSent = 0L
        var bytesReceived = 0L
        var operations = 0L
        var messagesReceived = 0L
        var messagesNotReceived = 0L
        var latency: Histogram? = null
        var posted = 0L
        var bytesPosted = 0L

        /** Adds the measured phase of [c]: work requests posted and messages taken after the last warm-up. */
        fun add(c: QpCounters) {
            val s = c.stats ?: return
            posted += s.posted() - c.postedBefore
            bytesPosted += s.bytesPosted() - c.bytesPostedBefore
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
            // The work requests' size, not the messages': a ping-pong's are the other side's.
            latency = latency?.let { h -> LatencySummary.of(h)?.copy(bytesPerSample = if (posted > 0) bytesPosted / posted else null) },
        )
    }

    companion object {
        /**
         * The side's results, [endNanos] being when both sides finished. Each QP's rates are over
         * its own measured time ([MeasuredTime]: from its first post or arrival of the measured
         * phase to its last completion or arrival, as perftest's), so neither what the script did
         * before its traffic (a barrier, a sleeping peer) nor after it is in them. The totals are
         * over the side's measured time: the one time that holds every byte counted.
         */
        fun result(role: Role, device: String, startNanos: Long, endNanos: Long, perQp: List<QpCounters>): ScenarioResult {
            val time = MeasuredTime(startNanos, endNanos, perQp.map { it.stats?.measured() })
            val from = time.from
            val to = time.to
            val durationNanos = time.nanos
            val total = Totals()
            // One kind per name across QPs (SectionKinds): the first QP's says it for all.
            val sections = HashMap<String, Section>()
            val each = perQp.mapIndexed { i, c ->
                val t = Totals()
                t.add(c)
                total.add(c)
                for ((name, s) in c.sections) {
                    val sum = sections.getOrPut(name) { Section(s.roundTrip) }
                    sum.histogram.add(s.histogram)
                    sum.bytes += s.bytes
                }
                t.toResult(i, (to[i] - from[i]) / 1e9)
            }
            return ScenarioResult(
                role = role,
                device = device,
                durationNanos = durationNanos,
                qps = each,
                total = total.toResult(null, durationNanos / 1e9),
                sections = sections.mapNotNull { (k, s) ->
                    LatencySummary.of(s.histogram)?.let { k to it.copy(roundTrip = s.roundTrip, bytesPerSample = s.bytes / it.count) }
                }.toMap(),
            )
        }
    }
}

/**
 * Each section name's kind, `measure` or `measureRoundTrip`, for the whole scenario: its first use,
 * on any QP, fixes it, since the results report a name's samples one way or as they are, never
 * both. One per scenario, used on its one thread.
 */
internal class SectionKinds {
    private val roundTrip = HashMap<String, Boolean>()

    fun claim(name: String, roundTrip: Boolean) {
        val first = this.roundTrip.putIfAbsent(name, roundTrip) ?: return
        if (first != roundTrip) {
            throw ScriptCallException(
                "${if (roundTrip) "measureRoundTrip" else "measure"}(\"$name\"): section $name was measured " +
                    "with ${if (first) "measureRoundTrip" else "measure"} already, and a name keeps one kind for the whole scenario, " +
                    "on every QP: give this one another name",
            )
        }
    }
}

/**
 * A side's measured time, for its results ([QpCounters.result], [end] when both sides finished)
 * and its live totals ([ScenarioMonitor.totals], [end] now), from its QPs' readings ([measured];
 * null for a QP without counters) and [start], when its QPs connected. A QP's time runs from its
 * first post or arrival of its measured phase ([measuredSince]; that phase's start until it has
 * one) to its last completion or arrival ([end] when it moved nothing measured): perftest's time
 * starts at its first post (its receiver's at the first arrival) and ends at its last completion.
 * The side's runs from the earliest first post or arrival of its QPs to the latest last
 * completion or arrival: neither what its script did before its traffic nor after it is in it.
 * All values are System.nanoTime() readings.
 */
internal class MeasuredTime(start: Long, end: Long, measured: List<QpStats.Measured?>) {
    /** Each QP's measured time. */
    val from = LongArray(measured.size)
    val to = LongArray(measured.size)

    /** Whether a QP posted or received anything in its measured phase: until then the side's time runs from the phase's start. */
    val started: Boolean

    /** The side's measured time, in ns. */
    val nanos: Long

    init {
        var first: Long? = null
        var since: Long? = null
        var last: Long? = null
        for ((i, m) in measured.withIndex()) {
            if (m == null) {
                from[i] = start
                to[i] = end
                since = since.earlier(start)
                continue
            }
            val phaseStart = measuredSince(start, m)
            since = since.earlier(phaseStart)
            val firstActivity = longArrayOf(m.firstPostNanos, m.firstArrivalNanos)
                .filter { it != 0L && it - phaseStart >= 0 }.reduceOrNull { a, b -> if (b - a < 0) b else a }
            from[i] = firstActivity ?: phaseStart
            to[i] = measuredUntil(from[i], end, m)
            if (firstActivity != null) first = first.earlier(firstActivity)
            if (movedAny(m)) last = if (last == null || to[i] - last > 0) to[i] else last
        }
        started = first != null
        nanos = (last ?: end) - (first ?: since ?: start)
    }

    private fun Long?.earlier(t: Long): Long = if (this == null || t - this < 0) t else this
}

/** When a QP's measured phase began, in System.nanoTime(): its last warm-up's end ([m]), else the side's [start]. */
internal fun measuredSince(start: Long, m: QpStats.Measured): Long = if (m.phase > 0 && m.sinceNanos - start > 0) m.sinceNanos else start

/**
 * When a QP's measured phase, begun at [from], ended: its last completion or arrival, or [end]
 * (both sides finished) when it had none after [from] (it moved nothing, or only took messages
 * that arrived in its warm-up).
 */
internal fun measuredUntil(from: Long, end: Long, m: QpStats.Measured): Long {
    val last = m.lastActivityNanos
    return if (movedAny(m) && last - from > 0 && end - last >= 0) last else end
}

private fun movedAny(m: QpStats.Measured) = m.operations > 0 || m.messagesReceived > 0
