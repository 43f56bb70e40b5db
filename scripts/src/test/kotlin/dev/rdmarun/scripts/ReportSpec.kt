package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.CliktCommandTestResult
import com.github.ajalt.clikt.testing.test
import io.kotest.assertions.fail
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContain
import io.kotest.matchers.collections.shouldContainAll
import io.kotest.matchers.collections.shouldNotContain
import io.kotest.matchers.doubles.plusOrMinus
import io.kotest.matchers.shouldNotBe
import io.kotest.matchers.ints.shouldBeGreaterThanOrEqual
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import java.awt.Color
import java.awt.image.BufferedImage
import java.io.ByteArrayInputStream
import java.io.File
import java.nio.file.Files
import java.util.Locale
import javax.imageio.ImageIO
import javax.xml.parsers.DocumentBuilderFactory
import kotlin.math.abs
import kotlin.math.ceil
import kotlin.math.floor
import kotlin.math.ln
import kotlin.math.log10
import kotlin.math.max
import kotlin.math.min
import kotlin.math.pow
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.double
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import org.w3c.dom.Element

/**
 * `rdma-run report`: from documents that real runs on soft0 wrote, and perftest's `--out_json` files
 * (fixtures written by hand from perftest's source: src/test/resources/.../perftest/README.md), one
 * self-contained page whose plots have their series; parsed as XML, so a page that is not
 * well-formed fails here.
 */
class ReportSpec : FunSpec({
    val dir = Files.createTempDirectory("report-spec").toFile()
    val cache = File(dir, "cache")
    afterSpec { dir.deleteRecursively() }

    fun run(vararg args: String): CliktCommandTestResult = rdmaRun(cache).test(withImplicitRun(arrayOf(*args)).toList())
    fun script(name: String, text: String) = File(dir, name).apply { writeText(text) }

    val pingpong = script("pp.main.kts", """
        import dev.rdmarun.dsl.*

        rdma {
            connect(peer)
            forEachQp {
                client { repeat { measureRoundTrip("rtt") { send(); receive() } } }
                server { repeat { receive(); send() } }
            }
        }
    """.trimIndent())

    // The client writes for the given seconds; the server only grants the access.
    val writes = script("writes.main.kts", """
        import dev.rdmarun.dsl.*

        rdma {
            if (isServer) remoteAccess(RemoteAccess.WRITE)
            connect(peer)
            client { forEachQp { repeat { write(); awaitCompletion() } } }
        }
    """.trimIndent())

    /** The page's plots by id, each with its series names. */
    /** The report of [document] (as NAME.json), which carries a <script>: the page has it as text, never as markup. */
    fun reportEscaping(name: String, document: String): File {
        val hostile = File(dir, "$name.json").apply { writeText(document) }
        val page = File(dir, "$name.html")
        run("report", hostile.path, "-o", page.path).statusCode shouldBe 0
        page.readText().let {
            it shouldNotContain "<script>alert"
            it shouldContain "&lt;script&gt;alert(1)&lt;/script&gt;"
        }
        return page
    }

    fun plots(page: File): Map<String, List<String>> {
        val doc = DocumentBuilderFactory.newInstance().apply { isNamespaceAware = true }.newDocumentBuilder().parse(page)
        val svgs = doc.getElementsByTagNameNS("http://www.w3.org/2000/svg", "svg")
        return (0 until svgs.length).associate { i ->
            val svg = svgs.item(i) as Element
            val lines = svg.getElementsByTagNameNS("http://www.w3.org/2000/svg", "polyline")
            svg.getAttribute("id") to (0 until lines.length).map { (lines.item(it) as Element).getAttribute("data-series") }
        }
    }

    /** A perftest `--out_json` fixture (written by hand from perftest's source, see perftest/README.md), copied into [dir]. */
    fun perftest(name: String): File = File(dir, name).apply {
        writeText(ReportSpec::class.java.getResource("perftest/$name")!!.readText())
    }

    /** The page's elements of [tag] (XHTML or SVG), parsed as XML. */
    fun elements(page: File, tag: String): List<Element> {
        val doc = DocumentBuilderFactory.newInstance().apply { isNamespaceAware = true }.newDocumentBuilder().parse(page)
        return listOf("http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml").flatMap { ns ->
            val list = doc.getElementsByTagNameNS(ns, tag)
            (0 until list.length).map { list.item(it) as Element }
        }
    }

    /** Within the svg of plot [id], the [kind] ("xtick" or "ytick") labels: value, label, position along the axis. */
    fun ticks(page: File, id: String, kind: String): List<Triple<Double, String, Double>> =
        elements(page, "svg").single { it.getAttribute("id") == id }.getElementsByTagNameNS("http://www.w3.org/2000/svg", "text").let { texts ->
            (0 until texts.length).map { texts.item(it) as Element }.filter { it.getAttribute("class") == kind }.map {
                Triple(it.getAttribute("data-value").toDouble(), it.textContent, it.getAttribute(if (kind == "xtick") "x" else "y").toDouble())
            }
        }

    val timed by lazy {
        File(dir, "timed.json").also {
            run(writes.path, "--loopback", "-d", "soft0", "-D", "1", "--interval", "0.2", "-s", "64", "--json", it.path).statusCode shouldBe 0
        }
    }

    /**
     * Two documents from real runs, a timed one with intervals and a sweep, perftest's files of a bandwidth test and a latency
     * test at two sizes each, and `report`'s page of them all; made once for the cases that read it.
     */
    val overlaid by lazy {
        val sweep = File(dir, "sweep.json")
        run(pingpong.path, "--loopback", "-d", "soft0", "-a", "-n", "3", "--json", sweep.path).statusCode shouldBe 0
        val page = File(dir, "report.html")
        val perftestFiles = listOf("write_bw_4096.json", "write_bw_65536_gbits.json", "send_lat_2.json", "send_lat_4096.json").map { perftest(it).path }
        page to run("report", timed.path, sweep.path, *perftestFiles.toTypedArray(), "-o", page.path)
    }

    test("latency percentiles, bandwidth over time and a sweep, with their series; two documents overlaid") {
        val (page, result) = overlaid
        result.statusCode shouldBe 0
        result.stdout shouldContain "wrote ${page.path} (52 runs from 6 files)" // 2 + 23 sizes x 2 sides + 4 perftest files
        val plots = plots(page)
        plots.keys shouldContainAll listOf("latency", "bandwidth-time", "sweep-bandwidth", "sweep-latency")
        plots.getValue("latency") shouldContainAll listOf("timed.json client work requests", "sweep.json client size=64 rtt (one way)")
        plots.getValue("bandwidth-time") shouldContainAll listOf("timed.json client")
        plots.getValue("sweep-bandwidth") shouldContainAll listOf("sweep.json client", "sweep.json server")
        plots.getValue("sweep-latency").size shouldBeGreaterThanOrEqual 1
        val html = page.readText()
        html shouldNotContain "src=\"http" // nothing loaded from the network
        html shouldNotContain "href=\"http"
        html shouldNotContain "<script"
        html shouldContain "<table>"
    }

    test("latency on a log axis (1-2-5 labels), sweep sizes on a log2 axis labelled 2, 1K, 64K, 1M, the sweep latency log-log") {
        val (page, _) = overlaid
        ReportPage.sizeLabel(2.0) shouldBe "2"
        ReportPage.sizeLabel(1024.0) shouldBe "1K"
        ReportPage.sizeLabel(65536.0) shouldBe "64K"
        ReportPage.sizeLabel((1 shl 20).toDouble()) shouldBe "1M"
        /** Each label sits at its value's logarithm: equal ratios, equal distances; and the labels are 1-2-5 x a power of ten. */
        fun logarithmic(ticks: List<Triple<Double, String, Double>>, base: Double) {
            ticks.size shouldBeGreaterThanOrEqual 3
            val (a, b) = ticks.first() to ticks.last()
            val perUnit = (b.third - a.third) / (ln(b.first / a.first) / ln(base))
            for (t in ticks) withClue(t) { t.third shouldBe (a.third + perUnit * ln(t.first / a.first) / ln(base) plusOrMinus 0.02) }
        }
        for (id in listOf("latency", "sweep-latency")) withClue(id) {
            val y = ticks(page, id, "ytick")
            logarithmic(y, 10.0)
            for ((v, label, _) in y) withClue(label) {
                (v / 10.0.pow(floor(log10(v) + 1e-9))).let { m -> listOf(1.0, 2.0, 5.0).any { abs(it - m) < 1e-6 } } shouldBe true
                label.toDouble() shouldBe (v plusOrMinus v * 1e-6)
            }
        }
        for (id in listOf("sweep-bandwidth", "sweep-latency")) withClue(id) {
            val x = ticks(page, id, "xtick")
            logarithmic(x, 2.0)
            x.map { it.second } shouldContainAll listOf("1K", "64K", "1M")
            for ((v, label, _) in x) withClue(label) { label shouldBe ReportPage.sizeLabel(v) }
        }
    }

    test("one colour per run; the sections of a run, and runs beyond the palette, told apart by dashes and markers the legend shows") {
        val (page, _) = overlaid
        for (svg in elements(page, "svg").filter { it.getAttribute("class") == "plot" }) withClue(svg.getAttribute("id")) {
            val lines = svg.getElementsByTagNameNS("http://www.w3.org/2000/svg", "polyline").let { l -> (0 until l.length).map { l.item(it) as Element } }
            fun Element.style() = Triple(getAttribute("stroke"), getAttribute("stroke-dasharray"), getAttribute("data-marker"))
            val styles = lines.associate { it.getAttribute("data-series") to it.style() }
            styles.values.toSet().size shouldBe lines.size // each series its own look
            val legends = svg.getElementsByTagNameNS("http://www.w3.org/2000/svg", "g").let { g -> (0 until g.length).map { g.item(it) as Element } }
                .filter { it.getAttribute("class") == "legend" }
            legends.size shouldBe lines.size
            for (legend in legends) {
                val sample = legend.getElementsByTagNameNS("http://www.w3.org/2000/svg", "line").item(0) as Element
                val (stroke, dash, marker) = styles.getValue(legend.getAttribute("data-legend"))
                sample.getAttribute("stroke") shouldBe stroke
                sample.getAttribute("stroke-dasharray") shouldBe dash
                if (marker.isNotEmpty()) legend.getElementsByTagNameNS("http://www.w3.org/2000/svg", "g").length shouldBe 1
            }
        }
        val latency = elements(page, "polyline").associate { it.getAttribute("data-series") to it.getAttribute("stroke") }
        latency.getValue("sweep.json client size=64 rtt (one way)") shouldBe latency.getValue("sweep.json client size=64 work requests")
        latency.getValue("sweep.json client size=64 rtt (one way)") shouldNotBe latency.getValue("sweep.json server size=64 work requests")
    }

    test("all-zero series and the target of RDMA WRITEs are left out, and the page says which and why") {
        val (page, _) = overlaid
        plots(page).getValue("bandwidth-time") shouldNotContain "timed.json server"
        elements(page, "p").single { it.getAttribute("id") == "bandwidth-time-omitted" }.textContent shouldBe
            "Left out: timed.json server (the target of RDMA WRITEs: it moved no bytes itself and measured no latency)."
        val zero = File(dir, "zero.json").apply { writeText(timed.readText().replace(Regex("\"bwMBps\": [0-9.eE+-]+"), "\"bwMBps\": 0.0")) }
        val zeroPage = File(dir, "zero.html")
        run("report", zero.path, "-o", zeroPage.path).statusCode shouldBe 0
        plots(zeroPage).keys shouldNotContain "bandwidth-time"
        elements(zeroPage, "p").single { it.getAttribute("id") == "bandwidth-time-omitted" }.textContent shouldBe
            "Left out: zero.json server (the target of RDMA WRITEs: it moved no bytes itself and measured no latency); zero.json client (all zero)."
    }

    test("the summary table leads with each run's measured section: a ping-pong's round trip one way, not the work requests") {
        val (page, _) = overlaid
        val sweep = ResultsDocument.parse(File(dir, "sweep.json").readText())
        val run = sweep.runs.single { it.role == "client" && it.label == "size=64" }
        fun num(x: Double) = String.format(Locale.ROOT, "%.2f", x).removeSuffix(".00")
        fun cell(row: Element, cls: String) = row.getElementsByTagNameNS("http://www.w3.org/1999/xhtml", "td").let { tds ->
            (0 until tds.length).map { tds.item(it) as Element }.single { cls in it.getAttribute("class").split(' ') }.textContent
        }
        val rows = elements(page, "tr").associateBy { it.getAttribute("data-run") }
        val client = rows.getValue("sweep.json client size=64")
        val rtt = run.end.sections.getValue("rtt")
        cell(client, "measured") shouldBe "rtt, one way"
        cell(client, "typical") shouldBe num(rtt.p50Nanos / 2000.0)
        cell(client, "p99") shouldBe num(rtt.p99Nanos / 2000.0)
        // The launcher's table: the side that measured no section shows none.
        cell(rows.getValue("sweep.json server size=64"), "typical") shouldBe "-"
        cell(rows.getValue("sweep.json server size=64"), "measured") shouldBe "none on this side"
        val bw = rows.getValue("timed.json client")
        cell(bw, "measured") shouldBe "bandwidth (latency: work requests)"
    }

    test("perftest's --out_json files are read beside rdma-run's and overlaid: sweeps by size, latency percentiles as points, the table") {
        val (page, _) = overlaid
        val plots = plots(page)
        plots.getValue("sweep-bandwidth") shouldContain "perftest RDMA_Write_BW_Test on mlx5_0"
        plots.getValue("sweep-latency") shouldContain "perftest Send_Latency_Test on mlx5_0"
        plots.getValue("latency") shouldContainAll listOf("send_lat_2.json Send_Latency_Test (one way)", "send_lat_4096.json Send_Latency_Test (one way)")
        elements(page, "polyline").single { it.getAttribute("data-series") == "send_lat_2.json Send_Latency_Test (one way)" }.let {
            it.getAttribute("data-marker") shouldBe "circle"
            it.getAttribute("points").split(' ').size shouldBe 5 // min, typical, 99 %, 99.9 %, max
        }
        elements(page, "p").single { it.getAttribute("id") == "perftest-note" }.textContent shouldContain "hold no histogram"
        val rows = elements(page, "tr").associateBy { it.getAttribute("data-run") }
        fun cells(run: String) = rows.getValue(run).getElementsByTagNameNS("http://www.w3.org/1999/xhtml", "td").let { tds ->
            (0 until tds.length).map { tds.item(it).textContent }
        }
        // Gb/sec (--report_gbits), told by MsgRate x MsgSize, shown in MB/s: 97.41 Gb/s.
        cells("write_bw_65536_gbits.json RDMA_Write_BW_Test").let {
            it[1] shouldBe "bandwidth (perftest)"
            it[4] shouldBe String.format(Locale.ROOT, "%.2f", 97.41e9 / 8 / (1 shl 20))
            it[7] shouldBe "mlx5_0"
        }
        cells("write_bw_4096.json RDMA_Write_BW_Test")[4] shouldBe "11198.23"
        cells("send_lat_2.json Send_Latency_Test").let {
            it[1] shouldBe "t_typical, one way (perftest)"
            it[2] shouldBe "1.09"
            it[3] shouldBe "1.52"
        }
    }

    test("a perftest file with a bad field is refused with one sentence; its text is escaped in the page") {
        val good = ReportSpec::class.java.getResource("perftest/send_lat_2.json")!!.readText()
        fun refused(name: String, text: String, sentence: String) {
            val f = File(dir, name).apply { writeText(text) }
            run("report", f.path, "-o", File(dir, "$name.html").path).let {
                it.statusCode shouldBe 1
                it.stderr shouldBe "rdma-run report: ${f.path}: $sentence\n"
            }
        }
        refused("typical.json", good.replace("\"t_typical\": 1.09", "\"t_typical\": \"fast\""),
            "results.t_typical should be a finite number, not \"fast\"")
        refused("order.json", good.replace("\"percentile_99\": 1.52", "\"percentile_99\": 0.5"),
            "results.percentile_99 (0.5) is below t_typical (1.09)")
        refused("size.json", good.replace("\"MsgSize\": 2", "\"MsgSize\": 0"), "results.MsgSize is 0; perftest writes 1 to 1099511627776")
        refused("output.json", "{\"test_info\": {\"test\": \"Send_BW_Test\", \"Device\": \"mlx5_0\"}, \"results\": {\"bw_avg\": 11000.5}}",
            "results holds only bw_avg (perftest's --output); run perftest without --output for a report")
        val bw = ReportSpec::class.java.getResource("perftest/write_bw_4096.json")!!.readText()
        refused("unit.json", bw.replace("\"BW_average\": 11198.23", "\"BW_average\": 700.0"),
            "results.BW_average (700.0) does not agree with MsgRate (2.866747 Mpps) x MsgSize (4096) in MB/sec or in Gb/sec")
        val page = reportEscaping("hostile-perftest", good.replace("\"Device\": \"mlx5_0\"", "\"Device\": \"<script>alert(1)</script>\""))
        plots(page).getValue("latency").size shouldBe 1 // still well-formed
    }

    // Lines that overlap hide each other in the page as drawn (latency curves of a sweep lie close together), so each series
    // is also drawn alone, the others hidden, and its colour looked for in its own box. The screenshot of the whole page is
    // kept with the test results: target/surefire-reports/report-screenshot.png.
    test("in headless Chromium each plot is laid out with its series, and each series is drawn in its colour (screenshots in target/surefire-reports)")
        .config(enabledOrReasonIf = { HeadlessChromium.enabledOrMissing() }) {
        val (page, _) = overlaid
        HeadlessChromium.start().use { chromium ->
            chromium.load(page)
            val plots = chromium.evaluate(LAID_OUT).jsonArray.map { LaidOutPlot.of(it.jsonObject) }
            val png = chromium.screenshot()
            File(System.getProperty("basedir", "."), "target/surefire-reports/report-screenshot.png").apply { parentFile.mkdirs() }.writeBytes(png)
            plots.associate { p -> p.id to p.series.map { it.name } } shouldBe plots(page) // the DOM Chromium built is the page's
            // A screenshot of each plot type, kept for a person to look at: report-latency.png, report-sweep-bandwidth.png...
            plots.map { it.id } shouldContainAll listOf("latency", "bandwidth-time", "sweep-bandwidth", "sweep-latency")
            for (plot in plots) {
                val b = plot.box
                val shot = chromium.screenshot(b.left, b.top, b.right - b.left, b.bottom - b.top)
                File(System.getProperty("basedir", "."), "target/surefire-reports/report-${plot.id}.png").writeBytes(shot)
                val image = ImageIO.read(ByteArrayInputStream(shot))
                withClue("${plot.id}'s screenshot") {
                    image.width shouldBe b.right - b.left
                    // The series drawn last is on top of the others in the picture (each is checked alone below).
                    pixelsNear(image, plot.series.last().stroke) shouldBeGreaterThanOrEqual 10
                }
            }
            plots.single { it.id == "sweep-bandwidth" }.series.map { it.name } shouldContain "perftest RDMA_Write_BW_Test on mlx5_0"
            val whole = ImageIO.read(ByteArrayInputStream(png))
            for (plot in plots) withClue(plot.id) {
                plot.box.width shouldBe 760.0
                val top = plot.series.last()
                withClue("${top.name}, drawn over the others") { pixelsNear(whole.crop(top.box), top.stroke) shouldBeGreaterThanOrEqual 10 }
                plot.series.forEachIndexed { i, s ->
                    chromium.evaluate(alone(plot.id, i))
                    val b = s.box
                    val clip = ImageIO.read(ByteArrayInputStream(chromium.screenshot(b.left, b.top, b.right - b.left, b.bottom - b.top)))
                    withClue("${s.name} drawn alone") { pixelsNear(clip, s.stroke) shouldBeGreaterThanOrEqual 10 }
                }
            }
        }
    }

    // Rank 0's document of an all-to-all holds the 6 pairs: the matrix has each one's rate, computed here from the JSON.
    test("a run of ranks: a pair matrix of what each rank sent to each other, with each rank's out and in; ranks overlay in the plots") {
        val json = File(dir, "ranks.json")
        val sample = File("../samples/alltoall.main.kts").path
        run(sample, "--loopback", "--ranks", "3", "-d", "soft0", "--set", "warmup=0", "--set", "preflight=0", "--set", "iterations=20",
            "--set", "size=4K", "--interval", "1", "--json", json.path, "--histogram", File(dir, "ranks.hgrm").path).statusCode shouldBe 0
        // Each pair's histogram file is named by its pair in its first line.
        val headers = dir.listFiles { f -> f.name.startsWith("ranks") && f.name.endsWith(".hgrm") }!!.map { it.readLines().first() }
        headers.size shouldBe 6
        headers.map { Regex("rank \\d with rank \\d").find(it)!!.value }.toSet().size shouldBe 6
        val page = File(dir, "ranks.html")
        run("report", json.path, "-o", page.path).statusCode shouldBe 0
        val runs = kotlinx.serialization.json.Json.parseToJsonElement(json.readText()).jsonObject.getValue("runs").jsonArray.map { it.jsonObject }
        fun rate(end: JsonObject, field: String) = end.getValue("total").jsonObject.num(field) * 1e9 / end.num("durationNanos") / (1 shl 20)
        fun num(x: Double) = String.format(Locale.ROOT, "%.2f", x)
        val expected = runs.associate { r ->
            val end = r.getValue("end").jsonObject
            val pair = end.getValue("pair").jsonObject
            (pair.num("rank").toInt() to pair.num("peerRank").toInt()) to end
        }
        expected.keys shouldBe setOf(0 to 1, 0 to 2, 1 to 0, 1 to 2, 2 to 0, 2 to 1)
        val table = elements(page, "table").single { it.getAttribute("id") == "pairs-0-0" }
        val cells = table.getElementsByTagNameNS("http://www.w3.org/1999/xhtml", "td").let { tds -> (0 until tds.length).map { tds.item(it) as Element } }
        val drawn = cells.filter { it.hasAttribute("data-from") }.associate { (it.getAttribute("data-from").toInt() to it.getAttribute("data-to").toInt()) to it.textContent }
        drawn shouldBe expected.mapValues { (_, end) -> num(rate(end, "bytesSent")) }
        for (r in 0..2) {
            val mine = expected.filterKeys { it.first == r }.values
            val row = table.getElementsByTagNameNS("http://www.w3.org/1999/xhtml", "tr").let { trs -> (0 until trs.length).map { trs.item(it) as Element } }
                .single { it.getAttribute("data-rank") == "$r" }
            fun cell(cls: String) = row.getElementsByTagNameNS("http://www.w3.org/1999/xhtml", "td").let { tds ->
                (0 until tds.length).map { tds.item(it) as Element }.single { it.getAttribute("class") == cls }.textContent
            }
            cell("out") shouldBe num(mine.sumOf { rate(it, "bytesSent") })
            cell("in") shouldBe num(mine.sumOf { rate(it, "bytesReceived") })
        }
        // Each pair is sampled: its intervals add up to its totals.
        for (r in runs) {
            val total = r.getValue("end").jsonObject.getValue("total").jsonObject
            val intervals = r.getValue("intervals").jsonArray.map { it.jsonObject }
            intervals.size shouldBeGreaterThanOrEqual 1
            intervals.sumOf { it.num("bytesSent") } shouldBe total.num("bytesSent")
            intervals.sumOf { it.num("bytesReceived") } shouldBe total.num("bytesReceived")
        }
        // The document sums its ranks (schema 2): each rank's pairs, and the total of the ranks.
        val summary = kotlinx.serialization.json.Json.parseToJsonElement(json.readText()).jsonObject.getValue("ranks").jsonArray.single()
            .jsonObject.getValue("summary").jsonObject
        val perRank = summary.getValue("perRank").jsonArray.map { it.jsonObject }
        perRank.map { it.num("rank").toInt() } shouldBe listOf(0, 1, 2)
        for (t in perRank) {
            val mine = expected.filterKeys { it.first == t.num("rank").toInt() }.values
            t.num("bytesSent") shouldBe mine.sumOf { it.getValue("total").jsonObject.num("bytesSent") }
            t.getValue("latency").jsonObject.num("count") shouldBe mine.sumOf { it.getValue("total").jsonObject.getValue("latency").jsonObject.num("count") }
        }
        summary.getValue("total").jsonObject.num("bytesSent") shouldBe perRank.sumOf { it.num("bytesSent") }
        // Ranks overlay in the latency plot, one curve per rank (its pairs merged), instead of one per pair.
        plots(page).getValue("latency") shouldContainAll listOf("ranks.json rank 0 work requests", "ranks.json rank 2 work requests")
        plots(page).getValue("latency").none { it.contains(" with rank ") } shouldBe true
        // A schema 1 document (no summary) is read too: its matrix is summed the same way, its pairs drawn one by one.
        val old = File(dir, "old.json").apply {
            writeText(json.readText().replaceFirst(Regex("\"schema\": 2"), "\"schema\": 1").replace(Regex("(?s),\\s*\"ranks\": \\[.*?\\n    \\]"), ""))
        }
        old.readText() shouldNotContain "\"perRank\""
        val oldPage = File(dir, "old.html")
        run("report", old.path, "-o", oldPage.path).statusCode shouldBe 0
        elements(oldPage, "table").single { it.getAttribute("id") == "pairs-0-0" }.textContent shouldBe table.textContent
        plots(oldPage).getValue("latency") shouldContainAll listOf("old.json rank 0 with rank 1 work requests", "old.json rank 2 with rank 1 work requests")
        // Rank 0's document under a launcher says role "rank" (more than 2 ranks): read as well.
        val launched = File(dir, "launched.json").apply { writeText(json.readText().replaceFirst(Regex("\"role\": \"loopback\""), "\"role\": \"rank\"")) }
        launched.readText() shouldContain "\"role\": \"rank\""
        run("report", launched.path, "-o", File(dir, "launched.html").path).statusCode shouldBe 0
        // A pair that is not one is refused before anything is drawn.
        for ((bad, sentence) in listOf(
            "\"rank\": 2, \"peerRank\": 0, \"ranks\": 3" to "\"rank\": 2, \"peerRank\": 0, \"ranks\": 100000",
            "\"rank\": 2, \"peerRank\": 0, \"ranks\": 3" to "\"rank\": 2, \"peerRank\": 2, \"ranks\": 3",
        ).zip(listOf("end.pair.ranks is 100000; a run of ranks has 2 to 4096", "end.pair.peerRank is the run's own rank (2); a pair is two ranks"))) {
            val f = File(dir, "bad-pair.json").apply { writeText(json.readText().replace(Regex(bad.first.replace(" ", "\\s*")), bad.second)) }
            run("report", f.path, "-o", File(dir, "bad-pair.html").path).let {
                it.statusCode shouldBe 1
                it.stderr shouldContain sentence
            }
        }
        // A summary whose total is not the sum of its ranks, or that names a rank outside the run, is refused.
        val document = kotlinx.serialization.json.Json.parseToJsonElement(json.readText()).jsonObject
        fun withSummary(change: (JsonObject) -> JsonObject): String {
            val entry = document.getValue("ranks").jsonArray.single().jsonObject
            val changed = JsonObject(entry + ("summary" to change(entry.getValue("summary").jsonObject)))
            return JsonObject(document + ("ranks" to JsonArray(listOf(changed)))).toString()
        }
        fun JsonObject.with(key: String, value: kotlinx.serialization.json.JsonElement) = JsonObject(this + (key to value))
        for ((text, sentence) in listOf(
            withSummary { it.with("total", it.getValue("total").jsonObject.with("bytesSent", JsonPrimitive(1))) } to
                "ranks[0].summary.total.bytesSent (1) is not the sum of the ranks'",
            withSummary { s -> s.with("perRank", JsonArray(s.getValue("perRank").jsonArray.map { it.jsonObject.with("rank", JsonPrimitive(7)) })) } to
                "ranks[0].summary.perRank[0].rank is 7, not a rank of 3",
        )) {
            val f = File(dir, "bad-summary.json").apply { writeText(text) }
            run("report", f.path, "-o", File(dir, "bad-summary.html").path).let {
                it.statusCode shouldBe 1
                it.stderr shouldContain sentence
            }
        }
    }

    test("text from a document is escaped") {
        val json = File(dir, "plain.json")
        run(pingpong.path, "--loopback", "-d", "soft0", "-n", "3", "--json", json.path).statusCode shouldBe 0
        val page = reportEscaping("hostile", json.readText().replace(Regex("\"host\": \"[^\"]*\""), "\"host\": \"<script>alert(1)</script>\""))
        plots(page).getValue("latency").size shouldBeGreaterThanOrEqual 1 // still well-formed
    }

    test("what is not a results document of this schema is refused with one sentence") {
        val notJson = File(dir, "x.json").apply { writeText("{\"schema\": ") }
        run("report", notJson.path, "-o", File(dir, "x.html").path).let {
            it.statusCode shouldBe 1
            it.stderr shouldContain "x.json is not JSON"
        }
        val other = File(dir, "other.json").apply { writeText("{\"schema\": 3, \"start\": {}}") }
        run("report", other.path, "-o", File(dir, "o.html").path).stderr shouldContain "other.json is results schema 3; this rdma-run reads schemas 1 to 2"
        val none = File(dir, "none.json").apply { writeText("{\"runs\": []}") }
        run("report", none.path, "-o", File(dir, "n.html").path).stderr shouldContain "none.json is not a results document of rdma-run"
    }
})

/** In page coordinates, CSS pixels (one screenshot pixel each); [left]..[bottom] round it out with room for a stroke's width. */
private data class Box(val x: Double, val y: Double, val width: Double, val height: Double) {
    val left get() = floor(x).toInt() - STROKE_MARGIN
    val top get() = floor(y).toInt() - STROKE_MARGIN
    val right get() = ceil(x + width).toInt() + STROKE_MARGIN
    val bottom get() = ceil(y + height).toInt() + STROKE_MARGIN

    companion object {
        fun of(o: JsonObject) = Box(o.num("x"), o.num("y"), o.num("width"), o.num("height"))
    }
}

private const val STROKE_MARGIN = 3

private data class LaidOutSeries(val name: String, val stroke: Color, val box: Box)

/** A plot as Chromium laid it out: its box, and each series' name, computed stroke colour and box. */
private data class LaidOutPlot(val id: String, val box: Box, val series: List<LaidOutSeries>) {
    companion object {
        fun of(o: JsonObject) = LaidOutPlot(o.str("id"), Box.of(o.getValue("box").jsonObject), o.getValue("series").jsonArray.map {
            val s = it.jsonObject
            val rgb = Regex("rgb\\((\\d+), (\\d+), (\\d+)\\)").matchEntire(s.str("stroke"))?.groupValues?.drop(1)?.map { c -> c.toInt() }
                ?: fail("${s.str("name")} is stroked with ${s.str("stroke")}, not a colour")
            LaidOutSeries(s.str("name"), Color(rgb[0], rgb[1], rgb[2]), Box.of(s.getValue("box").jsonObject))
        })
    }
}

private fun JsonObject.num(name: String) = getValue(name).jsonPrimitive.double
private fun JsonObject.str(name: String) = getValue(name).jsonPrimitive.content

/** The page's plots and their series, as laid out (page coordinates: the screenshot's). */
private const val LAID_OUT = """(() => {
    const box = e => { const r = e.getBoundingClientRect(); return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height}; };
    return Array.from(document.querySelectorAll('svg.plot'), svg => ({
        id: svg.id, box: box(svg),
        series: Array.from(svg.querySelectorAll('polyline'), line => ({
            name: line.getAttribute('data-series'), stroke: getComputedStyle(line).stroke, box: box(line),
        })),
    }));
})()"""

/** Hides every series of plot [id] but the [index]th, which is left as the page has it (other plots' are left too). */
private fun alone(id: String, index: Int) =
    "document.getElementById('$id').querySelectorAll('polyline').forEach((line, i) => line.style.visibility = i === $index ? '' : 'hidden'); $index"

private fun BufferedImage.crop(box: Box): BufferedImage {
    val left = max(0, box.left)
    val top = max(0, box.top)
    return getSubimage(left, top, min(width, box.right) - left, min(height, box.bottom) - top)
}

/** The pixels of [image] whose colour is within a small distance of [color]. */
private fun pixelsNear(image: BufferedImage, color: Color): Int {
    var count = 0
    for (y in 0 until image.height) for (x in 0 until image.width) {
        val c = Color(image.getRGB(x, y))
        val dr = c.red - color.red
        val dg = c.green - color.green
        val db = c.blue - color.blue
        if (dr * dr + dg * dg + db * db <= NEAR * NEAR) count++
    }
    return count
}

/**
 * Anti-aliasing blends a stroke with what is under it: a 1.8 px line covers some pixel along it at least 90 %, which is
 * within 32 of the palette's colours on white; the axes' greys stay over 60 away from the palette's grey.
 */
private const val NEAR = 40
