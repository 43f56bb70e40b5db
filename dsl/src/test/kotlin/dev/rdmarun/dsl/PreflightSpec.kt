package dev.rdmarun.dsl

import dev.rdmarun.runtime.Context
import dev.rdmarun.runtime.IdleMode
import dev.rdmarun.runtime.PollingDispatcher
import dev.rdmarun.runtime.VerbsResource
import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldBeEmpty
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.collections.shouldNotBeEmpty
import io.kotest.matchers.ints.shouldBeGreaterThan
import io.kotest.matchers.longs.shouldBeGreaterThan
import io.kotest.matchers.longs.shouldBeLessThanOrEqual
import io.kotest.matchers.nulls.shouldBeNull
import io.kotest.matchers.nulls.shouldNotBeNull
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldStartWith
import java.net.ServerSocket
import java.util.concurrent.ConcurrentLinkedQueue
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.job
import kotlinx.coroutines.withContext

/** The pre-flight warm-up of `connect(peer)` ([Preflight]), on soft0, both peers in this JVM. */
class PreflightSpec : FunSpec({
    /** Records what pre-flights of this JVM do while [block] runs. */
    class Recorder : Preflight.Probe {
        val sessions = ConcurrentLinkedQueue<Session>()
        val created = ConcurrentLinkedQueue<VerbsResource>()
        @Volatile
        var onRound: (suspend (Int) -> Unit)? = null
        @Volatile
        var clock: (() -> Long)? = null

        override fun starting(session: Session) {
            sessions.add(session)
        }

        override fun created(resource: VerbsResource) {
            created.add(resource)
        }

        override suspend fun roundDone(round: Int) {
            onRound?.invoke(round)
        }

        override fun nanoTime(): Long = clock?.invoke() ?: System.nanoTime()
    }

    suspend fun <T> recording(block: suspend (Recorder) -> T): T {
        val r = Recorder()
        Preflight.probe = r
        try {
            return block(r)
        } finally {
            Preflight.probe = null
        }
    }

    fun freePort() = ServerSocket(0).use { it.localPort }

    suspend fun pair(parameters: Map<String, String> = emptyMap(), block: suspend ScenarioScope.() -> Unit): Pair<ScenarioResult, ScenarioResult> {
        val port = freePort()
        fun options(peer: Peer) = RdmaOptions(parameters = parameters, overrides = SettingsOverrides(device = "soft0"), peer = peer)
        return coroutineScope {
            val server = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.listen(port)), block) } }
            val client = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.connect("127.0.0.1", port)), block) } }
            server.await().getOrThrow() to client.await().getOrThrow()
        }
    }

    test("the pre-flight runs on soft0 before the handshake; each session keeps its report") {
        recording { probe ->
            pair {
                bufferSize(256)
                inlineThreshold(64)
                signalEvery(4)
                connect(peer)
            }
            probe.sessions shouldHaveSize 2
            for (s in probe.sessions) {
                val report = s.preflight.shouldNotBeNull()
                report.device shouldBe "soft0"
                report.rounds shouldBeGreaterThan 0
                report.exchanges shouldBeGreaterThan (report.rounds - 1).toLong() * Preflight.EXCHANGES_PER_ROUND
                report.exchanges shouldBeLessThanOrEqual report.rounds.toLong() * Preflight.EXCHANGES_PER_ROUND
                println(report.describe()) // in the test report: how long a pre-flight takes here
                report.describe() shouldStartWith "pre-flight on soft0: ${report.rounds} round"
            }
        }
    }

    test("warmup=0 (the loop's cold figure) still runs it; preflight=0 skips it: nothing is created, no report") {
        recording { probe ->
            pair(mapOf(StandardParameters.WARMUP to "0")) { connect(peer) }
            probe.sessions shouldHaveSize 2
            probe.sessions.forEach { it.preflight.shouldNotBeNull() }
        }
        recording { probe ->
            pair(mapOf(StandardParameters.PREFLIGHT to "0")) { connect(peer) }
            probe.sessions shouldHaveSize 2
            probe.sessions.forEach { it.preflight.shouldBeNull() }
            probe.created.shouldBeEmpty()
        }
    }

    for (mode in CompletionMode.entries) {
        test("once connect returns, every verbs object of the pre-flight is closed ($mode, per-QP CQs)") {
            recording { probe ->
                val open = ConcurrentLinkedQueue<String>()
                pair {
                    completionMode(mode)
                    perQpCq()
                    connect(peer)
                    probe.created.filter { !it.isClosed }.forEach { open.add(it.javaClass.simpleName) }
                }
                probe.created.shouldNotBeEmpty()
                open.shouldBeEmpty()
            }
        }
    }

    test("a cancelled pre-flight (Ctrl-C) closes its objects and leaves nothing registered on the dispatcher") {
        recording { probe ->
            val context = Context.open("soft0")
            val polling = PollingDispatcher.start("spec-preflight", IdleMode.BACKOFF, null)
            try {
                val session = Session(ScenarioPlan(ScenarioSettings(device = "soft0"), Peer.listen(0)), polling, null)
                val lines = ConcurrentLinkedQueue<String>()
                var pending = -1
                withContext(VerbsDispatcher(polling)) {
                    shouldThrow<CancellationException> {
                        coroutineScope {
                            val inner = currentCoroutineContext().job
                            probe.onRound = { inner.cancel() }
                            Preflight.run(session, polling, context, context.defaultGid(1).index()) { lines.add(it) }
                        }
                    }
                }
                withContext(VerbsDispatcher(polling)) { pending = polling.pending() }
                probe.created.shouldNotBeEmpty()
                probe.created.filter { !it.isClosed }.shouldBeEmpty()
                pending shouldBe 0
                context.isClosed shouldBe false
                lines.shouldBeEmpty()
            } finally {
                polling.close()
                context.close()
            }
        }
    }

    test("the report's sentence counts exactly: a round cut short is not averaged away") {
        PreflightReport("soft0", 6, 6000, 1_900_000_000, true).describe() shouldBe
            "pre-flight on soft0: 6 rounds of 1000 local exchanges in 1.9 s, until no compilation for 0.5 s"
        PreflightReport("soft0", 7, 6413, 10_000_000_000, false).describe() shouldBe
            "pre-flight on soft0: 7 rounds, 6413 local exchanges in 10.0 s, stopped at its time bound with the JIT still compiling"
        PreflightReport("soft0", 1, 0, 1_000_000, false).describe() shouldBe
            "pre-flight on soft0: 1 round, 0 local exchanges in 0.0 s, stopped at its time bound with the JIT still compiling"
    }

    test("a round stops its ping-pongs as soon as the bound passes, not at the round's end") {
        recording { probe ->
            // Each pre-flight runs on its session's dispatcher thread: after its first reading
            // (the start), that thread's clock is an hour on, past the bound of any round.
            val readings = ThreadLocal.withInitial { 0 }
            probe.clock = {
                readings.set(readings.get() + 1)
                System.nanoTime() + if (readings.get() > 1) 3_600_000_000_000L else 0L
            }
            pair { connect(peer) }
            probe.sessions shouldHaveSize 2
            for (s in probe.sessions) {
                val report = s.preflight.shouldNotBeNull()
                report.rounds shouldBe 1
                report.exchanges shouldBe 0L
            }
        }
    }

    test("the scenario's figures after a pre-flight are exactly its own") {
        recording { probe ->
            val (server, client) = pair {
                bufferSize(128)
                if (isServer) remoteAccess(RemoteAccess.WRITE)
                connect(peer)
                qp(0) {
                    if (isClient) {
                        for (i in 0 until 100) send(size = 64)
                        for (i in 0 until 10) write(size = 128)
                        awaitAll()
                    } else {
                        for (i in 0 until 100) receive()
                    }
                }
            }
            probe.sessions shouldHaveSize 2
            probe.sessions.forEach { it.preflight.shouldNotBeNull() }
            client.total.operations shouldBe 110
            client.total.bytesSent shouldBe 100L * 64 + 10L * 128
            server.total.messagesReceived shouldBe 100
            server.total.operations shouldBe 0
        }
    }
})
