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
    /** Standard deviation. */
    val stdevNanos: Double = 0.0,
    /** Recorded with measureRoundTrip: the values are round trips, reported one way (halved) beside them. */
    val roundTrip: Boolean = false,
    /** HdrHistogram's compressed V2 encoding of the recorded values (nanoseconds), base64: `--histogram`, reports. */
    val histogram: String? = null,
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
            stdevNanos = h.stdDeviation,
            histogram = encode(h),
        )

        private fun encode(h: Histogram): String {
            val buffer = java.nio.ByteBuffer.allocate(h.neededByteBufferCapacity)
            val n = h.encodeIntoCompressedByteBuffer(buffer)
            return java.util.Base64.getEncoder().encodeToString(buffer.array().copyOf(n))
        }

        /** The histogram of [histogram] back (nanoseconds). */
        fun decode(histogram: String): Histogram =
            Histogram.decodeFromCompressedByteBuffer(java.nio.ByteBuffer.wrap(java.util.Base64.getDecoder().decode(histogram)), 0)
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

/** One QP's connection as the header of the results shows it (perftest's local and remote address lines). */
@Serializable
data class QpConnection(
    val index: Int,
    val localQpn: Int,
    val remoteQpn: Int,
    val localPsn: Int,
    val remotePsn: Int,
    val remoteGid: String,
)

/** The device, port and QPs a scenario ran on, for the header of its results (perftest's) and the JSON. */
@Serializable
data class ConnectionInfo(
    val device: String,
    /** True for soft0, rdma-run's software provider. */
    val software: Boolean,
    val firmware: String,
    val port: Int,
    /** "Ethernet" (RoCE) or "InfiniBand". */
    val linkLayer: String,
    /** The path MTU the QPs use, in bytes. */
    val mtu: Int,
    val gidIndex: Int,
    val gid: String,
    val transport: String = "RC",
    val qps: List<QpConnection>,
)

/**
 * What a scenario measured on this side; `table()` prints it perftest-style, `toJson()` gives it as JSON
 * (the launcher's `--json` writes it inside a results document, schema 1).
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
    /** Device, port and QPs (absent when the run did not connect: `--check`). */
    val connection: ConnectionInfo? = null,
    /** The parameters this scenario saw. */
    val parameters: Map<String, String> = emptyMap(),
    /** The plan fingerprint both peers matched. */
    val fingerprint: String? = null,
    /** What each `repeat { }` and `runFor` did before it measured: the scenario block's first, then by QP. */
    val warmup: List<WarmupSummary> = emptyList(),
    /** The pre-flight warm-up connect(peer) ran on two local QPs before it met the peer; null when none ran (`--set preflight=0`, or the device cannot connect two of its own QPs). */
    val preflight: PreflightReport? = null,
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

    /** This side's average rate in bytes per second, in the direction that moved more bytes (perftest reports one direction). */
    val bytesPerSecond: Double
        get() = if (seconds > 0) maxOf(total.bytesSent, total.bytesReceived) / seconds else 0.0

    /** Bytes per message, averaged over what this side sent and received (exact when all are one size); 0 when none moved. */
    val averageMessageSize: Long
        get() {
            val messages = total.operations + total.messagesReceived
            return if (messages == 0L) 0 else (total.bytesSent + total.bytesReceived) / messages
        }

    /**
     * perftest-style, in four parts: a header (side, device, firmware, port, link layer,
     * transport, QPs, MTU, GID index, then each QP's local and remote QPN, PSN and GID, as
     * perftest prints its address lines); rdma-run's per-QP traffic table; perftest's bandwidth
     * line (`#bytes #iterations BW peak BW average MsgRate`, for the direction that moved more bytes); and perftest's latency line for the
     * work-request latency and each `measure` section (`t_min t_max t_typical t_avg t_stdev 99%
     * 99.9%`, microseconds). Bandwidth in MB/s (2^20 bytes, as perftest) or, with [gbits], Gb/s;
     * [peakBytesPerSecond] is the best interval's rate when the launcher sampled intervals.
     */
    @JvmOverloads
    fun table(gbits: Boolean = false, peakBytesPerSecond: Double? = null): String = buildString {
        val header = String.format(Locale.ROOT, TABLE_ROW, "QP", "#bytes out", "#bytes in", "#WRs", "#msgs in",
            "BW out[Gb/s]", "BW in[Gb/s]", "MsgRate[Mpps]", "WR latency p50/p99/max[us]")
        val rule = "-".repeat(header.length)
        appendLine(String.format(Locale.ROOT, "%s on %s: %d QP%s, %.3f s", role.label, device, qps.size, if (qps.size == 1) "" else "s", seconds))
        connection?.let { c ->
            appendLine(String.format(Locale.ROOT, " Device: %s%s, firmware %s, port %d, link %s, transport %s, MTU %d, GID index %d",
                c.device, if (c.software) " (software)" else "", c.firmware.ifEmpty { "-" }, c.port, c.linkLayer, c.transport, c.mtu, c.gidIndex))
            for (q in c.qps) {
                appendLine(String.format(Locale.ROOT, " local address:  QP %d QPN 0x%06x PSN 0x%06x GID %s", q.index, q.localQpn, q.localPsn, c.gid))
                appendLine(String.format(Locale.ROOT, " remote address: QP %d QPN 0x%06x PSN 0x%06x GID %s", q.index, q.remoteQpn, q.remotePsn, q.remoteGid))
            }
        }
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
        appendLine(rule)
        val unit = if (gbits) "Gb/sec" else "MB/sec"
        fun rate(bytesPerSecond: Double) = if (gbits) fixed(bytesPerSecond * 8 / 1e9, 2) else fixed(bytesPerSecond / (1 shl 20), 2)
        // perftest's #iterations: the work requests the test posted and measured, whatever their
        // kind (READ and atomics bring bytes in); only a side that posted none (a SEND test's
        // receiver) counts the messages it received.
        val iterations = if (total.operations > 0) total.operations else total.messagesReceived
        val average = bytesPerSecond
        appendLine(String.format(Locale.ROOT, PERF_BW_ROW, "#bytes", "#iterations", "BW peak[$unit]", "BW average[$unit]", "MsgRate[Mpps]"))
        appendLine(String.format(Locale.ROOT, PERF_BW_ROW, averageMessageSize, iterations,
            peakBytesPerSecond?.let { rate(maxOf(it, average)) } ?: "-", rate(average), fixed(total.mpps, 6)))
        val latencies = listOfNotNull(total.latency?.let { "work requests" to it }) + sections.toSortedMap().toList()
        if (latencies.isNotEmpty()) {
            appendLine(String.format(Locale.ROOT, PERF_LAT_ROW, "latency", "#bytes", "#iterations", "t_min[usec]", "t_max[usec]",
                "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]", "99%[usec]", "99.9%[usec]"))
            for ((name, l) in latencies) {
                fun row(label: String, d: Double) = appendLine(String.format(Locale.ROOT, PERF_LAT_ROW, label, averageMessageSize, l.count,
                    fixed(l.minNanos / d / 1000, 2), fixed(l.maxNanos / d / 1000, 2), fixed(l.p50Nanos / d / 1000, 2),
                    fixed(l.meanNanos / d / 1000, 2), fixed(l.stdevNanos / d / 1000, 2), fixed(l.p99Nanos / d / 1000, 2),
                    fixed(l.p999Nanos / d / 1000, 2)))
                if (l.roundTrip) {
                    row("$name one way", 2.0)
                    row("$name RTT", 1.0)
                } else row(name, 1.0)
            }
        }
        preflight?.let { appendLine(" ${it.describe()} (before connecting; in no figure)") }
        for (w in warmupLines()) appendLine(" $w")
        append(rule)
    }

    /** The warm-up lines of [table]: one per loop, or one and a count when several QPs' loops did the same. */
    fun warmupLines(): List<String> {
        if (warmup.size <= 2) return warmup.map { it.describe() }
        val first = warmup.first()
        return listOf(first.describe(), "... and ${warmup.size - 1} more loops (the JSON has each)")
    }
}

private const val PERF_BW_ROW = " %-10s %-12s %-20s %-22s %s"
private const val PERF_LAT_ROW = " %-14s %-8s %-12s %-12s %-12s %-16s %-12s %-14s %-10s %s"
private const val TABLE_ROW = " %-5s %14s %14s %11s %10s %13s %12s %14s  %s"

private fun us(ns: Long): String = fixed(ns / 1000.0, 2)

private fun fixed(x: Double, decimals: Int): String = String.format(Locale.ROOT, "%.${decimals}f", x)

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
        sections.clear()
        roundTrips.clear()
    }

    /** Sections recorded with measureRoundTrip: reported one way. */
    val roundTrips = HashSet<String>()

    fun recordSection(name: String, nanos: Long, roundTrip: Boolean) {
        val h = sections[name] ?: Histogram(3).also {
            sections[name] = it
            if (roundTrip) roundTrips += name
        }
        if ((name in roundTrips) != roundTrip) {
            throw ScenarioException("section $name is measured both with measure and with measureRoundTrip: give them different names")
        }
        h.recordValue(nanos.coerceAtLeast(0))
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
            val each = perQp.mapIndexed { i, c ->
                val t = Totals()
                c.stats?.let { t.add(it); total.add(it) }
                for ((name, h) in c.sections) sections.getOrPut(name) { Histogram(3) }.add(h)
                roundTrips += c.roundTrips
                t.toResult(i, seconds)
            }
            return ScenarioResult(
                role = role,
                device = device,
                durationNanos = durationNanos,
                qps = each,
                total = total.toResult(null, seconds),
                sections = sections.mapNotNull { (k, h) -> LatencySummary.of(h)?.let { k to it.copy(roundTrip = k in roundTrips) } }.toMap(),
            )
        }
    }
}
