package dev.rdmarun.dsl

import java.util.Locale

/**
 * What [rdmaRanks] returns on each rank: this rank's pair results ([pairs], one per pair each
 * `forEachPeer` ran, in the order they ran) and, on rank 0, every rank's ([gathered]: rank 0's
 * own first, then rank 1's, and so on; each rank sends its own to rank 0 before the run's last
 * barrier, and rank 0 checks them before use). [gathered] is empty on the other ranks.
 */
public data class RanksResult(val rank: Int, val ranks: Int, val pairs: List<ScenarioResult>, val gathered: List<ScenarioResult>) {
    /**
     * The figures of [table] and of the launcher's JSON: on rank 0 every rank's (from [gathered]),
     * on another rank its own (from [pairs]).
     */
    public val summary: RanksSummary by lazy {
        if (gathered.isNotEmpty()) RanksSummary.of(ranks, gathered) else RanksSummary.of(ranks, pairs, listOf(rank))
    }

    /**
     * Rank 0's summary of [gathered] ([summary]): per rank its pairs, bytes out and in and its
     * bandwidth out and in (the sum of its pairs' rates: the pairs ran at once), the total, and the
     * pair matrix (the rate each row's rank sent to each column's). Rates in MB/sec (2^20 bytes)
     * or, with [gbits], Gb/sec; each pair's rate is its bytes over its own measured time. Empty on
     * the other ranks.
     */
    public fun table(gbits: Boolean = false): String {
        if (gathered.isEmpty()) return ""
        val unit = PerftestFormat.unit(gbits)
        val sent = RanksSummary.pairRates(gathered).mapValues { PerftestFormat.rate(it.value.sentBytesPerSecond, gbits) }
        fun row(label: String, t: RankTotal) = String.format(Locale.ROOT, NUMBERS, label, t.pairs, t.bytesSent, t.bytesReceived,
            PerftestFormat.rate(t.sentBytesPerSecond, gbits), PerftestFormat.rate(t.receivedBytesPerSecond, gbits))
        return buildString {
            appendLine("ranks: $ranks, ${gathered.size} pair result${if (gathered.size == 1) "" else "s"} gathered on rank 0")
            appendLine(String.format(Locale.ROOT, ROW, "rank", "pairs", "#bytes out", "#bytes in", "BW out[$unit]", "BW in[$unit]"))
            for (t in summary.perRank) appendLine(row(t.rank.toString(), t))
            appendLine(row("total", summary.total))
            appendLine("pair matrix: BW[$unit] sent by the row's rank to the column's")
            append("      ")
            for (c in 0 until ranks) append(String.format(Locale.ROOT, "%10d", c))
            appendLine()
            for (r in 0 until ranks) {
                append(String.format(Locale.ROOT, "%6d", r))
                for (c in 0 until ranks) append(sent[r to c]?.let { String.format(Locale.ROOT, "%10.2f", it) } ?: String.format(Locale.ROOT, "%10s", "-"))
                appendLine()
            }
        }.trimEnd()
    }

    private companion object {
        const val ROW = "%6s %6s %16s %16s %14s %14s"
        const val NUMBERS = "%6s %6d %16d %16d %14.2f %14.2f"
    }
}
