package dev.rdmarun.scripts

import dev.rdmarun.dsl.PairRate
import dev.rdmarun.dsl.PerftestFormat
import dev.rdmarun.dsl.RanksSummary
import dev.rdmarun.scripts.ReportPage.esc
import java.util.Locale

/**
 * The report's pair matrices: for each document of a run of ranks (runs with a `pair`), one
 * table per label (each size of a sweep) whose cell in row R, column P is the bandwidth rank R
 * sent to rank P (its bytes out over its measured time, MB/s of 2^20 bytes, as the launcher's
 * summary on rank 0), shaded by its share of the largest, with each rank's bandwidth out and in
 * (the sum of its pairs', which ran at once). Apart from [ReportPage] because it reads the
 * document by rank, not by run.
 */
internal object ReportPairs {
    /** Ranks a matrix draws at most (a row and a column each); more get a line that says so. */
    const val MAX_DRAWN = 64

    fun StringBuilder.pairMatrices(documents: List<ReportInput>) {
        val withPairs = documents.filter { d -> d.document.runs.any { it.end.pair != null } }
        if (withPairs.isEmpty()) return
        append("<h2>Pair matrix</h2>\n")
        withPairs.forEachIndexed { d, input ->
            input.document.runs.filter { it.end.pair != null }.groupBy { it.label }.entries.forEachIndexed { l, (label, runs) ->
                val results = runs.map { it.end }
                // The document's own summary of these runs (schema 2); a schema 1 document's is summed here, the same way.
                // Two rdmaRanks of one label (a script that runs two) have one matrix: their summaries are summed anew then.
                val summary = input.document.ranks.singleOrNull { it.label == label }?.summary
                    ?: RanksSummary.of(results.maxOf { it.pair!!.ranks }, results, results.map { it.pair!!.rank }.distinct().sorted())
                matrix("pairs-$d-$l", input.name + (label?.let { " $it" } ?: ""), RanksSummary.pairRates(results), summary)
            }
        }
        append("<p class=\"note\" id=\"pairs-note\">Each cell: MB/s (2^20 bytes) that the row's rank sent to the column's, ")
        append("its bytes out over its own measured time, as rank 0's summary; out and in: the sum of the rank's pairs, which ran at once. ")
        append("Ranks are the documents' own: rank 0's document holds every rank's pairs, another rank's only its own.</p>\n")
    }

    private fun StringBuilder.matrix(id: String, title: String, rates: Map<Pair<Int, Int>, PairRate>, summary: RanksSummary) {
        val ranks = (rates.keys.map { it.first } + rates.keys.map { it.second }).distinct().sorted()
        append("<h3>").append(esc(title)).append("</h3>\n")
        if (ranks.size > MAX_DRAWN) {
            append("<p class=\"omitted\" id=\"").append(id).append("\">").append(ranks.size)
            append(" ranks: the matrix is drawn for at most $MAX_DRAWN; the table of runs below has every pair.</p>\n")
            return
        }
        val perRank = summary.perRank.associateBy { it.rank }
        val largest = rates.values.maxOfOrNull { mbps(it.sentBytesPerSecond) }?.takeIf { it > 0 } ?: 1.0
        append("<table class=\"pairs\" id=\"").append(id).append("\">\n<tr><th>from \\ to</th>")
        for (p in ranks) append("<th>").append(p).append("</th>")
        append("<th>out [MB/s]</th><th>in [MB/s]</th></tr>\n")
        for (r in ranks) {
            append("<tr data-rank=\"").append(r).append("\"><th>").append(r).append("</th>")
            for (p in ranks) {
                val c = rates[r to p]
                if (c == null) {
                    append("<td class=\"none\">-</td>")
                    continue
                }
                val v = mbps(c.sentBytesPerSecond)
                val shade = String.format(Locale.ROOT, "%.2f", 0.08 + 0.6 * v / largest)
                append("<td data-from=\"").append(r).append("\" data-to=\"").append(p).append("\" style=\"background:rgba(31,119,180,")
                append(shade).append(")\">").append(num(v)).append("</td>")
            }
            // A rank that only received (it sent to no column) has no row of the summary on another rank's document.
            val mine = perRank[r]
            append("<td class=\"out\">").append(mine?.let { num(mbps(it.sentBytesPerSecond)) } ?: "-").append("</td><td class=\"in\">")
            append(mine?.let { num(mbps(it.receivedBytesPerSecond)) } ?: "-").append("</td></tr>\n")
        }
        append("</table>\n")
    }

    private fun mbps(bytesPerSecond: Double) = PerftestFormat.rate(bytesPerSecond, gbits = false)

    private fun num(x: Double): String = String.format(Locale.ROOT, "%.2f", x)
}
