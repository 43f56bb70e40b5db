package dev.rdmarun.dsl

import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactlyInAnyOrder
import io.kotest.matchers.doubles.plusOrMinus
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import java.net.ConnectException
import java.net.InetSocketAddress
import java.net.ServerSocket
import java.net.Socket
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay

/**
 * Runs of several ranks ([rdmaRanks]) on soft0, every rank a coroutine of this JVM with its own
 * options, as `mpirun` would start them as processes: the rendezvous through rank 0, the pairs,
 * the barrier, and a failing rank ending every rank with its name.
 */
class RanksSpec : FunSpec({
    fun freePort() = ServerSocket(0).use { it.localPort }
    val token = ControlToken.random()

    fun options(rank: Int, size: Int, port: Int) = RdmaOptions(
        parameters = mapOf(StandardParameters.WARMUP to "0", StandardParameters.PREFLIGHT to "0"),
        overrides = SettingsOverrides(device = "soft0", timeout = 10.seconds),
        token = token,
        ranks = Ranks(rank, size, if (rank == 0) Peer.listen(port) else Peer.connect("127.0.0.1", port)),
    )

    /** Every rank of [size] at once, each running [block]; what each returned or threw, by rank. */
    suspend fun run(size: Int, port: Int = freePort(), block: suspend RanksScope.() -> Unit): List<Result<List<ScenarioResult>>> =
        coroutineScope {
            (0 until size).map { r -> async(Dispatchers.IO) { runCatching { RankRun(options(r, size, port), false, null).run(block).pairs } } }.awaitAll()
        }

    /** One message each way with the pair's peer, checked: who sent it, to whom. */
    val exchange: suspend ScenarioScope.() -> Unit = {
        connect(peer)
        forEachQp {
            send("rank $rank to rank $peerRank".toByteArray())
            val text = receive().text()
            if (text != "rank $peerRank to rank $rank") throw ScenarioException("rank $rank got '$text' from rank $peerRank")
        }
    }

    test("all to all: every rank exchanges a checked message with every other, and each pair's result names it") {
        val outcomes = run(4) {
            allToAll(exchange)
            barrier()
        }
        outcomes.forEachIndexed { r, outcome ->
            val results = outcome.getOrThrow()
            results.map { it.pair!!.peerRank } shouldContainExactlyInAnyOrder (0 until 4).filter { it != r }
            results.forEach {
                it.pair!!.rank shouldBe r
                it.pair!!.ranks shouldBe 4
                it.total.operations shouldBe 1
                it.total.messagesReceived shouldBe 1
            }
        }
    }

    test("rank 0 gathers every rank's pair results, and its table sums them per rank and per pair") {
        val port = freePort()
        val outcomes = coroutineScope {
            (0 until 3).map { r -> async(Dispatchers.IO) { RankRun(options(r, 3, port), false, null).run { allToAll(exchange) } } }.awaitAll()
        }
        val gathered = outcomes[0].gathered
        gathered.map { it.pair!!.rank } shouldBe listOf(0, 0, 1, 1, 2, 2) // rank 0's own, then by rank
        gathered.map { it.pair!!.rank to it.pair!!.peerRank } shouldContainExactlyInAnyOrder listOf(0 to 1, 0 to 2, 1 to 0, 1 to 2, 2 to 0, 2 to 1)
        outcomes[1].gathered shouldBe emptyList()
        val table = outcomes[0].table()
        table shouldContain "ranks: 3, 6 pair results gathered on rank 0"
        // 6 pairs, each one message of the exchange's text each way.
        val bytes = gathered.sumOf { it.total.bytesSent }
        bytes shouldBe gathered.sumOf { it.total.bytesReceived }
        Regex("""(?m)^ +total +6 +$bytes +$bytes """).containsMatchIn(table) shouldBe true
        table shouldContain "pair matrix"
        outcomes[1].table() shouldBe ""

        // The summary behind the table and the JSON: each rank's pairs summed, latencies merged sample by sample.
        val summary = outcomes[0].summary
        summary.perRank.map { it.rank } shouldBe listOf(0, 1, 2)
        for (t in summary.perRank) {
            val mine = gathered.filter { it.pair!!.rank == t.rank }
            t.pairs shouldBe 2
            t.bytesSent shouldBe mine.sumOf { it.total.bytesSent }
            t.latency!!.count shouldBe mine.sumOf { it.total.latency!!.count }
            t.latency!!.maxNanos shouldBe mine.maxOf { it.total.latency!!.maxNanos }
        }
        summary.total.bytesSent shouldBe summary.perRank.sumOf { it.bytesSent }
        summary.total.sentBytesPerSecond shouldBe (summary.perRank.sumOf { it.sentBytesPerSecond } plusOrMinus 1e-6)
        summary.total.latency!!.count shouldBe gathered.sumOf { it.total.latency!!.count }
        // Another rank sums its own pairs only.
        outcomes[1].summary.perRank.map { it.rank } shouldBe listOf(1)
        outcomes[1].summary.total.bytesSent shouldBe outcomes[1].pairs.sumOf { it.total.bytesSent }
    }

    test("incast: the senders each pair with rank 0 only; rank 0 receives what they sent") {
        val outcomes = run(4) {
            incast(to = 0) {
                connect(peer)
                forEachQp { if (rank == 0) receive() else send("to rank 0".toByteArray()) }
            }
        }
        val received = outcomes[0].getOrThrow().sumOf { it.total.messagesReceived }
        val sent = outcomes.drop(1).sumOf { o -> o.getOrThrow().single().also { it.pair!!.peerRank shouldBe 0 }.total.operations }
        received shouldBe 3
        received shouldBe sent
    }

    test("a rank that fails ends every rank, each with a sentence naming it") {
        val outcomes = run(4) {
            allToAll {
                connect(peer)
                if (rank == 2 && peerRank == 1) throw ScenarioException("rank 2 gives up")
                forEachQp { if (isServer) send() else receive() }
            }
        }
        outcomes.forEach { it.isFailure shouldBe true }
        outcomes[2].exceptionOrNull()!!.message!! shouldContain "rank 2 gives up"
        for (r in listOf(0, 1, 3)) outcomes[r].exceptionOrNull()!!.message!! shouldContain "rank 2"
    }

    // Without the idle check rank 0 waits for ever: the case's own bound makes that a failure.
    test("a rank that never reaches the barrier, alive in code of its own, ends every rank within the timeout, named").config(timeout = 60.seconds) {
        val port = freePort()
        val short = SettingsOverrides(device = "soft0", timeout = 3.seconds)
        val outcomes = coroutineScope {
            (0 until 3).map { r ->
                async(Dispatchers.IO) {
                    runCatching {
                        RankRun(options(r, 3, port).copy(overrides = short), false, null).run {
                            if (rank == 2) awaitCancellation() // alive (heartbeats go on) but never at the barrier
                            barrier()
                        }
                    }
                }
            }.awaitAll()
        }
        outcomes.forEach { it.isFailure shouldBe true }
        for (r in 0..1) outcomes[r].exceptionOrNull()!!.message!! shouldContain "rank 2 (host 127.0.0.1, pid "
        outcomes[0].exceptionOrNull()!!.message!! shouldContain "did not reach barrier 1 within 3s: it runs code of its own"
    }

    test("a stray at the rendezvous port is closed and counted; the run goes on") {
        val port = freePort()
        coroutineScope {
            val zero = async(Dispatchers.IO) { runCatching { RankRun(options(0, 3, port), false, null).run { allToAll(exchange) }.pairs } }
            // The stray connects first (retrying until rank 0 listens), and sends garbage.
            var stray: Socket
            while (true) {
                stray = Socket() // a refused socket is closed: each attempt needs its own
                try {
                    stray.connect(InetSocketAddress("127.0.0.1", port))
                    break
                } catch (_: ConnectException) {
                    stray.close()
                    delay(20)
                }
            }
            stray.use { it.getOutputStream().write("GET / HTTP/1.0\r\n\r\n".toByteArray()) }
            val others = (1..2).map { r -> async(Dispatchers.IO) { runCatching { RankRun(options(r, 3, port), false, null).run { allToAll(exchange) }.pairs } } }
            zero.await().getOrThrow().size shouldBe 2
            others.awaitAll().forEach { it.getOrThrow().size shouldBe 2 }
        }
    }

    test("a rank with another token is refused at the rendezvous, and the run ends with a sentence") {
        val port = freePort()
        val outcomes = coroutineScope {
            val short = SettingsOverrides(device = "soft0", timeout = 3.seconds)
            val zero = async(Dispatchers.IO) { runCatching { RankRun(options(0, 2, port).copy(overrides = short), false, null).run { allToAll(exchange) } } }
            val other = async(Dispatchers.IO) {
                runCatching { RankRun(options(1, 2, port).copy(token = ControlToken.random(), overrides = short), false, null).run { allToAll(exchange) } }
            }
            zero.await() to other.await()
        }
        outcomes.second.exceptionOrNull()!!.message!! shouldContain "refused the connection: the tokens differ"
        outcomes.first.exceptionOrNull()!!.message!! shouldContain "no client completed the hello"
    }

    test("a rank of another launcher's run at the rendezvous port is refused with a sentence saying so") {
        val port = freePort()
        val outcomes = coroutineScope {
            val short = SettingsOverrides(device = "soft0", timeout = 3.seconds)
            fun of(rank: Int, run: String) = options(rank, 2, port).let { it.copy(overrides = short, ranks = it.ranks!!.copy(run = run)) }
            val zero = async(Dispatchers.IO) { runCatching { RankRun(of(0, "1300430849"), false, null).run { allToAll(exchange) } } }
            val other = async(Dispatchers.IO) { runCatching { RankRun(of(1, "1300430850"), false, null).run { allToAll(exchange) } } }
            zero.await() to other.await()
        }
        outcomes.second.exceptionOrNull()!!.message!! shouldContain
            "the launchers' runs differ (job 1300430850 here, 1300430849 on the server): is another run using the rendezvous port?"
        outcomes.first.exceptionOrNull()!!.message!! shouldContain "no client completed the hello"
    }

    test("--check plans the first pair, up to its connect, and stops the run there: nobody is met") {
        var after = false
        val plans = mutableListOf<ScenarioPlan>()
        val result = RankRun(options(1, 4, 1).copy(onPlan = { plans += it }), true, null).run {
            allToAll { qps(2); connect(peer) }
            after = true
        }
        plans.map { it.settings.qps } shouldBe listOf(2)
        after shouldBe false
        result.pairs shouldBe emptyList()
    }

    test("bad calls get one sentence: a rank outside the run, a two-peer scenario in a run of 4, no rank at all") {
        shouldThrow<ScenarioException> {
            RankRun(options(1, 4, 1), true, null).run { forEachPeer(listOf(1)) { } }
        }.message!! shouldContain "forEachPeer: 1 is not another rank"
        shouldThrow<ScenarioException> {
            RdmaDefaults.forThisThread(options(1, 4, 1)) { rdma { connect(peer) } }
        }.message!! shouldContain "this process is rank 1 of 4, and rdma { } runs between two peers"
        shouldThrow<ScenarioException> { RankRun(RdmaOptions(), false, null) }.message shouldBe NO_RANKS
    }
})
