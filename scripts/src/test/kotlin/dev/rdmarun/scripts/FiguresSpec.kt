package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.CliktCommandTestResult
import com.github.ajalt.clikt.testing.test
import io.kotest.core.spec.style.FunSpec
import io.kotest.assertions.withClue
import io.kotest.matchers.collections.shouldBeEmpty
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.collections.shouldNotBeEmpty
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import java.io.File
import java.nio.file.Files
import java.util.Locale

/**
 * The figures of a run are what it measured, exactly, on soft0 in one JVM: perftest's
 * `#iterations`, the boundary between a warm-up and the measured phase, and intervals that add up
 * to the totals.
 */
class FiguresSpec : FunSpec({
    val dir = Files.createTempDirectory("figures-spec").toFile()
    val cache = File(dir, "cache")
    afterSpec { dir.deleteRecursively() }

    fun script(name: String, text: String) = File(dir, name).apply { writeText(text) }
    fun run(vararg args: String): CliktCommandTestResult = rdmaRun(cache).test(withImplicitRun(arrayOf(*args)).toList())

    val rowPattern = Regex("""\[SUM]\[(TX|RX)-([CS])] +(\d+\.\d\d)-(\d+\.\d\d) +sec +([\d.]+) ([KMGT]?)Bytes +.*""")

    /** The bytes a printed transfer (`44.5` `M`) stands for: the range that rounds to it. */
    fun bytes(number: String, prefix: String): ClosedFloatingPointRange<Double> {
        val unit = Math.pow(1024.0, if (prefix.isEmpty()) 0.0 else "KMGT".indexOf(prefix) + 1.0)
        val half = 0.5 * Math.pow(10.0, -number.substringAfter('.', "").length.toDouble()) * unit
        return number.toDouble() * unit - half..number.toDouble() * unit + half
    }

    /** The `#iterations` of [role]'s perftest bandwidth line in the printed results. */
    fun iterations(out: String, role: String): Long {
        val table = out.substringAfter("$role on soft0:")
        val lines = table.lines()
        val header = lines.indexOfFirst { it.startsWith(" #bytes     #iterations    BW peak") }
        return lines[header + 1].trim().split(Regex("\\s+"))[1].toLong()
    }

    // The client posts `op` (16 in flight, one in `signal` signaled) `iterations` times after `warmup`
    // rounds (repeat { }); the server takes each message the client's op sends it, with the same warm-up.
    val stream = script("stream.main.kts", """
        import dev.rdmarun.dsl.*
        rdma {
            val op = param("op", "write")
            sendDepth(16)
            signalEvery(intParam("signal", 1))
            if (isServer) remoteAccess(RemoteAccess.WRITE, RemoteAccess.READ, RemoteAccess.ATOMIC)
            connect(peer)
            forEachQp {
                client {
                    repeat {
                        when (op) {
                            "send" -> send()
                            "write" -> write()
                            "writeWithImm" -> writeWithImm(7)
                            "read" -> read()
                            "fetchAndAdd" -> fetchAndAdd(1)
                            "compareAndSwap" -> compareAndSwap(0, 0)
                        }
                        if (outstanding >= 16) awaitCompletion()
                    }
                    awaitAll()
                }
                server { if (op == "send" || op == "writeWithImm") repeat { receive() } }
            }
        }
    """.trimIndent())

    test("#iterations is the number of measured work requests for every operation kind, on the side that posted them") {
        for (op in listOf("send", "write", "writeWithImm", "read", "fetchAndAdd", "compareAndSwap")) {
            val result = run(stream.path, "--loopback", "-d", "soft0", "-s", "256", "-n", "37", "--set", "warmup=5", "--set", "op=$op")
            result.statusCode shouldBe 0
            iterations(result.stdout, "client") shouldBe 37
            // A SEND test's receiver posted nothing: it counts the messages it received, as perftest's server does.
            if (op == "send" || op == "writeWithImm") iterations(result.stdout, "server") shouldBe 37
        }
    }

    test("the latency block's #bytes is what the measured section posted per sample, not the run's average") {
        // A 64-byte ping-pong timed, then untimed 8 KiB WRITEs and READs on the same QP.
        val mixed = script("mixed.main.kts", """
            import dev.rdmarun.dsl.*
            rdma {
                bufferSize(8192)
                if (isServer) remoteAccess(RemoteAccess.WRITE, RemoteAccess.READ)
                connect(peer)
                qp(0) {
                    client {
                        repeat { measureRoundTrip("pp") { send(64); receive(copyPayload = false) } }
                        kotlin.repeat(20) { write(); read(); awaitAll() }
                    }
                    server { repeat { receive(copyPayload = false); send(64) } }
                }
            }
        """.trimIndent())
        val json = File(dir, "mixed.json")
        val result = run(mixed.path, "--loopback", "-d", "soft0", "-n", "50", "--set", "warmup=0", "--set", "preflight=0", "--json", json.path)
        withClue(result.stderr) { result.statusCode shouldBe 0 }
        val client = result.stdout.substringAfter("client on soft0:").lines()
        val header = client.indexOfFirst { it.startsWith(" #bytes #iterations    t_min") }
        client[header + 1].trim().split(Regex("\\s+")).take(2) shouldContainExactly listOf("64", "50")
        client.single { it.startsWith(" pp RTT") }.trim().split(Regex("\\s+"))[2] shouldBe "64"
        ResultsDocument.parse(json.readText()).runs.single { it.role == "client" }.end.sections.getValue("pp").bytesPerSample shouldBe 64L
    }

    test("a second loop's warm-up that leaves out what an earlier loop measured says so, in the table and the JSON") {
        val twoLoops = script("two-loops.main.kts", """
            import dev.rdmarun.dsl.*
            rdma {
                if (isServer) remoteAccess(RemoteAccess.WRITE)
                connect(peer)
                qp(0) {
                    client {
                        repeat { measureRoundTrip("rt") { send(8); receive(copyPayload = false) } }
                        repeat { write(); awaitCompletion() }
                    }
                    server { repeat { receive(copyPayload = false); send(8) } }
                }
            }
        """.trimIndent())
        val json = File(dir, "two-loops.json")
        val result = run(twoLoops.path, "--loopback", "-d", "soft0", "-n", "30", "--set", "warmup=5", "--set", "preflight=0", "--json", json.path)
        withClue(result.stderr) { result.statusCode shouldBe 0 }
        val runs = ResultsDocument.parse(json.readText()).runs
        runs.single { it.role == "client" }.end.warmup.map { it.leftOutMeasured } shouldContainExactly listOf(false, true)
        runs.single { it.role == "server" }.end.warmup.map { it.leftOutMeasured } shouldContainExactly listOf(false)
        result.stdout.substringAfter("client on soft0:") shouldContain "its end left out what QP 0 had measured before it"
    }

    test("#iterations is per QP, as perftest's -n: -n 40 -q 2 says 40 on both sides") {
        for (op in listOf("write", "send")) {
            val result = run(stream.path, "--loopback", "-d", "soft0", "-s", "256", "-n", "40", "-q", "2", "--set", "warmup=5", "--set", "op=$op")
            result.statusCode shouldBe 0
            iterations(result.stdout, "client") shouldBe 40
            if (op == "send") iterations(result.stdout, "server") shouldBe 40
        }
    }

    test("a work request belongs to the phase it was posted in: the warm-up's, still in flight at its end, are left out") {
        for ((signal, qps) in listOf(1 to 1, 4 to 2)) {
            val result = run(stream.path, "--loopback", "-d", "soft0", "-s", "4096", "-n", "500", "-q", "$qps", "--set", "warmup=100",
                "--set", "signal=$signal", "--json", "-")
            result.statusCode shouldBe 0
            val client = ResultsDocument.parse(result.stdout).runs.single { it.role == "client" }.end
            client.qps.map { it.operations } shouldContainExactly List(qps) { 500L }
            client.total.bytesSent shouldBe qps * 2_048_000L
            client.total.latency!!.count shouldBe qps * 500L / signal // the signaled ones of the measured phase
        }
    }

    test("a message belongs to the phase of the receive() that took it: the receiver's warm-up leaves out exactly its own") {
        val result = run(stream.path, "--loopback", "-d", "soft0", "-s", "512", "-n", "300", "--set", "warmup=100", "--set", "op=send", "--json", "-")
        result.statusCode shouldBe 0
        val runs = ResultsDocument.parse(result.stdout).runs
        val server = runs.single { it.role == "server" }.end.total
        server.messagesReceived shouldBe 300
        server.bytesReceived shouldBe 300 * 512L
        server.messagesNotReceived shouldBe 0
        runs.single { it.role == "client" }.end.total.operations shouldBe 300
    }

    test("the intervals of a run add up to its totals, in the JSON and the printed lines (to their digits), on both sides") {
        val json = File(dir, "intervals.json")
        val runs = listOf(
            listOf("-n", "200", "--interval", "30"), // far shorter than one interval: the partial one is all there is
            listOf("-D", "0.4", "--interval", "0.1"),
            listOf("-n", "400", "--interval", "0.15", "--set", "op=send"), // the server's receives take exactly the client's sends
            listOf("-n", "2000", "--set", "warmup=300", "--interval", "0.1"),
            listOf("-D", "0.3", "--interval", "0.1", "--set", "op=read"),
        )
        for (args in runs) {
            val result = run(stream.path, "--loopback", "-d", "soft0", "-s", "1024", "--json", json.path, *args.toTypedArray())
            result.statusCode shouldBe 0
            for (r in ResultsDocument.parse(json.readText()).runs) {
                val t = r.end.total
                r.intervals.shouldNotBeEmpty()
                r.intervals.sumOf { it.bytesSent } shouldBe t.bytesSent
                r.intervals.sumOf { it.bytesReceived } shouldBe t.bytesReceived
                r.intervals.sumOf { it.operations } shouldBe t.operations
                r.intervals.sumOf { it.messagesReceived } shouldBe t.messagesReceived
                // The printed rows after the warm-up's ([SUM][TX-C]  START-END  sec  TRANSFER  BITRATE) are the records,
                // to iperf3's three digits: a row per record and direction, none for a direction that moved nothing yet.
                val lines = result.stdout.lines()
                val side = if (r.role == "server") "S" else "C"
                val rows = lines.drop(lines.indexOfLast { it.startsWith("[${r.role}] warm-up over") } + 1)
                    .mapNotNull { rowPattern.matchEntire(it)?.destructured }
                    .filter { (_, s) -> s == side }
                    .associate { (direction, _, start, end, number, unit) -> (direction to "$start-$end") to bytes(number, unit) }
                if (t.bytesSent + t.bytesReceived == 0L) {
                    rows.keys.shouldBeEmpty()
                    result.stdout shouldContain "[${r.role}] ${IntervalSampler.NOTHING_MOVED}"
                }
                rows.keys.map { it.second }.distinct().size shouldBe (if (rows.isEmpty()) 0 else r.intervals.size)
                for (record in r.intervals) {
                    val time = String.format(Locale.ROOT, "%.2f-%.2f", record.startSeconds, record.endSeconds)
                    for ((direction, moved) in listOf("TX" to record.bytesSent, "RX" to record.bytesReceived)) withClue("$direction $time") {
                        val printed = rows[direction to time]
                        if (printed == null) moved shouldBe 0L
                        else (moved.toDouble() in printed) shouldBe true
                    }
                }
            }
        }
    }

    test("-a on a script that fixes the message size with bufferSize(n) names the call and its line") {
        val fixed = script("fixed.main.kts", """
            import dev.rdmarun.dsl.*

            rdma {
                bufferSize(4096) // fixed
                connect(peer)
            }
        """.trimIndent())
        val result = run(fixed.path, "--loopback", "-d", "soft0", "-a")
        result.statusCode shouldBe 1
        result.stderr shouldContain "-a sweeps the message size, but fixed.main.kts fixes it with bufferSize(4096) at line 4: remove one"
        (result.stderr.contains("-s/--size")) shouldBe false
    }
})
