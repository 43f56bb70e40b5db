package dev.rdmarun.dsl

import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.CompletionChannel
import dev.rdmarun.runtime.CompletionQueue
import dev.rdmarun.runtime.Context
import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.runtime.Gid
import dev.rdmarun.runtime.MemoryRegion
import dev.rdmarun.runtime.Mtu
import dev.rdmarun.runtime.PollingDispatcher
import dev.rdmarun.runtime.ProtectionDomain
import dev.rdmarun.runtime.QpEndpoint
import dev.rdmarun.runtime.QueuePair
import dev.rdmarun.runtime.QueuePairConfig
import dev.rdmarun.runtime.RtrAttributes
import dev.rdmarun.runtime.RtsAttributes
import dev.rdmarun.runtime.WcStatus
import dev.rdmarun.runtime.WorkCompletions
import java.net.ServerSocket
import java.security.SecureRandom
import java.util.EnumSet
import java.util.concurrent.CompletableFuture
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.TimeUnit
import java.util.concurrent.TimeoutException
import java.util.concurrent.atomic.AtomicReference
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.ensureActive
import kotlinx.coroutines.isActive
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext

/**
 * One run of a validated plan on this side: verbs objects, the dispatcher, the control
 * connection, the run pass, the end-of-run handshake and teardown.
 *
 * Order of a run: bind the TCP port (server), open and check the device, create PD, CQs, MRs
 * (with the plan's access flags) and QPs (to INIT), start the dispatcher and post every receive,
 * exchange hellos, RTR/RTS, "ready" both ways; run the block on the dispatcher; wait for this
 * side's work to complete; "done 1" both ways (from now on receives only count and re-post);
 * stop credit updates; "done 2" both ways. On success, failure or cancellation alike, teardown
 * moves the QPs to ERR, lets the dispatcher drain the flushed completions, closes it, then the
 * QPs, MRs, CQs, channel, PD and context.
 */
internal class Session(private val plan: ScenarioPlan, options: RdmaOptions) {
    val settings = plan.settings
    private val parameters = options.parameters
    private val monitor = options.monitor

    /** What the block reads as `peer` (the plan's peer is what it passed to connect). */
    val givenPeer: Peer? = options.peer
    private val peer: Peer = plan.peer ?: throw ScenarioException("the scenario never calls connect(peer)")
    val role = peer.role
    private val access = plan.accessFor(role)

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
    private var polling: PollingDispatcher? = null
    private var coroutineDispatcher: VerbsDispatcher? = null
    val qps = ArrayList<QpSession>()
    private var deviceName = settings.device ?: "?"
    private var gidIndex = 0
    private val psns = IntArray(settings.qps)
    private var localMtu = Mtu.MTU_1024

    @Volatile
    var tearingDown = false
        private set

    /** Set after both sides finished: no more messages can arrive, so re-posts need no credit updates. */
    @Volatile
    var creditsStopped = false
        private set

    private val failure = AtomicReference<Throwable?>(null)

    @Volatile
    private var runJob: Job? = null

    @Volatile
    private var settingUp = true
    private var barrierSeq = 0

    val dispatcher: PollingDispatcher get() = polling ?: error("no dispatcher yet")

    suspend fun run(block: suspend ScenarioScope.() -> Unit): ScenarioResult = withContext(Dispatchers.IO) {
        var result: ScenarioResult? = null
        var primary: Throwable? = null
        // Accepting, connecting and the handshake block in socket calls that do not see a
        // cancellation (Ctrl-C): closing the sockets ends them.
        val unblocker = launch {
            try {
                awaitCancellation()
            } finally {
                if (settingUp) closeSockets()
            }
        }
        try {
            setUp()
            settingUp = false
            result = runScenario(block)
        } catch (e: Throwable) {
            primary = failure.get() ?: if (isActive) e else e as? CancellationException ?: CancellationException("the scenario was cancelled", e)
            val told = if (primary is CancellationException) "the ${role.label} was cancelled" else primary.message ?: primary.toString()
            control?.trySend(Failure(told))
        } finally {
            settingUp = false
            unblocker.cancel()
            monitor?.stopped()
        }
        val cleanup = withContext(NonCancellable) { tearDown() }
        if (primary != null) {
            cleanup?.let { if (it !== primary) primary.addSuppressed(it) }
            throw primary
        }
        if (cleanup != null) throw ScenarioException("the scenario ran but cleaning up failed: ${cleanup.message}", cleanup)
        result!!
    }

    /** Records the first failure and cancels the run; later failures (often consequences) are dropped. */
    fun fail(cause: Throwable) {
        if (failure.compareAndSet(null, cause)) runJob?.cancel(CancellationException(cause.message, cause))
    }

    /** An error completion: ends the scenario with what failed and the likely cause. */
    fun completionFailed(qp: QpSession?, what: String, completions: WorkCompletions, index: Int) {
        if (tearingDown) return
        val status = completions.status(index)
        // Flushes follow the error that moved the QP to ERR; that one is reported.
        if (status == WcStatus.WR_FLUSH_ERR && failure.get() != null) return
        val v = completions.failure(index)
        val where = qp?.let { "QP ${it.index} (qpn ${it.qp.qpNum()})" } ?: "QP with qpn ${completions.qpNum(index)}"
        fail(ScenarioException("$what on $where failed with ${status.name}", v, v.hint()))
    }

    // ---- setup ----

    private suspend fun setUp() {
        val coroutine = currentCoroutineContext()
        (peer as? Peer.Listen)?.let { listener = ControlConnection.listen(it, settings.timeout) }
        coroutine.ensureActive() // a cancellation before the listener existed did not close it
        openDevice()
        createResources()
        val d = PollingDispatcher.start("rdma-run-${role.label}", settings.completionMode.idleMode, channel)
        polling = d
        val vd = VerbsDispatcher(d)
        coroutineDispatcher = vd
        withContext(vd) {
            cqs.forEach { d.addCompletionQueue(it) }
            d.setUnmatchedCompletionHandler { wcs, i ->
                if (!wcs.isSuccess(i)) completionFailed(null, "an unsignaled work request", wcs, i)
            }
            // Receives first: the peer may send as soon as both sides are ready.
            qps.forEach { it.postInitialReceives() }
        }
        val c = when (peer) {
            is Peer.Listen -> ControlConnection.accept(listener!!, settings.timeout).also {
                listener?.close()
                listener = null
            }
            is Peer.Connect -> ControlConnection.connect(peer, settings.timeout) { coroutine.isActive }
        }
        control = c
        coroutine.ensureActive() // likewise for the connection
        val remote = c.handshake(hello())
        connectQps(remote)
        c.send(Ready)
        val ready = c.receive("the ${role.other.label}'s ready signal")
        if (ready != Ready) throw PeerException("the ${role.other.label} sent something else than its ready signal: it is not a compatible rdma-run")
        c.startWatching { fail(it) }
    }

    /** Wakes setup calls blocked on the sockets (see [run]); teardown closes them again, harmlessly. */
    private fun closeSockets() {
        runCatching { listener?.close() }
        runCatching { control?.close() }
    }

    private fun openDevice() {
        DeviceList.open().use { list ->
            val names = list.devices().map { it.name() }
            deviceName = Validation.checkDevice(plan, names,
                attributes = { name -> list.find(name).open().also { context = it }.queryDevice() },
                port = { context!!.queryPort(settings.port) },
                missing = list.unavailable().firstOrNull()?.describeInline())
        }
    }

    private fun readAtomicDepth(peerSide: Boolean): Int {
        val a = context!!.queryDevice()
        val ops = if (peerSide) plan.opsOf(role.other) else plan.opsOf(role)
        if (ops.none { it.kind.writesLocalBuffer }) return 1
        return minOf(16, if (peerSide) a.maxQpRdAtom() else a.maxQpInitRdAtom()).coerceAtLeast(1)
    }

    private fun createResources() {
        val ctx = context!!
        val s = settings
        pd = ctx.allocateProtectionDomain()
        if (s.completionMode == CompletionMode.EVENT) channel = ctx.createCompletionChannel()
        val perQp = s.sendDepth + 1 + s.recvDepth
        if (s.cqMode == CqMode.SHARED) {
            cqs.add(ctx.createCompletionQueue(perQp * s.qps, channel))
        } else {
            repeat(s.qps) { cqs.add(ctx.createCompletionQueue(perQp, channel)) }
        }
        if (access.creditWords) creditMr = pd!!.registerMemory(s.qps * 8L, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE))
        gidIndex = s.gidIndex ?: ctx.defaultGid(s.port).index()
        localMtu = ctx.queryPort(s.port).activeMtu()
        val random = SecureRandom()
        for (i in 0 until s.qps) {
            val data = pd!!.registerMemory(s.dataBytes, access.data).also { mrs.add(it) }
            val recv = if (access.receiveSlots) {
                pd!!.registerMemory(QpSession.receiveRegionBytes(s), EnumSet.of(Access.LOCAL_WRITE)).also { mrs.add(it) }
            } else null
            val cq = cqs[if (s.cqMode == CqMode.SHARED) 0 else i]
            val qp = pd!!.createQueuePair(QueuePairConfig.rc(cq)
                .withDepth(s.sendDepth + 1, s.recvDepth)
                .withMaxInlineData(s.inlineThreshold))
            queuePairs.add(qp)
            qp.modifyToInit(s.port, access.qpAccess)
            psns[i] = random.nextInt(1 shl 24)
            qps.add(QpSession(i, this, qp, data, recv, creditMr, s, access.holdsMessages))
        }
    }

    private fun hello(): Hello {
        val ctx = context!!
        val gid = ctx.gid(settings.port, gidIndex).gid()
        val lid = ctx.queryPort(settings.port).lid()
        return Hello(
            version = Handshake.VERSION,
            role = role,
            qpCount = settings.qps,
            recvDepth = settings.recvDepth,
            maxDestRdAtomic = readAtomicDepth(peerSide = true),
            fingerprint = plan.fingerprint,
            parameters = parameters,
            plan = plan.canonicalLines(),
            qps = qps.map { q ->
                QpInfo(
                    qpn = q.qp.qpNum(),
                    psn = psns[q.index],
                    lid = lid,
                    gid = gid.toHex(),
                    mtu = localMtu.bytes(),
                    buffer = q.dataInfo(),
                    credit = creditMr?.let { BufferInfo(it.address() + q.index * 8L, it.rkey(), 8) },
                )
            },
        )
    }

    private fun connectQps(remote: Hello) {
        val cap = settings.mtu?.let { Mtu.ofBytes(it) }
        val outgoingAtomics = minOf(readAtomicDepth(peerSide = false), remote.maxDestRdAtomic.coerceAtLeast(1))
        val incomingAtomics = readAtomicDepth(peerSide = true)
        for (q in qps) {
            val r = remote.qps[q.index]
            val endpoint = try {
                QpEndpoint(r.lid, r.qpn, r.psn, Gid.parseHex(r.gid), Mtu.ofBytes(r.mtu))
            } catch (e: IllegalArgumentException) {
                throw PeerException("the ${role.other.label} sent an invalid endpoint for QP ${q.index}: ${e.message}", e)
            }
            if (access.receiveSlots && r.credit == null) {
                throw PeerException("the ${role.other.label} sends on QP ${q.index} but gave no credit word: it is not a compatible rdma-run")
            }
            var mtu = Mtu.min(localMtu, endpoint.mtu())
            if (cap != null) mtu = Mtu.min(mtu, cap)
            q.qp.modifyToRtr(RtrAttributes.of(endpoint, settings.port, gidIndex, mtu).withMaxDestRdAtomic(incomingAtomics))
            q.qp.modifyToRts(RtsAttributes.of(psns[q.index])
                .withRnrRetry(settings.rnrRetry)
                .withRetry(settings.retryTimeout, settings.retryCount)
                .withMaxRdAtomic(outgoingAtomics))
            q.connectTo(r, remote.recvDepth)
        }
    }

    // ---- run ----

    private suspend fun runScenario(block: suspend ScenarioScope.() -> Unit): ScenarioResult {
        val scope = RunningScenarioScope(this)
        monitor?.running(qps.map { it.counters })
        var start = 0L
        var end = 0L
        coroutineScope {
            val job = launch(coroutineDispatcher!!) {
                start = System.nanoTime()
                scope.block()
                qps.forEach { it.quiesce() }
                qps.forEach { it.switchToSink() }
                sendControl(Done(1))
                control!!.await(Done(1), "the ${role.other.label} to finish the scenario")
                // Both sides' work is complete: every message is in a receive queue already.
                end = System.nanoTime()
                creditsStopped = true
                qps.forEach { it.awaitCreditIdle() }
                sendControl(Done(2))
                control!!.await(Done(2), "the ${role.other.label}'s final frame")
            }
            runJob = job
            if (failure.get() != null) job.cancel()
        }
        failure.get()?.let { throw it }
        return QpCounters.result(role, deviceName, end - start, qps.map { it.counters })
    }

    private suspend fun sendControl(frame: Frame) = withContext(Dispatchers.IO) { control!!.send(frame) }

    suspend fun barrier() {
        val seq = ++barrierSeq
        qps.forEach { it.flush() }
        sendControl(Barrier(seq))
        control!!.await(Barrier(seq), "barrier $seq")
    }

    fun parameter(name: String): String? = parameters[name]

    // ---- teardown ----

    /** Closes everything, in dependency order; returns the first error (others suppressed into it). */
    private fun tearDown(): Throwable? {
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
        polling?.let { d ->
            attempt { drain(d) }
            attempt { d.close() }
        }
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
    private fun drain(d: PollingDispatcher) {
        val drained = CompletableFuture<Unit>()
        val check = object : Runnable {
            override fun run() {
                if (d.pending() == 0) drained.complete(Unit) else d.execute(this)
            }
        }
        try {
            d.execute(check)
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
