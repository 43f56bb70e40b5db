package dev.rdmarun.dsl

import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContain
import io.kotest.matchers.collections.shouldContainInOrder
import io.kotest.matchers.collections.shouldNotContain
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import io.kotest.matchers.string.shouldStartWith
import java.io.File

/**
 * `table()` prints what a parser of perftest's output reads, as perftest prints it: each format
 * against the lines of real ib_send_lat and ib_write_bw logs (e2e/testdata, from the Soft-RoCE
 * VM), then the table's layout: perftest's banner and addresses, one result block (latency for a
 * latency test, bandwidth otherwise), rdma-run's own lines after perftest's closing line, one unit.
 */
class PerftestTableSpec : FunSpec({
    fun log(name: String) = File("../e2e/testdata/$name").readLines()
    val sendLat = log("ib_send_lat.client.log")
    val writeBw = log("ib_write_bw.client.log")

    test("each format gives perftest's line, character for character (tabs included)") {
        PerftestFormat.RULE shouldBe sendLat[1]
        PerftestFormat.LATENCY_HEADER shouldBe sendLat.single { it.startsWith(" #bytes") }
        val latencyRow = sendLat[sendLat.indexOf(PerftestFormat.LATENCY_HEADER) + 1]
        PerftestFormat.latencyRow(64, 1000, 15.55, 309.92, 18.15, 22.59, 21.32, 156.76, 309.92) shouldBe latencyRow
        PerftestFormat.bandwidthHeader(gbits = false) shouldBe writeBw.single { it.startsWith(" #bytes") }
        val bandwidthRow = writeBw[writeBw.indexOf(PerftestFormat.bandwidthHeader(false)) + 1]
        PerftestFormat.bandwidthRow(65536, 1000, 43.91, 42.20, 0.000675, gbits = false) shouldBe bandwidthRow
        PerftestFormat.titleLine("Send", latency = true) shouldBe sendLat[2]
        PerftestFormat.titleLine("RDMA_Write", latency = false) shouldBe writeBw.single { it.endsWith("BW Test") }
        PerftestFormat.pairs("Dual-port", "OFF", "Device", "rxe0") shouldBe sendLat[3]
        PerftestFormat.pairs("Number of qps", 1, "Transport type", "IB") shouldBe sendLat[4]
        PerftestFormat.pairs("Connection type", "RC", "Using SRQ", "OFF") shouldBe sendLat[5]
        for ((key, value) in listOf("TX depth" to "1", "Mtu" to "1024[B]", "Link type" to "Ethernet", "GID index" to "1",
            "Max inline data" to "0[B]", "Data ex. method" to "Ethernet")) {
            sendLat shouldContain PerftestFormat.pair(key, value)
        }
        writeBw shouldContain PerftestFormat.pair("CQ Moderation", 100)
        sendLat shouldContain PerftestFormat.address("local", 0, 0x11, 0xbe5eb6, null, null)
        writeBw shouldContain PerftestFormat.address("local", 0, 0x19, 0xc43508, 0x0014b9, 0x0055579cb1c000)
        sendLat shouldContain PerftestFormat.gidLine("0000:0000:0000:0000:0000:ffff:0a4d:0001")
    }

    test("C's %#0Nx: zero without the 0x, the width counting the prefix") {
        PerftestFormat.cHex(0, 4) shouldBe "0000"
        PerftestFormat.cHex(1, 4) shouldBe "0x01"
        PerftestFormat.cHex(0x11, 6) shouldBe "0x0011"
        PerftestFormat.cHex(0xabcdef, 6) shouldBe "0xabcdef"
        PerftestFormat.cHex(0x55579cb1c000, 16) shouldBe "0x0055579cb1c000"
    }

    fun latency(count: Long, roundTrip: Boolean, base: Long = 10_000) = LatencySummary(count = count, minNanos = base,
        meanNanos = base * 1.5, p50Nanos = base * 6 / 5, p90Nanos = base * 2, p99Nanos = base * 3, p999Nanos = base * 4,
        maxNanos = base * 5, stdevNanos = base / 2.0, roundTrip = roundTrip)

    fun traffic(ops: Long, messages: Long, latency: LatencySummary?) = TrafficResult(qp = null, bytesSent = ops * 64,
        bytesReceived = messages * 64, operations = ops, messagesReceived = messages, sentGbps = 0.5, receivedGbps = 0.5,
        mpps = 0.02, latency = latency)

    val connection = ConnectionInfo(device = "rxe0", software = false, firmware = "0.0.0", port = 1, linkLayer = "Ethernet",
        mtu = 1024, gidIndex = 1, gid = "0000:0000:0000:0000:0000:ffff:0a4d:0001",
        qps = listOf(QpConnection(0, localQpn = 0x11, remoteQpn = 0x12, localPsn = 0xbe5eb6, remotePsn = 0x7ce73b,
            remoteGid = "0000:0000:0000:0000:0000:ffff:0a4d:0002", localRkey = 0x14b9, remoteRkey = 0x1526,
            localAddress = 0x55579cb1c000, remoteAddress = 0x5559f59a8000)),
        sendDepth = 16, signalEvery = 4, inlineThreshold = 64)

    // A ping-pong's client: 1000 measured exchanges (measureRoundTrip), 125 signaled sends timed.
    val pingpong = ScenarioResult(role = Role.CLIENT, device = "rxe0", durationNanos = 50_000_000,
        qps = listOf(traffic(1000, 1000, latency(125, false)).copy(qp = 0)), total = traffic(1000, 1000, latency(125, false)),
        sections = mapOf("rtt" to latency(1000, true)), connection = connection)

    // A WRITE stream's client: no section.
    val stream = pingpong.copy(sections = emptyMap(), total = traffic(5000, 0, latency(5000, false)),
        qps = listOf(traffic(5000, 0, latency(5000, false)).copy(qp = 0)))

    /** The lines after perftest's result block (its closing dashed line). */
    fun afterBlock(lines: List<String>): List<String> {
        val header = lines.indexOfFirst { it.startsWith(" #bytes") }
        return lines.drop(header + 3)
    }

    test("a latency test: perftest's banner and addresses, the latency block one way, no bandwidth line; the rest after it") {
        val lines = pingpong.table(title = "pingpong-lat.main.kts").lines()
        lines[0] shouldBe "client on rxe0: 1 QP, 0.050 s"
        lines shouldContainInOrder listOf(PerftestFormat.RULE, "                    pingpong-lat.main.kts Latency Test",
            " Dual-port       : OFF\t\tDevice         : rxe0", " Number of qps   : 1\t\tTransport type : IB",
            " Connection type : RC\t\tUsing SRQ      : OFF", " TX depth        : 16", " CQ Moderation   : 4", " Mtu             : 1024[B]",
            " Link type       : Ethernet", " GID index       : 1", " Max inline data : 64[B]", " rdma_cm QPs\t : OFF",
            " Data ex. method : Ethernet", PerftestFormat.RULE,
            " local address: LID 0000 QPN 0x0011 PSN 0xbe5eb6 RKey 0x0014b9 VAddr 0x0055579cb1c000",
            " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:01",
            " remote address: LID 0000 QPN 0x0012 PSN 0x7ce73b RKey 0x001526 VAddr 0x005559f59a8000",
            " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:02", PerftestFormat.RULE,
            PerftestFormat.LATENCY_HEADER,
            // one way: the round trips halved; #iterations: the measured round trips; no label before #bytes
            PerftestFormat.latencyRow(64, 1000, 5.0, 25.0, 6.0, 7.5, 2.5, 15.0, 20.0),
            PerftestFormat.RULE)
        lines.none { it.contains("BW peak") || it.contains("BW average") } shouldBe true
        val own = afterBlock(lines)
        own.first() shouldBe " the latency above: rtt, one way (half the round trip, as perftest); rdma-run's figures follow"
        own.single { it.startsWith(" rtt RTT") } shouldStartWith " rtt RTT        64       1000         10.00        50.00"
        own.single { it.startsWith(" work requests") } shouldStartWith " work requests  64       125 "
        own.none { it.startsWith(" #bytes") || it.startsWith(" rtt one way") } shouldBe true
        own.last() shouldBe PerftestFormat.RULE
    }

    test("the side of a latency test that measured no section prints no result block, not a bandwidth line") {
        val answering = stream.copy(role = Role.SERVER, peerMeasuredLatency = true)
        answering.latencyTest shouldBe true
        val text = answering.table()
        text shouldContain "                    rdma-run Latency Test"
        text.lines().none { it.startsWith(" #bytes") } shouldBe true
        text shouldNotContain "BW peak"
        text shouldContain " no latency section on this side: the client's results have the latency"
    }

    test("a bandwidth test: perftest's bandwidth block with the measured work requests, the work-request latency after it") {
        val lines = stream.table(peakBytesPerSecond = 8_000_000.0).lines()
        lines shouldContain "                    rdma-run BW Test"
        val header = lines.indexOf(PerftestFormat.bandwidthHeader(false))
        // 5000 x 64 bytes in 50 ms: 6.10 MB/sec (2^20 bytes); the peak, 7.63 MB/sec, is the launcher's;
        // MsgRate 0.1 Mpps, BW average / #bytes as perftest's (not the result's mpps, set apart here)
        lines[header + 1] shouldBe PerftestFormat.bandwidthRow(64, 5000, 8_000_000.0 / (1 shl 20), 320_000 / 0.05 / (1 shl 20), 0.1, false)
        lines[header + 2] shouldBe PerftestFormat.RULE
        lines.none { it.contains("t_min[usec]") && it.startsWith(" #bytes") } shouldBe true
        afterBlock(lines).single { it.startsWith(" work requests") } shouldStartWith " work requests  64       5000 "
        // Without a peak (no launcher sampled it), 0.00 as perftest's --noPeak prints, a number a parser reads.
        stream.perftestRow()!!.trim().split(Regex("\\s+"))[2] shouldBe "0.00"
    }

    test("the side of a bandwidth test that moved nothing (a WRITE's target) prints no result block, not a zero row") {
        val target = stream.copy(role = Role.SERVER, total = traffic(0, 0, null), qps = listOf(traffic(0, 0, null).copy(qp = 0)))
        target.latencyTest shouldBe false
        val text = target.table(peakBytesPerSecond = 0.0)
        text shouldContain "                    rdma-run BW Test"
        text.lines().none { it.startsWith(" #bytes") } shouldBe true
        target.perftestRow() shouldBe null
        text shouldContain " no traffic on this side: what the peer's one-sided operations moved to or from this side's memory, " +
            "if any, is in the peer's results"
        // The side that moved data keeps its block and says nothing of the kind.
        stream.table() shouldNotContain "no traffic on this side"
    }

    test("each traffic row's bandwidth is over its own time, as its MsgRate and the JSON are, not over the side's") {
        // QP 1's warm-up ended later: the same bytes over a shorter time than QP 0's.
        val q0 = traffic(5000, 0, null).copy(qp = 0, sentGbps = 0.4, mpps = 0.01)
        val q1 = traffic(5000, 0, null).copy(qp = 1, sentGbps = 0.5, mpps = 0.0125)
        val two = stream.copy(qps = listOf(q0, q1), total = traffic(10_000, 0, null).copy(sentGbps = 0.8, mpps = 0.02))
        val rows = two.trafficLines().drop(1).map { it.trim().split(Regex("\\s+")) }
        rows.map { it[0] to it[5] } shouldBe listOf("0" to "47.684", "1" to "59.605", "total" to "95.367") // Gb/s * 1e9 / 8 / 2^20
        two.trafficLines(gbits = true).drop(1).map { it.trim().split(Regex("\\s+"))[5] } shouldBe listOf("0.400", "0.500", "0.800")
    }

    test("the messages column counts arrivals, taken or not, and says so; the line after it says how many no receive() took") {
        // The card's side: 1000 messages arrived, none taken (its script never calls receive()).
        val card = stream.copy(total = traffic(1000, 1000, null).copy(messagesNotReceived = 1000),
            qps = listOf(traffic(1000, 1000, null).copy(qp = 0, messagesNotReceived = 1000)))
        val lines = card.trafficLines()
        val header = lines[0].trim().split(Regex("\\s{2,}"))
        header[4] shouldBe "#msgs arrived"
        lines[1].trim().split(Regex("\\s+"))[4] shouldBe "1000"
        lines.last() shouldBe " 1000 messages arrived that no receive() took"
    }

    test("the warm-up lines of several QPs' loops give the rounds of those they do not show") {
        fun loop(qp: Int, rounds: Int) = WarmupSummary(qp, WarmupSummary.MODE_AUTO, rounds, 1000, 1_000_000_000, quiet = true)
        // A stranger's -q 4 run: QP 0 557 rounds, the others 1115 each, which "... and 3 more loops" hid.
        stream.copy(warmup = listOf(loop(0, 557), loop(1, 1115), loop(2, 1115), loop(3, 1115))).warmupLines().last() shouldBe
            "... and 3 more loops, 1115 rounds each (the JSON has each)"
        stream.copy(warmup = listOf(loop(0, 557), loop(1, 900), loop(2, 1115))).warmupLines().last() shouldBe
            "... and 2 more loops, 900 to 1115 rounds (the JSON has each)"
    }

    test("one unit system per run: MB/sec everywhere, or with --report_gbits Gb/sec everywhere") {
        for (r in listOf(stream, pingpong)) {
            val mb = r.table()
            mb shouldContain "[MB/sec]"
            mb shouldNotContain "Gb/s"
            val gb = r.table(gbits = true)
            gb shouldContain "[Gb/sec]"
            gb shouldNotContain "MB/s"
        }
        stream.table(gbits = true) shouldContain PerftestFormat.bandwidthHeader(true)
        // A slow Gb/sec average gets perftest's six decimals.
        stream.perftestRow(gbits = true)!!.trim().split(Regex("\\s+")).drop(2) shouldBe listOf("0.000000", "0.051200", "0.100000")
    }

    test("without a connection (--check), the banner says what is known and has no address lines") {
        val text = ScenarioResult.empty(Role.SERVER, "soft0", 2).table()
        text shouldContain " Number of qps   : 2\t\tTransport type : IB"
        text shouldNotContain "address:"
        text.lines() shouldNotContain " TX depth        : 0"
    }
})
