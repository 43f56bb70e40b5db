package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.CliktCommandTestResult
import com.github.ajalt.clikt.testing.test
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldBeEmpty
import io.kotest.matchers.collections.shouldContainAll
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.collections.shouldNotBeEmpty
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldMatch
import io.kotest.matchers.string.shouldNotContain
import java.io.File
import java.nio.file.Files
import java.util.Locale
import java.util.concurrent.TimeUnit
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.double
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.long

/**
 * rdma-run's results read by a perftest parser (e2e/perftest_parse.py, written from perftest's
 * formats) give the fields perftest's own output gives, on soft0 in one JVM: the samples'
 * latency and bandwidth blocks, the banner and address lines, `-a` as one table on the client,
 * `#iterations` without the warm-up, one unit per run; and the parser reads the real logs of
 * ib_send_lat and ib_write_bw (e2e/testdata) as well.
 */
class PerftestOutputSpec : FunSpec({
    val dir = Files.createTempDirectory("perftest-output-spec").toFile()
    val cache = File(dir, "cache")
    afterSpec { dir.deleteRecursively() }

    val pingpong = File("../samples/pingpong-lat.main.kts").path
    val writeBw = File("../samples/write-bw.main.kts").path
    val cold = arrayOf("--set", "preflight=0")

    fun run(vararg args: String): CliktCommandTestResult = rdmaRun(cache).test(withImplicitRun(arrayOf(*args)).toList())

    /** What the parser makes of [text] (its JSON: tests with banner, addresses, latency and bandwidth rows). */
    fun parse(text: String): List<JsonObject> {
        val process = ProcessBuilder("python3", "../e2e/perftest_parse.py").redirectError(ProcessBuilder.Redirect.INHERIT).start()
        process.outputStream.use { it.write(text.toByteArray()) }
        val out = process.inputStream.readBytes().decodeToString()
        process.waitFor(60, TimeUnit.SECONDS) shouldBe true
        process.exitValue() shouldBe 0
        return Json.parseToJsonElement(out).jsonObject.getValue("tests").jsonArray.map { it.jsonObject }
    }

    fun rows(tests: List<JsonObject>, kind: String) = tests.flatMap { it.getValue(kind).jsonArray.map { r -> r.jsonObject } }
    fun JsonObject.long(key: String) = getValue(key).jsonPrimitive.long
    fun JsonObject.double(key: String) = getValue(key).jsonPrimitive.double
    fun JsonObject.text(key: String) = getValue(key).jsonPrimitive.content
    fun fixed(x: Double) = String.format(Locale.ROOT, "%.2f", x).toDouble()

    val perftestLat = parse(File("../e2e/testdata/ib_send_lat.client.log").readText())
    val perftestBw = parse(File("../e2e/testdata/ib_write_bw.client.log").readText())

    test("the parser reads perftest's own logs: ib_send_lat's latency block, ib_write_bw's bandwidth block, banners and addresses") {
        val lat = rows(perftestLat, "latency").single()
        lat.keys shouldBe setOf("bytes", "iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p99_9")
        listOf(lat.long("bytes"), lat.long("iterations")) shouldContainExactly listOf(64L, 1000L)
        listOf("t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p99_9").map { lat.double(it) } shouldContainExactly
            listOf(15.55, 309.92, 18.15, 22.59, 21.32, 156.76, 309.92)
        rows(perftestLat, "bandwidth").shouldBeEmpty()
        val bw = rows(perftestBw, "bandwidth").single()
        listOf(bw.long("bytes"), bw.long("iterations")) shouldContainExactly listOf(65536L, 1000L)
        listOf(bw.double("bw_peak"), bw.double("bw_average"), bw.double("msg_rate")) shouldContainExactly listOf(43.91, 42.20, 0.000675)
        bw.text("unit") shouldBe "MB/sec"
        rows(perftestBw, "latency").shouldBeEmpty()
        perftestLat.single().text("title") shouldBe "Send Latency Test"
        perftestBw.single().getValue("banner").jsonObject.text("CQ Moderation") shouldBe "100"
        perftestBw.single().getValue("addresses").jsonArray.map { it.jsonObject.text("side") } shouldContainExactly listOf("local", "remote")
    }

    test("pingpong-lat -D: a timed ping-pong ends on both sides after as many exchanges, agreed round by round") {
        for (warmup in listOf("0", "300")) {
            val json = File(dir, "timed-$warmup.json")
            val result = run(pingpong, "--loopback", "-d", "soft0", "-s", "64", "-D", "0.3", "--set", "warmup=$warmup", *cold, "--json", json.path)
            withClue(result.stderr) { result.statusCode shouldBe 0 }
            val runs = ResultsDocument.parse(json.readText()).runs
            val client = runs.single { it.role == "client" }.end
            val server = runs.single { it.role == "server" }.end
            val exchanges = client.sections.getValue("rtt").count
            (exchanges > 0 && exchanges % 1000 == 0L) shouldBe true // whole agreed rounds of 1000
            client.total.messagesReceived shouldBe exchanges
            server.total.messagesReceived shouldBe exchanges
            server.total.operations shouldBe exchanges
        }
    }

    test("pingpong-lat: one latency block, the client's, one way, with perftest's fields and the JSON's figures; no bandwidth line") {
        val json = File(dir, "lat.json")
        val result = run(pingpong, "--loopback", "-d", "soft0", "-s", "64", "-n", "300", "--set", "warmup=0", *cold, "--json", json.path)
        result.statusCode shouldBe 0
        val tests = parse(result.stdout)
        tests shouldHaveSize 2 // one banner per side
        rows(tests, "bandwidth").shouldBeEmpty()
        val row = rows(tests, "latency").single()
        row.keys shouldBe rows(perftestLat, "latency").single().keys
        listOf(row.long("bytes"), row.long("iterations")) shouldContainExactly listOf(64L, 300L)
        val rtt = ResultsDocument.parse(json.readText()).runs.single { it.role == "client" }.end.sections.getValue("rtt")
        row.double("t_typical") shouldBe fixed(rtt.p50Nanos / 2000.0)
        row.double("t_min") shouldBe fixed(rtt.minNanos / 2000.0)
        row.double("p99") shouldBe fixed(rtt.p99Nanos / 2000.0)
        // The banner has what perftest's does, under the same keys; the addresses have its fields and format.
        val client = tests.single { it.getValue("latency").jsonArray.isNotEmpty() }
        client.text("title") shouldBe "pingpong-lat.main.kts Latency Test"
        val banner = client.getValue("banner").jsonObject
        perftestLat.single().getValue("banner").jsonObject.keys shouldContainAll listOf("Number of qps", "Transport type",
            "Connection type", "TX depth", "Mtu", "Link type", "GID index", "Max inline data")
        banner.keys shouldContainAll listOf("Number of qps", "Transport type", "Connection type", "TX depth", "CQ Moderation",
            "Mtu", "Link type", "GID index", "Max inline data", "Device")
        banner.text("Max inline data") shouldBe "64[B]"
        banner.text("Connection type") shouldBe "RC"
        val addresses = client.getValue("addresses").jsonArray.map { it.jsonObject }
        addresses.map { it.text("side") } shouldContainExactly listOf("local", "remote")
        addresses.first().keys shouldBe perftestBw.single().getValue("addresses").jsonArray.first().jsonObject.keys
        val connection = ResultsDocument.parse(json.readText()).runs.single { it.role == "client" }.end.connection!!
        addresses.first().long("qpn") shouldBe connection.qps.single().localQpn.toLong()
        addresses.last().long("psn") shouldBe connection.qps.single().remotePsn.toLong()
        addresses.first().text("gid") shouldMatch Regex("(\\d{2,3}:){15}\\d{2,3}")
    }

    test("write-bw: the bandwidth block, the client's measured writes and MB/sec; no latency block") {
        val json = File(dir, "bw.json")
        val result = run(writeBw, "--loopback", "-d", "soft0", "-n", "400", "--set", "warmup=0", *cold, "--json", json.path)
        result.statusCode shouldBe 0
        val tests = parse(result.stdout)
        rows(tests, "latency").shouldBeEmpty()
        val client = rows(tests, "bandwidth").single { it.long("bytes") == 65536L }
        client.keys shouldBe rows(perftestBw, "bandwidth").single().keys
        client.long("iterations") shouldBe 400
        client.text("unit") shouldBe "MB/sec"
        val end = ResultsDocument.parse(json.readText()).runs.single { it.role == "client" }.end
        client.double("bw_average") shouldBe fixed(end.bytesPerSecond / (1 shl 20))
        result.stdout shouldNotContain "Gb/s"
    }

    test("#iterations counts the measured iterations only: -n 500 after --set warmup=100 says 500") {
        val lat = run(pingpong, "--loopback", "-d", "soft0", "-n", "500", "--set", "warmup=100", *cold)
        lat.statusCode shouldBe 0
        rows(parse(lat.stdout), "latency").single().long("iterations") shouldBe 500
        val bw = run(writeBw, "--loopback", "-d", "soft0", "-s", "4096", "-n", "500", "--set", "warmup=100", *cold)
        bw.statusCode shouldBe 0
        rows(parse(bw.stdout), "bandwidth").single { it.long("bytes") == 4096L }.long("iterations") shouldBe 500
    }

    test("--report_gbits: Gb/sec throughout the run (block, traffic table), no MB/s; the interval lines keep iperf3's bits/sec") {
        val result = run(writeBw, "--loopback", "-d", "soft0", "-s", "4096", "-n", "3000", "--set", "warmup=0", *cold,
            "--report_gbits", "--interval", "0.1")
        result.statusCode shouldBe 0
        rows(parse(result.stdout), "bandwidth").map { it.text("unit") }.distinct() shouldBe listOf("Gb/sec")
        result.stdout shouldContain "BW out[Gb/sec]"
        val rows = result.stdout.lines().filter { it.startsWith("[SUM][TX-C]") }
        rows.shouldNotBeEmpty()
        rows.forEach { it shouldMatch Regex(".* [KMGT]?bits/sec") }
        result.stdout shouldNotContain "MB/s"
    }

    test("-a: one table on the client, a row per size under one header; the server's one line per size after it") {
        val result = run(pingpong, "--loopback", "-d", "soft0", "-a", "-n", "5", "--set", "warmup=0", *cold)
        withClue(result.stderr) { result.statusCode shouldBe 0 }
        val tests = parse(result.stdout)
        tests shouldHaveSize 1 // one banner
        val sizes = rows(tests, "latency").map { it.long("bytes") }
        sizes shouldContainExactly PerftestOptions.SWEEP_SIZES.map { it.toLong() }
        rows(tests, "latency").map { it.long("iterations") }.distinct() shouldBe listOf(5L)
        val lines = result.stdout.lines()
        lines.count { it.startsWith(" #bytes") } shouldBe 1
        val server = lines.filter { it.startsWith("server on soft0, -a size=") }
        server shouldHaveSize PerftestOptions.SWEEP_SIZES.size
        lines.indexOf(server.first()) shouldBe lines.indexOfLast { it == "-".repeat(87) } + 1 // perftest's RESULT_LINE
        lines.filter { it.isNotEmpty() }.last() shouldBe "loopback on soft0: server and client succeeded"
        lines.count { it.startsWith("loopback on") } shouldBe 1
    }
})
