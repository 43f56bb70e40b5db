package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.CliktCommandTestResult
import com.github.ajalt.clikt.testing.test
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainAll
import io.kotest.matchers.ints.shouldBeGreaterThanOrEqual
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import java.io.File
import java.nio.file.Files
import javax.xml.parsers.DocumentBuilderFactory
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

    test("latency percentiles, bandwidth over time and a sweep, with their series; two documents overlaid") {
        val timed = File(dir, "timed.json")
        run(writes.path, "--loopback", "-d", "soft0", "-D", "1", "-i", "0.2", "-s", "64", "--json", timed.path).statusCode shouldBe 0
        val sweep = File(dir, "sweep.json")
        run(pingpong.path, "--loopback", "-d", "soft0", "-a", "-n", "3", "--json", sweep.path).statusCode shouldBe 0
        val page = File(dir, "report.html")
        val result = run("report", timed.path, sweep.path, "-o", page.path)
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
