package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.CliktCommandTestResult
import com.github.ajalt.clikt.testing.test
import io.kotest.assertions.fail
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainAll
import io.kotest.matchers.ints.shouldBeGreaterThanOrEqual
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import java.awt.Color
import java.awt.image.BufferedImage
import java.io.ByteArrayInputStream
import java.io.File
import java.nio.file.Files
import javax.imageio.ImageIO
import javax.xml.parsers.DocumentBuilderFactory
import kotlin.math.ceil
import kotlin.math.floor
import kotlin.math.max
import kotlin.math.min
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.double
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import org.w3c.dom.Element

/**
 * `rdma-run report`: from documents that real runs on soft0 wrote, one self-contained page whose
 * plots have their series; parsed as XML, so a page that is not well-formed fails here.
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
    fun plots(page: File): Map<String, List<String>> {
        val doc = DocumentBuilderFactory.newInstance().apply { isNamespaceAware = true }.newDocumentBuilder().parse(page)
        val svgs = doc.getElementsByTagNameNS("http://www.w3.org/2000/svg", "svg")
        return (0 until svgs.length).associate { i ->
            val svg = svgs.item(i) as Element
            val lines = svg.getElementsByTagNameNS("http://www.w3.org/2000/svg", "polyline")
            svg.getAttribute("id") to (0 until lines.length).map { (lines.item(it) as Element).getAttribute("data-series") }
        }
    }

    /** Two documents from real runs, a timed one with intervals and a sweep, and `report`'s page of both; made once for the cases that read it. */
    val overlaid by lazy {
        val timed = File(dir, "timed.json")
        run(writes.path, "--loopback", "-d", "soft0", "-D", "1", "--interval", "0.2", "-s", "64", "--json", timed.path).statusCode shouldBe 0
        val sweep = File(dir, "sweep.json")
        run(pingpong.path, "--loopback", "-d", "soft0", "-a", "-n", "3", "--json", sweep.path).statusCode shouldBe 0
        val page = File(dir, "report.html")
        page to run("report", timed.path, sweep.path, "-o", page.path)
    }

    test("latency percentiles, bandwidth over time and a sweep, with their series; two documents overlaid") {
        val (page, result) = overlaid
        result.statusCode shouldBe 0
        result.stdout shouldContain "wrote ${page.path} (48 runs from 2 files)" // 2 + 23 sizes x 2 sides
        val plots = plots(page)
        plots.keys shouldContainAll listOf("latency", "bandwidth-time", "sweep-bandwidth", "sweep-latency")
        plots.getValue("latency") shouldContainAll listOf("timed.json client work requests", "sweep.json client size=64 rtt (one way)")
        plots.getValue("bandwidth-time") shouldContainAll listOf("timed.json client", "timed.json server")
        plots.getValue("sweep-bandwidth") shouldContainAll listOf("sweep.json client", "sweep.json server")
        plots.getValue("sweep-latency").size shouldBeGreaterThanOrEqual 1
        val html = page.readText()
        html shouldNotContain "src=\"http" // nothing loaded from the network
        html shouldNotContain "href=\"http"
        html shouldNotContain "<script"
        html shouldContain "<table>"
    }

    // Lines that overlap hide each other in the page as drawn (latency curves of a sweep lie close together), so each series
    // is also drawn alone, the others hidden, and its colour looked for in its own box. The screenshot of the whole page is
    // kept with the test results: target/surefire-reports/report-screenshot.png.
    test("in headless Chromium each plot is laid out with its series, and each series is drawn in its colour (screenshot in target/surefire-reports)")
        .config(enabledOrReasonIf = { HeadlessChromium.enabledOrMissing() }) {
        val (page, _) = overlaid
        HeadlessChromium.start().use { chromium ->
            chromium.load(page)
            val plots = chromium.evaluate(LAID_OUT).jsonArray.map { LaidOutPlot.of(it.jsonObject) }
            val png = chromium.screenshot()
            File(System.getProperty("basedir", "."), "target/surefire-reports/report-screenshot.png").apply { parentFile.mkdirs() }.writeBytes(png)
            plots.associate { p -> p.id to p.series.map { it.name } } shouldBe plots(page) // the DOM Chromium built is the page's
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

    test("text from a document is escaped") {
        val json = File(dir, "plain.json")
        run(pingpong.path, "--loopback", "-d", "soft0", "-n", "3", "--json", json.path).statusCode shouldBe 0
        val hostile = File(dir, "hostile.json").apply {
            writeText(json.readText().replace(Regex("\"host\": \"[^\"]*\""), "\"host\": \"<script>alert(1)</script>\""))
        }
        val page = File(dir, "hostile.html")
        run("report", hostile.path, "-o", page.path).statusCode shouldBe 0
        plots(page).getValue("latency").size shouldBeGreaterThanOrEqual 1 // still well-formed
        page.readText().let {
            it shouldNotContain "<script>alert"
            it shouldContain "&lt;script&gt;alert(1)&lt;/script&gt;"
        }
    }

    test("what is not a results document of this schema is refused with one sentence") {
        val notJson = File(dir, "x.json").apply { writeText("{\"schema\": ") }
        run("report", notJson.path, "-o", File(dir, "x.html").path).let {
            it.statusCode shouldBe 1
            it.stderr shouldContain "x.json is not JSON"
        }
        val other = File(dir, "other.json").apply { writeText("{\"schema\": 2, \"start\": {}}") }
        run("report", other.path, "-o", File(dir, "o.html").path).stderr shouldContain "other.json is results schema 2; this rdma-run reads schema 1"
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
