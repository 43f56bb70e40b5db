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
         * its own measured time: from its last warm-up's end (else [startNanos]) to its last
         * completion or arrival, as perftest's time ends at its last completion, so whatever the
         * script did after its traffic (a barrier, a check, the peer's own work) is not in them;
         * a QP that moved nothing measured keeps [endNanos]. The totals are over the
         * earliest start to the latest end of those: the one time that holds every byte counted.
         */
        fun result(role: Role, device: String, startNanos: Long, endNanos: Long, perQp: List<QpCounters>): ScenarioResult {
            val measured = perQp.map { it.stats?.measured() }
            val from = measured.map { m -> m?.let { measuredSince(startNanos, it) } ?: startNanos }
            val to = measured.mapIndexed { i, m -> m?.let { measuredUntil(from[i], endNanos, it) } ?: endNanos }
            val moved = measured.indices.filter { measured[it]?.let(::movedAny) == true }
            val durationNanos = (if (moved.isEmpty()) endNanos else latest(moved.map { to[it] })) - earliest(startNanos, from)
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
 * When a QP's measured phase began, in System.nanoTime(): its last warm-up's end ([m]), else the
 * side's [start]. The side's own is the [earliest] of its QPs': the results' duration and the
 * live totals' elapsed time both start there.
 */
internal fun measuredSince(start: Long, m: QpStats.Measured): Long = if (m.phase > 0 && m.sinceNanos - start > 0) m.sinceNanos else start

/** The earliest of [times] (System.nanoTime() values, compared by difference), [start] for none. */
internal fun earliest(start: Long, times: List<Long>): Long = times.reduceOrNull { a, b -> if (b - a < 0) b else a } ?: start

/** The latest of [times] (System.nanoTime() values, compared by difference; at least one). */
internal fun latest(times: List<Long>): Long = times.reduce { a, b -> if (b - a > 0) b else a }

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
