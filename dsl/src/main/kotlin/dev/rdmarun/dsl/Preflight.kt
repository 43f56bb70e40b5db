package dev.rdmarun.dsl

import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.CompletionChannel
import dev.rdmarun.runtime.CompletionQueue
import dev.rdmarun.runtime.Context
import dev.rdmarun.runtime.DeviceAttributes
import dev.rdmarun.runtime.FabricKey
import dev.rdmarun.runtime.IdleMode
import dev.rdmarun.runtime.MemoryRegion
import dev.rdmarun.runtime.Mtu
import dev.rdmarun.runtime.PollingDispatcher
import dev.rdmarun.runtime.QueuePair
import dev.rdmarun.runtime.QueuePairConfig
import dev.rdmarun.runtime.RemoteRegion
import dev.rdmarun.runtime.RtrAttributes
import dev.rdmarun.runtime.RtsAttributes
import dev.rdmarun.runtime.VerbsResource
import dev.rdmarun.runtime.engine.EngineConfig
import dev.rdmarun.runtime.engine.QpEngine
import java.security.SecureRandom
import java.util.EnumSet
import kotlin.time.Duration
import kotlin.time.Duration.Companion.seconds
import kotlin.time.toJavaDuration
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext
import kotlinx.coroutines.yield

/**
 * The pre-flight warm-up `connect(peer)` runs after the device is open and before it meets the
 * peer (a server's listener already exists: a client that connects meanwhile waits in its
 * backlog), so that the first loop a script times itself is not the JIT's warm-up: on a small VM
 * the engine's post/poll/resume path, interpreted or C1-compiled, made a self-timed ping-pong 1.6x
 * ib_send_lat.
 *
 * It runs the scenario's own code path: on the opened device and port, two RC QPs of this process
 * connected to each other, each with a real [QpEngine] (the scenario's buffer size, inline
 * threshold, signalEvery, sendDepth, recvDepth and inbox; one buffer) driven by a real [QpDriver],
 * both polled by the scenario's [PollingDispatcher] in its completion mode: one thread drives both
 * QPs (a peer pinned to one CPU would otherwise hand over only at scheduler ticks). Each round is
 * send/receive ping-pong (receive without and with a copy of the payload), an RDMA WRITE stream
 * with awaitCompletion, READs and atomics; rounds go on until the JIT is quiet ([JitQuiet]), at most for [BOUND] or half the scenario's timeout (the peer waits under that timeout
 * meanwhile).
 *
 * Its objects are its own (PD, CQs, completion channel, MRs, QPs), none of the scenario's: the
 * scenario's figures include nothing of it, and all of them are closed before [run] returns, on
 * every path (cancellation too). Skipped when the parameter `preflight` is `0` (with `warmup=0`,
 * the figures of a JVM that has run nothing yet), and, with one line, when the device cannot connect a QP to another of this process;
 * its failure is never the scenario's.
 */
internal object Preflight {
    /** The longest a pre-flight runs (besides half the scenario's timeout). */
    val BOUND: Duration = 10.seconds

    /** Local operations of a whole round (one past the time bound is cut short): see [round]. */
    const val EXCHANGES_PER_ROUND = 1000

    /** The parameter `preflight`: `auto` (absent) or `0`; anything else is one sentence, said at connect by both sides. */
    fun enabled(text: String?): Boolean = when (text?.trim()?.lowercase()) {
        null, "auto" -> true
        "0" -> false
        else -> throw ScenarioException("parameter preflight must be auto or 0 (none), not '${printable(text)}'")
    }

    private const val DRAIN_NANOS = 5_000_000_000L

    /** The largest WRITE or READ of a round (a huge bufferSize warms no other code, only costs time). */
    private const val MAX_TRANSFER = 64 * 1024

    /** For tests: sees every verbs object a pre-flight creates, and each round's end, and gives its clock. Null in use. */
    @Volatile
    internal var probe: Probe? = null

    internal interface Probe {
        fun starting(session: Session) {}
        fun created(resource: VerbsResource) {}
        suspend fun roundDone(round: Int) {}
        /** The clock of the pre-flight's bound (System.nanoTime()). */
        fun nanoTime(): Long = System.nanoTime()
    }

    private fun now(): Long = probe?.nanoTime() ?: System.nanoTime()

    /**
     * Runs the pre-flight for [session] (on its dispatcher thread, before the session adds its own
     * CQs to the dispatcher) on [context] with GID [gidIndex]; [note] gets the one line of a skip.
     * Null: skipped.
     */
    suspend fun run(session: Session, polling: PollingDispatcher, context: Context, gidIndex: Int, note: (String) -> Unit): PreflightReport? {
        probe?.starting(session)
        if (!enabled(session.parameter(StandardParameters.PREFLIGHT))) return null
        val s = session.settings
        val bound = minOf(BOUND, s.timeout / 2)
        // The QP drivers answer to a session of their own: its failure is the pre-flight's, never the scenario's,
        // and its deadlines bound every wait by [bound].
        val settings = s.copy(bufferCount = 1, bufferReuse = BufferReuse.WAIT, timeout = bound)
        val local = Session(ScenarioPlan(settings, Peer.Listen(Peer.DEFAULT_PORT)), polling, null)
        val run = Run(local, polling, context, gidIndex, settings)
        try {
            try {
                run.setUp()
            } catch (e: CancellationException) {
                throw e
            } catch (e: Exception) {
                note("pre-flight skipped: ${session.deviceName} cannot connect a QP to another QP of this process (${e.message ?: e.javaClass.simpleName})")
                return null
            }
            return try {
                run.rounds(bound, session.deviceName)
            } catch (e: CancellationException) {
                throw e
            } catch (e: Exception) {
                note("pre-flight skipped: it failed on ${session.deviceName} (${e.message ?: e.javaClass.simpleName}); the scenario runs cold")
                null
            }
        } finally {
            withContext(NonCancellable) { run.tearDown() }?.let {
                note("pre-flight: releasing its objects on ${session.deviceName} failed (${it.message ?: it.javaClass.simpleName})")
            }
        }
    }

    /** One pre-flight: its objects, in creation order, and the two drivers. */
    private class Run(val local: Session, val polling: PollingDispatcher, val context: Context, val gidIndex: Int, val s: ScenarioSettings) {
        val created = ArrayList<VerbsResource>()
        val cqs = ArrayList<CompletionQueue>()
        val qps = ArrayList<QueuePair>()
        val engines = ArrayList<QpEngine>()
        var channel: CompletionChannel? = null
        var polled = false
        var pendingBefore = 0
        lateinit var a: QpDriver
        lateinit var b: QpDriver
        val config: EngineConfig = s.engineConfig()
        var atomics = false
        /** Operations of the rounds so far (a ping-pong counts once). */
        var exchanges = 0L

        private fun <T : VerbsResource> track(r: T): T {
            created.add(r)
            probe?.created(r)
            return r
        }

        fun setUp() {
            val device = context.queryDevice()
            atomics = device.atomicCap() != DeviceAttributes.AtomicCapability.NONE && s.bufferSize >= 8
            val pd = track(context.allocateProtectionDomain())
            if (s.completionMode == CompletionMode.EVENT) channel = track(context.createCompletionChannel())
            val perQp = config.completionQueueEntries()
            if (s.cqMode == CqMode.SHARED) {
                cqs.add(track(context.createCompletionQueue(perQp * 2, channel)))
            } else {
                repeat(2) { cqs.add(track(context.createCompletionQueue(perQp, channel))) }
            }
            val remote = EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ).apply { if (atomics) add(Access.REMOTE_ATOMIC) }
            val credits = track(pd.registerMemory(2 * 8L, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE)))
            val data = ArrayList<MemoryRegion>()
            val psns = IntArray(2)
            val random = SecureRandom()
            val endpoints = (0 until 2).map { i ->
                data.add(track(pd.registerMemory(s.dataBytes, EnumSet.of(Access.LOCAL_WRITE).apply { addAll(remote) })))
                val recv = track(pd.registerMemory(config.receiveRegionBytes(), EnumSet.of(Access.LOCAL_WRITE)))
                val qp = track(pd.createQueuePair(QueuePairConfig.rc(cqs[if (s.cqMode == CqMode.SHARED) 0 else i])
                    .withDepth(config.sendQueueDepth(), s.recvDepth)
                    .withMaxInlineData(s.inlineThreshold)))
                qps.add(qp)
                qp.modifyToInit(s.port, remote)
                psns[i] = random.nextInt(1 shl 24)
                engines.add(QpEngine(i, qp, data[i], recv, credits, config, polling))
                qp.localEndpoint(s.port, gidIndex, psns[i])
            }
            // Both ends are in this process: a random key is as good as a derived one (soft0 needs one).
            val key = FabricKey.random()
            val port = context.queryPort(s.port)
            val outgoing = minOf(MAX_RD_ATOMIC, device.maxQpInitRdAtom()).coerceAtLeast(1)
            val incoming = minOf(MAX_RD_ATOMIC, device.maxQpRdAtom()).coerceAtLeast(1)
            for (i in 0 until 2) {
                val other = endpoints[1 - i]
                var mtu = Mtu.min(port.activeMtu(), other.mtu())
                s.mtu?.let { mtu = Mtu.min(mtu, Mtu.ofBytes(it)) }
                qps[i].modifyToRtr(RtrAttributes.of(other, s.port, gidIndex, mtu).withMaxDestRdAtomic(incoming).withFabricKey(key)
                    .withConnectTimeout(s.timeout.toJavaDuration()))
                qps[i].modifyToRts(RtsAttributes.of(psns[i]).withRnrRetry(s.rnrRetry).withRetry(s.retryTimeout, s.retryCount)
                    .withMaxRdAtomic(outgoing))
            }
            // On the dispatcher thread from here: as Session.connect, in the scenario's completion mode.
            pendingBefore = polling.pending()
            polling.setIdleMode(s.completionMode.idleMode, channel)
            polled = true
            cqs.forEach { polling.addCompletionQueue(it) }
            val kinds = SectionKinds()
            a = QpDriver(local, engines[0], kinds)
            b = QpDriver(local, engines[1], kinds)
            local.drivers.add(a)
            local.drivers.add(b)
            polling.addAgent(local)
            engines.forEach { it.postInitialReceives() }
            for (i in 0 until 2) {
                val other = engines[1 - i]
                // Engine i reports its re-posted receives into the other's credit word (at the other's index).
                val creditWord = RemoteRegion(credits.address() + other.index() * 8L, 8, credits.rkey())
                val otherData = other.dataRegion().let { RemoteRegion(it.address(), it.length(), it.rkey()) }
                engines[i].connect(QpEngine.Peer("the pre-flight's other QP", s.recvDepth, creditWord, arrayOf(otherData, otherData), remote))
            }
        }

        suspend fun rounds(bound: Duration, device: String): PreflightReport {
            val jit = JitQuiet()
            val start = now()
            val end = start + bound.inWholeNanoseconds
            var rounds = 0
            var quiet = false
            coroutineScope {
                // A cancellation (Ctrl-C) does not reach a coroutine parked in a QpDriver: ending the
                // local session's waits does.
                var finished = false
                val watcher = launch(start = CoroutineStart.UNDISPATCHED) {
                    try {
                        awaitCancellation()
                    } finally {
                        if (!finished) local.fail(CancellationException("the pre-flight was cancelled"))
                    }
                }
                try {
                    while (true) {
                        round(end)
                        rounds++
                        probe?.roundDone(rounds)
                        if (jit.roundEnded()) {
                            quiet = true
                            break
                        }
                        if (now() - end >= 0) break
                    }
                } finally {
                    finished = true
                    watcher.cancel()
                }
            }
            return PreflightReport(device, rounds, exchanges, now() - start, quiet)
        }

        /**
         * One round, [EXCHANGES_PER_ROUND] operations: 250 ping-pongs of a small message taken with
         * receive(copyPayload = false), 250 of a larger one taken with a copy, 250 WRITEs streamed
         * with awaitCompletion, 125 READs, 125 atomics (fetchAndAdd and compareAndSwap, each
         * awaited; READs instead where the device has no atomics or the buffer is under 8 bytes).
         */
        private suspend fun round(end: Long) = coroutineScope {
            // Past the bound the rest of a round is left out: under emulation one round takes seconds.
            fun over() = now() - end >= 0
            val small = minOf(s.bufferSize, 64)
            val large = minOf(s.bufferSize, MAX_TRANSFER)
            val transfer = large
            launch {
                failing {
                    // A 0-byte message from the other QP: the bound passed, no more ping-pongs this round.
                    var stopped = false
                    for (i in 0 until PING_PONGS) {
                        if (b.receive(copyPayload = false).length == 0) {
                            stopped = true
                            break
                        }
                        b.send(small)
                    }
                    if (!stopped) {
                        for (i in 0 until PING_PONGS) {
                            if (b.receive().length == 0) break
                            b.send(large)
                        }
                    }
                    b.awaitAll()
                }
            }
            failing {
                var stopped = false
                for (i in 0 until PING_PONGS) {
                    if (over()) {
                        a.send(0)
                        stopped = true
                        break
                    }
                    a.send(small)
                    a.receive(copyPayload = false)
                    exchanges++
                }
                if (!stopped) {
                    for (i in 0 until PING_PONGS) {
                        if (over()) {
                            a.send(0)
                            break
                        }
                        a.send(large)
                        a.receive()
                        exchanges++
                    }
                }
                a.awaitAll()
                for (i in 0 until WRITES) {
                    if (over()) break
                    a.write(transfer)
                    exchanges++
                    if (a.outstanding >= s.sendDepth) a.awaitCompletion()
                }
                a.awaitAll()
                val readDepth = minOf(s.sendDepth, 16)
                for (i in 0 until (if (atomics) READS else READS + ATOMICS)) {
                    if (over()) break
                    a.read(transfer)
                    exchanges++
                    if (a.outstanding >= readDepth) a.awaitCompletion()
                }
                a.awaitAll()
                if (atomics) {
                    for (i in 0 until ATOMICS) {
                        if (over()) break
                        if (i and 1 == 0) a.fetchAndAdd(1) else a.compareAndSwap(i.toLong(), i + 1L)
                        a.awaitCompletion()
                        exchanges++
                    }
                }
            }
        }

        /** Ends the other coroutine's wait too when this one fails (a parked QpDriver does not see cancellation). */
        private inline fun failing(block: () -> Unit) {
            try {
                block()
            } catch (e: Throwable) {
                local.fail(e)
                throw e
            }
        }

        /** Closes everything [setUp] made, whatever state it got to; the first error, or null. On the dispatcher thread, not cancellable. */
        suspend fun tearDown(): Throwable? {
            var error: Throwable? = null
            fun attempt(body: () -> Unit) {
                try {
                    body()
                } catch (e: Throwable) {
                    if (error == null) error = e else error!!.addSuppressed(e)
                }
            }
            // Flushed work requests complete into engines nobody listens to any more.
            engines.forEach { e -> attempt { e.setListener { _, _ -> } } }
            attempt { polling.removeAgent(local) }
            for (qp in qps) attempt { qp.modifyToError() }
            if (polled) {
                // Let the dispatcher take the flushed completions of every registered work request
                // before the QPs go: none is left for a destroyed QP (as Session.tearDown drains).
                val deadline = System.nanoTime() + DRAIN_NANOS
                while (polling.pending() > pendingBefore && System.nanoTime() - deadline < 0) yield()
                cqs.forEach { cq -> attempt { polling.removeCompletionQueue(cq) } }
                // Back to the mode the scenario's thread starts in (no CQ is left; the session sets its own next).
                attempt { polling.setIdleMode(IdleMode.BACKOFF, null) }
            }
            for (r in created.asReversed()) attempt { r.close() }
            return error
        }
    }

    private const val PING_PONGS = 250
    private const val WRITES = 250
    private const val READS = 125
    private const val ATOMICS = 125

    /** The largest max_rd_atomic / max_dest_rd_atomic: the attributes are 8-bit. */
    private const val MAX_RD_ATOMIC = 255
}
