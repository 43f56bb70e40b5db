package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.CliktCommandTestResult
import com.github.ajalt.clikt.testing.test
import com.github.ajalt.mordant.terminal.Terminal
import com.github.ajalt.mordant.terminal.TerminalRecorder
import dev.rdmarun.dsl.LiveTotals
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldBeEmpty
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.collections.shouldNotBeEmpty
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldMatch
import java.io.File
import java.nio.file.Files

/**
 * `--interval`'s lines are iperf3's: a header, `[SUM][TX-C]` rows with 1024-based transfers and
 * bitrates in bits/sec, a row per direction the side moved data in; a side that moved nothing (the
 * target of RDMA WRITEs) says so once instead of printing zeros; on a terminal they are printed
 * too, above the progress line, which is drawn again under them.
 */
class IntervalLinesSpec : FunSpec({
    val dir = Files.createTempDirectory("interval-lines-spec").toFile()
    val cache = File(dir, "cache")
    afterSpec { dir.deleteRecursively() }

    val writeBw = File("../samples/write-bw.main.kts").path

    fun run(vararg args: String, terminal: Boolean = false): CliktCommandTestResult =
        rdmaRun(cache).test(withImplicitRun(arrayOf(*args)).toList(), outputInteractive = terminal)

    fun record(start: Double, end: Double, sent: Long, received: Long, operations: Long = 0, messages: Long = 0) =
        IntervalRecord(start, end, sent, received, operations, messages, 0.0, 0.0, 0.0)

    /** What a terminal shows after [output]: "\r" goes back to the line's start and what follows overwrites it. */
    fun screen(output: String): List<String> {
        val lines = ArrayList<String>()
        val line = StringBuilder()
        var column = 0
        for (c in output) when (c) {
            '\n' -> { lines += line.toString().trimEnd(); line.clear(); column = 0 }
            '\r' -> column = 0
            else -> {
                if (column < line.length) line.setCharAt(column, c) else line.append(c)
                column++
            }
        }
        if (line.isNotBlank()) lines += line.toString().trimEnd()
        return lines
    }

    val row = Regex("""\[SUM]\[(TX|RX)-([CS])] +\d+\.\d\d-\d+\.\d\d +sec +[\d.]+ [KMGT]?Bytes +[\d.]+ [KMGT]?bits/sec""")

    test("transfers in 1024-based units and bitrates in bits/sec with SI prefixes, to three digits, as iperf3 prints them") {
        listOf(0L, 1L, 512L, 1023L, 1024L, 1536L, 10_229L, 10_235L, 46_661_632L, 432_013_312L, 5_798_205_850L)
            .map { IperfFormat.transfer(it) } shouldContainExactly listOf("0.00 Bytes", "1.00 Bytes", " 512 Bytes", "1023 Bytes",
                "1.00 KBytes", "1.50 KBytes", "9.99 KBytes", "10.0 KBytes", "44.5 MBytes", " 412 MBytes", "5.40 GBytes")
        listOf(0.0, 999.0, 1_000.0, 46_400_000.0, 999_400_000.0, 3_456_106_496.0, 1.25e13)
            .map { IperfFormat.bitrate(it) } shouldContainExactly listOf("0.00 bits/sec", " 999 bits/sec", "1.00 Kbits/sec",
                "46.4 Mbits/sec", " 999 Mbits/sec", "3.46 Gbits/sec", "12.5 Tbits/sec")
    }

    test("a row is iperf3's --bidir row: [SUM][TX-C], the interval in seconds, the transfer, the bitrate over the exact duration") {
        IperfFormat.HEADER shouldBe "[ ID][Role] Interval           Transfer     Bitrate"
        IperfFormat.row("SUM", "TX", "C", 0.0, 1.0, 432_013_312L, 1.0) shouldBe "[SUM][TX-C]   0.00-1.00   sec   412 MBytes  3.46 Gbits/sec"
        // The times print rounded to 10 ms; the bitrate is over the interval's own 0.5004 s.
        IperfFormat.row("SUM", "RX", "S", 12.5, 13.0004, 1_000_000L, 0.5004) shouldBe
            "[SUM][RX-S]  12.50-13.00  sec   977 KBytes  16.0 Mbits/sec"
        IperfFormat.row("SUM", "TX", "S", 3.0, 3.0, 0L, 0.0) shouldBe "[SUM][TX-S]   3.00-3.00   sec  0.00 Bytes  0.00 bits/sec"
    }

    test("rows are held while a side has moved nothing, printed all at once with the first traffic, and a pause is still printed") {
        val rows = IntervalRows("SUM", server = true)
        rows.add(record(0.0, 1.0, 0, 0), 1.0, LiveTotals(1_000_000_000, 0, 0, 0, 0)).shouldBeEmpty()
        rows.add(record(1.0, 2.0, 0, 0), 1.0, LiveTotals(2_000_000_000, 0, 0, 0, 0)).shouldBeEmpty()
        rows.moved shouldBe false
        // Received bytes only: RX rows, the two held ones first, and no TX column of zeros.
        rows.add(record(2.0, 3.0, 0, 2048, messages = 2), 1.0, LiveTotals(3_000_000_000, 0, 2048, 0, 2)) shouldContainExactly listOf(
            "[SUM][RX-S]   0.00-1.00   sec  0.00 Bytes  0.00 bits/sec",
            "[SUM][RX-S]   1.00-2.00   sec  0.00 Bytes  0.00 bits/sec",
            "[SUM][RX-S]   2.00-3.00   sec  2.00 KBytes  16.4 Kbits/sec",
        )
        rows.add(record(3.0, 4.0, 0, 0), 1.0, LiveTotals(4_000_000_000, 0, 2048, 0, 2)) shouldContainExactly
            listOf("[SUM][RX-S]   3.00-4.00   sec  0.00 Bytes  0.00 bits/sec")
        // Sending starts: a TX row from now on, beside the RX one.
        rows.add(record(4.0, 5.0, 1024, 0, operations = 1), 1.0, LiveTotals(5_000_000_000, 1024, 2048, 1, 2)) shouldContainExactly listOf(
            "[SUM][TX-S]   4.00-5.00   sec  1.00 KBytes  8.19 Kbits/sec",
            "[SUM][RX-S]   4.00-5.00   sec  0.00 Bytes  0.00 bits/sec",
        )
        rows.printed shouldBe 5
    }

    test("a side that moved no bytes but completed work requests or took messages (zero-length) still has its rows") {
        IntervalRows("SUM", server = false).add(record(0.0, 1.0, 0, 0, operations = 5), 1.0, LiveTotals(1_000_000_000, 0, 0, 5, 0)) shouldContainExactly
            listOf("[SUM][TX-C]   0.00-1.00   sec  0.00 Bytes  0.00 bits/sec")
        IntervalRows("SUM", server = true).add(record(0.0, 1.0, 0, 0, messages = 5), 1.0, LiveTotals(1_000_000_000, 0, 0, 0, 5)) shouldContainExactly
            listOf("[SUM][RX-S]   0.00-1.00   sec  0.00 Bytes  0.00 bits/sec")
    }

    test("a peak sample spans at least 90 ms: the sliver between the last sample and the traffic's end is none") {
        // A stranger's run: the last 78 ms of a 291 ms run gave its "BW peak", well above every whole sample.
        val at200 = LiveTotals(200_000_000, 200L shl 20, 0, 800, 0)
        IntervalSampler.sampleRate(LiveTotals(100_000_000, 100L shl 20, 0, 400, 0), at200) shouldBe (1000.0 * (1 shl 20))
        IntervalSampler.sampleRate(at200, LiveTotals(278_000_000, 300L shl 20, 0, 1200, 0)) shouldBe null
        IntervalSampler.sampleRate(at200, LiveTotals(290_000_000, 290L shl 20, 0, 1160, 0)) shouldBe (1000.0 * (1 shl 20))
    }

    test("the header comes before the first row, once, and again only when other output came between rows; a note once per key") {
        val printed = ArrayList<String>()
        val output = IntervalOutput { printed += it }
        output.print(listOf(IntervalLine("[client] warm-up over: ...", row = false)))
        output.print(listOf(IntervalLine("row 1", row = true), IntervalLine("row 2", row = true)))
        output.print(listOf(IntervalLine("row 3", row = true)))
        output.once("server", "note")
        output.once("server", "note")
        output.interrupted()
        output.print(listOf(IntervalLine("row 4", row = true)))
        printed shouldContainExactly listOf("[client] warm-up over: ...", IperfFormat.HEADER, "row 1", "row 2", "row 3", "note",
            IperfFormat.HEADER, "row 4")
    }

    test("write-bw: the client's TX rows under one header; its server, the target of the WRITEs, one note and no rows; JSON unchanged") {
        val json = File(dir, "write.json")
        val result = run(writeBw, "--loopback", "-d", "soft0", "-s", "4096", "-D", "0.6", "--interval", "0.1", "--set", "warmup=0",
            "--json", json.path)
        withClue(result.stderr) { result.statusCode shouldBe 0 }
        val lines = result.stdout.lines()
        lines.filter { it == IperfFormat.HEADER } shouldHaveSize 1
        val rows = lines.filter { it.startsWith("[SUM]") }
        rows.shouldNotBeEmpty()
        rows.forEach { it shouldMatch row }
        rows.map { it.substring(0, 11) }.distinct() shouldContainExactly listOf("[SUM][TX-C]")
        lines.indexOf(IperfFormat.HEADER) shouldBe lines.indexOfFirst { it.startsWith("[SUM]") } - 1
        lines.filter { it.startsWith("[server]") } shouldContainExactly listOf("[server] ${IntervalSampler.NOTHING_MOVED}")
        // The records are the server's exact counts still: zeros, an interval each.
        val server = ResultsDocument.parse(json.readText()).runs.single { it.role == "server" }
        server.intervals.shouldNotBeEmpty()
        server.intervals.all { it.bytesSent == 0L && it.bytesReceived == 0L && it.operations == 0L && it.messagesReceived == 0L } shouldBe true
    }

    test("on a terminal the lines are printed too, whole, with the progress line out of their way") {
        val json = File(dir, "terminal.json")
        // Long enough for the progress line (drawn from 1 s on, twice a second) to be under some of the rows.
        val result = run(writeBw, "--loopback", "-d", "soft0", "-s", "4096", "-D", "1.6", "--interval", "0.2", "--set", "warmup=0",
            "--json", json.path, terminal = true)
        withClue(result.stderr) { result.statusCode shouldBe 0 }
        val shown = screen(result.stdout)
        shown.filter { it == IperfFormat.HEADER } shouldHaveSize 1
        // Every line that starts as a row is a whole row: nothing of the progress line is left in or after it.
        val rows = shown.filter { it.startsWith("[SUM]") }
        rows.forEach { it shouldMatch row }
        rows.size shouldBe ResultsDocument.parse(json.readText()).runs.single { it.role == "client" }.intervals.size
        shown.filter { it.startsWith("[server]") } shouldContainExactly listOf("[server] ${IntervalSampler.NOTHING_MOVED}")
    }

    test("the status line is wiped for lines printed above it and drawn again under them at once") {
        val recorder = TerminalRecorder(width = 80)
        val line = StatusLine(Terminal(terminalInterface = recorder))
        val first = "client 1.5 s: 1.2 GiB out, 0 B in, 300 WRs, 0 msgs, 812.00 MB/sec"
        val second = "client 2.0 s: 1.6 GiB out"
        line.show(first)
        line.above { } // nothing printed: the line comes back as it was
        line.above { Terminal(terminalInterface = recorder).rawPrint("[SUM][TX-C]   0.00-0.20   sec   162 MBytes  6.81 Gbits/sec\n") }
        line.show(second)
        screen(recorder.stdout()) shouldContainExactly listOf(
            "[SUM][TX-C]   0.00-0.20   sec   162 MBytes  6.81 Gbits/sec",
            "client 2.0 s: 1.6 GiB out",
        )
        // The redraw after the row is there before any new show(): the last drawing is the line itself.
        recorder.stdout().substringAfterLast("Gbits/sec\n") shouldBe "\r$first\r$second" + " ".repeat(first.length - second.length)
        line.close()
        screen(recorder.stdout()).last() shouldBe "[SUM][TX-C]   0.00-0.20   sec   162 MBytes  6.81 Gbits/sec"
    }
})
