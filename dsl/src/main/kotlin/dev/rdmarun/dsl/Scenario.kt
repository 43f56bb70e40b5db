package dev.rdmarun.dsl

import dev.rdmarun.runtime.IdleMode
import dev.rdmarun.runtime.PollingDispatcher
import kotlin.coroutines.ContinuationInterceptor
import kotlin.time.Duration
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.isActive
import kotlinx.coroutines.job
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext

/**
 * One `rdma { }`: runs the user's block once on the scenario's own thread (a [PollingDispatcher],
 * which later polls its CQs, so operations post and complete without locks or thread hops).
 * Settings collect until `connect(peer)`, which validates them and hands them to a [Session];
 * operations go to the QPs' drivers from then on.
 */
internal class Scenario(private val options: RdmaOptions, private val checkOnly: Boolean, private val pairing: Pairing? = null) :
    ScenarioScope(), LoopHost {
    private var settings = ScenarioSettings()
    private var session: Session? = null
    private var connectCalled = false
    /** The script called bufferSize(n): the `size` parameter then leaves the buffers alone. */
    private var bufferSizeSet = false

    /** The role of the peer given to connect (under --check there is no session to ask). */
    private var connectedRole: Role? = null
    private lateinit var polling: PollingDispatcher

    /**
     * `--check`: connect() reported the plan and stops the block. A Throwable, not an Exception,
     * so that a script's `catch (e: Exception)` or runCatching around connect does not swallow it.
     */
    private object CheckStop : Throwable() {
        private fun readResolve(): Any = CheckStop
        override fun fillInStackTrace(): Throwable = this
    }

    suspend fun run(block: suspend ScenarioScope.() -> Unit): ScenarioResult {
        polling = PollingDispatcher.start("rdma-run-${options.peer?.role?.label ?: "scenario"}", IdleMode.BACKOFF, null)
        var result: ScenarioResult? = null
        var primary: Throwable? = null
        var finished = false
        try {
            coroutineScope {
                // A cancelled caller (the monitor's Ctrl-C) ends waits that kotlinx does not see (a parked QP).
                val watcher = launch(start = CoroutineStart.UNDISPATCHED) {
                    try {
                        awaitCancellation()
                    } finally {
                        // The peer hears it now: a script busy in its own code may never reach the catch below.
                        if (!finished) session?.let { s ->
                            val c = ScenarioCancelled("the ${role().label} was ${options.monitor?.cancelReason ?: "cancelled"}")
                            if (s.fail(c)) s.tellPeer(c, options.script)
                        }
                    }
                }
                try {
                    result = withContext(VerbsDispatcher(polling)) {
                        try {
                            block()
                        } catch (_: CheckStop) {
                            // stopped at connect, as --check asks
                        }
                        if (checkOnly && connectCalled) return@withContext ScenarioResult.empty(role(), settings.device ?: "(first device)", settings.qps)
                        val s = session ?: throw ScenarioException("the scenario never calls connect(peer)")
                        s.finish()
                    }
                } finally {
                    finished = true
                    watcher.cancel()
                }
            }
        } catch (e: Throwable) {
            val recorded = session?.failure
            primary = when {
                recorded != null && recorded !== e && (e is CancellationException || recorded !is CancellationException) -> recorded
                e is CancellationException || currentCoroutineContext().isActive -> e
                else -> CancellationException("the scenario was cancelled").also { it.initCause(e) }
            }
            session?.tellPeer(primary, options.script)
        } finally {
            options.monitor?.stopped()
        }
        val cleanup = withContext(NonCancellable) { session?.tearDown() ?: runCatching { polling.close() }.exceptionOrNull() }
        if (primary != null) {
            cleanup?.let { if (it !== primary) primary.addSuppressed(it) }
            throw primary
        }
        if (cleanup != null) throw ScenarioException("the scenario ran but cleaning up failed: ${cleanup.message}", cleanup)
        return result!!
    }

    // ---- role and parameters ----

    private fun role(): Role = session?.role ?: connectedRole ?: options.peer?.role
        ?: options.ranks?.let { throw ScenarioException(twoPeerScenarioInRanks(it)) } ?: PLACEHOLDER_PEER.role.takeIf { checkOnly }
        ?: throw ScenarioException("the scenario asks whether it is the server or the client (isServer, isClient) but no peer was given: " +
            "run it with rdma-run --listen, --peer or --loopback, or pass RdmaOptions(peer = ...)")

    override val pair: RankPair get() = pairing?.pair ?: twoPeerPair(role())
    override val isServer: Boolean get() = role() == Role.SERVER
    override val isClient: Boolean get() = role() == Role.CLIENT
    override fun param(name: String, default: String) = options.parameters[name] ?: default

    override fun roundsPlanned(rounds: Long) {
        session?.scenarioRounds?.let { it.planned += rounds }
    }

    override fun roundDone() {
        session?.scenarioRounds?.let { it.done++ }
    }

    // ---- repeat { } and runFor in the scenario's block (LoopHost): all QPs at once ----

    override val canWarmUp: Boolean get() = session != null
    override val loopQp: Int? get() = null
    override fun loopParam(name: String): String? = options.parameters[name]
    override fun messagesMoved(): Long = session?.let { s -> s.drivers.sumOf { it.messagesMoved() } + s.barriers } ?: 0L
    override fun messagesTaken(): Long = session?.drivers?.sumOf { it.messagesTaken() } ?: 0L
    private var loops = 0
    override fun nextLoop(): Int = ++loops
    override suspend fun agreeOnRound(loop: Int, round: Int, more: Boolean, dropLeftovers: Boolean, measured: Boolean) =
        session.let { s -> if (s == null) more else s.warmup.agreeOnRound(null, loop, round, more, dropLeftovers, measured) }
    override fun startMeasuring(): Boolean {
        val s = session ?: return false
        // Each QP says whether it loses something measured; every one of them is asked.
        return s.drivers.map { it.startMeasuring() }.any { it }
    }
    override fun warmupStarted() {
        session?.let { s ->
            s.drivers.forEach { it.noteWarmupStart() }
            s.warmup.warmupGate.started()
        }
    }
    override suspend fun warmupOver() {
        session?.warmup?.warmupGate?.over()
    }
    override fun planned(iterations: Long, warmupIterations: Long) {
        session?.scenarioRounds?.let {
            it.done -= warmupIterations
            it.planned += iterations
        }
    }
    override fun warmedUp(summary: WarmupSummary) {
        session?.let { s ->
            s.drivers.forEach { it.loopMeasured() }
            s.warmup.warmedUp(summary)
        }
    }

    override fun measureFromHere() = drivers("measureFromHere()").forEach { it.measureFromHere() }

    override val peer: Peer
        get() = options.peer ?: options.ranks?.let { throw ScenarioException(twoPeerScenarioInRanks(it)) }
            ?: if (checkOnly) PLACEHOLDER_PEER else throw ScenarioException(NO_PEER)

    // ---- settings ----

    override fun setting(call: String, sizeGiven: Boolean, change: (ScenarioSettings) -> ScenarioSettings) {
        if (connectCalled) throw ScriptCallException("$call after connect(peer): settings come before connect(peer)")
        val changed = change(settings)
        // A bad value is said at the call that gave it, with the script's line.
        try {
            Validation.checkValues(changed)
        } catch (e: ScenarioException) {
            throw ScriptCallException(e.message.orEmpty())
        }
        settings = changed
        if (sizeGiven) bufferSizeSet = true
    }

    /**
     * As [CommonScope.sizeParam]; the script's default for `size` is also the buffer size of a
     * script that calls no bufferSize(n), as `-s` would be (README: the script's numbers are the
     * defaults), unless `-s`/`--set size` gives one.
     */
    override fun sizeParam(name: String, default: Int): Int {
        val size = super.sizeParam(name, default)
        if (name == StandardParameters.SIZE && !connectCalled && !bufferSizeSet && options.parameters[name] == null) {
            settings = settings.copy(bufferSize = size)
        }
        return size
    }

    override val qpCount get() = settings.qps

    // ---- connect ----

    override suspend fun connect(peer: Peer) {
        if (connectCalled) throw ScriptCallException("connect() is called twice: a scenario has one control connection")
        connectCalled = true
        val effective = options.overrides.applyTo(StandardParameters.applyTo(settings, options.parameters, bufferSizeSet))
        settings = effective
        Validation.checkSettings(effective)
        // Said before any device or peer is touched, by both sides.
        Warmup.parse(options.parameters[StandardParameters.WARMUP])
        Preflight.enabled(options.parameters[StandardParameters.PREFLIGHT])
        val plan = ScenarioPlan(effective, peer, options.parameters.toSortedMap(), options.scenarioSource?.let { Fingerprint.sha256(it) },
            peerGiven = peer !== PLACEHOLDER_PEER)
        connectedRole = plan.role
        options.onPlan?.invoke(plan)
        if (checkOnly) throw CheckStop
        val s = Session(plan, polling, options.monitor, options.token, options.softTransport, pairing)
        session = s
        s.runJob = currentCoroutineContext().job.also { job -> options.monitor?.let { m -> job.invokeOnCompletion { m.blockEnded() } } }
        s.progress.dispatcher = currentCoroutineContext()[ContinuationInterceptor] as? VerbsDispatcher
        s.connect()
    }

    private fun connected(what: String): Session {
        if (checkOnly && connectCalled) throw CheckStop // a script that caught the stop goes no further
        return session ?: throw ScriptCallException("$what before connect(peer): operations need the peer's QPs, connect first")
    }

    private fun drivers(what: String): List<QpDriver> = connected(what).drivers

    override suspend fun barrier() = connected("barrier()").barrier()

    override suspend fun <T> qp(index: Int, block: suspend QpScope.() -> T): T {
        val d = drivers("qp($index) { }")
        if (index !in d.indices) throw ScriptCallException("qp($index) is outside 0..${d.size - 1} (qps(${d.size}))")
        return d[index].block()
    }

    override suspend fun forEachQp(block: suspend QpScope.() -> Unit) {
        val d = drivers("forEachQp { }")
        coroutineScope {
            for (q in d) {
                launch {
                    try {
                        q.block()
                    } catch (e: Throwable) {
                        abort(e) // the other QPs' coroutines may be parked where cancellation does not reach
                        throw e
                    }
                }
            }
        }
    }

    override fun abort(cause: Throwable) {
        session?.fail(cause)
    }

    override fun everyQp(what: String): List<QpScope> = drivers(what)

    private companion object {
        /** `peer` under `--check` when the launcher gave none; compared by identity. */
        val PLACEHOLDER_PEER: Peer = Peer.Listen(Peer.DEFAULT_PORT)
    }
}

/** The scenario's caller cancelled it (a launcher's Ctrl-C: [ScenarioMonitor.cancel]); [message] says so to the peer. */
internal class ScenarioCancelled(message: String) : CancellationException(message)
