package dev.rdmarun.dsl

import java.util.Locale
import kotlinx.serialization.Serializable
import kotlinx.serialization.json.Json
import dev.rdmarun.runtime.engine.QpStats
import org.HdrHistogram.Histogram

private val RESULT_JSON = Json { prettyPrint = true }

/** Latency percentiles of one histogram, in nanoseconds. */
@Serializable
data class LatencySummary(
    val count: Long,
    val minNanos: Long,
    val meanNanos: Double,
    val p50Nanos: Long,
    val p90Nanos: Long,
    val p99Nanos: Long,
    val p999Nanos: Long,
    val maxNanos: Long,
) {
    companion object {
        fun of(h: Histogram): LatencySummary? = if (h.totalCount == 0L) null else LatencySummary(
            count = h.totalCount,
            minNanos = h.minValue,
            meanNanos = h.mean,
            p50Nanos = h.getValueAtPercentile(50.0),
            p90Nanos = h.getValueAtPercentile(90.0),
            p99Nanos = h.getValueAtPercentile(99.0),
            p999Nanos = h.getValueAtPercentile(99.9),
            maxNanos = h.maxValue,
        )
    }
}

/**
 * Traffic of one QP ([qp]) or of all ([qp] null), as this side saw it: bytes it sent (send,
 * write) and received (receives, READ data, atomic results), work requests it completed,
 * messages it received; rates over the run's duration; latency from post to completion of its
 * signaled work requests. RDMA WRITE/READ/atomics of the peer leave no trace on this side (no
 * completion): their numbers are on the peer's side.
 */
@Serializable
data class TrafficResult(
    val qp: Int?,
    val bytesSent: Long,
    val bytesReceived: Long,
    val operations: Long,
    val messagesReceived: Long,
    /** Messages that arrived but no receive() took before this side finished. */
    val messagesNotReceived: Long = 0,
    val sentGbps: Double,
    val receivedGbps: Double,
    val mpps: Double,
    val latency: LatencySummary?,
)

/**
 * What a scenario measured on this side; `table()` prints it perftest-style, `toJson()` for --json.
 * [durationNanos] runs from the end of connect(peer) until both sides finished (their work
 * completed), so both peers divide by comparable times.
 */
@Serializable
data class ScenarioResult(
    val role: Role,
    val device: String,
    val durationNanos: Long,
    val qps: List<TrafficResult>,
    val total: TrafficResult,
    /** `measure(name) { }` sections, all QPs merged. */
    val sections: Map<String, LatencySummary>,
) {
    val seconds: Double get() = durationNanos / 1e9

    fun toJson(): String = RESULT_JSON.encodeToString(serializer(), this)

    companion object {
        /** The result of a run that did not happen (`--check`): no traffic. */
        fun empty(role: Role, device: String, qps: Int): ScenarioResult {
            val none = List(qps) { QpCounters() }
            return QpCounters.result(role, device, 0, none)
        }
    }

    /**
     * perftest-style: a header line (side, device, QPs, duration), one row per QP (when there are
     * several) and the total, then one line per `measure` section. Bandwidth in Gb/s, message
     * rate (work requests completed plus messages received) in Mpps, latencies in microseconds.
     */
    fun table(): String = buildString {
        val header = String.format(Locale.ROOT, TABLE_ROW, "QP", "#bytes out", "#bytes in", "#WRs", "#msgs in",
            "BW out[Gb/s]", "BW in[Gb/s]", "MsgRate[Mpps]", "WR latency p50/p99/max[us]")
        val rule = "-".repeat(header.length)
        appendLine(String.format(Locale.ROOT, "%s on %s: %d QP%s, %.3f s", role.label, device, qps.size, if (qps.size == 1) "" else "s", seconds))
        appendLine(rule)
        appendLine(header)
        for (t in (if (qps.size > 1) qps else emptyList()) + total) {
            val latency = t.latency?.let { "${us(it.p50Nanos)}/${us(it.p99Nanos)}/${us(it.maxNanos)}" } ?: "-"
            appendLine(String.format(Locale.ROOT, TABLE_ROW, t.qp?.toString() ?: "total", t.bytesSent, t.bytesReceived,
                t.operations, t.messagesReceived, fixed(t.sentGbps, 3), fixed(t.receivedGbps, 3), fixed(t.mpps, 6), latency))
        }
        if (total.messagesNotReceived > 0) {
            appendLine(" ${total.messagesNotReceived} message${if (total.messagesNotReceived == 1L) "" else "s"} arrived that no receive() took")
        }
        for ((name, l) in sections.toSortedMap()) {
            appendLine(String.format(Locale.ROOT, " %s[us]: %d samples, min %s, mean %s, p50 %s, p90 %s, p99 %s, p99.9 %s, max %s",
                name, l.count, us(l.minNanos), fixed(l.meanNanos / 1000, 2), us(l.p50Nanos), us(l.p90Nanos), us(l.p99Nanos),
                us(l.p999Nanos), us(l.maxNanos)))
        }
        append(rule)
    }
}

private const val TABLE_ROW = " %-5s %14s %14s %11s %10s %13s %12s %14s  %s"

private fun us(ns: Long): String = fixed(ns / 1000.0, 2)

private fun fixed(x: Double, decimals: Int): String = String.format(Locale.ROOT, "%.${decimals}f", x)

/**
 * One QP's results: the engine's counters ([stats]; none for an empty result) and the
 * `measure(name) { }` sections, which only the DSL knows. Read when the run ends.
 */
internal class QpCounters(private val stats: QpStats? = null) {
    val sections = HashMap<String, Histogram>()

    fun recordSection(name: String, nanos: Long) {
        sections.getOrPut(name) { Histogram(3) }.recordValue(nanos.coerceAtLeast(0))
    }

    private class Totals {
        var bytesSent = 0L
        var bytesReceived = 0L
        var operations = 0L
        var messagesReceived = 0L
        var messagesNotReceived = 0L
        var latency: Histogram? = null

        fun add(s: QpStats) {
            bytesSent += s.bytesSent()
            bytesReceived += s.bytesReceived()
            operations += s.operations()
            messagesReceived += s.messagesReceived()
            messagesNotReceived += s.messagesNotReceived()
            val h = s.latencyCopy()
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
            val each = perQp.mapIndexed { i, c ->
                val t = Totals()
                c.stats?.let { t.add(it); total.add(it) }
                for ((name, h) in c.sections) sections.getOrPut(name) { Histogram(3) }.add(h)
                t.toResult(i, seconds)
            }
            return ScenarioResult(
                role = role,
                device = device,
                durationNanos = durationNanos,
                qps = each,
                total = total.toResult(null, seconds),
                sections = sections.mapNotNull { (k, h) -> LatencySummary.of(h)?.let { k to it } }.toMap(),
            )
        }
    }
}
