package dev.rdmarun.dsl

import java.util.Locale
import kotlinx.serialization.Serializable
import kotlinx.serialization.json.Json

private val RESULT_JSON = Json { prettyPrint = true }

/**
 * Traffic of one QP ([qp]) or of all ([qp] null), as this side saw it: bytes it sent (send,
 * write) and received (receives, READ data, atomic results), work requests it completed,
 * messages it received; rates over the QP's measured time (the side's duration for [qp] null,
 * see [ScenarioResult.durationNanos]); latency from post to completion of its signaled work
 * requests, whose `bytesPerSample` is the measured work requests' average size. RDMA
 * WRITE/READ/atomics of the peer leave no trace on this side (no completion): their numbers are
 * on the peer's side.
 */
@Serializable
public data class TrafficResult(
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
 * One QP's connection as the banner of the results shows it (perftest's local and remote address
 * lines): QPN, PSN and LID of each end, and the data region (the first buffer's address and rkey)
 * each end registered. The LIDs, rkeys and addresses are absent (0, null) in documents written before
 * they were recorded.
 */
@Serializable
public data class QpConnection(
    val index: Int,
    val localQpn: Int,
    val remoteQpn: Int,
    val localPsn: Int,
    val remotePsn: Int,
    val remoteGid: String,
    val localLid: Int = 0,
    val remoteLid: Int = 0,
    /** The rkey of this side's data region (unsigned 32 bits). */
    val localRkey: Long? = null,
    val remoteRkey: Long? = null,
    /** The virtual address of this side's data region. */
    val localAddress: Long? = null,
    val remoteAddress: Long? = null,
)

/**
 * The device, port and QPs a scenario ran on, and the settings perftest's banner shows, for the
 * banner of its results and the JSON. [sendDepth], [signalEvery] and [inlineThreshold] (perftest's
 * TX depth, CQ moderation and max inline data) are null in documents written before they were recorded.
 */
@Serializable
public data class ConnectionInfo(
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
    val sendDepth: Int? = null,
    val signalEvery: Int? = null,
    val inlineThreshold: Int? = null,
)

/**
 * What a scenario measured on this side; `table()` prints it perftest-style, `toJson()` gives it as JSON
 * (the launcher's `--json` writes it inside a results document, schema 2).
 * [durationNanos] runs from this side's first post or arrival of the measured phase (after
 * connect(peer), or after the last warm-up) to its last completion or arrival, as perftest's time
 * runs from its first post (its receiver's from the first arrival) to its last completion: what
 * the script, or the peer, does before or after its traffic (a barrier, a sleep) is not in it. A
 * side that moved nothing keeps the time from the measured phase's start until both sides
 * finished. Each QP's own rates ([qps]) are over its own measured time, from its own first post
 * or arrival to its own last completion or arrival.
 */
@Serializable
public data class ScenarioResult(
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
    /** The peer measured a `measure` or `measureRoundTrip` section (its end-of-scenario frame says so): see [latencyTest]. */
    val peerMeasuredLatency: Boolean = false,
    /** In a run of ranks ([rdmaRanks]): which pair this scenario was; null in a two-peer run. */
    val pair: RankPair? = null,
) {
    val seconds: Double get() = durationNanos / 1e9

    public fun toJson(): String = RESULT_JSON.encodeToString(serializer(), this)

    public companion object {
        /** The result of a run that did not happen (`--check`): no traffic. */
        public fun empty(role: Role, device: String, qps: Int): ScenarioResult {
            val none = List(qps) { QpCounters() }
            return QpCounters.result(role, device, 0, 0, none)
        }

        /** The header of rdma-run's own latency lines (after perftest's block): a label, then perftest's figures. */
        public val OWN_LATENCY_HEADER: String = String.format(Locale.ROOT, OWN_LAT_ROW, "latency", "#bytes", "#samples", "t_min[usec]", "t_max[usec]",
            "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]", "99%[usec]", "99.9%[usec]")
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
     * Whether these are a latency test's results or a bandwidth test's, as perftest's tools are one
     * or the other. The rule: a scenario in which either side measured a latency section
     * (`measure(name) { }` or `measureRoundTrip(name) { }`) is a latency test, since the sections
     * are what it set out to measure and its traffic is only the means; a scenario that measured
     * none is a bandwidth test. The peer's sections count too ([peerMeasuredLatency]), so that the
     * side of a ping-pong that only answers is not taken for a bandwidth test. A latency test prints
     * perftest's latency block and no bandwidth block; a bandwidth test the bandwidth block only.
     */
    val latencyTest: Boolean get() = sections.isNotEmpty() || peerMeasuredLatency

    /**
     * perftest's `#iterations` of a bandwidth test: the measured work requests this side posted,
     * of any kind, per QP as perftest's `-n` is (`-n 3000 -q 2` says 3000) when every QP that
     * posted posted as many, else all of them; a side that posted none (a SEND test's receiver)
     * counts the messages it received, per QP in the same way.
     */
    val perftestIterations: Long get() {
        val posted = total.operations > 0
        val counts = qps.map { if (posted) it.operations else it.messagesReceived }.filter { it > 0 }
        val all = if (posted) total.operations else total.messagesReceived
        return if (counts.isNotEmpty() && counts.all { it == counts[0] }) counts[0] else all
    }

    /** The section perftest's latency block shows: the first by name (as `--histogram`); null when this side measured none. */
    val leadingSection: Pair<String, LatencySummary>? get() = sections.toSortedMap().entries.firstOrNull()?.toPair()

    /**
     * The results, perftest's parts first, so that a parser of perftest's output reads them (it keys
     * on the result header, ` #bytes #iterations ...`, and reads the rows under it):
     *
     * 1. `client on DEV: N QPs, S s` (rdma-run's);
     * 2. [perftestBanner]: the dashed line, the test line ([title], rdma-run's name of the test: the
     *    launcher gives the script's file name; `Latency Test` or `BW Test` by [latencyTest]),
     *    perftest's `key : value` lines that rdma-run knows, then per QP the local and, after them,
     *    the remote `address:` lines (LID, QPN, PSN, RKey, VAddr), each with its `GID:` line;
     * 3. perftest's result block between dashed lines: for a latency test, the latency header and
     *    one row ([leadingSection]: for a `measureRoundTrip` section, one way, half the round trip,
     *    as ib_send_lat reports; `#iterations` is the number of measured samples, warm-ups left out);
     *    for a bandwidth test, the bandwidth header and row (the direction that moved more bytes,
     *    MsgRate its messages per second, BW average / `#bytes`, as perftest's; peak and average
     *    in MB/sec, 2^20 bytes, or with [gbits] Gb/sec; the peak is [peakBytesPerSecond], the
     *    best interval the launcher sampled, never below the average, or 0.00 without one, as
     *    perftest's `--noPeak` prints). The side of a latency test that measured no section, and
     *    the side of a bandwidth test that moved nothing (the target of its peer's WRITEs, READs or
     *    atomics, which do not involve it), have no block: perftest's reader then finds none on
     *    it, rightly, and a line after it says that the peer's results have the figures;
     * 4. rdma-run's own lines ([ownLines]), after perftest's closing dashed line, where a perftest
     *    parser does not look, and a last dashed line.
     *
     * Every rate in it is in the one unit [gbits] chooses.
     */
    @JvmOverloads
    public fun table(gbits: Boolean = false, peakBytesPerSecond: Double? = null, title: String? = null): String = buildString {
        appendLine(sideLine())
        appendLine(perftestBanner(title))
        perftestHeader(gbits)?.let { header ->
            appendLine(header)
            perftestRow(gbits, peakBytesPerSecond)?.let { appendLine(it) }
            appendLine(PerftestFormat.RULE)
        }
        for (line in ownLines(gbits)) appendLine(line)
        append(PerftestFormat.RULE)
    }

    /** `client on soft0: 1 QP, 0.184 s`: the side (in a run of ranks, `rank 2 with rank 0`), device, QPs and the measured time. */
    public fun sideLine(): String =
        String.format(Locale.ROOT, "%s on %s: %d QP%s, %.3f s", pair?.let { "rank ${it.rank} with rank ${it.peerRank}" } ?: role.label,
            device, qps.size, if (qps.size == 1) "" else "s", seconds)

    /**
     * perftest's banner: the dashed line, the test line, the `key : value` lines rdma-run knows
     * (Dual-port OFF, Device, Number of qps, Transport type IB: RC QPs of InfiniBand, RoCE or
     * soft0's RoCE emulation; Connection type RC, Using SRQ OFF, TX depth: `sendDepth`, CQ
     * Moderation: `signalEvery`, Mtu: the path MTU, Link type, GID index, Max inline data:
     * `inlineThreshold`, rdma_cm QPs OFF, Data ex. method Ethernet: the TCP control connection),
     * the dashed line; then the QPs' address and GID lines and a dashed line. Without a connection
     * (`--check`), only what is known.
     */
    public fun perftestBanner(title: String? = null): String = PerftestFormat.banner(this, title)

    /**
     * perftest's header of this side's result block, or null when it has none: the side of a
     * latency test that measured no section, or of a bandwidth test that moved nothing.
     */
    public fun perftestHeader(gbits: Boolean = false): String? = when {
        !latencyTest -> if (movedNothing) null else PerftestFormat.bandwidthHeader(gbits)
        sections.isNotEmpty() -> PerftestFormat.LATENCY_HEADER
        else -> null
    }

    /** The row under [perftestHeader] (see [table]), or null with it. */
    @JvmOverloads
    public fun perftestRow(gbits: Boolean = false, peakBytesPerSecond: Double? = null): String? {
        if (!latencyTest) {
            if (movedNothing) return null
            val average = bytesPerSecond
            val peak = peakBytesPerSecond?.let { PerftestFormat.rate(maxOf(it, average), gbits) } ?: 0.0
            // The BW average's direction's messages, as perftest's BW average = MsgRate x #bytes
            // (total.mpps counts both directions' work requests and messages).
            val rate = if (averageMessageSize > 0) average / averageMessageSize / 1e6 else total.mpps
            return PerftestFormat.bandwidthRow(averageMessageSize, perftestIterations, peak, PerftestFormat.rate(average, gbits), rate, gbits)
        }
        val (_, l) = leadingSection ?: return null
        val d = if (l.roundTrip) 2000.0 else 1000.0
        return PerftestFormat.latencyRow(l.bytesPerSample ?: averageMessageSize, l.count, l.minNanos / d, l.maxNanos / d, l.p50Nanos / d,
            l.meanNanos / d, l.stdevNanos / d, l.p99Nanos / d, l.p999Nanos / d)
    }

    /**
     * rdma-run's own lines, after perftest's block: what the block shows ([latencyNote]), the
     * device line, the per-QP traffic table (bytes, work requests, messages, rates in the run's
     * unit, work-request latency), messages no receive() took, the latencies perftest's block does
     * not show ([ownLatencyRows] under [OWN_LATENCY_HEADER]), then the pre-flight and warm-up lines.
     */
    public fun ownLines(gbits: Boolean = false): List<String> = buildList {
        latencyNote()?.let { add(it) }
        connection?.let { c ->
            add(String.format(Locale.ROOT, " Device: %s%s, firmware %s, port %d, link %s, transport %s, MTU %d, GID index %d",
                c.device, if (c.software) " (software)" else "", c.firmware.ifEmpty { "-" }, c.port, c.linkLayer, c.transport, c.mtu, c.gidIndex))
        }
        addAll(trafficLines(gbits))
        val latencies = ownLatencyRows()
        if (latencies.isNotEmpty()) {
            add(OWN_LATENCY_HEADER)
            addAll(latencies)
        }
        addAll(notes().map { " $it" })
    }

    /**
     * A passive side: no work request, no message in. A zero row would read as a measured zero;
     * the figures of the operations that reached this side's memory are its peer's.
     */
    private val movedNothing: Boolean
        get() = total.operations == 0L && total.messagesReceived == 0L && total.bytesSent == 0L && total.bytesReceived == 0L

    /**
     * The line that says what perftest's block shows: for a latency test, which latency (or that
     * this side has none); for a bandwidth test that moved nothing on this side, that the peer's
     * results have the bandwidth. Null for a bandwidth test that moved data.
     */
    public fun latencyNote(): String? {
        if (!latencyTest) {
            return if (movedNothing) " no traffic on this side: what the peer's one-sided operations moved " +
                "to or from this side's memory, if any, is in the peer's results" else null
        }
        val lead = leadingSection
        return when {
            lead == null -> " no latency section on this side: the ${role.other.label}'s results have the latency"
            lead.second.roundTrip -> " the latency above: ${lead.first}, one way (half the round trip, as perftest); rdma-run's figures follow"
            else -> " the latency above: ${lead.first}; rdma-run's figures follow"
        }
    }

    /**
     * rdma-run's per-QP traffic table (one row per QP when there are several, then the total),
     * rates in MB/sec or, with [gbits], Gb/sec. `#msgs arrived` counts the messages that reached
     * this side's inbox, taken by a receive() or not; a line after the table says how many no
     * receive() took. Every rate of a row is over that row's time, as in
     * the JSON ([TrafficResult]): a QP's own measured time, the side's duration for the total. So
     * the total's rates are not the sum of the QPs' when their warm-ups ended apart.
     */
    public fun trafficLines(gbits: Boolean = false): List<String> = buildList {
        val unit = PerftestFormat.unit(gbits)
        add(String.format(Locale.ROOT, TABLE_ROW, "QP", "#bytes out", "#bytes in", "#WRs", "#msgs arrived",
            "BW out[$unit]", "BW in[$unit]", "MsgRate[Mpps]", "WR latency p50/p99/max[us]"))
        fun rate(gbps: Double) = PerftestFormat.rate(gbps * 1e9 / 8, gbits)
        for (t in (if (qps.size > 1) qps else emptyList()) + total) {
            val latency = t.latency?.let { "${us(it.p50Nanos)}/${us(it.p99Nanos)}/${us(it.maxNanos)}" } ?: "-"
            add(String.format(Locale.ROOT, TABLE_ROW, t.qp?.toString() ?: "total", t.bytesSent, t.bytesReceived,
                t.operations, t.messagesReceived, fixed(rate(t.sentGbps), 3), fixed(rate(t.receivedGbps), 3), fixed(t.mpps, 6), latency))
        }
        if (total.messagesNotReceived > 0) {
            add(" ${total.messagesNotReceived} message${if (total.messagesNotReceived == 1L) "" else "s"} arrived that no receive() took")
        }
    }

    /**
     * The latencies perftest's block does not show, labelled, in microseconds: the round trip of
     * the block's section (when it is a `measureRoundTrip` one), every other section (one way and
     * round trip for a `measureRoundTrip` one), then the work requests' post-to-completion latency
     * (`#samples`: the signaled work requests it timed).
     */
    public fun ownLatencyRows(): List<String> = ownLatencies().map { it.second }

    /** [ownLatencyRows] with their labels (`rtt RTT`, `work requests`). */
    public fun ownLatencies(): List<Pair<String, String>> = buildList {
        val lead = if (latencyTest) leadingSection?.first else null
        fun row(label: String, l: LatencySummary, d: Double) = add(label to String.format(Locale.ROOT, OWN_LAT_ROW, label, l.bytesPerSample ?: averageMessageSize, l.count,
            fixed(l.minNanos / d / 1000, 2), fixed(l.maxNanos / d / 1000, 2), fixed(l.p50Nanos / d / 1000, 2),
            fixed(l.meanNanos / d / 1000, 2), fixed(l.stdevNanos / d / 1000, 2), fixed(l.p99Nanos / d / 1000, 2),
            fixed(l.p999Nanos / d / 1000, 2)))
        for ((name, l) in sections.toSortedMap()) {
            when {
                l.roundTrip -> {
                    if (name != lead) row("$name one way", l, 2.0)
                    row("$name RTT", l, 1.0)
                }
                name != lead -> row(name, l, 1.0)
            }
        }
        total.latency?.let { row("work requests", it, 1.0) }
    }

    /** The pre-flight line and the warm-up lines, without indentation. */
    public fun notes(): List<String> =
        listOfNotNull(preflight?.let { "${it.describe()} (before connecting; in no figure)" }) + warmupLines()

    /**
     * The warm-up lines of [table]: one per loop, or one and a count when several QPs' loops did
     * the same; a warm-up that left out something measured always has its line.
     */
    public fun warmupLines(): List<String> {
        if (warmup.size <= 2) return warmup.map { it.describe() }
        val first = warmup.first()
        val lost = warmup.drop(1).filter { it.leftOutMeasured }
        val rest = warmup.size - 1 - lost.size
        // The rounds of the loops not shown: a QP that warmed up for twice as long as the first must not hide behind it.
        val others = warmup.drop(1).filter { !it.leftOutMeasured }.map { it.rounds }
        val rounds = when {
            others.isEmpty() -> ""
            others.min() == others.max() -> ", ${others.min()} rounds each"
            else -> ", ${others.min()} to ${others.max()} rounds"
        }
        return listOf(first.describe()) + lost.map { it.describe() } +
            listOfNotNull(if (rest > 0) "... and $rest more loops$rounds (the JSON has each)" else null)
    }
}

private const val OWN_LAT_ROW = " %-14s %-8s %-12s %-12s %-12s %-16s %-12s %-14s %-10s %s"
private const val TABLE_ROW = " %-5s %14s %14s %11s %15s %15s %14s %14s  %s"

private fun us(ns: Long): String = fixed(ns / 1000.0, 2)

private fun fixed(x: Double, decimals: Int): String = String.format(Locale.ROOT, "%.${decimals}f", x)
