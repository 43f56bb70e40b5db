package dev.rdmarun.scripts

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

    /** One pair's figures: what [rank] sent to and received from [peer], and over how long. */
    private class Cell(val rank: Int, val peer: Int, val bytesOut: Long, val bytesIn: Long, val nanos: Long) {
        fun mbps(bytes: Long) = if (nanos > 0) bytes * 1e9 / nanos / (1 shl 20) else 0.0
    }

    fun StringBuilder.pairMatrices(documents: List<ReportInput>) {
        val withPairs = documents.filter { d -> d.document.runs.any { it.end.pair != null } }
        if (withPairs.isEmpty()) return
        append("<h2>Pair matrix</h2>\n")
        withPairs.forEachIndexed { d, input ->
            input.document.runs.filter { it.end.pair != null }.groupBy { it.label }.entries.forEachIndexed { l, (label, runs) ->
                // A pair measured twice under one label (not rdma-run's own documents) adds up.
                val cells = runs.groupBy { it.end.pair!!.rank to it.end.pair!!.peerRank }.map { (k, rs) ->
                    Cell(k.first, k.second, rs.sumOf { it.end.total.bytesSent }, rs.sumOf { it.end.total.bytesReceived },
                        rs.sumOf { it.end.durationNanos })
                }
                matrix("pairs-$d-$l", input.name + (label?.let { " $it" } ?: ""), cells)
            }
        }
        append("<p class=\"note\" id=\"pairs-note\">Each cell: MB/s (2^20 bytes) that the row's rank sent to the column's, ")
        append("its bytes out over its own measured time, as rank 0's summary; out and in: the sum of the rank's pairs, which ran at once. ")
        append("Ranks are the documents' own: rank 0's document holds every rank's pairs, another rank's only its own.</p>\n")
    }

    private fun StringBuilder.matrix(id: String, title: String, cells: List<Cell>) {
        val ranks = (cells.map { it.rank } + cells.map { it.peer }).distinct().sorted()
        append("<h3>").append(esc(title)).append("</h3>\n")
        if (ranks.size > MAX_DRAWN) {
            append("<p class=\"omitted\" id=\"").append(id).append("\">").append(ranks.size)
            append(" ranks: the matrix is drawn for at most $MAX_DRAWN; the table of runs below has every pair.</p>\n")
            return
        }
        val at = cells.associateBy { it.rank to it.peer }
        val largest = cells.maxOfOrNull { it.mbps(it.bytesOut) }?.takeIf { it > 0 } ?: 1.0
        append("<table class=\"pairs\" id=\"").append(id).append("\">\n<tr><th>from \\ to</th>")
        for (p in ranks) append("<th>").append(p).append("</th>")
        append("<th>out [MB/s]</th><th>in [MB/s]</th></tr>\n")
        for (r in ranks) {
            append("<tr data-rank=\"").append(r).append("\"><th>").append(r).append("</th>")
            for (p in ranks) {
                val c = at[r to p]
                if (c == null) {
                    append("<td class=\"none\">-</td>")
                    continue
                }
                val v = c.mbps(c.bytesOut)
                val shade = String.format(Locale.ROOT, "%.2f", 0.08 + 0.6 * v / largest)
                append("<td data-from=\"").append(r).append("\" data-to=\"").append(p).append("\" style=\"background:rgba(31,119,180,")
                append(shade).append(")\">").append(num(v)).append("</td>")
            }
            val mine = cells.filter { it.rank == r }
            append("<td class=\"out\">").append(num(mine.sumOf { it.mbps(it.bytesOut) })).append("</td><td class=\"in\">")
            append(num(mine.sumOf { it.mbps(it.bytesIn) })).append("</td></tr>\n")
        }
        append("</table>\n")
    }

    private fun num(x: Double): String = String.format(Locale.ROOT, "%.2f", x)
}
