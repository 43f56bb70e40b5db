package dev.rdmarun.dsl

import java.util.Locale

/**
 * perftest's printed lines, character for character, so that what reads ib_send_lat's or
 * ib_write_bw's output reads rdma-run's: the dashed line, the banner's `key : value` lines, the
 * address and GID lines, and the result blocks (header and rows, tabs included). The layouts are
 * those of perftest 4.5 to 24.04 (the Soft-RoCE VM's `ib_send_lat`/`ib_write_bw`, whose logs are
 * `e2e/testdata/`): bandwidth in `MB/sec` (2^20 bytes per second; perftest 24.07 and later print the
 * same numbers under `MiB/sec`, two columns further right) or, with `--report_gbits`, `Gb/sec`.
 */
public object PerftestFormat {
    /** perftest's RESULT_LINE: it opens and closes the banner, the addresses and each result block. */
    public val RULE: String = "-".repeat(87)

    /** The header of the latency block (perftest's iterations mode), trailing space included. */
    public const val LATENCY_HEADER: String = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    " +
        "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "

    /** The header of the bandwidth block, in MB/sec or, with [gbits], Gb/sec. */
    public fun bandwidthHeader(gbits: Boolean): String {
        val unit = unit(gbits)
        return " #bytes     #iterations    BW peak[$unit]    BW average[$unit]   MsgRate[Mpps]"
    }

    /** `MB/sec` or `Gb/sec`: the one unit of a run's bandwidth figures. */
    public fun unit(gbits: Boolean): String = if (gbits) "Gb/sec" else "MB/sec"

    /** [bytesPerSecond] in [unit]: 2^20 bytes per second, or 10^9 bits. */
    public fun rate(bytesPerSecond: Double, gbits: Boolean): Double = if (gbits) bytesPerSecond * 8 / 1e9 else bytesPerSecond / (1 shl 20)

    /** One row of the latency block; the times in microseconds. */
    public fun latencyRow(bytes: Long, iterations: Long, min: Double, max: Double, typical: Double, average: Double,
                   stdev: Double, p99: Double, p999: Double): String =
        String.format(Locale.ROOT, " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f",
            bytes, iterations, min, max, typical, average, stdev, p99, p999)

    /**
     * One row of the bandwidth block, [peak] and [average] already in the run's unit. As perftest,
     * a Gb/sec average under 0.1 is printed with six decimals (its "extended accuracy" row).
     */
    public fun bandwidthRow(bytes: Long, iterations: Long, peak: Double, average: Double, msgRateMpps: Double, gbits: Boolean): String =
        if (gbits && average < 0.1) {
            String.format(Locale.ROOT, " %-7d    %d           %-7.6f            %-7.6f            %-7.6f", bytes, iterations, peak, average, msgRateMpps)
        } else {
            String.format(Locale.ROOT, " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f", bytes, iterations, peak, average, msgRateMpps)
        }

    /** The line that names the test: `Latency Test` or `BW Test` after [what] (perftest: the verb; rdma-run: the script). */
    public fun titleLine(what: String, latency: Boolean): String = " ".repeat(20) + "$what ${if (latency) "Latency" else "BW"} Test"

    /** A banner line with one `key : value` pair (the key padded to perftest's 16 columns). */
    public fun pair(key: String, value: Any): String = String.format(Locale.ROOT, " %-16s: %s", key, value)

    /** A banner line with two pairs, tab-separated as perftest prints them. */
    public fun pairs(key: String, value: Any, key2: String, value2: Any): String =
        String.format(Locale.ROOT, " %-16s: %s\t\t%-15s: %s", key, value, key2, value2)

    /**
     * A `local address:` or `remote address:` line: LID, QPN and PSN, then the data buffer's RKey
     * and VAddr (perftest prints those two for RDMA tests only; rdma-run, which cannot tell, always).
     */
    public fun address(side: String, lid: Int, qpn: Int, psn: Int, rkey: Long?, vaddr: Long?): String = buildString {
        append(" $side address: LID ${cHex(lid.toLong(), 4)} QPN ${cHex(qpn.toLong(), 6)} PSN ${cHex(psn.toLong(), 6)}")
        if (rkey != null && vaddr != null) append(" RKey ${cHex(rkey, 8)} VAddr ${cHex(vaddr, 16)}")
    }

    /** The GID line after an address line: each of the 16 bytes in decimal, two digits at least (perftest's form). */
    public fun gidLine(gid: String): String = " GID: " + (gidBytes(gid)?.joinToString(":") { String.format(Locale.ROOT, "%02d", it) } ?: gid)

    /** The 16 bytes of a GID written as eight colon-separated groups of hex digits (show_gids' form), or null. */
    public fun gidBytes(gid: String): List<Int>? {
        val groups = gid.split(':')
        if (groups.size != 8 || groups.any { it.isEmpty() || it.length > 4 }) return null
        return groups.flatMap { g -> g.toIntOrNull(16)?.let { listOf(it shr 8, it and 0xff) } ?: return null }
    }

    /**
     * C's `%#0<width>x`: zero-padded to [width] characters including the `0x` prefix, which C
     * leaves out for zero (LID 0 prints `0000`; Java's `%#x` would print `0x00`).
     */
    public fun cHex(value: Long, width: Int): String =
        if (value == 0L) "0".repeat(width) else "0x" + java.lang.Long.toHexString(value).padStart(width - 2, '0')

    /** [ScenarioResult.perftestBanner] of [r]: its connection, or without one only what is known. */
    internal fun banner(r: ScenarioResult, title: String?): String = buildString {
        val c = r.connection
        appendLine(PerftestFormat.RULE)
        appendLine(PerftestFormat.titleLine(title ?: "rdma-run", r.latencyTest))
        appendLine(PerftestFormat.pairs("Dual-port", "OFF", "Device", c?.device ?: r.device))
        appendLine(PerftestFormat.pairs("Number of qps", r.qps.size, "Transport type", "IB"))
        appendLine(PerftestFormat.pairs("Connection type", c?.transport ?: "RC", "Using SRQ", "OFF"))
        c?.sendDepth?.let { appendLine(PerftestFormat.pair("TX depth", it)) }
        c?.signalEvery?.let { appendLine(PerftestFormat.pair("CQ Moderation", it)) }
        if (c != null) {
            appendLine(PerftestFormat.pair("Mtu", "${c.mtu}[B]"))
            appendLine(PerftestFormat.pair("Link type", if (c.linkLayer == "Ethernet") "Ethernet" else "IB"))
            appendLine(PerftestFormat.pair("GID index", c.gidIndex))
        }
        c?.inlineThreshold?.let { appendLine(PerftestFormat.pair("Max inline data", "$it[B]")) }
        appendLine(" rdma_cm QPs\t : OFF")
        appendLine(PerftestFormat.pair("Data ex. method", "Ethernet"))
        append(PerftestFormat.RULE)
        if (c != null && c.qps.isNotEmpty()) {
            appendLine()
            for (q in c.qps) {
                appendLine(PerftestFormat.address("local", q.localLid, q.localQpn, q.localPsn, q.localRkey, q.localAddress))
                appendLine(PerftestFormat.gidLine(c.gid))
            }
            for (q in c.qps) {
                appendLine(PerftestFormat.address("remote", q.remoteLid, q.remoteQpn, q.remotePsn, q.remoteRkey, q.remoteAddress))
                appendLine(PerftestFormat.gidLine(q.remoteGid))
            }
            append(PerftestFormat.RULE)
        }
    }
}
