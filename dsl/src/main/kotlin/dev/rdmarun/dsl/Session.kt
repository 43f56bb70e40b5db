package dev.rdmarun.dsl

import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.FabricKey
import dev.rdmarun.runtime.PollingDispatcher
import dev.rdmarun.runtime.RemoteRegion
import dev.rdmarun.runtime.SoftTransport
import dev.rdmarun.runtime.WorkCompletions
import dev.rdmarun.runtime.engine.QpEngine
import java.net.ServerSocket
import java.util.EnumSet
import java.util.concurrent.CompletableFuture
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.TimeUnit
import java.util.concurrent.TimeoutException
import java.util.concurrent.atomic.AtomicReference
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.ensureActive
import kotlinx.coroutines.isActive
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext

/**
 * One connected scenario on this side, the order of its steps: it owns the verbs objects
 * ([ScenarioVerbs]), the QP drivers, the control connection, and drives the deadlines of every
 * wait (the dispatcher's agent); what the peer does is [PeerProgress]'s, the warm-up rounds agreed
 * with it are [WarmupRounds]'.
 *
 * [connect] (the script's `connect(peer)`): bind the TCP port (server), open and check the device,
 * create PD, CQs, MRs (with the declared access flags) and QPs (to INIT) and read their endpoints
 * (so a bad device, port or GID index fails before a peer is waited for), post every receive,
 * then the handshake ([ControlConnection]: intros, proofs of the secret and the plan, hellos; the
 * server keeps accepting until a connection passes the first two), RTR/RTS with the [FabricKey]
 * both derived, "ready" both
 * ways, all under one deadline, the timeout. [finish] (the block returned): wait for this side's
 * work to complete; "done 1" both ways (from now on arrivals are only counted); stop credit
 * updates; "done 2" both ways. [tearDown], on success, failure or cancellation alike: QPs to ERR,
 * let the dispatcher drain the flushed completions, then close the QPs, MRs, CQs, channel, PD and
 * context.
 *
 * Everything but the blocking setup runs on the scenario's dispatcher thread ([polling]).
 */
internal class Session(
    private val plan: ScenarioPlan,
    private val polling: PollingDispatcher,
    private val monitor: ScenarioMonitor?,
    /** The control connection's shared secret; null: the per-user secret ([ControlToken.userSecret]). */
    private val token: ControlToken? = null,
    /** How soft0 reaches the peer; null: [SoftTransport.configured]. */
    private val softTransport: SoftTransport? = null,
    /** One pair of a run of ranks ([RankTeam]): its listener, owned by the team, and how sentences name the peer rank. */
    val pairing: Pairing? = null,
) : PollingDispatcher.Agent {
    val settings = plan.settings
    val role = plan.role
    /** "the server" or "the client" (in a run of ranks: "rank 3 (host 10.0.0.3, pid 4242)"): the other side, for sentences. */
    val peerLabel = pairing?.peerLabel ?: "the ${role.other.label}"
    private val timeoutNanos = settings.timeout.inWholeNanoseconds

    /** The server's own listener (a pair of ranks borrows its team's: [acceptOn]). */
    @Volatile
    private var listener: ServerSocket? = null
    private var acceptOn: ServerSocket? = null

    @Volatile
    private var control: ControlConnection? = null

    /** The verbs objects: device, PD, CQs, MRs, QPs. */
    private val verbs = ScenarioVerbs(plan, polling, softTransport, peerLabel)
    val drivers = ArrayList<QpDriver>()
    val deviceName: String get() = verbs.deviceName

    /** The soft0 connection secret of this scenario: derived by both sides in the handshake ([Handshake.fabricKey]). */
    private var fabricKey: FabricKey? = null

    /** What the pre-flight warm-up of [connect] did ([Preflight]); null: skipped, or not run yet. */
    var preflight: PreflightReport? = null

    /** The scenario scope's `repeat { }` rounds (each QP's are its driver's). */
    val scenarioRounds = Rounds()

    private var barrierSeq = 0
    private var startNanos = 0L

    @Volatile
    var tearingDown = false
        private set

    private val failureRef = AtomicReference<Throwable?>(null)

    /** The first failure (later ones are usually its consequences), or null. */
    val failure: Throwable? get() = failureRef.get()

    /** The scenario's coroutine, cancelled on failure. */
    @Volatile
    var runJob: Job? = null

    /** The peer's liveness and progress, from its heartbeats, and this side's own. */
    val progress = PeerProgress(this)

    /** The warm-up rounds agreed with the peer. */
    val warmup = WarmupRounds(this)

    /** A frame of the scenario arrived that no one awaited yet ([ControlConnection.framePending]). */
    val framePending: Boolean get() = control?.framePending == true
    // ---- setup ----
    /** Everything `connect(peer)` does, on the scenario's dispatcher thread (blocking parts on the IO pool). */
    suspend fun connect() {
        val coroutine = currentCoroutineContext()
        var settingUp = true
        coroutineScope {
            // Accepting, connecting and the handshake block in socket calls that do not see a
            // cancellation (Ctrl-C): closing the sockets ends them.
            val unblocker = launch(Dispatchers.IO) {
                try {
                    awaitCancellation()
                } finally {
                    if (settingUp) closeSockets()
                }
            }
            try {
                val secret = withContext(Dispatchers.IO) {
                    // First: a per-user secret that cannot be used is said before any port or device is touched.
                    val secret = token ?: ControlToken.userSecret()
                    acceptOn = (plan.peer as? Peer.Listen)?.let { pairing?.listener ?: ControlServer.listen(it, settings.timeout).also { l -> listener = l } }
                    coroutine.ensureActive() // a cancellation before the listener existed did not close it
                    verbs.openDevice()
                    verbs.createResources()
                    SectionKinds().let { kinds -> verbs.engines.forEach { drivers.add(QpDriver(this@Session, it, kinds)) } }
                    secret
                }
                // On the dispatcher thread, which polls from now on.
                preflight = Preflight.run(this@Session, polling, verbs.context!!, verbs.gidIndex) { note(it) }
                polling.setIdleMode(settings.completionMode.idleMode, verbs.channel)
                verbs.cqs.forEach { polling.addCompletionQueue(it) }
                polling.setUnmatchedCompletionHandler { wcs, i -> unmatched(wcs, i) }
                polling.addAgent(this@Session)
                drivers.forEach { it.engine.postInitialReceives() } // before the peer can send
                polling.relax() // a server may wait minutes for its client: no core spins for that
                val remote = withContext(Dispatchers.IO) {
                    val credentials = Handshake.Credentials(plan, secret)
                    val c = when (val peer = plan.peer) {
                        is Peer.Listen -> {
                            val accepted = ControlServer.accept(acceptOn!!, settings.timeout, credentials, { coroutine.isActive }) { note(it) }
                            fabricKey = accepted.fabricKey
                            listener?.close()
                            listener = null
                            control = accepted.connection
                            // The client's own deadline, from its accept, for the rest of its handshake.
                            accepted.connection.handshakeDeadline(deadlineAfterNanos(timeoutNanos, accepted.acceptedAt))
                            accepted.connection
                        }
                        is Peer.Connect -> ControlClient.authenticated(peer, settings.timeout, credentials, { coroutine.isActive }) { control = it }
                            .let { (connection, key) -> fabricKey = key; connection }
                    }
                    coroutine.ensureActive() // likewise for the connection
                    val remote = c.exchangeHellos(verbs.hello(), Handshake.Expected(settings.qps, settings.recvDepth, settings.dataBytes))
                    verbs.connectQps(remote, fabricKey)
                    c.send(Ready)
                    val ready = c.receive("ready signal")
                    if (ready != Ready) throw PeerException("$peerLabel sent something else than its ready signal: it is not a compatible rdma-run")
                    remote
                }
                val peerData = Array(remote.qps.size) { i -> remote.qps[i].buffer.let { RemoteRegion(it.addr, it.length, it.rkey) } }
                val granted = EnumSet.noneOf(Access::class.java).apply { remote.access.forEach { add(it.access) } }
                for (d in drivers) {
                    val credit = remote.qps[d.index].credit
                    d.engine.connect(QpEngine.Peer(peerLabel, remote.recvDepth, RemoteRegion(credit.addr, credit.length, credit.rkey), peerData, granted))
                }
                polling.resumeSpinning()
                progress.startClock()
                control!!.startWatching(
                    onLost = { fail(it) },
                    onHeartbeat = { progress.heartbeat(it) },
                    onFrame = {
                        if (it is Round) warmup.roundReport(it)
                        if (it is Done && it.isPhase(1)) progress.peerFinished(it.messagesSent)
                    },
                    heartbeat = { progress.progressReport() },
                )
                startNanos = System.nanoTime().also { warmup.measuringFrom() }
                monitor?.running(drivers.map { it.engine.stats() }, drivers.map { it.rounds } + scenarioRounds, startNanos)
            } finally {
                settingUp = false
                unblocker.cancel()
            }
        }
    }

    /** A line about the control connection for the launcher (stray connections), escaped; stderr without a monitor. */
    private fun note(line: String) {
        val text = printable(line, MAX_PEER_SENTENCE)
        if (monitor != null) monitor.note(text) else System.err.println("rdma-run: ${role.label}: $text")
    }

    /** Wakes setup calls blocked on the sockets (see [connect]); teardown closes them again, harmlessly. */
    private fun closeSockets() {
        runCatching { listener?.close() }
        runCatching { control?.close() }
    }

    private fun unmatched(completions: WorkCompletions, i: Int) {
        if (tearingDown || completions.isSuccess(i)) return
        val status = completions.status(i)
        if (status == dev.rdmarun.runtime.WcStatus.WR_FLUSH_ERR && failure != null) return
        val v = completions.failure(i)
        val qpn = completions.qpNum(i)
        val where = dev.rdmarun.runtime.QueuePair.qpnText(qpn).let { hex -> drivers.firstOrNull { it.engine.queuePair().qpNum() == qpn }?.let { "QP ${it.index} (qpn $hex)" } ?: "the QP with qpn $hex" }
        fail(ScenarioException("an unsignaled work request on $where failed with ${status.name}", v, v.hint()))
    }

    /** Makes each QP's unsignaled sends report their completion, for the heartbeat's deadlock check. Any thread. */
    fun requestCompletionOfAll() {
        try {
            polling.execute { drivers.forEach { it.engine.requestCompletionOf(it.engine.posted()) } }
        } catch (_: RejectedExecutionException) { /* the dispatcher is gone: the run is over */ }
    }

    // ---- failures ----
    /**
     * Records the first failure and ends the run: every parked coroutine is resumed with it (on
     * the dispatcher thread) and the scenario's coroutine is cancelled. Any thread. False: another was first.
     */
    fun fail(cause: Throwable): Boolean {
        if (!failureRef.compareAndSet(null, cause)) return false
        monitor?.failed(cause)
        runJob?.cancel(CancellationException(cause.message, cause))
        try {
            polling.execute { drivers.forEach { it.abort(cause) } }
        } catch (_: RejectedExecutionException) {
            // the dispatcher is gone: nothing is parked on it any more
        }
        return true
    }

    // ---- deadlines and progress ----
    private var waiters = 0
    private var creditWaiters = 0

    fun parked(onCredit: Boolean) {
        waiters++
        if (onCredit) creditWaiters++
    }

    fun unparked(onCredit: Boolean) {
        waiters--
        if (onCredit) creditWaiters--
    }

    private var rounds = 0

    /**
     * Credits change without a completion, waits have deadlines, and a waiting coroutine may be
     * cancelled (kotlinx's `withTimeout` around a wait): checked while anything waits.
     */
    override fun doWork(): Int {
        if (waiters == 0) return 0
        var work = 0
        // Indexed loops: an iterator here would be garbage on every round of the dispatcher.
        if (creditWaiters > 0) for (i in drivers.indices) if (drivers[i].pollCredit()) work++
        // Every round: a field and the job's state per QP, so a cancelled wait ends within a round.
        for (i in drivers.indices) if (drivers[i].releaseIfCancelled()) work++
        // Deadlines are seconds long: every 64th round is often enough, and keeps the rounds of a
        // busy-polling wait short (a completion is noticed sooner).
        if ((++rounds and 63) == 0) {
            val now = System.nanoTime()
            for (i in drivers.indices) drivers[i].checkDeadline(now)
        }
        return work
    }

    override fun maxSleepMillis(): Long = when {
        creditWaiters > 0 -> 1
        waiters > 0 -> 10
        else -> -1
    }

    // ---- run ----

    suspend fun barrier() {
        val seq = ++barrierSeq
        for (d in drivers) d.awaitEverything() // what this side posted before the barrier is done when the peer passes it
        sendControl(Barrier(seq))
        awaitControl(Barrier(seq), "barrier $seq")
    }
    /** Barriers passed so far: a loop's round with a barrier must be agreed, as one with messages. */
    val barriers: Int get() = barrierSeq

    suspend fun sendControl(frame: Frame) = withContext(Dispatchers.IO) { control!!.send(frame) }

    private suspend fun awaitControl(frame: Frame, what: String): Frame {
        val since = System.nanoTime()
        progress.controlWait = "$peerLabel to reach $what"
        try {
            return control!!.await(frame, "$peerLabel to reach $what") {
                failure?.let { throw it }
                if (progress.waitExpired(since, System.nanoTime())) throw progress.waitedTooLong("$peerLabel to reach $what", null, receiving = false, onCredit = false)
            }
        } finally {
            progress.controlWait = null
        }
    }

    /** This side's block returned: complete its work, then agree with the peer that both are done. */
    suspend fun finish(): ScenarioResult {
        for (d in drivers) d.awaitEverything()
        drivers.forEach { it.engine.finishReceiving() }
        sendControl(Done(1, drivers.map { it.engine.stats().messagesSent() }, latency = drivers.any { it.counters.measuredAny() }))
        polling.relax() // nothing more to post here: stop spinning a core the peer (and the device) may need
        val peerDone = awaitControl(Done(1), "the end of its scenario") as Done
        // Both sides' work is complete, so every message is in a completion queue or on its way
        // there (a device may acknowledge before it writes the completion): wait for the count.
        val sent = checkedCounts(peerDone.messagesSent)
        for (d in drivers) d.awaitArrivals(sent[d.index])
        val end = System.nanoTime()
        monitor?.stopped() // the figures are final: a launcher's intervals end here, not after the goodbyes
        drivers.forEach { it.engine.stopCredits() }
        for (d in drivers) d.awaitCreditIdle()
        sendControl(Done(2))
        awaitControl(Done(2), "its final frame")
        return QpCounters.result(role, deviceName, startNanos, end, drivers.map { it.counters })
            .copy(connection = verbs.connection, parameters = plan.parameters, fingerprint = plan.fingerprint, warmup = warmup.summaries(), preflight = preflight,
                peerMeasuredLatency = peerDone.latency, pair = pairing?.pair)
    }

    /** The peer's per-QP message counts, checked against what can be true before any wait relies on them. */
    private fun checkedCounts(sent: List<Long>): List<Long> {
        if (sent.size != drivers.size) {
            throw PeerException("$peerLabel reported message counts for ${sent.size} QPs, not ${drivers.size}: it is not a compatible rdma-run")
        }
        for (d in drivers) {
            val arrived = d.engine.stats().messagesReceived()
            if (sent[d.index] < arrived) {
                throw PeerException("$peerLabel says it sent ${sent[d.index]} messages on QP ${d.index}, but $arrived arrived: it is not a compatible rdma-run")
            }
        }
        return sent
    }

    /** Tells the peer why this side failed: what [script]'s code threw, with its line; a cancellation in the caller's words, never kotlinx's. */
    fun tellPeer(cause: Throwable, script: ScriptSource?) = control?.trySend(Failure(when {
        cause is ScenarioCancelled -> cause.message.orEmpty()
        cause is CancellationException && cause !is TimeoutCancellationException -> "the ${role.label} was ${monitor?.cancelReason ?: "cancelled"}"
        else -> describeFailure(cause, script).lineSequence().first()
    }))

    fun parameter(name: String): String? = plan.parameters[name]

    // ---- teardown ----
    /** Closes everything, in dependency order; returns the first error (others suppressed into it). Any thread but the dispatcher's. */
    fun tearDown(): Throwable? {
        tearingDown = true
        var error: Throwable? = null
        fun attempt(body: () -> Unit) {
            try {
                body()
            } catch (e: Throwable) {
                val first = error
                if (first == null) error = e else first.addSuppressed(e)
            }
        }
        attempt { control?.close() }
        attempt { listener?.close() }
        // ERR flushes every outstanding work request; the dispatcher polls those completions
        // (handlers ignore them now) so no completion is left for a destroyed QP.
        verbs.toError(::attempt)
        attempt { drain() }
        attempt { polling.close() }
        verbs.close(::attempt)
        return error
    }

    /** Waits (boundedly) until the dispatcher holds no pending operation. */
    private fun drain() {
        val drained = CompletableFuture<Unit>()
        val check = object : Runnable {
            override fun run() {
                if (polling.pending() == 0) drained.complete(Unit) else polling.execute(this)
            }
        }
        try {
            polling.execute(check)
            drained.get(DRAIN_SECONDS, TimeUnit.SECONDS)
        } catch (_: RejectedExecutionException) {
            // the dispatcher already stopped (it failed): close() frees what is left
        } catch (_: TimeoutException) {
            // a provider that never flushes: close anyway
        }
    }

    private companion object {
        const val DRAIN_SECONDS = 5L
    }
}
