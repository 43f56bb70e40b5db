package dev.rdmarun.dsl

import dev.rdmarun.runtime.engine.QpEngine
import java.lang.foreign.MemorySegment
import java.lang.foreign.ValueLayout
import kotlin.coroutines.Continuation
import kotlin.coroutines.intrinsics.COROUTINE_SUSPENDED
import kotlin.coroutines.intrinsics.intercepted
import kotlin.coroutines.intrinsics.suspendCoroutineUninterceptedOrReturn
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Job
import kotlinx.coroutines.ensureActive

/**
 * One QP's coroutine layer over its [QpEngine]: each operation posts through the engine and, when
 * the engine says it has to wait, parks the calling coroutine until the engine reports progress
 * (or the wait's deadline passes). Everything runs on the scenario's dispatcher thread.
 *
 * A parked coroutine is the caller's own continuation, resumed directly on the dispatcher's thread
 * when the engine reports progress: one reusable continuation per QP, no object per wait.
 *
 * A parked wait is cancellable as kotlinx's own suspending functions are: once the waiting
 * coroutine's [Job] is cancelled (`withTimeout` around the wait, a cancelled `launch`), the
 * dispatcher's next round ends the wait with the job's CancellationException ([releaseIfCancelled]),
 * and nothing the wait would have consumed is consumed: no message taken, no work request marked
 * awaited, nothing posted. The job is read at [park] (a context lookup, nothing allocated) and
 * polled, not watched with a handler, so the data path still allocates nothing per wait.
 */
internal class QpDriver(private val session: Session, val engine: QpEngine) : QpScope, QpEngine.Listener, LoopHost {
    override val index: Int = engine.index()
    val counters = QpCounters(engine.stats())

    /** This QP's `repeat { }` rounds, for a progress line. */
    val rounds = Rounds()

    private var waiter: Continuation<Any?>? = null
    /** The parked coroutine's job, polled for cancellation ([releaseIfCancelled]); null when none waits. */
    private var waitJob: Job? = null
    private var waitKind = NONE
    private var waitTarget = 0L
    private var waitOp = OpKind.SEND
    /** The buffer a BUFFER wait is for. */
    private var waitBuffer = 0
    private var waitSince = 0L
    private var lastCompletion: Completion? = null
    /** The waiting receive()'s copyPayload. */
    private var receiveCopies = true
    private var lastBareMessage: Message? = null

    /** What this QP waits for now, for the peer's sentences (read by the heartbeat thread). */
    @Volatile
    var waitingFor: String? = null
        private set

    /** What a parked coroutine waits for, by wait kind: for this side's heartbeats ("it waits for ..."). */
    private val describeWait = arrayOf(
        "",
        "a message in receive() on QP $index",
        "a credit to send on QP $index",
        "room in the send queue of QP $index",
        "a completion in awaitCompletion() on QP $index",
        "its work on QP $index to complete",
        "a credit update on QP $index to complete",
        "the peer's last messages on QP $index to arrive",
        "earlier work on a buffer of QP $index to complete",
    )

    init {
        engine.setListener(this)
    }

    /** This QP's coroutine waits in receive() (read by the heartbeat thread: the volatile [waitingFor] says so). */
    val waitsForMessage: Boolean get() = waitingFor === describeWait[MESSAGE]

    val messagesWaiting: Int get() = engine.messagesWaiting()
    val inboxFull: Boolean get() = engine.inboxFull()

    // ---- scope ----

    override val isServer: Boolean get() = session.role == Role.SERVER
    override val isClient: Boolean get() = session.role == Role.CLIENT
    override fun param(name: String, default: String) = session.parameter(name) ?: default

    override suspend fun server(block: suspend QpScope.() -> Unit) {
        if (isServer) block()
    }

    override suspend fun client(block: suspend QpScope.() -> Unit) {
        if (isClient) block()
    }

    override fun buffer(i: Int): MemorySegment {
        val s = session.settings
        if (i !in 0 until s.bufferCount) throw ScenarioException("buffer($i) on QP $index is outside 0..${s.bufferCount - 1} (bufferCount ${s.bufferCount})")
        return engine.dataRegion().segment().asSlice(i.toLong() * s.bufferSize, s.bufferSize.toLong())
    }

    // ---- posting ----

    private fun stopped() {
        session.failure?.let { throw it }
    }

    /** Posts, or parks until the engine can take it; the fast path is not a coroutine frame (nothing allocated). */
    private suspend fun post(kind: OpKind, size: Int, buffer: Int, remoteQp: Int, remoteBuffer: Int, remoteOffset: Long, imm: Int, a: Long, b: Long) {
        stopped()
        val seq = engine.post(kind, size, buffer, remoteQp, remoteBuffer, remoteOffset, imm, a, b)
        if (seq > 0) return
        return postAfterWaiting(kind, seq, size, buffer, remoteQp, remoteBuffer, remoteOffset, imm, a, b)
    }

    private suspend fun postAfterWaiting(kind: OpKind, firstBlock: Long, size: Int, buffer: Int, remoteQp: Int, remoteBuffer: Int,
                                         remoteOffset: Long, imm: Int, a: Long, b: Long) {
        var blocked = firstBlock
        while (true) {
            if (blocked == QpEngine.BLOCKED_ON_BUFFER) {
                val until = engine.bufferBusyUntil(kind, buffer)
                if (session.settings.bufferReuse == BufferReuse.FAIL) {
                    throw ScenarioException("${kind.label()}() on QP $index would ${if (kind == OpKind.READ) "overwrite" else "read"} buffer $buffer " +
                        "while the ${engine.kindOf(until).label()}() posted before it still ${if (kind == OpKind.READ) "uses" else "fills"} it " +
                        "(bufferReuse(FAIL)): await its completion first, use another buffer, or bufferReuse(WAIT)")
                }
                awaitWork(until, buffer)
            } else {
                awaitRoom(kind, blocked)
            }
            stopped()
            val seq = engine.post(kind, size, buffer, remoteQp, remoteBuffer, remoteOffset, imm, a, b)
            if (seq > 0) return
            blocked = seq
        }
    }

    private suspend fun awaitRoom(kind: OpKind, blocked: Long): Unit = suspendCoroutineUninterceptedOrReturn { c ->
        waitOp = kind
        if (blocked == QpEngine.BLOCKED_ON_WINDOW) {
            engine.requestCompletionOf(engine.completedThrough() + 1)
            park(c, WINDOW, 0)
        } else {
            park(c, CREDIT, 0)
        }
    }

    override suspend fun send(size: Int, buffer: Int) = post(OpKind.SEND, size, buffer, index, 0, 0, 0, 0, 0)

    /** Parks until work request [seq], which uses [buffer], has completed (not marked awaited: the script still awaits it). */
    private suspend fun awaitWork(seq: Long, buffer: Int): Unit = suspendCoroutineUninterceptedOrReturn { c ->
        engine.requestCompletionOf(seq)
        waitBuffer = buffer
        park(c, BUFFER, seq)
    }

    override suspend fun send(payload: ByteArray, buffer: Int) {
        val target = buffer(buffer)
        if (payload.size > target.byteSize()) {
            throw ScenarioException("send(payload) of ${payload.size} bytes on QP $index is larger than bufferSize ${target.byteSize()}")
        }
        stopped()
        // A message given as bytes is a value: the copy waits until no posted work uses the buffer.
        val busy = engine.localWriteBusyUntil(buffer)
        if (busy != 0L) awaitWork(busy, buffer)
        MemorySegment.copy(payload, 0, target, ValueLayout.JAVA_BYTE, 0, payload.size)
        post(OpKind.SEND, payload.size, buffer, index, 0, 0, 0, 0, 0)
    }

    override suspend fun sendWithImm(imm: Int, size: Int, buffer: Int) = post(OpKind.SEND_WITH_IMM, size, buffer, index, 0, 0, imm, 0, 0)

    override suspend fun write(size: Int, buffer: Int, remoteQp: Int, remoteBuffer: Int, remoteOffset: Long) =
        post(OpKind.WRITE, size, buffer, remoteQp, remoteBuffer, remoteOffset, 0, 0, 0)

    override suspend fun writeWithImm(imm: Int, size: Int, buffer: Int, remoteQp: Int, remoteBuffer: Int, remoteOffset: Long) =
        post(OpKind.WRITE_WITH_IMM, size, buffer, remoteQp, remoteBuffer, remoteOffset, imm, 0, 0)

    override suspend fun read(size: Int, buffer: Int, remoteQp: Int, remoteBuffer: Int, remoteOffset: Long) =
        post(OpKind.READ, size, buffer, remoteQp, remoteBuffer, remoteOffset, 0, 0, 0)

    override suspend fun compareAndSwap(compare: Long, swap: Long, remoteQp: Int, remoteBuffer: Int, remoteOffset: Long, buffer: Int) =
        post(OpKind.COMPARE_AND_SWAP, 8, buffer, remoteQp, remoteBuffer, remoteOffset, 0, compare, swap)

    override suspend fun fetchAndAdd(add: Long, remoteQp: Int, remoteBuffer: Int, remoteOffset: Long, buffer: Int) =
        post(OpKind.FETCH_AND_ADD, 8, buffer, remoteQp, remoteBuffer, remoteOffset, 0, add, 0)

    // ---- completions ----

    override val outstanding: Int get() = engine.outstanding()

    override suspend fun awaitCompletion(): Completion {
        stopped()
        val seq = engine.nextToAwait()
        if (seq == 0L) throw ScenarioException("awaitCompletion() on QP $index: no work request is outstanding (each one posted was awaited already)")
        if (engine.completedThrough() >= seq) {
            engine.markAwaited(seq)
            return completionOf(seq)
        }
        engine.requestCompletionOf(seq)
        return suspendCoroutineUninterceptedOrReturn { c -> park(c, COMPLETION, seq) }
    }

    override suspend fun awaitCompletions(n: Int): List<Completion> {
        if (n < 0) throw ScenarioException("awaitCompletions($n) on QP $index: n cannot be negative")
        stopped()
        val outstanding = engine.outstanding()
        if (n > outstanding) {
            throw ScenarioException("awaitCompletions($n) on QP $index: only $outstanding work request${if (outstanding == 1) " is" else "s are"} " +
                "outstanding (posted and not awaited yet)")
        }
        if (n == 0) return emptyList()
        val all = ArrayList<Completion>(n)
        for (i in 0 until n) all.add(awaitCompletion())
        return all
    }

    override suspend fun awaitAll() = awaitThrough(COMPLETED_ALL)

    /** Waits until everything posted so far has completed. */
    private suspend fun awaitThrough(kind: Int) {
        stopped()
        val target = engine.posted()
        if (engine.completedThrough() >= target) {
            engine.markAwaited(target)
            return
        }
        engine.requestCompletionOf(target)
        return suspendCoroutineUninterceptedOrReturn { c -> park(c, kind, target) }
    }

    /** The end of the scenario, or a barrier: this QP's work completes first. */
    suspend fun awaitEverything() = awaitThrough(COMPLETED_ALL)

    /**
     * Waits until [count] messages have arrived on this QP since the start (the end of the
     * scenario: the peer's work completed, so they are in the completion queue or on their way to it).
     */
    suspend fun awaitArrivals(count: Long) {
        if (engine.stats().messagesReceived() >= count) return
        return suspendCoroutineUninterceptedOrReturn { c -> park(c, ARRIVALS, count) }
    }

    /** Waits until no credit write of this QP is in flight (end of the scenario). */
    suspend fun awaitCreditIdle() {
        if (!engine.creditWriteInFlight()) return
        return suspendCoroutineUninterceptedOrReturn { c -> park(c, CREDIT_IDLE, 0) }
    }

    private fun completionOf(seq: Long): Completion {
        val kind = engine.kindOf(seq)
        val bytes = engine.sizeOf(seq)
        val value = engine.resultOf(seq)
        val last = lastCompletion
        // Completions are values: the same one again (a loop's) is the same object, not a new one.
        if (last != null && last.opcode == kind && last.bytes == bytes && last.value == value) return last
        return Completion(index, kind, bytes, value).also { lastCompletion = it }
    }

    // ---- receiving ----

    override suspend fun receive(copyPayload: Boolean): Message {
        stopped()
        receiveCopies = copyPayload
        if (engine.hasMessage()) return takeMessage()
        return suspendCoroutineUninterceptedOrReturn { c -> park(c, MESSAGE, 0) }
    }

    private fun takeMessage(): Message {
        val length = engine.messageLength()
        val imm = if (engine.messageHasImmediate()) engine.messageImmediate() else null
        if (!receiveCopies || engine.messageIsWrite() || length == 0) {
            engine.releaseMessage()
            // Without a payload a message is a value: the same one again (a loop's) is the same object.
            val last = lastBareMessage
            if (last != null && last.length == length && last.immediate == imm) return last
            return Message(index, length, imm, EMPTY).also { lastBareMessage = it }
        }
        val bytes = ByteArray(length).also { engine.copyMessage(it, 0) }
        engine.releaseMessage()
        return Message(index, length, imm, bytes)
    }

    override suspend fun <T> measure(name: String, block: suspend () -> T): T = section(name, roundTrip = false, block)

    /** Times [block] as section [name], with the bytes the work requests posted inside it. */
    private suspend inline fun <T> section(name: String, roundTrip: Boolean, block: suspend () -> T): T {
        val b0 = engine.stats().bytesPosted()
        val t0 = System.nanoTime()
        val result = block()
        counters.recordSection(name, System.nanoTime() - t0, roundTrip, bytes = engine.stats().bytesPosted() - b0)
        return result
    }

    override fun roundsPlanned(rounds: Long) {
        this.rounds.planned += rounds
    }

    // ---- repeat { } and runFor (LoopHost) ----

    override val canWarmUp: Boolean get() = true
    override val loopQp: Int get() = index
    override fun loopParam(name: String): String? = session.parameter(name)
    // Taken, not arrived: the peer's next round may arrive before this side's next round starts.
    override fun messagesMoved(): Long = engine.stats().messagesSent() + messagesTaken()
    override fun messagesTaken(): Long = engine.stats().messagesReceived() - engine.messagesWaiting()

    /**
     * Messages waiting here that the peer sent in its warm-up, as the last agreed round showed
     * ([afterAgreedRound]); -1 without an agreed round since the last measureFromHere.
     */
    private var peerWarmupWaiting = -1L

    /**
     * The peer's word on a warm-up round: it had sent [peerSent] messages on this QP by then, all
     * arrived here. With [drop] (this loop takes none) its leftovers are dropped: exactly those,
     * not the first of its next round, which may be here already.
     */
    fun afterAgreedRound(peerSent: Long, drop: Boolean) {
        var left = peerSent - messagesTaken()
        if (drop && left > 0) left -= engine.dropWaitingMessages(left)
        peerWarmupWaiting = left.coerceIn(0, engine.messagesWaiting().toLong())
    }
    private var loops = 0
    override fun nextLoop(): Int = ++loops
    override suspend fun agreeOnRound(loop: Int, round: Int, more: Boolean, dropLeftovers: Boolean, measured: Boolean) =
        session.warmup.agreeOnRound(index, loop, round, more, dropLeftovers, measured)
    override fun startMeasuring(): Boolean {
        val lost = measuredBeforeWarmup
        measureFromHere()
        measuredRunEnded = false
        measuredBeforeWarmup = false
        return lost
    }

    /** Whether something measured (a section, a loop's measured run) preceded the current warm-up. */
    private var measuredBeforeWarmup = false

    /** A loop's measured run ended since the last warm-up: a warm-up's end leaves its figures out. */
    private var measuredRunEnded = false
    override fun warmupStarted() {
        noteWarmupStart()
        session.warmup.warmupGate.started()
    }

    /** A warm-up of this QP or of the scenario's block starts: what was measured so far is at stake. */
    fun noteWarmupStart() {
        measuredBeforeWarmup = counters.sections.isNotEmpty() || measuredRunEnded
    }
    override suspend fun warmupOver() = session.warmup.warmupGate.over()
    override fun planned(iterations: Long, warmupIterations: Long) {
        rounds.done -= warmupIterations
        rounds.planned += iterations
    }
    override fun warmedUp(summary: WarmupSummary) {
        loopMeasured()
        session.warmup.warmedUp(summary)
    }

    /** A loop of this QP, or of the scenario's block, ended its measured run. */
    fun loopMeasured() {
        measuredRunEnded = true
    }

    override fun roundDone() {
        rounds.done++
    }

    override fun measureFromHere() {
        val now = System.nanoTime()
        if (peerWarmupWaiting >= 0) engine.measureFromHere(now, peerWarmupWaiting) else engine.measureFromHere(now)
        peerWarmupWaiting = -1
        counters.measureFromHere()
        session.measuredFrom(now)
    }

    override suspend fun <T> measureRoundTrip(name: String, block: suspend () -> T): T = section(name, roundTrip = true, block)

    // ---- parking and waking ----

    private fun park(c: Continuation<*>, kind: Int, target: Long): Any {
        if (waiter != null) {
            throw ScenarioException("two coroutines wait on QP $index at once (${describeWait[waitKind]} and ${describeWait[kind]}): " +
                "give each QP one coroutine, as forEachQp { } does")
        }
        @Suppress("UNCHECKED_CAST")
        waiter = c as Continuation<Any?>
        waitJob = c.context[Job]
        waitKind = kind
        waitTarget = target
        waitSince = System.nanoTime()
        waitingFor = describeWait[kind]
        session.parked(kind == CREDIT)
        return COROUTINE_SUSPENDED
    }

    private fun unpark(): Continuation<Any?> {
        val c = waiter!!
        session.unparked(waitKind == CREDIT)
        waiter = null
        waitJob = null
        waitKind = NONE
        waitingFor = null
        return c
    }

    override fun onProgress(engine: QpEngine) {
        if (session.tearingDown) return // flushed work requests of a scenario that is over
        engine.failure()?.let { session.fail(it) }
        tryResume()
    }

    /** Resumes the parked coroutine when its condition holds; true if it did. */
    private fun tryResume(): Boolean {
        if (waiter == null) return false
        // A cancelled wait takes nothing: the message or completion stays for the next wait.
        if (releaseIfCancelled()) return true
        val value: Any = when (waitKind) {
            CREDIT, WINDOW -> if (engine.blockedOn(waitOp) == 0L) Unit else return false
            COMPLETION -> if (engine.completedThrough() >= waitTarget) {
                engine.markAwaited(waitTarget)
                completionOf(waitTarget)
            } else return false
            COMPLETED_ALL -> if (engine.completedThrough() >= waitTarget) {
                engine.markAwaited(waitTarget)
                Unit
            } else return false
            BUFFER -> if (engine.completedThrough() >= waitTarget) Unit else return false
            CREDIT_IDLE -> if (!engine.creditWriteInFlight()) Unit else return false
            MESSAGE -> if (engine.hasMessage()) takeMessage() else return false
            ARRIVALS -> if (engine.stats().messagesReceived() >= waitTarget) Unit else return false
            else -> return false
        }
        // Resumed right here, on the dispatcher thread it was parked on: no trip through the task
        // queue between a completion and the code that waits for it. Safe because every engine
        // callback reports progress last, and nothing a coroutine calls polls a CQ.
        unpark().resume(value)
        return true
    }

    /** A credit wait re-reads the credit word (the peer writes it without a completion here). */
    fun pollCredit(): Boolean = waitKind == CREDIT && tryResume()

    /**
     * Ends the parked wait if its coroutine's job was cancelled (kotlinx's `withTimeout` around it,
     * a cancelled scope): it then throws the job's CancellationException, or the scenario's failure
     * when that is what cancelled it, and takes nothing. True if it did. Dispatcher thread.
     */
    fun releaseIfCancelled(): Boolean {
        val job = waitJob ?: return false
        if (!job.isCancelled) return false
        val cause: Throwable = session.failure ?: try {
            job.ensureActive()
            return false // not cancelled after all: a job that completed normally
        } catch (e: CancellationException) {
            e
        }
        unpark().intercepted().resumeWithException(cause)
        return true
    }

    /** Ends a parked wait with [cause] (the scenario failed or was cancelled). */
    fun abort(cause: Throwable) {
        if (waiter == null) return
        unpark().intercepted().resumeWithException(cause)
    }

    /** Fails the scenario when this QP's wait has outlived the peer's progress by the timeout. */
    fun checkDeadline(now: Long) {
        if (waiter == null) return
        if (waitKind == MESSAGE && !engine.hasMessage() && engine.stats().messagesReceived() >= session.progress.peerMessagesSent(index)) {
            // Everything the finished peer sent on this QP has arrived, and none is left for this receive().
            session.fail(session.progress.peerFinishedWithoutSending(index))
        } else if (session.progress.waitExpired(waitSince, now)) {
            val what = when (waitKind) {
                MESSAGE -> "a message in receive() on QP $index"
                CREDIT -> "a free receive at the peer to ${waitOp.label()}() on QP $index"
                WINDOW -> "the completion of earlier work requests to post on QP $index (sendDepth ${session.settings.sendDepth} are in flight)"
                COMPLETION -> "the completion of a ${engine.kindOf(waitTarget).label()}() on QP $index"
                BUFFER -> "the completion of a ${engine.kindOf(waitTarget).label()}() that uses buffer $waitBuffer of QP $index"
                ARRIVALS -> "the last ${waitTarget - engine.stats().messagesReceived()} of the ${waitTarget} messages that ${session.peerLabel} " +
                    "says it sent on QP $index to arrive"
                else -> "the work posted on QP $index to complete"
            }
            session.fail(session.progress.waitedTooLong(what, index, receiving = waitKind == MESSAGE, onCredit = waitKind == CREDIT))
        }
    }

    private companion object {
        const val NONE = 0
        const val MESSAGE = 1
        const val CREDIT = 2
        const val WINDOW = 3
        const val COMPLETION = 4
        const val COMPLETED_ALL = 5
        const val CREDIT_IDLE = 6
        const val ARRIVALS = 7
        const val BUFFER = 8
        val EMPTY = ByteArray(0)
    }
}
