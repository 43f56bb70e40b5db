package dev.rdmarun.dsl

import dev.rdmarun.dsl.QpWait.Companion.ARRIVALS
import dev.rdmarun.dsl.QpWait.Companion.BUFFER
import dev.rdmarun.dsl.QpWait.Companion.COMPLETED_ALL
import dev.rdmarun.dsl.QpWait.Companion.COMPLETION
import dev.rdmarun.dsl.QpWait.Companion.CREDIT
import dev.rdmarun.dsl.QpWait.Companion.CREDIT_IDLE
import dev.rdmarun.dsl.QpWait.Companion.MESSAGE
import dev.rdmarun.dsl.QpWait.Companion.WINDOW
import dev.rdmarun.runtime.engine.CompletedWork
import dev.rdmarun.runtime.engine.Progress
import dev.rdmarun.runtime.engine.QpEngine
import java.lang.foreign.MemorySegment
import java.lang.foreign.ValueLayout
import kotlin.coroutines.intrinsics.suspendCoroutineUninterceptedOrReturn
import kotlin.coroutines.resume
import kotlinx.coroutines.Job

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
 * awaited, nothing posted. The job is read at [QpWait.park] (a context lookup, nothing allocated) and
 * polled, not watched with a handler, so the data path still allocates nothing per wait.
 *
 * Two jobs live next door, each in the final field that holds it: the parked wait's state and how
 * it ends other than by its condition ([QpWait], [wait]), and what `repeat { }` and `runFor` ask of
 * their scope ([QpLoopHost], [loop], to which this class delegates [LoopHost]).
 */
internal class QpDriver private constructor(private val session: Session, val engine: QpEngine, private val loop: QpLoopHost) :
    QpScope(), QpEngine.Listener, LoopHost by loop {
    /** [kinds]: the scenario's, one for all its QPs. */
    constructor(session: Session, engine: QpEngine, kinds: SectionKinds) :
        this(session, engine, QpLoopHost(session, engine, engine.index(), QpCounters(engine.stats(), kinds)))

    override val index: Int = engine.index()
    val counters = loop.counters

    /** This QP's `repeat { }` rounds, for a progress line. */
    val rounds = loop.rounds

    /** The parked wait of this QP's coroutine: park, unpark, cancel, deadline. */
    private val wait = QpWait(session, engine, index)

    private var lastCompletion: Completion? = null
    /** The completion [QpEngine.takeCompletion] took last: one, reused. */
    private val taken = CompletedWork()
    /** The waiting receive()'s copyPayload. */
    private var receiveCopies = true
    private var lastBareMessage: Message? = null

    /** What this QP waits for now, for the peer's sentences (read by the heartbeat thread). */
    val waitingFor: String? get() = wait.waitingFor

    init {
        engine.setListener(this)
    }

    /** This QP's coroutine waits in receive() (read by the heartbeat thread). */
    val waitsForMessage: Boolean get() = wait.waitsForMessage

    /** This QP's coroutine waits for a credit to send (read by the heartbeat thread). */
    val waitsForCredit: Boolean get() = wait.waitsForCredit

    /** [QpWait.callSite]: where the script called the parked wait, or null. */
    fun waitCallSite(): String? = wait.callSite()

    /** [QpWait.bounded]: the parked wait is inside a timeout of the script's, so it is not final. */
    val waitBounded: Boolean get() = wait.bounded

    val messagesWaiting: Int get() = engine.messagesWaiting()
    val inboxFull: Boolean get() = engine.inboxFull()

    // ---- scope ----

    override val pair: RankPair get() = session.pairing?.pair ?: twoPeerPair(session.role)
    override val isServer: Boolean get() = session.role == Role.SERVER
    override val isClient: Boolean get() = session.role == Role.CLIENT
    override fun param(name: String, default: String) = session.parameter(name) ?: default

    override fun buffer(i: Int): MemorySegment =
        bufferSlice(i) { count -> "buffer($i) on QP $index is outside 0..${count - 1} (bufferCount $count)" }

    /** Buffer [i]'s memory; one out of range fails with [outside]'s sentence, named as the script's call. */
    private inline fun bufferSlice(i: Int, outside: (count: Int) -> String): MemorySegment {
        val s = session.settings
        if (i !in 0 until s.bufferCount) throw ScriptCallException(outside(s.bufferCount), QpEngine.BUFFER_COUNT_HINT)
        return engine.dataRegion().segment().asSlice(i.toLong() * s.bufferSize, s.bufferSize.toLong())
    }

    // ---- posting ----

    override fun checkNotStopped() {
        session.failure?.let { throw it }
    }

    /** Posts, or parks until the engine can take it; the fast path is not a coroutine frame (nothing allocated). */
    override suspend fun post(kind: OpKind, size: Int, buffer: Int, remoteQp: Int, remoteBuffer: Int, remoteOffset: Long, imm: Int, a: Long, b: Long) {
        checkNotStopped()
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
                    throw ScriptCallException("${kind.label()}() on QP $index would ${if (kind == OpKind.READ) "overwrite" else "read"} buffer $buffer " +
                        "while the ${engine.kindOf(until).label()}() posted before it still ${if (kind == OpKind.READ) "uses" else "fills"} it " +
                        "(bufferReuse(FAIL)): await its completion first, use another buffer, or bufferReuse(WAIT)")
                }
                awaitWork(until, buffer)
            } else {
                awaitRoom(kind, blocked)
            }
            checkNotStopped()
            val seq = engine.post(kind, size, buffer, remoteQp, remoteBuffer, remoteOffset, imm, a, b)
            if (seq > 0) return
            blocked = seq
        }
    }

    private suspend fun awaitRoom(kind: OpKind, blocked: Long): Unit = suspendCoroutineUninterceptedOrReturn { c ->
        wait.op = kind
        if (blocked == QpEngine.BLOCKED_ON_WINDOW) {
            engine.requestCompletionOf(engine.completedThrough() + 1)
            wait.park(c, WINDOW, 0)
        } else {
            wait.park(c, CREDIT, 0)
        }
    }

    /** Parks until work request [seq], which uses [buffer], has completed (not marked awaited: the script still awaits it). */
    private suspend fun awaitWork(seq: Long, buffer: Int): Unit = suspendCoroutineUninterceptedOrReturn { c ->
        engine.requestCompletionOf(seq)
        wait.buffer = buffer
        wait.park(c, BUFFER, seq)
    }

    override suspend fun copyWhenFree(payload: ByteArray, buffer: Int) {
        // Named as the script called it: send(payload), not the buffer(i) it never called.
        val target = bufferSlice(buffer) { count -> "send(payload) on QP $index: buffer $buffer is outside 0..${count - 1} (bufferCount $count)" }
        if (payload.size > target.byteSize()) {
            throw ScriptCallException("send(payload) of ${payload.size} bytes on QP $index is larger than bufferSize ${target.byteSize()}")
        }
        checkNotStopped()
        // A message given as bytes is a value: the copy waits until no posted work uses the buffer.
        val busy = engine.localWriteBusyUntil(buffer)
        if (busy != 0L) awaitWork(busy, buffer)
        MemorySegment.copy(payload, 0, target, ValueLayout.JAVA_BYTE, 0, payload.size)
    }

    // ---- completions ----

    override val outstanding: Int get() = engine.outstanding()

    override suspend fun awaitCompletion(): Completion {
        checkNotStopped()
        val seq = engine.nextToAwait()
        val forgotten = outstanding - (if (seq == 0L) 0L else engine.posted() - seq + 1)
        if (forgotten > 0) {
            throw ScriptCallException("awaitCompletion() on QP $index: the oldest $forgotten of the $outstanding work requests posted " +
                "and not awaited are forgotten, as a QP keeps the last ${engine.config().rememberedWork()} posted: await " +
                "within that many posts, or wait for them all with awaitAll()")
        }
        if (seq == 0L) throw ScriptCallException("awaitCompletion() on QP $index: no work request is outstanding (each one posted was awaited already)")
        if (engine.takeCompletion(seq, taken)) return completion()
        engine.requestCompletionOf(seq)
        return suspendCoroutineUninterceptedOrReturn { c -> wait.park(c, COMPLETION, seq) }
    }

    override suspend fun awaitAll() = awaitThrough(COMPLETED_ALL)

    /** Waits until everything posted so far has completed. */
    private suspend fun awaitThrough(kind: Int) {
        checkNotStopped()
        val target = engine.posted()
        if (engine.takeCompletion(target, null)) return
        engine.requestCompletionOf(target)
        return suspendCoroutineUninterceptedOrReturn { c -> wait.park(c, kind, target) }
    }

    /** The end of the scenario, or a barrier: this QP's work completes first. */
    suspend fun awaitEverything() = awaitThrough(COMPLETED_ALL)

    /**
     * Waits until [count] messages have arrived on this QP since the start (the end of the
     * scenario: the peer's work completed, so they are in the completion queue or on their way to it).
     */
    suspend fun awaitArrivals(count: Long) {
        if (engine.stats().messagesReceived() >= count) return
        return suspendCoroutineUninterceptedOrReturn { c -> wait.park(c, ARRIVALS, count) }
    }

    /** Waits until no credit write of this QP is in flight (end of the scenario). */
    suspend fun awaitCreditIdle() {
        if (!engine.creditWriteInFlight()) return
        return suspendCoroutineUninterceptedOrReturn { c -> wait.park(c, CREDIT_IDLE, 0) }
    }

    /** The [Completion] of what [taken] holds, the completion just taken. */
    private fun completion(): Completion {
        val kind = taken.kind()
        val bytes = taken.bytes()
        val value = taken.value()
        val last = lastCompletion
        // Completions are values: the same one again (a loop's) is the same object, not a new one.
        if (last != null && last.opcode == kind && last.bytes == bytes && last.value == value) return last
        return Completion(index, kind, bytes, value).also { lastCompletion = it }
    }

    // ---- receiving ----

    override suspend fun receive(copyPayload: Boolean): Message {
        checkNotStopped()
        receiveCopies = copyPayload
        if (engine.hasMessage()) return takeMessage()
        return suspendCoroutineUninterceptedOrReturn { c -> wait.park(c, MESSAGE, 0) }
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

    override fun recordSection(name: String, nanos: Long, roundTrip: Boolean) = counters.record(counters.section(name, roundTrip), nanos, 0)

    /** Times [block] as section [name], with the bytes the work requests posted inside it. */
    private suspend inline fun <T> section(name: String, roundTrip: Boolean, block: suspend () -> T): T {
        val section = counters.section(name, roundTrip)
        val b0 = engine.stats().bytesPosted()
        val t0 = System.nanoTime()
        val result = block()
        counters.record(section, System.nanoTime() - t0, engine.stats().bytesPosted() - b0)
        return result
    }

    override fun roundsPlanned(rounds: Long) {
        this.rounds.planned += rounds
    }

    // ---- repeat { } and runFor: LoopHost, delegated to loop ----

    fun afterAgreedRound(peerSent: Long, drop: Boolean) = loop.afterAgreedRound(peerSent, drop)
    fun noteWarmupStart() = loop.noteWarmupStart()
    fun loopMeasured() = loop.loopMeasured()

    override fun roundDone() {
        rounds.done++
    }

    override fun measureFromHere() = loop.measureFromHere()

    override suspend fun <T> measureRoundTrip(name: String, block: suspend () -> T): T = section(name, roundTrip = true, block)

    // ---- waking: what each wait kind waits for (the wait itself is QpWait's) ----

    override fun onProgress(engine: QpEngine, what: Progress) {
        if (session.tearingDown) return // flushed work requests of a scenario that is over
        if (what == Progress.FAILED) session.fail(engine.failure())
        // Any event may end the one wait (a completion frees a buffer and room in the window, an
        // arrival is a credit's too): its condition decides.
        tryResume()
    }

    /** Resumes the parked coroutine when its condition holds; true if it did. */
    private fun tryResume(): Boolean {
        if (!wait.parked) return false
        // A cancelled wait takes nothing: the message or completion stays for the next wait.
        if (wait.releaseIfCancelled()) return true
        val target = wait.target
        val value: Any = when (wait.kind) {
            CREDIT, WINDOW -> if (engine.blockedOn(wait.op) == 0L) Unit else return false
            COMPLETION -> if (engine.takeCompletion(target, taken)) completion() else return false
            COMPLETED_ALL -> if (engine.takeCompletion(target, null)) Unit else return false
            BUFFER -> if (engine.completedThrough() >= target) Unit else return false
            CREDIT_IDLE -> if (!engine.creditWriteInFlight()) Unit else return false
            MESSAGE -> if (engine.hasMessage()) takeMessage() else return false
            ARRIVALS -> if (engine.stats().messagesReceived() >= target) Unit else return false
            else -> return false
        }
        // Resumed right here, on the dispatcher thread it was parked on: no trip through the task
        // queue between a completion and the code that waits for it. Safe because every engine
        // callback reports progress last, and nothing a coroutine calls polls a CQ.
        wait.unpark().resume(value)
        return true
    }

    /** A credit wait re-reads the credit word (the peer writes it without a completion here). */
    fun pollCredit(): Boolean = wait.kind == CREDIT && tryResume()

    /** [QpWait.releaseIfCancelled]: the Session agent's poll for a cancelled wait. */
    fun releaseIfCancelled(): Boolean = wait.releaseIfCancelled()

    /** [QpWait.abort]: the scenario failed or was cancelled. */
    fun abort(cause: Throwable) = wait.abort(cause)

    /** [QpWait.checkDeadline]: the Session agent's deadline check. */
    fun checkDeadline(now: Long) = wait.checkDeadline(now)

    private companion object {
        val EMPTY = ByteArray(0)
    }
}
