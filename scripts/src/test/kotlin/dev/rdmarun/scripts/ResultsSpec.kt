package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.CliktCommandTestResult
import com.github.ajalt.clikt.testing.test
import dev.rdmarun.dsl.LatencySummary
import dev.rdmarun.dsl.PerftestFormat
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.collections.shouldNotBeEmpty
import io.kotest.matchers.nulls.shouldBeNull
import io.kotest.matchers.nulls.shouldNotBeNull
import io.kotest.matchers.doubles.plusOrMinus
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldStartWith
import java.io.File
import java.nio.file.Files
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.jsonObject

/**
 * What a scenario run gives people to compare and plot, on soft0 in one JVM: perftest's flags
 * reaching the script as parameters, the `--set` check, `--params`, perftest's result lines, the
 * JSON document (schema 2) on success and on failure, `--json -`, intervals and `--histogram`.
 */
class ResultsSpec : FunSpec({
    val dir = Files.createTempDirectory("results-spec").toFile()
    val cache = File(dir, "cache")
    afterSpec { dir.deleteRecursively() }

    fun script(name: String, text: String) = File(dir, name).apply { writeText(text) }
    fun run(vararg args: String): CliktCommandTestResult = rdmaRun(cache).test(withImplicitRun(arrayOf(*args)).toList())

    // Every QP: `iterations` sends of the buffer (size bytes), each awaited, and as many receives on the peer.
    val echo = script("echo.main.kts", """
        @file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT")
        import dev.rdmarun.dsl.*
        rdma {
            connect(peer)
            forEachQp {
                client { repeat { send(); awaitCompletion() } }
                server { repeat { receive() } }
            }
        }
    """.trimIndent())

    test("perftest's flags reach the script as its standard parameters, and the DSL applies them") {
        val json = File(dir, "flags.json")
        val result = run(echo.path, "--loopback", "-d", "soft0", "-s", "1K", "-n", "7", "-q", "3", "-t", "32", "-I", "0", "--json", json.path)
        result.statusCode shouldBe 0
        val doc = ResultsDocument.parse(json.readText())
        doc.start.parameters shouldBe mapOf("depth" to "32", "inline" to "0", "iterations" to "7", "qps" to "3", "size" to "1024")
        val client = doc.runs.single { it.role == "client" }
        client.end.qps shouldHaveSize 3
        client.end.total.operations shouldBe 21 // 3 QPs x 7 sends
        client.end.total.bytesSent shouldBe 21 * 1024L
        doc.runs.single { it.role == "server" }.end.total.messagesReceived shouldBe 21
    }

    test("repeat { }'s warm-up rounds (--set warmup=N) are left out of every figure") {
        val result = run(echo.path, "--loopback", "-d", "soft0", "-n", "7", "-q", "2", "--set", "warmup=5", "--json", "-")
        result.statusCode shouldBe 0
        val doc = ResultsDocument.parse(result.stdout)
        val client = doc.runs.single { it.role == "client" }.end
        client.total.operations shouldBe 14 // 2 QPs x 7 counted sends; the 2 x 5 warm-up ones are not
        client.total.bytesSent shouldBe 14 * 4096L
        client.total.latency!!.count shouldBe 14
        client.qps.map { it.operations } shouldContainExactly listOf(7L, 7L)
    }

    test("a flag and a --set of the same parameter, or a --set the script does not read, are usage errors") {
        run(echo.path, "--loopback", "-d", "soft0", "-s", "64", "--set", "size=64").let {
            it.statusCode shouldBe 1
            it.stderr shouldContain "-s/--size and --set size both give the parameter size: give it once"
        }
        run(echo.path, "--loopback", "-d", "soft0", "--set", "iteration=5").let {
            it.statusCode shouldBe 1
            it.stderr shouldContain "--set iteration: echo.main.kts does not read a parameter named iteration"
            it.stderr shouldContain "did you mean iterations?"
        }
        run(echo.path, "--loopback", "-d", "soft0", "-s", "4Q").statusCode shouldBe 1
    }

    test("--params lists what the script reads, with defaults, docs and flags") {
        val documented = script("documented.main.kts", """
            import dev.rdmarun.dsl.*

            rdma {
                val op = param("op", "send") // send, write or read
                bufferSize(sizeParam("size", 4096))
                connect(peer)
            }
        """.trimIndent())
        val result = run(documented.path, "--params")
        result.statusCode shouldBe 0
        val lines = result.stdout.lines()
        lines.first() shouldStartWith "NAME"
        lines.single { it.startsWith("op ") } shouldContain "send, write or read"
        lines.single { it.startsWith("size ") } shouldContain "-s"
        lines.any { it.startsWith("iterations ") } shouldBe false // no repeat { }: nothing reads it
    }

    test("the results lead with perftest's banner, addresses and latency block (the round trip one way); the round trip after it") {
        val pingpong = script("pp.main.kts", """
            import dev.rdmarun.dsl.*

            rdma {
                bufferSize(8)
                connect(peer)
                forEachQp {
                    client { repeat { measureRoundTrip("rtt") { send(); receive() } } }
                    server { repeat { receive(); send() } }
                }
            }
        """.trimIndent())
        val result = run(pingpong.path, "--loopback", "-d", "soft0", "-n", "50")
        result.statusCode shouldBe 0
        val out = result.stdout
        val lines = out.lines()
        lines.filter { it == "                    pp.main.kts Latency Test" } shouldHaveSize 2
        lines.filter { it.startsWith(" local address: LID ") } shouldHaveSize 2
        lines.filter { it.startsWith(" remote address: LID ") } shouldHaveSize 2
        // The client's block, without a label before #bytes; the server, which measured no section, has none.
        val header = lines.indexOf(PerftestFormat.LATENCY_HEADER)
        lines.count { it == PerftestFormat.LATENCY_HEADER } shouldBe 1
        lines[header + 1].trim().split(Regex("\\s+")).take(2) shouldContainExactly listOf("8", "50") // #bytes, #iterations
        lines[header + 2] shouldBe PerftestFormat.RULE
        lines.none { it.contains("BW peak") } shouldBe true // a latency test prints no bandwidth line
        // rdma-run's own lines come after perftest's closing line: the device, the round trip, the work requests.
        val own = lines.drop(header + 3)
        own.any { it.startsWith(" Device: soft0 (software)") } shouldBe true
        own.single { it.startsWith(" rtt RTT") }.trim().split(Regex("\\s+")).drop(2).take(2) shouldContainExactly listOf("8", "50")
        own.none { it.startsWith(" rtt one way") } shouldBe true
        run(pingpong.path, "--loopback", "-d", "soft0", "-n", "5", "--report_gbits").stdout shouldContain "BW out[Gb/sec]"
    }

    test("--json - puts only the document on standard output; its fields are all there") {
        val result = run(echo.path, "--loopback", "-d", "soft0", "-n", "5", "-q", "2", "--json", "-")
        result.statusCode shouldBe 0
        val root = Json.parseToJsonElement(result.stdout).jsonObject // nothing but JSON
        root.keys shouldBe setOf("schema", "start", "runs", "ranks", "error")
        val doc = ResultsDocument.parse(result.stdout)
        doc.schema shouldBe 2
        doc.error.shouldBeNull()
        doc.start.role shouldBe "loopback"
        doc.start.script.sha256 shouldBe java.security.MessageDigest.getInstance("SHA-256").digest(echo.readBytes())
            .joinToString("") { "%02x".format(it) }
        doc.runs.map { it.role }.toSet() shouldBe setOf("server", "client")
        for (r in doc.runs) {
            val c = r.end.connection.shouldNotBeNull()
            c.device shouldBe "soft0"
            c.qps.map { it.index } shouldContainExactly listOf(0, 1)
            r.end.fingerprint.shouldNotBeNull()
            r.end.parameters["qps"] shouldBe "2"
        }
        // Each side's local QPN is the other's remote one.
        val (server, client) = doc.runs.sortedBy { it.role != "server" }.map { it.end.connection!! }
        server.qps.map { it.localQpn } shouldContainExactly client.qps.map { it.remoteQpn }
        result.stderr shouldContain "client on soft0" // the tables went to stderr
    }

    test("a failed run still writes the document, with the error") {
        val json = File(dir, "failed.json")
        val result = run(echo.path, "--loopback", "-d", "nosuch0", "--json", json.path)
        result.statusCode shouldBe 1
        val doc = ResultsDocument.parse(json.readText())
        doc.runs shouldHaveSize 0
        val error = doc.error.shouldNotBeNull()
        error.exitStatus shouldBe 1
        error.message shouldContain "no RDMA device named 'nosuch0'"
    }

    test("--interval adds interval records; --histogram writes the latency as .hgrm") {
        // The client writes for the given seconds; the server only grants the access.
        val writes = script("writes.main.kts", """
            import dev.rdmarun.dsl.*

            rdma {
                if (isServer) remoteAccess(RemoteAccess.WRITE)
                connect(peer)
                client { forEachQp { repeat { write(); awaitCompletion() } } }
            }
        """.trimIndent())
        val json = File(dir, "intervals.json")
        val hgrm = File(dir, "latency.hgrm")
        val result = run(writes.path, "--loopback", "-d", "soft0", "-D", "1", "--interval", "0.2", "--json", json.path, "--histogram", hgrm.path)
        result.statusCode shouldBe 0
        val client = ResultsDocument.parse(json.readText()).runs.single { it.role == "client" }
        client.intervals.shouldNotBeEmpty()
        client.intervals.zipWithNext().forEach { (a, b) -> b.startSeconds shouldBe a.endSeconds }
        (client.intervals.sumOf { it.operations } <= client.end.total.operations) shouldBe true
        result.stdout shouldContain "[SUM][TX-C]" // the client's interval rows
        val text = hgrm.readText()
        text shouldContain "Value     Percentile TotalCount 1/(1-Percentile)"
        text shouldStartWith "# rdma-run writes.main.kts: client, latency work requests"
    }

    test("--histogram of a measureRoundTrip section holds the one-way figures the table leads with") {
        val pingPong = script("rtt.main.kts", """
            import dev.rdmarun.dsl.*

            rdma {
                connect(peer)
                qp(0) {
                    client { repeat { measureRoundTrip("rtt") { send(); receive() } } }
                    server { repeat { receive(); send() } }
                }
            }
        """.trimIndent())
        val hgrm = File(dir, "rtt.hgrm")
        val result = run(pingPong.path, "--loopback", "-d", "soft0", "-n", "200", "--set", "warmup=0", "--set", "preflight=0",
            "--json", "-", "--histogram", hgrm.path)
        result.statusCode shouldBe 0
        val rtt = ResultsDocument.parse(result.stdout).runs.single { it.role == "client" }.end.sections.getValue("rtt")
        rtt.roundTrip shouldBe true
        // One file per run, whichever side ended first: the client's is the one --histogram names, the server's FILE-2.
        File(dir, "rtt-2.hgrm").readText() shouldStartWith "# rdma-run rtt.main.kts: server, latency work requests"
        val text = hgrm.readText()
        text shouldStartWith "# rdma-run rtt.main.kts: client, latency rtt one way (half of each round trip), microseconds"
        // The median row: one way, as the table's t_typical (the round trips' p50 / 2); it was the round trip.
        val medianText = text.lines().map { it.trim().split(Regex("\\s+")) }.first { it.size >= 2 && it[1] == "0.500000000000" }[0]
        // The file prints as many decimals as the histogram has significant digits: it agrees to half its last place.
        val halfLastPlace = 0.5 * Math.pow(10.0, -medianText.substringAfter('.').length.toDouble()) + 1e-9
        medianText.toDouble() shouldBe (rtt.p50Nanos / 2000.0 plusOrMinus halfLastPlace)
    }

    test("a latency's histogram in the JSON decodes to what was recorded") {
        val result = run(echo.path, "--loopback", "-d", "soft0", "-n", "20", "--json", "-")
        val client = ResultsDocument.parse(result.stdout).runs.single { it.role == "client" }
        val latency = client.end.total.latency.shouldNotBeNull()
        LatencySummary.decode(latency.histogram.shouldNotBeNull()).totalCount shouldBe latency.count
    }

    test("the document's fields are docs/results-json.md's, table by table") {
        // The documented names per table ("## `runs[].end`" -> end), and those that may be absent.
        val doc = File("../docs/results-json.md").readText()
        val tables = doc.split(Regex("(?m)^## ")).drop(1).associate { section ->
            val title = section.lineSequence().first().trim().trim('`')
            val rows = Regex("(?m)^\\| `([A-Za-z0-9.]+)` \\| ([^|]*) \\|").findAll(section).map { it.groupValues[1] to it.groupValues[2] }.toList()
            title to rows
        }
        fun names(obj: kotlinx.serialization.json.JsonObject, documented: List<Pair<String, String>>): Set<String> =
            obj.flatMap { (k, v) ->
                // A documented dotted name (script.path) stands for a nested object's fields.
                if (documented.none { it.first == k } && documented.any { it.first.startsWith("$k.") }) v.jsonObject.keys.map { "$k.$it" }
                else listOf(k)
            }.toSet()
        val result = run(echo.path, "--loopback", "-d", "soft0", "-n", "3", "--json", "-")
        result.statusCode shouldBe 0
        val json = Json.parseToJsonElement(result.stdout).jsonObject
        val run0 = json.getValue("runs").let { it as kotlinx.serialization.json.JsonArray }.first().jsonObject
        val levels = mapOf("Top level" to json, "start" to json.getValue("start").jsonObject, "runs[]" to run0,
            "runs[].end" to run0.getValue("end").jsonObject)
        for ((title, obj) in levels) {
            val documented = tables[title].shouldNotBeNull()
            val present = names(obj, documented)
            withClue("undocumented fields of $title") { (present - documented.map { it.first }.toSet()) shouldBe emptySet() }
            val required = documented.filter { "absent" !in it.second }.map { it.first }.toSet()
            withClue("documented fields of $title missing") { (required - present) shouldBe emptySet() }
        }
    }
})
