package dev.rdmarun.dsl

import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.CompletionChannel
import dev.rdmarun.runtime.CompletionQueue
import dev.rdmarun.runtime.Context
import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.runtime.FabricKey
import dev.rdmarun.runtime.Gid
import dev.rdmarun.runtime.MemoryRegion
import dev.rdmarun.runtime.Mtu
import dev.rdmarun.runtime.PollingDispatcher
import dev.rdmarun.runtime.PortAttributes
import dev.rdmarun.runtime.ProtectionDomain
import dev.rdmarun.runtime.QpEndpoint
import dev.rdmarun.runtime.QueuePair
import dev.rdmarun.runtime.QueuePairConfig
import dev.rdmarun.runtime.RemoteRegion
import dev.rdmarun.runtime.RtrAttributes
import dev.rdmarun.runtime.RtsAttributes
import dev.rdmarun.runtime.SoftTransport
import dev.rdmarun.runtime.WorkCompletions
import dev.rdmarun.runtime.engine.QpEngine
import java.net.ServerSocket
import java.security.SecureRandom
import java.util.EnumSet
import java.util.concurrent.CompletableFuture
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.TimeUnit
import java.util.concurrent.TimeoutException
import java.util.concurrent.atomic.AtomicReference
import kotlin.time.toJavaDuration
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.selects.onTimeout
import kotlinx.coroutines.selects.select
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.ensureActive
import kotlinx.coroutines.isActive
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext

/**
 * One connected scenario on this side: its verbs objects, the QP engines and their drivers, the
 * control connection, the deadlines of every wait, the end-of-run handshake and teardown.
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
) : PollingDispatcher.Agent {
    val settings = plan.settings
    val role = plan.role
    /** "the server" or "the client": the other side, for sentences. */
    val peerLabel = "the ${role.other.label}"
    private val timeoutNanos = settings.timeout.inWholeNanoseconds

    @Volatile
    private var listener: ServerSocket? = null

    @Volatile
    private var control: ControlConnection? = null
    private var context: Context? = null
    private var pd: ProtectionDomain? = null
    private var channel: CompletionChannel? = null
    private val cqs = ArrayList<CompletionQueue>()
    private var creditMr: MemoryRegion? = null
    private val mrs = ArrayList<MemoryRegion>()
    private val queuePairs = ArrayList<QueuePair>()
    val drivers = ArrayList<QpDriver>()
    var deviceName = settings.device ?: "?"
        private set
    private var gidIndex = 0
    private val psns = IntArray(settings.qps)

    /** Each QP's half of the exchange, read at setup: a bad GID index fails before any peer is waited for. */
    private val endpoints = ArrayList<QpEndpoint>()

    /** The soft0 connection secret of this scenario: derived by both sides in the handshake ([Handshake.fabricKey]). */
    private var fabricKey: FabricKey? = null
    /** This side's port, read once when the resources are made (MTU, link layer). */
    private var portAttributes: PortAttributes? = null

    /** The path MTU the QPs were connected with. */
    /** What the pre-flight warm-up of [connect] did ([Preflight]); null: skipped, or not run yet. */
    var preflight: PreflightReport? = null

    /** The scenario scope's `repeat { }` rounds (each QP's are its driver's). */
    val scenarioRounds = Rounds()

    /** Device, port and QPs once the QPs are connected: the results' header. */
    private var connection: ConnectionInfo? = null
    private var barrierSeq = 0
    private var startNanos = 0L

    /** The latest end of a warm-up ([ScenarioScope.measureFromHere]): the results' duration starts there. */
    private var measuredFrom: Long? = null

    fun measuredFrom(nanos: Long) {
        val latest = measuredFrom
        if (latest == null || nanos - latest > 0) measuredFrom = nanos
    }

    @Volatile
    var tearingDown = false
        private set

    private val failureRef = AtomicReference<Throwable?>(null)

    /** The first failure (later ones are usually its consequences), or null. */
    val failure: Throwable? get() = failureRef.get()

    /** The scenario's coroutine, cancelled on failure. */
    @Volatile
    var runJob: Job? = null

    // ---- the peer's liveness and progress, from its heartbeats ----
    @Volatile
    private var peerProgress = -1L

    /** When the peer last made progress (or this side started waiting, whichever is later: see [waitExpired]). */
    @Volatile
    private var peerProgressAt = System.nanoTime()

    @Volatile
    private var lastHeartbeat: Heartbeat? = null

    /** When the peer's "done 1" arrived: it finished its block and its work completed. 0: not yet. */
    @Volatile
    var peerFinishedAt = 0L
        private set

    /** The messages the finished peer says it sent on each QP (its "done 1"); null while it runs. */
    @Volatile
    private var peerSent: List<Long>? = null

    /** Messages the peer sent on [qp], once it finished; Long.MAX_VALUE while it runs (or sent no usable count). */
    fun peerMessagesSent(qp: Int): Long = peerSent?.getOrNull(qp) ?: Long.MAX_VALUE

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
                    (plan.peer as? Peer.Listen)?.let { listener = ControlConnection.listen(it, settings.timeout) }
                    coroutine.ensureActive() // a cancellation before the listener existed did not close it
                    openDevice()
                    createResources()
                    secret
                }
                // On the dispatcher thread, which polls from now on.
                preflight = Preflight.run(this@Session, polling, context!!, gidIndex) { note(it) }
                polling.setIdleMode(settings.completionMode.idleMode, channel)
                cqs.forEach { polling.addCompletionQueue(it) }
                polling.setUnmatchedCompletionHandler { wcs, i -> unmatched(wcs, i) }
                polling.addAgent(this@Session)
                drivers.forEach { it.engine.postInitialReceives() } // before the peer can send
                polling.relax() // a server may wait minutes for its client: no core spins for that
                val remote = withContext(Dispatchers.IO) {
                    val credentials = Handshake.Credentials(plan, secret)
                    val c = when (val peer = plan.peer) {
                        is Peer.Listen -> {
                            val accepted = ControlConnection.accept(listener!!, settings.timeout, credentials) { note(it) }
                            fabricKey = accepted.fabricKey
                            listener?.close()
                            listener = null
                            control = accepted.connection
                            // The client's own deadline, from its accept, for the rest of its handshake.
                            accepted.connection.handshakeDeadline(deadlineAfterNanos(timeoutNanos, accepted.acceptedAt))
                            accepted.connection
                        }
                        is Peer.Connect -> ControlConnection.connect(peer, settings.timeout) { coroutine.isActive }.also {
                            control = it
                            fabricKey = it.authenticate(credentials)
                        }
                    }
                    coroutine.ensureActive() // likewise for the connection
                    val remote = c.exchangeHellos(hello(), Handshake.Expected(settings.qps, settings.recvDepth, settings.dataBytes))
                    connectQps(remote)
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
                peerProgressAt = System.nanoTime()
                control!!.startWatching(
                    onLost = { fail(it) },
                    onHeartbeat = { heartbeat(it) },
                    onFrame = {
                        if (it is Round) roundReport(it)
                        if (it is Done && it.isPhase(1)) peerFinished(it.messagesSent)
                    },
                    heartbeat = { progressReport() },
                )
                startNanos = System.nanoTime()
                monitor?.running(drivers.map { it.engine.stats() }, drivers.map { it.rounds } + scenarioRounds, startNanos)
            } finally {
                settingUp = false
                unblocker.cancel()
            }
        }
    }

    /** A line about the control connection for the launcher (stray connections), escaped; stderr without a monitor. */
    private fun note(line: String) {
        val text = printable(line, 2 * MAX_PEER_TEXT)
        if (monitor != null) monitor.note(text) else System.err.println("rdma-run: ${role.label}: $text")
    }

    /** Wakes setup calls blocked on the sockets (see [connect]); teardown closes them again, harmlessly. */
    private fun closeSockets() {
        runCatching { listener?.close() }
        runCatching { control?.close() }
    }

    private fun openDevice() {
        DeviceList.open().use { list ->
            val names = list.devices().map { it.name() }
            deviceName = Validation.checkDevice(plan, names,
                attributes = { name ->
                    val device = list.find(name)
                    // No transport given: Device.open() applies its documented default.
                    (softTransport?.let(device::open) ?: device.open()).also { context = it }.queryDevice()
                },
                port = { context!!.queryPort(settings.port) },
                missing = list.unavailable().firstOrNull()?.describeInline(),
                software = list.devices().filter { it.isSoftware() }.map { it.name() })
        }
    }

    /**
     * READs and atomics in flight per QP: the device's maximum, as perftest's default (`-o`). A cap
     * of 16 left rxe (128) at a third of ib_atomic_bw's rate, each atomic being a round trip.
     */
    private fun atomicDepth(initiator: Boolean): Int {
        val a = context!!.queryDevice()
        return minOf(MAX_RD_ATOMIC, if (initiator) a.maxQpInitRdAtom() else a.maxQpRdAtom()).coerceAtLeast(1)
    }

    private fun createResources() {
        val ctx = context!!
        val s = settings
        val engine = s.engineConfig()
        val protection = ctx.allocateProtectionDomain().also { pd = it }
        if (s.completionMode == CompletionMode.EVENT) channel = ctx.createCompletionChannel()
        val perQp = engine.completionQueueEntries()
        if (s.cqMode == CqMode.SHARED) {
            cqs.add(ctx.createCompletionQueue(perQp * s.qps, channel))
        } else {
            repeat(s.qps) { cqs.add(ctx.createCompletionQueue(perQp, channel)) }
        }
        val credits = protection.registerMemory(s.qps * 8L, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE)).also { creditMr = it }
        gidIndex = s.gidIndex ?: ctx.defaultGid(s.port).index()
        ctx.gid(s.port, gidIndex) // a GID index that does not exist fails here, before a server waits for its client
        portAttributes = ctx.queryPort(s.port)
        val random = SecureRandom()
        for (i in 0 until s.qps) {
            val data = protection.registerMemory(s.dataBytes, plan.dataAccess).also { mrs.add(it) }
            val recv = protection.registerMemory(engine.receiveRegionBytes(), EnumSet.of(Access.LOCAL_WRITE)).also { mrs.add(it) }
            val cq = cqs[if (s.cqMode == CqMode.SHARED) 0 else i]
            val qp = protection.createQueuePair(QueuePairConfig.rc(cq)
                .withDepth(engine.sendQueueDepth(), s.recvDepth)
                .withMaxInlineData(s.inlineThreshold))
            queuePairs.add(qp)
            qp.modifyToInit(s.port, plan.qpAccess)
            psns[i] = random.nextInt(1 shl 24)
            endpoints.add(qp.localEndpoint(s.port, gidIndex, psns[i]))
            val e = QpEngine(i, qp, data, recv, credits, engine, polling)
            drivers.add(QpDriver(this, e))
        }
    }

    private fun hello(): Hello {
        val credits = creditMr!!
        return Hello(
            version = CONTROL_PROTOCOL_VERSION,
            role = role,
            qpCount = settings.qps,
            recvDepth = settings.recvDepth,
            maxDestRdAtomic = atomicDepth(initiator = false),
            fingerprint = plan.fingerprint,
            parameters = plan.parameters,
            plan = plan.canonicalLines(),
            access = settings.remoteAccess,
            qps = drivers.map { d ->
                val data = d.engine.dataRegion()
                val e = endpoints[d.index]
                QpInfo(
                    qpn = e.qpn(),
                    psn = e.psn(),
                    lid = e.lid(),
                    gid = e.gid().toHex(),
                    mtu = e.mtu().bytes(),
                    buffer = BufferInfo(data.address(), data.rkey(), data.length()),
                    credit = BufferInfo(credits.address() + d.index * 8L, credits.rkey(), 8),
                )
            },
        )
    }

    private fun connectQps(remote: Hello) {
        val cap = settings.mtu?.let { Mtu.ofBytes(it) }
        val port = portAttributes!!
        val outgoing = minOf(atomicDepth(initiator = true), remote.maxDestRdAtomic.coerceIn(1, MAX_RD_ATOMIC))
        val incoming = atomicDepth(initiator = false)
        for (d in drivers) {
            val r = remote.qps[d.index]
            val endpoint = try {
                QpEndpoint(r.lid, r.qpn, r.psn, Gid.parseHex(r.gid), Mtu.ofBytes(r.mtu))
            } catch (e: IllegalArgumentException) {
                throw PeerException("$peerLabel sent an invalid endpoint for QP ${d.index}: ${printable(e.message.orEmpty())}", e)
            }
            var mtu = Mtu.min(port.activeMtu(), endpoint.mtu())
            if (cap != null) mtu = Mtu.min(mtu, cap)
            pathMtu = mtu
            val qp = d.engine.queuePair()
            qp.modifyToRtr(RtrAttributes.of(endpoint, settings.port, gidIndex, mtu).withMaxDestRdAtomic(incoming).withFabricKey(fabricKey)
                .withConnectTimeout(settings.timeout.toJavaDuration())) // soft0 waits for its first connection that long
            qp.modifyToRts(RtsAttributes.of(psns[d.index])
                .withRnrRetry(settings.rnrRetry)
                .withRetry(settings.retryTimeout, settings.retryCount)
                .withMaxRdAtomic(outgoing))
        }
        val ctx = context!!
        connection = ConnectionInfo(
            device = deviceName,
            software = ctx.isSoftware(),
            firmware = ctx.queryDevice().firmwareVersion(),
            port = settings.port,
            linkLayer = when (port.linkLayer()) {
                PortAttributes.LinkLayer.INFINIBAND -> "InfiniBand"
                PortAttributes.LinkLayer.ETHERNET -> "Ethernet"
                else -> "unspecified"
            },
            mtu = pathMtu.bytes(),
            gidIndex = gidIndex,
            gid = endpoints.firstOrNull()?.gid()?.toString() ?: "",
            qps = drivers.map { d ->
                val r = remote.qps[d.index]
                val data = d.engine.dataRegion()
                QpConnection(d.index, d.engine.queuePair().qpNum(), r.qpn, psns[d.index], r.psn, Gid.parseHex(r.gid).toString(),
                    localLid = endpoints[d.index].lid(), remoteLid = r.lid,
                    localRkey = data.rkey().toLong() and 0xFFFF_FFFFL, remoteRkey = r.buffer.rkey.toLong() and 0xFFFF_FFFFL,
                    localAddress = data.address(), remoteAddress = r.buffer.addr)
            },
            sendDepth = settings.sendDepth,
            signalEvery = settings.signalEvery,
            inlineThreshold = settings.inlineThreshold,
        )
    }

    private var pathMtu = Mtu.MTU_1024

    private fun unmatched(completions: WorkCompletions, i: Int) {
        if (tearingDown || completions.isSuccess(i)) return
        val status = completions.status(i)
        if (status == dev.rdmarun.runtime.WcStatus.WR_FLUSH_ERR && failure != null) return
        val v = completions.failure(i)
        val qpn = completions.qpNum(i)
        val where = drivers.firstOrNull { it.engine.queuePair().qpNum() == qpn }?.let { "QP ${it.index} (qpn $qpn)" } ?: "the QP with qpn $qpn"
        fail(ScenarioException("an unsignaled work request on $where failed with ${status.name}", v, v.hint()))
    }

    // ---- failures ----

    /**
     * Records the first failure and ends the run: every parked coroutine is resumed with it (on
     * the dispatcher thread) and the scenario's coroutine is cancelled. Any thread.
     */
    fun fail(cause: Throwable) {
        if (!failureRef.compareAndSet(null, cause)) return
        runJob?.cancel(CancellationException(cause.message, cause))
        try {
            polling.execute { drivers.forEach { it.abort(cause) } }
        } catch (_: RejectedExecutionException) {
            // the dispatcher is gone: nothing is parked on it any more
        }
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

    /**
     * A wait that started at [since] has lasted too long: the peer made no progress for the
     * timeout since then.
     */
    fun waitExpired(since: Long, now: Long): Boolean = now - maxOf(since, peerProgressAt) > timeoutNanos

    private fun heartbeat(h: Heartbeat) {
        lastHeartbeat = h
        peerStalls = if (h.stalled && h.progress == peerProgress) peerStalls + 1 else if (h.stalled) 1 else 0
        if (h.progress != peerProgress) {
            peerProgress = h.progress
            peerProgressAt = System.nanoTime()
        }
        checkBothStalled()
    }

    // ---- both sides waiting to receive, seen in the heartbeats long before the timeout ----

    /**
     * Consecutive heartbeats in which this side, and the peer, reported a stall ([Heartbeat.stalled])
     * with unchanged progress. A stall is only the peer's to end, so both stalled at once for
     * [STALLED_HEARTBEATS] heartbeats each (at least two heartbeat periods, in which any message in
     * flight would have arrived and changed a progress counter) is a deadlock nothing can end.
     */
    @Volatile
    private var localStalls = 0
    @Volatile
    private var peerStalls = 0
    /** Written by the heartbeat thread only. */
    private var localProgress = -1L
    @Volatile
    private var localWait: String? = null

    private fun checkBothStalled() {
        if (localStalls < STALLED_HEARTBEATS || peerStalls < STALLED_HEARTBEATS) return
        val mine = localWait ?: return
        val theirs = lastHeartbeat?.waiting?.let { printable(it) } ?: return
        fail(ScenarioException("the ${role.label} waits for $mine; $peerLabel waits too, for $theirs: $BOTH_RECEIVE " +
            "(neither side made progress for $STALLED_HEARTBEATS heartbeats)"))
    }

    /**
     * What this side's only possible progress waits for, or null: every coroutine of the scenario
     * waits in receive() (as many coroutines are alive as QPs wait in receive(), so one busy in
     * its own code, or in withContext elsewhere, is seen), nothing posted is still in flight and
     * no message waits in an inbox. The heartbeat thread reads the dispatcher's state without
     * locking; [waitingFor][QpDriver.waitsForMessage] is read before the counters, so a message
     * taken since shows as progress. A coroutine suspended in delay() while it has a child that
     * waits in receive() is not told apart from one that waits for that child. Under RdmaJava the
     * code runs on threads of its own and [runJob] (connect's call) has ended: no coroutine is
     * seen, nothing is called a deadlock, and the timeout ends the wait as before.
     */
    private fun stalledOn(): String? {
        if (controlWait != null || peerFinishedAt != 0L || failure != null) return null
        var receiving = 0
        var what: String? = null
        for (d in drivers) {
            if (d.waitsForMessage) {
                receiving++
                if (what == null) what = d.waitingFor
            }
        }
        if (receiving == 0) return null
        for (d in drivers) {
            if (d.messagesWaiting != 0 || d.engine.completedThrough() < d.engine.posted()) return null
        }
        val job = runJob ?: return null
        return if (liveCoroutines(job) == receiving) what else null
    }

    /** Active coroutines of [job]'s tree that have no active child: those running or suspended in their own code. */
    private fun liveCoroutines(job: Job): Int {
        var n = 0
        var parent = false
        for (c in job.children) {
            if (c.isActive) {
                parent = true
                n += liveCoroutines(c)
            }
        }
        return if (parent) n else if (job.isActive) 1 else 0
    }

    private fun peerFinished(sent: List<Long>) {
        peerSent = sent
        peerFinishedAt = System.nanoTime()
        peerProgressAt = peerFinishedAt
    }

    /** This side's heartbeat: its progress, what it waits for, its inboxes. Called on the heartbeat thread. */
    private fun progressReport(): Heartbeat {
        val stalled = stalledOn() // first: a message taken after it shows in the progress read below
        var progress = 0L
        var waiting: String? = null
        val messages = ArrayList<Int>(drivers.size)
        val full = ArrayList<Int>()
        for (d in drivers) {
            progress += d.engine.stats().progress()
            if (waiting == null) waiting = d.waitingFor
            messages.add(d.messagesWaiting)
            if (d.inboxFull) full.add(d.index)
        }
        val total = progress + barrierSeq + roundsAgreed.get()
        localWait = stalled
        localStalls = if (stalled != null && total == localProgress) localStalls + 1 else if (stalled != null) 1 else 0
        localProgress = total
        checkBothStalled()
        return Heartbeat(total, waiting ?: controlWait, messages, full, stalled = stalled != null)
    }

    @Volatile
    private var controlWait: String? = null

    /**
     * The sentence for a wait that ran out: what this side waited for, and what the peer last did.
     * [what] completes "the server waited 30s for ..."; [qp] is the QP it waited on, if any.
     */
    fun waitedTooLong(what: String, qp: Int?, receiving: Boolean, onCredit: Boolean): RdmaTimeoutException {
        val h = lastHeartbeat
        val peerWaits = h?.waiting?.let { printable(it) }
        val peerPart = when {
            peerFinishedAt != 0L && receiving -> "; $peerLabel finished its scenario without sending it"
            onCredit && qp != null && h != null && qp in h.inboxFull ->
                "; $peerLabel holds ${h.messagesWaiting.getOrNull(qp) ?: "its"} messages on QP $qp that no receive() took (its inbox is full): " +
                    "it calls receive() less often than this side sends"
            peerWaits != null && receiving && peerWaits.startsWith("a message in receive()") ->
                "; $peerLabel waits too, for $peerWaits: $BOTH_RECEIVE"
            peerWaits != null -> "; $peerLabel made no progress either: it waits for $peerWaits"
            h == null -> "; $peerLabel sent no progress report"
            else -> "; $peerLabel is alive but made no progress for ${settings.timeout} (busy in its own code?)"
        }
        return RdmaTimeoutException("the ${role.label} waited ${settings.timeout} for $what$peerPart")
    }

    /** The sentence for a receive() the peer can no longer answer. */
    fun peerFinishedWithoutSending(qp: Int): ScenarioException =
        ScenarioException("$peerLabel finished without sending the message that the ${role.label} waits for in receive() on QP $qp")

    // ---- run ----

    suspend fun barrier() {
        val seq = ++barrierSeq
        for (d in drivers) d.awaitEverything() // what this side posted before the barrier is done when the peer passes it
        sendControl(Barrier(seq))
        awaitControl(Barrier(seq), "barrier $seq")
    }

    // ---- warm-up rounds (repeat { }, runFor) ----

    private data class RoundKey(val qp: Int?, val loop: Int, val round: Int)

    /** The peer's round ends, by loop and round: at most one per QP and the scenario's block waits at a time. */
    private val roundReports = java.util.concurrent.ConcurrentHashMap<RoundKey, CompletableDeferred<Round>>()

    /** Barriers passed so far: a loop's round with a barrier must be agreed, as one with messages. */
    val barriers: Int get() = barrierSeq

    /** Warm-up rounds agreed so far: progress for the heartbeats. */
    private val roundsAgreed = java.util.concurrent.atomic.AtomicLong()

    /** Where this side's warming loops wait for each other before they measure. */
    val warmupGate = WarmupGate()

    /** What each loop's warm-up did, for the results. */
    private val warmups = java.util.Collections.synchronizedList(ArrayList<WarmupSummary>())

    fun warmedUp(summary: WarmupSummary) {
        warmups += summary
    }

    /** On the reader thread: the peer ended a warm-up round. Checked before use: it may not be rdma-run. */
    private fun roundReport(r: Round) {
        if ((r.qp != null && r.qp !in drivers.indices) || r.loop < 1 || r.round < 1 ||
            r.sent.size != (if (r.qp == null) drivers.size else 1) || r.sent.any { it < 0 }) {
            fail(PeerException("$peerLabel sent the end of warm-up round ${r.round} of loop ${r.loop} on QP ${r.qp}, which this scenario has not: it is not a compatible rdma-run"))
            return
        }
        // Per scope at most this side's round and the peer's next, plus one report per loop of the peer's
        // that found no partner loop here (its first): far more is a broken peer.
        if (roundReports.size > MAX_PENDING_ROUNDS * (drivers.size + 1)) {
            fail(PeerException("$peerLabel sent ends of warm-up rounds that no repeat { } here waits for: it is not a compatible rdma-run"))
            return
        }
        roundReports.computeIfAbsent(RoundKey(r.qp, r.loop, r.round)) { CompletableDeferred() }.complete(r)
    }

    /**
     * Tells the peer whether this side wants another warm-up round after [round] of [qp]'s [loop]-th
     * loop, waits for the peer's word on the same round and for every message the peer sent until
     * then (on [qp], or on every QP), and returns whether either wants another round. Null when the
     * peer has no partner loop but answers this one's messages in code of its own (a `while` loop
     * until a stop message): it waits in receive() for this side, stalled, for two heartbeats (a
     * partner loop would be waiting for this word, not for a message). The loop then goes on alone.
     */
    @OptIn(kotlinx.coroutines.ExperimentalCoroutinesApi::class)
    suspend fun agreeOnRound(qp: Int?, loop: Int, round: Int, more: Boolean, dropLeftovers: Boolean, measured: Boolean = false): Boolean? {
        val where = if (qp == null) "in its scenario block" else "on QP $qp"
        val phase = if (measured) "timed round" else "warm-up round"
        val what = "repeat { } $where to end $phase $round"
        val scope = if (qp == null) drivers else listOf(drivers[qp])
        sendControl(Round(qp, loop, round, more, scope.map { it.engine.stats().messagesSent() }))
        val key = RoundKey(qp, loop, round)
        val report = roundReports.computeIfAbsent(key) { CompletableDeferred() }
        val since = System.nanoTime()
        controlWait = "$peerLabel's $what"
        try {
            while (true) {
                val peerMore = select {
                    report.onAwait { it }
                    onTimeout(100) { null }
                }
                if (peerMore != null) {
                    roundsAgreed.incrementAndGet()
                    // Sent in the peer's warm-up, so in this side's warm-up too: the boundary is exact.
                    // (A timed round of the measured run only waits for them: they are measured.)
                    for ((i, d) in scope.withIndex()) {
                        d.awaitArrivals(peerMore.sent[i])
                        if (!measured) d.afterAgreedRound(peerMore.sent[i], dropLeftovers)
                    }
                    return more || peerMore.more
                }
                failure?.let { throw it }
                val peerWaits = lastHeartbeat?.waiting
                if (peerStalls >= UNPAIRED_HEARTBEATS && peerWaits != null &&
                    peerWaits.startsWith(if (qp == null) "a message in receive()" else "a message in receive() on QP $qp")) {
                    return null
                }
                if (peerFinishedAt != 0L || control?.framePending == true) {
                    throw ScenarioException("the ${role.label}'s repeat { } $where exchanged messages with $peerLabel in $phase $round, " +
                        "but $peerLabel went on without a repeat { } to pair with it: write the peer's loop with repeat { } (or runFor) " +
                        "on the same QP, or give --set warmup=N for a fixed warm-up")
                }
                if (waitExpired(since, System.nanoTime())) {
                    throw RdmaTimeoutException("the ${role.label} waited ${settings.timeout} for $peerLabel's repeat { } $where to end $phase $round: " +
                        "a loop that exchanges messages needs its partner repeat { } (or runFor) on the peer, on the same QP, " +
                        "or --set warmup=N for a fixed warm-up")
                }
            }
        } finally {
            roundReports.remove(key)
            controlWait = null
        }
    }

    private suspend fun sendControl(frame: Frame) = withContext(Dispatchers.IO) { control!!.send(frame) }

    private suspend fun awaitControl(frame: Frame, what: String): Frame {
        val since = System.nanoTime()
        controlWait = "$peerLabel to reach $what"
        try {
            return control!!.await(frame, "$peerLabel to reach $what") {
                failure?.let { throw it }
                if (waitExpired(since, System.nanoTime())) throw waitedTooLong("$peerLabel to reach $what", null, receiving = false, onCredit = false)
            }
        } finally {
            controlWait = null
        }
    }

    /** This side's block returned: complete its work, then agree with the peer that both are done. */
    suspend fun finish(): ScenarioResult {
        for (d in drivers) d.awaitEverything()
        drivers.forEach { it.engine.finishReceiving() }
        sendControl(Done(1, drivers.map { it.engine.stats().messagesSent() }, latency = drivers.any { it.counters.sections.isNotEmpty() }))
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
        return QpCounters.result(role, deviceName, end - (measuredFrom?.takeIf { it - startNanos > 0 } ?: startNanos), drivers.map { it.counters })
            .copy(connection = connection, parameters = plan.parameters, fingerprint = plan.fingerprint, warmup = warmups.sortedWith(compareBy(nullsFirst()) { it.qp }), preflight = preflight,
                peerMeasuredLatency = peerDone.latency)
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

    /** Tells the peer why this side failed (it may not know yet); what [script]'s own code threw, with its line. */
    fun tellPeer(cause: Throwable, script: ScriptSource?) {
        val told = if (cause is CancellationException) "the ${role.label} was cancelled" else describeFailure(cause, script).lineSequence().first()
        control?.trySend(Failure(told))
    }

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
        for (qp in queuePairs) attempt { qp.modifyToError() }
        attempt { drain() }
        attempt { polling.close() }
        for (qp in queuePairs.asReversed()) attempt { qp.close() }
        for (mr in mrs.asReversed()) attempt { mr.close() }
        attempt { creditMr?.close() }
        for (cq in cqs.asReversed()) attempt { cq.close() }
        attempt { channel?.close() }
        attempt { pd?.close() }
        attempt { context?.close() }
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

        /** Heartbeats of each side that must show both waiting to receive before it is called a deadlock. */
        const val STALLED_HEARTBEATS = 3

        /** Heartbeats of a peer stalled in receive() while a loop here waits for its word on a round: it has no partner loop. */
        const val UNPAIRED_HEARTBEATS = 2

        /** Round reports that may wait for a loop here, per QP and the scenario's block. */
        const val MAX_PENDING_ROUNDS = 64

        const val BOTH_RECEIVE = "both sides wait to receive, one of them has to send first"

        /** The largest max_rd_atomic / max_dest_rd_atomic: the attributes are 8-bit. */
        const val MAX_RD_ATOMIC = 255
    }
}
