package dev.rdmarun.scripts

import dev.rdmarun.scripts.ReportPairs.pairMatrices
import java.util.Locale
import kotlin.math.ceil
import kotlin.math.floor
import kotlin.math.log10
import kotlin.math.log2
import kotlin.math.pow

/**
 * The HTML page of `rdma-run report`: one self-contained file (inline CSS and SVG, no script,
 * nothing loaded from anywhere), well-formed XML so that any parser can check it. It has:
 * the latency percentile distribution of every run (HdrHistogram's, from each latency's
 * histogram; one way for `measureRoundTrip` sections) on a log latency axis, bandwidth over time
 * from the intervals, a sweep's message size (log2 axis: 2, 1K, 64K, 1M) against bandwidth and
 * latency (log-log), and a summary table that leads with each run's measured latency; rdma-run's
 * documents and perftest's `--out_json` files are overlaid in the same plots. One colour per run;
 * dashes and markers tell apart a run's sections and runs beyond the palette, in the legend too.
 * All-zero series and the passive side of RDMA WRITEs are left out, said in a line under the
 * plot. Each plot is an `<svg class="plot" id=...>` and each series a `<polyline data-series=...>`.
 * Every text from a document is escaped.
 */
object ReportPage {
    private val COLORS = listOf("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")

    // The styles that tell apart series of one colour: a run's sections, and runs beyond the palette. Dashes first, then markers.
    private val DASHES = listOf("", "7 4", "2 3", "9 3 2 3", "14 5", "4 2 1 2")
    private val MARKERS = listOf("", "circle", "square", "triangle", "diamond")

    /**
     * A named line of (x, y) points; [run] is the run it belongs to (its colour: a document, role
     * and label, or a perftest file). [pointsOnly]: a few figures, not a curve (perftest's
     * percentiles), drawn as markers on a dotted line.
     */
    private data class Series(val name: String, val run: String, val points: List<Pair<Double, Double>>, val pointsOnly: Boolean = false)

    /** A series the page leaves out of a plot, and why, said under the plot. */
    private data class Omitted(val name: String, val why: String)

    private enum class Scale { LINEAR, PERCENTILE, LOG10, LOG2_SIZE }

    /** perftest's test_info lines the table shows (the others are the same in most runs: ON/OFF switches). */
    private val PERFTEST_PARAMETERS = setOf("Number_of_qps", "Connection_type", "TX_depth", "CQ_Moderation", "Mtu", "Link_type", "Max_inline_data")

    private const val WRITE_TARGET = "the target of RDMA WRITEs: it moved no bytes itself and measured no latency"
    private const val ALL_ZERO = "all zero"

    fun render(inputs: List<ReportSource>): String = buildString {
        val documents = inputs.filterIsInstance<ReportInput>()
        val perftest = inputs.filterIsInstance<PerftestInput>()
        append("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
        append("<title>rdma-run report</title>\n<style>\n")
        append("body{font-family:sans-serif;margin:2em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:2em}")
        append("table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}")
        append("th{background:#f4f4f4}td.l,th.l{text-align:left}svg.plot{display:block;margin:.5em 0}.none,.omitted,.note{color:#777}")
        append(".omitted,.note{font-size:.85em;margin:.2em 0 1em}\n")
        append("</style>\n</head>\n<body>\n<h1>rdma-run report</h1>\n<p>")
        append(esc(inputs.joinToString(", ") { i ->
            when (i) {
                is ReportInput -> "${i.name}: ${i.document.start.role} on ${i.document.start.host}, ${i.document.start.timestamp}, rdma-run ${i.document.start.rdmaRun}" +
                    (i.document.error?.let { " (failed: ${it.message})" } ?: "")
                is PerftestInput -> "${i.name}: perftest ${i.test} on ${i.device}, ${i.size} bytes"
            }
        }))
        append("</p>\n")
        if (perftest.isNotEmpty()) {
            append("<p class=\"note\" id=\"perftest-note\">perftest's --out_json files hold no histogram: their latency shows as points at ")
            append("min, typical (median), 99 %, 99.9 % and max, and -D latency tests only in the table and the sweep (their average). ")
            append("A file holds one size (perftest rewrites it at each size of -a): files of one test and device make a sweep. ")
            append("Their bandwidth is read in MB/s or, where MsgRate x MsgSize says so, Gb/s (--report_gbits), and shown in MB/s.</p>\n")
        }

        append("<h2>Latency percentile distribution</h2>\n")
        val latencyOmitted = ArrayList<Omitted>()
        val latency = documents.flatMap { input ->
            // A document that sums its ranks overlays them, one curve per rank, instead of one per pair.
            val byRank = input.rankCurves.isNotEmpty()
            input.document.runs.zip(input.curves).filter { (run, _) -> !byRank || run.end.pair == null }
                .flatMap { (run, curves) -> latencySeries(runName(input, run), curves) } + rankSeries(input)
        }.filter { s -> keepNonZero(s, latencyOmitted) } + perftest.mapNotNull { p -> perftestPercentiles(p) }
        plot("latency", latency, latencyOmitted, "percentile", "latency [µs]", Scale.PERCENTILE, Scale.LOG10)
        if (documents.any { it.rankCurves.isNotEmpty() }) {
            append("<p class=\"note\" id=\"ranks-note\">A run of ranks draws one curve per rank: every sample of its pairs, ")
            append("their histograms merged; each pair's own is in the table of runs and the JSON.</p>\n")
        }

        append("<h2>Bandwidth over time</h2>\n")
        val timeOmitted = ArrayList<Omitted>()
        val overTime = documents.flatMap { input ->
            input.document.runs.filter { it.intervals.isNotEmpty() }.mapNotNull { run ->
                // A step per interval: its rate over its whole span (one interval still draws a line).
                val s = Series(runName(input, run), runName(input, run), run.intervals.flatMap { listOf(it.startSeconds to it.bwMBps, it.endSeconds to it.bwMBps) })
                if (writeTarget(run)) null.also { timeOmitted += Omitted(s.name, WRITE_TARGET) } else s
            }
        }.filter { s -> keepNonZero(s, timeOmitted) }
        // Linear: a rate over time is read against zero and its plateau, which a log axis flattens.
        plot("bandwidth-time", overTime, timeOmitted, "time [s]", "bandwidth [MB/s]", Scale.LINEAR, Scale.LINEAR)

        append("<h2>Message size sweep</h2>\n")
        val sweeps = documents.flatMap { input -> sweepRuns(input) }
        val bwOmitted = ArrayList<Omitted>()
        val sweepBandwidth = sweeps.mapNotNull { (name, runs) ->
            if (runs.all { writeTarget(it.second) }) null.also { bwOmitted += Omitted(name, WRITE_TARGET) }
            else Series(name, name, runs.map { (size, run) -> size.toDouble() to averageMBps(run) })
        } + perftestSweeps(perftest.filter { it.bandwidth != null }).map { (name, files) ->
            Series(name, name, files.map { it.size.toDouble() to it.bandwidth!!.averageMBps })
        }
        // Linear bandwidth against a log size: the plateau a sweep reaches is what one reads, and it is where a linear axis has room.
        plot("sweep-bandwidth", sweepBandwidth.filter { keepNonZero(it, bwOmitted) }, bwOmitted, "message size [bytes]", "bandwidth [MB/s]",
            Scale.LOG2_SIZE, Scale.LINEAR)
        val latOmitted = ArrayList<Omitted>()
        val sweepLatency = sweeps.mapNotNull { (name, runs) ->
            val points = runs.mapNotNull { (size, run) -> lead(run)?.let { size.toDouble() to it.typicalUs } }
            when {
                points.isNotEmpty() -> Series(name, name, points)
                runs.all { writeTarget(it.second) } -> null.also { latOmitted += Omitted(name, WRITE_TARGET) }
                else -> null.also { latOmitted += Omitted(name, "no latency on this side: the peer measured it") }
            }
        } + perftestSweeps(perftest.filter { it.latency != null }).map { (name, files) ->
            Series(name, name, files.map { it.size.toDouble() to (it.latency!!.typicalUs ?: it.latency.averageUs) })
        }
        plot("sweep-latency", sweepLatency.filter { keepNonZero(it, latOmitted) }, latOmitted, "message size [bytes]",
            "typical latency [µs] (each run's measured section)", Scale.LOG2_SIZE, Scale.LOG10)

        pairMatrices(documents)

        append("<h2>Runs</h2>\n<table>\n<tr><th class=\"l\">run</th><th class=\"l\">measured</th><th>latency typical [µs]</th><th>p99 [µs]</th>")
        append("<th>BW average [MB/s]</th><th>BW peak [MB/s]</th><th>MsgRate [Mpps]</th><th class=\"l\">device</th><th class=\"l\">parameters</th>")
        append("<th>seconds</th><th>bytes out</th><th>bytes in</th></tr>\n")
        for (input in inputs) when (input) {
            is ReportInput -> for (run in input.document.runs) {
                val t = run.end.total
                val l = lead(run)
                val measured = l?.label ?: "none on this side"
                row(runName(input, run), measured, l?.typicalUs?.let(::num) ?: "-", l?.p99Us?.let(::num) ?: "-", num(averageMBps(run)),
                    run.bwPeakBytesPerSecond?.let { num(it / (1 shl 20)) } ?: "-", num(t.mpps), run.end.device,
                    run.end.parameters.entries.joinToString(" ") { "${it.key}=${it.value}" }, num(run.end.durationNanos / 1e9),
                    t.bytesSent.toString(), t.bytesReceived.toString())
            }
            is PerftestInput -> {
                val l = input.latency
                val measured = when {
                    input.bandwidth != null -> "bandwidth (perftest)"
                    l?.typicalUs != null -> "t_typical" + (if (l.oneWay) ", one way" else "") + " (perftest)"
                    else -> "t_avg" + (if (l!!.oneWay) ", one way" else "") + " (perftest -D)"
                }
                val b = input.bandwidth
                row(perftestName(input), measured, l?.let { num(it.typicalUs ?: it.averageUs) } ?: "-", l?.p99Us?.let(::num) ?: "-",
                    b?.let { num(it.averageMBps) } ?: "-", b?.let { num(it.peakMBps) } ?: "-", b?.let { num(it.mpps) } ?: "-", input.device,
                    (listOf("MsgSize" to input.size.toString(), "n_iterations" to input.iterations.toString()) +
                        input.info.filter { it.first in PERFTEST_PARAMETERS }).joinToString(" ") { "${it.first}=${it.second}" },
                    "-", "-", "-")
            }
        }
        append("</table>\n<p class=\"note\" id=\"table-note\">measured: what each run's latency columns show, as the launcher's result ")
        append("block: the first section by name (one way: half the round trip of a measureRoundTrip section, as perftest reports a ")
        append("ping-pong); a bandwidth test's work requests; none on the side of a latency test that measured no section.</p>\n")
        append("</body>\n</html>\n")
    }

    /** A row of the summary table; every cell is escaped. */
    private fun StringBuilder.row(run: String, measured: String, typical: String, p99: String, vararg rest: String) {
        append("<tr data-run=\"").append(esc(run)).append("\"><td class=\"l\">").append(esc(run)).append("</td><td class=\"l measured\">")
        append(esc(measured)).append("</td><td class=\"typical\">").append(esc(typical)).append("</td><td class=\"p99\">").append(esc(p99)).append("</td>")
        rest.forEachIndexed { i, cell -> append(if (i == 3 || i == 4) "<td class=\"l\">" else "<td>").append(esc(cell)).append("</td>") }
        append("</tr>\n")
    }

    /** Keeps [s] unless every y is zero, which [omitted] then records. */
    private fun keepNonZero(s: Series, omitted: MutableList<Omitted>): Boolean =
        (s.points.isEmpty() || s.points.any { it.second != 0.0 }).also { if (!it) omitted += Omitted(s.name, ALL_ZERO) }

    /**
     * A side that moved no bytes itself and measured no latency: the target of RDMA WRITEs (or
     * READs), whose adapter moved the data without it. Its bandwidth is zeros, not a measurement.
     */
    private fun writeTarget(run: ResultsRun): Boolean =
        run.end.total.let { it.bytesSent == 0L && it.bytesReceived == 0L && it.latency == null } && run.end.sections.isEmpty()

    /** The latency a run leads with, µs: as the launcher's table shows it. */
    private class Lead(val label: String, val typicalUs: Double, val p99Us: Double)

    /**
     * The launcher's rule ([dev.rdmarun.dsl.ScenarioResult.perftestRow]): a latency test leads with
     * its first section by name, one way (half) for a `measureRoundTrip` one, and the side that
     * measured none has no latency; a bandwidth test has the work requests' latency.
     */
    private fun lead(run: ResultsRun): Lead? {
        val end = run.end
        end.leadingSection?.let { (name, l) ->
            val d = if (l.roundTrip) 2000.0 else 1000.0
            return Lead(if (l.roundTrip) "$name, one way" else name, l.p50Nanos / d, l.p99Nanos / d)
        }
        if (end.latencyTest) return null
        return end.total.latency?.let { Lead("bandwidth (latency: work requests)", it.p50Nanos / 1000.0, it.p99Nanos / 1000.0) }
    }

    /** A run's name in legends and the table; a pair of a run of ranks is named by its ranks, so that ranks overlay. */
    private fun runName(input: ReportInput, run: ResultsRun) =
        "${input.name} " + (run.end.pair?.let { "rank ${it.rank} with rank ${it.peerRank}" } ?: run.role) + (run.label?.let { " $it" } ?: "")

    private fun perftestName(p: PerftestInput) = "${p.name} ${p.test}"

    private fun averageMBps(run: ResultsRun): Double = run.end.bytesPerSecond / (1 shl 20)

    /** The runs of a sweep (labels `size=N`), per document and role, in size order; none when a document has fewer than two sizes. */
    private fun sweepRuns(input: ReportInput): List<Pair<String, List<Pair<Int, ResultsRun>>>> =
        input.document.runs.groupBy { it.role }.mapNotNull { (role, runs) ->
            val sized = runs.mapNotNull { run -> run.label?.removePrefix("size=")?.toIntOrNull()?.let { it to run } }.sortedBy { it.first }
            if (sized.size < 2) null else "${input.name} $role" to sized
        }

    /** perftest files of one test and device, in size order, when they hold two sizes or more: named "perftest TEST on DEVICE". */
    private fun perftestSweeps(files: List<PerftestInput>): List<Pair<String, List<PerftestInput>>> =
        files.groupBy { it.test to it.device }.mapNotNull { (key, group) ->
            if (group.map { it.size }.distinct().size < 2) null else "perftest ${key.first} on ${key.second}" to group.sortedBy { it.size }
        }

    /** The work-request latency and each section of a run, as (x = log10 of 1/(1-percentile), y = µs); [ResultsReader] decoded them. */
    private fun latencySeries(name: String, curves: List<LatencyCurve>): List<Series> = curves.map { c ->
        val divisor = if (c.roundTrip) 2000.0 else 1000.0
        Series("$name ${c.name}" + if (c.roundTrip) " (one way)" else "", name, c.points.map { (x, nanos) -> x to nanos / divisor })
    }

    /** Each rank's merged latencies of the document's runs of ranks ([ReportInput.rankCurves]), named `rank R`. */
    private fun rankSeries(input: ReportInput): List<Series> = input.document.ranks.zip(input.rankCurves).flatMap { (entry, byRank) ->
        byRank.toSortedMap().flatMap { (rank, curves) ->
            val name = "${input.name} rank $rank" + (entry.label?.let { " $it" } ?: "")
            latencySeries(name, curves)
        }
    }

    /** perftest's five figures on the percentile axis: min at 0 %, typical (median) at 50 %, 99 %, 99.9 %, max where the curves put theirs. */
    private fun perftestPercentiles(p: PerftestInput): Series? {
        val l = p.latency ?: return null
        val typical = l.typicalUs ?: return null // a -D test: its average only
        fun x(percentile: Double) = log10(1 / (1 - percentile))
        return Series(perftestName(p) + if (l.oneWay) " (one way)" else "", perftestName(p), listOf(0.0 to l.minUs!!, x(0.5) to typical,
            x(0.99) to l.p99Us!!, x(0.999) to l.p999Us!!, x(ResultsReader.MAX_PERCENTILE) to l.maxUs!!), pointsOnly = true)
    }

    private const val W = 760.0
    private const val H = 360.0
    private const val LEFT = 70.0
    private const val RIGHT = 50.0
    private const val TOP = 20.0
    private const val BOTTOM = 50.0

    /** The least room between two labels of a log2 size axis, px (a label such as "512K" takes about 25). */
    private const val LABEL_ROOM = 34.0

    /** One axis: its scale and range, where a value lies along it (0..1), and its ticks (value, label or null for an unlabelled one). */
    private class Axis(val scale: Scale, val lo: Double, val hi: Double) {
        private fun t(v: Double): Double = when (scale) {
            Scale.LOG10 -> log10(maxOf(v, lo)) // a zero (below any decade) sits on the axis
            Scale.LOG2_SIZE -> log2(maxOf(v, lo))
            else -> v
        }

        fun at(v: Double): Double = (t(v) - t(lo)) / (t(hi) - t(lo))

        fun ticks(length: Double): List<Pair<Double, String?>> = when (scale) {
            Scale.LINEAR -> (0..5).map { lo + (hi - lo) * it / 5 }.map { it to num(it) }
            Scale.PERCENTILE -> (0..5).map { it.toDouble() }.filter { it <= hi + 1e-9 }.map { it to percentileLabel(it) }
            Scale.LOG10 -> {
                // At most 40 decades of ticks: more is no latency (rdma-run's nanoseconds span 25 at most).
                val decades = Math.round(log10(hi / lo)).toInt().coerceIn(1, 40)
                // 1-2-5 labels while they fit (three decades or fewer); beyond, the decades only and the 2s and 5s as ticks.
                (0..decades).flatMap { d ->
                    val v = lo * 10.0.pow(d)
                    listOf(v to decimal(v)) + if (d == decades) emptyList() else listOf(2.0, 5.0).map { m -> v * m to (if (decades <= 3) decimal(v * m) else null) }
                }
            }
            Scale.LOG2_SIZE -> {
                val p0 = Math.round(log2(lo)).toInt()
                val p1 = Math.round(log2(hi)).toInt()
                val perPower = length / (p1 - p0)
                // A label every 1, 2, 4... powers, on multiples of the step, so that 1K, 64K and 1M are among them.
                val step = generateSequence(1) { it * 2 }.first { it * perPower >= LABEL_ROOM }
                (p0..p1).map { p -> 2.0.pow(p) to (if (p % step == 0) sizeLabel(2.0.pow(p)) else null) }
            }
        }

        companion object {
            fun of(scale: Scale, values: List<Double>, nice: Boolean): Axis = when (scale) {
                Scale.LINEAR -> if (nice) Axis(scale, 0.0, niceCeiling(values.max())) else {
                    val lo = minOf(values.min(), 0.0)
                    Axis(scale, lo, maxOf(values.max(), lo + 1e-9))
                }
                Scale.PERCENTILE -> Axis(scale, 0.0, maxOf(values.max(), 1e-9))
                Scale.LOG10 -> {
                    val positive = values.filter { it > 0 }
                    if (positive.isEmpty()) Axis(scale, 1.0, 10.0) else {
                        val lo = 10.0.pow(floor(log10(positive.min())))
                        val hi = 10.0.pow(ceil(log10(positive.max())))
                        Axis(scale, lo, if (hi > lo * 1.5) hi else lo * 10)
                    }
                }
                Scale.LOG2_SIZE -> {
                    val positive = values.filter { it > 0 }.ifEmpty { listOf(1.0) }
                    val lo = 2.0.pow(floor(log2(positive.min())))
                    val hi = 2.0.pow(ceil(log2(positive.max())))
                    Axis(scale, lo, if (hi > lo * 1.5) hi else lo * 2)
                }
            }
        }
    }

    private fun StringBuilder.plot(id: String, series: List<Series>, omitted: List<Omitted>, xLabel: String, yLabel: String, xScale: Scale, yScale: Scale) {
        val shown = series.filter { it.points.isNotEmpty() }
        if (shown.isEmpty()) {
            append("<p class=\"none\" id=\"").append(id).append("\">No data for this plot in these results.</p>\n")
            omittedLine(id, omitted)
            return
        }
        val xAxis = Axis.of(xScale, shown.flatMap { s -> s.points.map { it.first } }, nice = false)
        val yAxis = Axis.of(yScale, shown.flatMap { s -> s.points.map { it.second } }, nice = true)
        fun sx(x: Double) = LEFT + xAxis.at(x) * (W - LEFT - RIGHT)
        fun sy(y: Double) = H - BOTTOM - yAxis.at(y) * (H - TOP - BOTTOM)
        val bottom = H - BOTTOM
        val legend = 18.0 * shown.size + 6 // room under the last label for its descenders (an underscore)
        append("<svg class=\"plot\" id=\"").append(id).append("\" xmlns=\"http://www.w3.org/2000/svg\" width=\"").append(num(W))
        append("\" height=\"").append(num(H + legend)).append("\" viewBox=\"0 0 ").append(num(W)).append(' ').append(num(H + legend)).append("\">\n")
        append("<rect x=\"0\" y=\"0\" width=\"").append(num(W)).append("\" height=\"").append(num(H + legend)).append("\" fill=\"white\"/>\n")
        // Axes, ticks, labels, and a faint grid at the labelled ticks of log axes (where reading a value off needs one).
        append("<g stroke=\"#888\" stroke-width=\"1\" font-size=\"11\" fill=\"#444\">\n")
        append("<line x1=\"$LEFT\" y1=\"$bottom\" x2=\"${W - RIGHT}\" y2=\"$bottom\"/>\n<line x1=\"$LEFT\" y1=\"$TOP\" x2=\"$LEFT\" y2=\"$bottom\"/>\n")
        for ((y, label) in yAxis.ticks(H - TOP - BOTTOM)) {
            val py = num(sy(y))
            append("<line x1=\"${LEFT - (if (label == null) 2 else 4)}\" y1=\"$py\" x2=\"$LEFT\" y2=\"$py\"/>")
            if (label != null) {
                if (yScale == Scale.LOG10) append("<line stroke=\"#eee\" x1=\"${LEFT + 1}\" y1=\"$py\" x2=\"${W - RIGHT}\" y2=\"$py\"/>")
                append("<text class=\"ytick\" data-value=\"${y}\" stroke=\"none\" x=\"${LEFT - 6}\" y=\"${num(sy(y) + 4)}\" text-anchor=\"end\">${esc(label)}</text>")
            }
            append('\n')
        }
        for ((x, label) in xAxis.ticks(W - LEFT - RIGHT)) {
            val px = num(sx(x))
            append("<line x1=\"$px\" y1=\"$bottom\" x2=\"$px\" y2=\"${num(bottom + if (label == null) 2 else 4)}\"/>")
            if (label != null) {
                if (xScale == Scale.LOG2_SIZE) append("<line stroke=\"#eee\" x1=\"$px\" y1=\"$TOP\" x2=\"$px\" y2=\"${bottom - 1}\"/>")
                append("<text class=\"xtick\" data-value=\"${x}\" stroke=\"none\" x=\"$px\" y=\"${num(bottom + 16)}\" text-anchor=\"middle\">${esc(label)}</text>")
            }
            append('\n')
        }
        append("<text stroke=\"none\" x=\"${num((LEFT + W - RIGHT) / 2)}\" y=\"${num(H - 12)}\" text-anchor=\"middle\">${esc(xLabel)}</text>\n")
        append("<text stroke=\"none\" x=\"14\" y=\"${num((TOP + H - BOTTOM) / 2)}\" text-anchor=\"middle\" transform=\"rotate(-90 14 ${num((TOP + H - BOTTOM) / 2)})\">${esc(yLabel)}</text>\n")
        append("</g>\n")
        // One colour per run; the series of one run (its sections), and runs beyond the palette, take the next style.
        val runs = shown.map { it.run }.distinct()
        val perRun = shown.groupingBy { it.run }.eachCount().values.max()
        val seen = HashMap<String, Int>()
        shown.forEachIndexed { i, s ->
            val r = runs.indexOf(s.run)
            val within = seen.merge(s.run, 1, Int::plus)!! - 1
            val color = COLORS[r % COLORS.size]
            val style = (r / COLORS.size) * perRun + within
            val dash = if (s.pointsOnly) "1 3" else DASHES[style % DASHES.size]
            val marker = MARKERS[(style / DASHES.size) % MARKERS.size].ifEmpty { if (s.pointsOnly) "circle" else "" }
            val width = if (s.pointsOnly) "1.2" else "1.8"
            append("<polyline data-series=\"").append(esc(s.name)).append("\" fill=\"none\" stroke=\"").append(color).append("\" stroke-width=\"$width\"")
            if (dash.isNotEmpty()) append(" stroke-dasharray=\"").append(dash).append('"')
            if (marker.isNotEmpty()) append(" data-marker=\"").append(marker).append('"')
            append(" points=\"").append(s.points.joinToString(" ") { (x, y) -> "${num(sx(x))},${num(sy(y))}" }).append("\"/>\n")
            if (marker.isNotEmpty()) {
                // Every point of a few figures; along a curve, about eight, so the line stays readable.
                val every = if (s.pointsOnly) 1 else maxOf(1, s.points.size / 8)
                append("<g fill=\"").append(color).append("\">")
                s.points.filterIndexed { k, _ -> k % every == 0 }.forEach { (x, y) -> marker(marker, sx(x), sy(y)) }
                append("</g>\n")
            }
            val ly = H + 12 + 18.0 * i
            append("<g class=\"legend\" data-legend=\"").append(esc(s.name)).append("\">")
            append("<line x1=\"$LEFT\" y1=\"${num(ly)}\" x2=\"${LEFT + 30}\" y2=\"${num(ly)}\" stroke=\"").append(color).append("\" stroke-width=\"2.5\"")
            if (dash.isNotEmpty()) append(" stroke-dasharray=\"").append(dash).append('"')
            append("/>")
            if (marker.isNotEmpty()) append("<g fill=\"").append(color).append("\">").also { marker(marker, LEFT + 15, ly) }.append("</g>")
            append("<text x=\"${LEFT + 36}\" y=\"${num(ly + 4)}\" font-size=\"12\">").append(esc(s.name)).append("</text></g>\n")
        }
        append("</svg>\n")
        omittedLine(id, omitted)
    }

    /** One line under a plot naming the series left out of it and why, so that none goes missing unsaid. */
    private fun StringBuilder.omittedLine(id: String, omitted: List<Omitted>) {
        if (omitted.isEmpty()) return
        append("<p class=\"omitted\" id=\"").append(id).append("-omitted\">Left out: ")
        append(esc(omitted.groupBy({ it.why }, { it.name }).entries.joinToString("; ") { (why, names) -> "${names.joinToString(", ")} ($why)" }))
        append(".</p>\n")
    }

    private fun StringBuilder.marker(kind: String, x: Double, y: Double) {
        val r = 3.2
        when (kind) {
            "circle" -> append("<circle cx=\"${num(x)}\" cy=\"${num(y)}\" r=\"$r\"/>")
            "square" -> append("<rect x=\"${num(x - r)}\" y=\"${num(y - r)}\" width=\"${num(2 * r)}\" height=\"${num(2 * r)}\"/>")
            "triangle" -> append("<path d=\"M${num(x)},${num(y - r - 0.6)} L${num(x + r)},${num(y + r)} L${num(x - r)},${num(y + r)} Z\"/>")
            else -> append("<path d=\"M${num(x)},${num(y - r - 0.8)} L${num(x + r)},${num(y)} L${num(x)},${num(y + r + 0.8)} L${num(x - r)},${num(y)} Z\"/>")
        }
    }

    /** 0 → "0%", 1 → "90%", 2 → "99%", 3 → "99.9%", 4 → "99.99%"... */
    private fun percentileLabel(x: Double): String {
        val p = 100 * (1 - 10.0.pow(-x))
        return if (x < 0.5) "0%" else "${String.format(Locale.ROOT, "%.${(x - 2).toInt().coerceAtLeast(0)}f", p)}%"
    }

    /** A size in 1024-based units where it is a whole number of them: 2, 512, 1K, 64K, 1M, 4G. */
    fun sizeLabel(v: Double): String {
        val n = v.toLong()
        return when {
            n >= 1L shl 30 && n % (1L shl 30) == 0L -> "${n shr 30}G"
            n >= 1L shl 20 && n % (1L shl 20) == 0L -> "${n shr 20}M"
            n >= 1024 && n % 1024 == 0L -> "${n shr 10}K"
            else -> n.toString()
        }
    }

    /** A 1-2-5 tick's value as written: 0.05, 2, 1000. */
    private fun decimal(v: Double): String = java.math.BigDecimal(v).round(java.math.MathContext(3)).stripTrailingZeros().toPlainString()

    private fun niceCeiling(v: Double): Double {
        if (v <= 0) return 1.0
        val magnitude = 10.0.pow(floor(log10(v)))
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
