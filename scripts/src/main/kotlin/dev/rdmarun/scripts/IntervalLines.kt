package dev.rdmarun.scripts

import dev.rdmarun.dsl.LiveTotals
import java.util.Locale

/**
 * The `--interval` lines in iperf3's form (its `--bidir` one, whose `[Role]` column tells a
 * side's two directions apart): [HEADER], then rows such as
 * `[SUM][TX-C]   0.00-1.00   sec   412 MBytes  3.46 Gbits/sec`. The transfer is in 1024-based
 * units and the bitrate in bits per second with SI (1000-based) prefixes, both to three
 * significant digits as iperf3 prints them, so that what reads iperf3's interval lines reads
 * these; `--report_gbits` (perftest's unit) does not apply to them.
 */
internal object IperfFormat {
    const val HEADER = "[ ID][Role] Interval           Transfer     Bitrate"

    private val BYTES = listOf("Bytes", "KBytes", "MBytes", "GBytes", "TBytes")
    private val BITS = listOf("bits/sec", "Kbits/sec", "Mbits/sec", "Gbits/sec", "Tbits/sec")

    /** [bytes] as iperf3's Transfer column: `0.00 Bytes`, `1.50 KBytes`, `44.5 MBytes`, ` 412 MBytes`. */
    fun transfer(bytes: Long): String = scaled(bytes.toDouble(), 1024.0, BYTES)

    /** [bitsPerSecond] as iperf3's Bitrate column: `3.46 Gbits/sec`. */
    fun bitrate(bitsPerSecond: Double): String = scaled(bitsPerSecond, 1000.0, BITS)

    /**
     * One row of stream [id] (`SUM`, or a pair's number, `  1`): [direction] `TX` (sent) or `RX`
     * (received) of side [side] (`C` client, `S` server),
     * [bytes] moved in the [seconds] from [start] to [end] (the bitrate's time is [seconds], exact,
     * rather than the printed times rounded to 10 ms).
     */
    fun row(id: String, direction: String, side: String, start: Double, end: Double, bytes: Long, seconds: Double): String =
        String.format(Locale.ROOT, "[%s][%s-%s] %6.2f-%-6.2f sec  %s  %s", id, direction, side, start, end, transfer(bytes),
            bitrate(if (seconds > 0) bytes * 8 / seconds else 0.0))

    /** Below 1000 of a unit (1024 for bytes) the next is not used; then 2, 1 or 0 decimals keep three digits. */
    private fun scaled(value: Double, base: Double, units: List<String>): String {
        var v = value
        var unit = 0
        while (v >= base && unit < units.lastIndex) {
            v /= base
            unit++
        }
        // The bounds are where rounding adds a digit (9.995 prints as 10.00).
        val decimals = when {
            v < 9.995 -> 2
            v < 99.95 -> 1
            else -> 0
        }
        return String.format(Locale.ROOT, "%4.${decimals}f %s", v, units[unit])
    }
}

/** A line for [IntervalOutput]: an interval [row], which the header must precede, or a note. */
internal data class IntervalLine(val text: String, val row: Boolean)

/**
 * The rows of one side's intervals in one phase (a scenario, or what follows its warm-up): a row
 * per direction that has carried bytes so far (TX sent, RX received; without any bytes, TX for
 * completed work requests and RX for received messages), so a side that only writes prints no
 * RX column of zeros, while an idle interval of a direction that did move is still printed.
 *
 * While the side has moved nothing at all, the rows are held back, not dropped: the first
 * interval with traffic prints them all, in order. A side that never moves anything (the target
 * of RDMA WRITEs: its CPU sees no completions) thus prints no column of zeros, and the decision
 * waits for nothing but the first traffic; its run ends with [moved] false and a note instead.
 * [id] is the rows' stream: `SUM` for a side, a number for a pair of a run of ranks.
 */
internal class IntervalRows(private val id: String, server: Boolean) {
    private val side = if (server) "S" else "C"
    private var tx = false
    private var rx = false
    private val held = ArrayList<Pair<IntervalRecord, Double>>()

    /** Intervals printed so far. */
    var printed = 0
        private set

    /** Whether anything moved: from then on every interval is printed when it is taken. */
    val moved: Boolean get() = tx || rx

    /** Takes the next interval, which lasted [seconds] and ended at the phase's totals [total]; returns the rows to print now. */
    fun add(record: IntervalRecord, seconds: Double, total: LiveTotals): List<String> {
        held += record to seconds
        tx = tx || total.bytesSent > 0
        rx = rx || total.bytesReceived > 0
        if (!moved) {
            tx = total.operations > 0
            rx = total.messagesReceived > 0
        }
        if (!moved) return emptyList()
        val rows = held.flatMap { (r, s) ->
            listOfNotNull(
                if (tx) IperfFormat.row(id, "TX", side, r.startSeconds, r.endSeconds, r.bytesSent, s) else null,
                if (rx) IperfFormat.row(id, "RX", side, r.startSeconds, r.endSeconds, r.bytesReceived, s) else null,
            )
        }
        printed += held.size
        held.clear()
        return rows
    }
}

/**
 * Where a command's `--interval` lines go ([say]), shared by `--loopback`'s two sides: iperf3's
 * header before the first row, and again before the next row whenever other output came between
 * ([interrupted]: a results table, a sweep row), so that rows never sit under another header.
 */
internal class IntervalOutput(private val say: (String) -> Unit) {
    private var headerDue = true
    private val noted = HashSet<String>()

    fun print(lines: List<IntervalLine>) = synchronized(this) {
        for (line in lines) {
            if (line.row && headerDue) {
                say(IperfFormat.HEADER)
                headerDue = false
            }
            say(line.text)
        }
    }

    /** Prints [text] the first time [key] is given only (a note a `-a` sweep would repeat at every size). */
    fun once(key: String, text: String) = synchronized(this) {
        if (noted.add(key)) say(text)
    }

    /** Other output went where the rows go: the next row gets the header again. */
    fun interrupted() = synchronized(this) {
        headerDue = true
    }
}
