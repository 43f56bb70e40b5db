package dev.rdmarun.scripts

import java.util.Locale
import kotlin.math.log10
import kotlin.math.log2
import kotlin.math.pow

/**
 * The HTML page of `rdma-run report`: one self-contained file (inline CSS and SVG, no script,
 * nothing loaded from anywhere), well-formed XML so that any parser can check it. It has:
 * the latency percentile distribution of every run (HdrHistogram's, from each latency's
 * histogram; one way for `measureRoundTrip` sections), bandwidth over time from the intervals,
 * a sweep's message size against bandwidth and latency, and a summary table; several documents
 * are overlaid in the same plots. Each plot is an `<svg class="plot" id=...>` and each series a
 * `<polyline data-series=...>`. Every text from a document is escaped.
 */
object ReportPage {
    private val COLORS = listOf("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")

    /** A named line of (x, y) points. */
    private data class Series(val name: String, val points: List<Pair<Double, Double>>)

    fun render(inputs: List<ReportInput>): String = buildString {
        append("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
        append("<title>rdma-run report</title>\n<style>\n")
        append("body{font-family:sans-serif;margin:2em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:2em}")
        append("table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}")
        append("th{background:#f4f4f4}td.l,th.l{text-align:left}svg.plot{display:block;margin:.5em 0}.none{color:#777}\n")
        append("</style>\n</head>\n<body>\n<h1>rdma-run report</h1>\n<p>")
        append(esc(inputs.joinToString(", ") { i ->
            "${i.name}: ${i.document.start.role} on ${i.document.start.host}, ${i.document.start.timestamp}, rdma-run ${i.document.start.rdmaRun}" +
                (i.document.error?.let { " (failed: ${it.message})" } ?: "")
        }))
        append("</p>\n")

        append("<h2>Latency percentile distribution</h2>\n")
        val latency = inputs.flatMap { input -> input.document.runs.zip(input.curves).flatMap { (run, curves) -> latencySeries(input, run, curves) } }
        plot("latency", latency, "percentile", "latency [µs]", percentileAxis = true)

        append("<h2>Bandwidth over time</h2>\n")
        val overTime = inputs.flatMap { input ->
            input.document.runs.filter { it.intervals.isNotEmpty() }.map { run ->
                // A step per interval: its rate over its whole span (one interval still draws a line).
                Series(runName(input, run), run.intervals.flatMap { listOf(it.startSeconds to it.bwMBps, it.endSeconds to it.bwMBps) })
            }
        }
        plot("bandwidth-time", overTime, "time [s]", "bandwidth [MB/s]")

        append("<h2>Message size sweep</h2>\n")
        val sweeps = inputs.flatMap { input -> sweepRuns(input) }
        plot("sweep-bandwidth", sweeps.map { (name, runs) -> Series(name, runs.map { (size, run) -> log2(size.toDouble()) to averageMBps(run) }) },
            "message size [log2 bytes]", "bandwidth [MB/s]")
        plot("sweep-latency", sweeps.mapNotNull { (name, runs) ->
            val points = runs.mapNotNull { (size, run) -> run.end.total.latency?.let { log2(size.toDouble()) to it.p50Nanos / 1000.0 } }
            if (points.isEmpty()) null else Series(name, points)
        }, "message size [log2 bytes]", "typical latency [µs]")

        append("<h2>Runs</h2>\n<table>\n<tr><th class=\"l\">run</th><th class=\"l\">device</th><th class=\"l\">parameters</th><th>seconds</th>")
        append("<th>bytes out</th><th>bytes in</th><th>BW average [MB/s]</th><th>BW peak [MB/s]</th><th>MsgRate [Mpps]</th><th>latency typical [µs]</th><th>p99 [µs]</th></tr>\n")
        for (input in inputs) for (run in input.document.runs) {
            val t = run.end.total
            append("<tr><td class=\"l\">").append(esc(runName(input, run))).append("</td><td class=\"l\">").append(esc(run.end.device))
            append("</td><td class=\"l\">").append(esc(run.end.parameters.entries.joinToString(" ") { "${it.key}=${it.value}" }))
            append("</td><td>").append(num(run.end.durationNanos / 1e9)).append("</td><td>").append(t.bytesSent).append("</td><td>").append(t.bytesReceived)
            append("</td><td>").append(num(averageMBps(run))).append("</td><td>").append(run.bwPeakBytesPerSecond?.let { num(it / (1 shl 20)) } ?: "-")
            append("</td><td>").append(num(t.mpps)).append("</td><td>").append(t.latency?.let { num(it.p50Nanos / 1000.0) } ?: "-")
            append("</td><td>").append(t.latency?.let { num(it.p99Nanos / 1000.0) } ?: "-").append("</td></tr>\n")
        }
        append("</table>\n</body>\n</html>\n")
    }

    private fun runName(input: ReportInput, run: ResultsRun) = "${input.name} ${run.role}" + (run.label?.let { " $it" } ?: "")

    private fun averageMBps(run: ResultsRun): Double = run.end.bytesPerSecond / (1 shl 20)

    /** The runs of a sweep (labels `size=N`), per document and role, in size order; none when a document has fewer than two sizes. */
    private fun sweepRuns(input: ReportInput): List<Pair<String, List<Pair<Int, ResultsRun>>>> =
        input.document.runs.groupBy { it.role }.mapNotNull { (role, runs) ->
            val sized = runs.mapNotNull { run -> run.label?.removePrefix("size=")?.toIntOrNull()?.let { it to run } }.sortedBy { it.first }
            if (sized.size < 2) null else "${input.name} $role" to sized
        }

    /** The work-request latency and each section of a run, as (x = log10 of 1/(1-percentile), y = µs); [ResultsReader] decoded them. */
    private fun latencySeries(input: ReportInput, run: ResultsRun, curves: List<LatencyCurve>): List<Series> = curves.map { c ->
        val divisor = if (c.roundTrip) 2000.0 else 1000.0
        Series(runName(input, run) + " " + c.name + if (c.roundTrip) " (one way)" else "", c.points.map { (x, nanos) -> x to nanos / divisor })
    }

    private const val W = 760.0
    private const val H = 360.0
    private const val LEFT = 70.0
    private const val RIGHT = 50.0
    private const val TOP = 20.0
    private const val BOTTOM = 50.0

    private fun StringBuilder.plot(id: String, series: List<Series>, xLabel: String, yLabel: String, percentileAxis: Boolean = false) {
        val shown = series.filter { it.points.isNotEmpty() }
        if (shown.isEmpty()) {
            append("<p class=\"none\" id=\"").append(id).append("\">No data for this plot in these results.</p>\n")
            return
        }
        val xs = shown.flatMap { s -> s.points.map { it.first } }
        val ys = shown.flatMap { s -> s.points.map { it.second } }
        val x0 = if (percentileAxis) 0.0 else minOf(xs.min(), 0.0)
        val x1 = maxOf(xs.max(), x0 + 1e-9)
        val y1 = niceCeiling(ys.max())
        fun sx(x: Double) = LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT)
        fun sy(y: Double) = H - BOTTOM - y / y1 * (H - TOP - BOTTOM)
        val legend = 18.0 * shown.size
        append("<svg class=\"plot\" id=\"").append(id).append("\" xmlns=\"http://www.w3.org/2000/svg\" width=\"").append(num(W))
        append("\" height=\"").append(num(H + legend)).append("\" viewBox=\"0 0 ").append(num(W)).append(' ').append(num(H + legend)).append("\">\n")
        append("<rect x=\"0\" y=\"0\" width=\"").append(num(W)).append("\" height=\"").append(num(H + legend)).append("\" fill=\"white\"/>\n")
        // Axes, ticks and labels.
        append("<g stroke=\"#888\" stroke-width=\"1\" font-size=\"11\" fill=\"#444\">\n")
        append("<line x1=\"$LEFT\" y1=\"${sy(0.0)}\" x2=\"${W - RIGHT}\" y2=\"${sy(0.0)}\"/>\n<line x1=\"$LEFT\" y1=\"$TOP\" x2=\"$LEFT\" y2=\"${sy(0.0)}\"/>\n")
        for (i in 0..5) {
            val y = y1 * i / 5
            append("<line x1=\"${LEFT - 4}\" y1=\"${num(sy(y))}\" x2=\"$LEFT\" y2=\"${num(sy(y))}\"/>")
            append("<text stroke=\"none\" x=\"${LEFT - 6}\" y=\"${num(sy(y) + 4)}\" text-anchor=\"end\">${num(y)}</text>\n")
        }
        val xTicks = if (percentileAxis) (0..5).map { it.toDouble() } else (0..5).map { x0 + (x1 - x0) * it / 5 }
        for (x in xTicks.filter { it <= x1 + 1e-9 }) {
            val label = if (percentileAxis) percentileLabel(x) else num(x)
            append("<line x1=\"${num(sx(x))}\" y1=\"${num(sy(0.0))}\" x2=\"${num(sx(x))}\" y2=\"${num(sy(0.0) + 4)}\"/>")
            append("<text stroke=\"none\" x=\"${num(sx(x))}\" y=\"${num(sy(0.0) + 16)}\" text-anchor=\"middle\">${esc(label)}</text>\n")
        }
        append("<text stroke=\"none\" x=\"${num((LEFT + W - RIGHT) / 2)}\" y=\"${num(H - 12)}\" text-anchor=\"middle\">${esc(xLabel)}</text>\n")
        append("<text stroke=\"none\" x=\"14\" y=\"${num((TOP + H - BOTTOM) / 2)}\" text-anchor=\"middle\" transform=\"rotate(-90 14 ${num((TOP + H - BOTTOM) / 2)})\">${esc(yLabel)}</text>\n")
        append("</g>\n")
        shown.forEachIndexed { i, s ->
            val color = COLORS[i % COLORS.size]
            append("<polyline data-series=\"").append(esc(s.name)).append("\" fill=\"none\" stroke=\"").append(color).append("\" stroke-width=\"1.8\" points=\"")
            append(s.points.joinToString(" ") { (x, y) -> "${num(sx(x))},${num(sy(y))}" }).append("\"/>\n")
            val ly = H + 12 + 18.0 * i
            append("<line x1=\"$LEFT\" y1=\"${num(ly)}\" x2=\"${LEFT + 24}\" y2=\"${num(ly)}\" stroke=\"").append(color).append("\" stroke-width=\"3\"/>")
            append("<text x=\"${LEFT + 30}\" y=\"${num(ly + 4)}\" font-size=\"12\">").append(esc(s.name)).append("</text>\n")
        }
        append("</svg>\n")
    }

    /** 0 → "0%", 1 → "90%", 2 → "99%", 3 → "99.9%", 4 → "99.99%"... */
    private fun percentileLabel(x: Double): String {
        val p = 100 * (1 - 10.0.pow(-x))
        return if (x < 0.5) "0%" else "${String.format(Locale.ROOT, "%.${(x - 2).toInt().coerceAtLeast(0)}f", p)}%"
    }

    private fun niceCeiling(v: Double): Double {
        if (v <= 0) return 1.0
        val magnitude = 10.0.pow(kotlin.math.floor(log10(v)))
        val n = v / magnitude
        return magnitude * listOf(1.0, 2.0, 2.5, 5.0, 10.0).first { it >= n - 1e-12 }
    }

    private fun num(x: Double): String = String.format(Locale.ROOT, "%.2f", x).removeSuffix(".00")

    /** XML text and attribute escaping (documents carry what scripts and peers wrote). */
    fun esc(text: String): String = buildString(text.length) {
        for (c in text) when {
            c == '&' -> append("&amp;")
            c == '<' -> append("&lt;")
            c == '>' -> append("&gt;")
            c == '"' -> append("&quot;")
            c == '\'' -> append("&#39;")
            c < ' ' && c != '\n' && c != '\t' -> append('\uFFFD') // not allowed in XML 1.0
            else -> append(c)
        }
    }
}
