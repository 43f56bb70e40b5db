package dev.rdmarun.dsl

import dev.rdmarun.runtime.engine.QpEngine
import kotlin.coroutines.Continuation
import kotlin.coroutines.intrinsics.COROUTINE_SUSPENDED
import kotlin.coroutines.intrinsics.intercepted
import kotlin.coroutines.jvm.internal.CoroutineStackFrame
import kotlin.coroutines.resumeWithException
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.ExperimentalCoroutinesApi
import kotlinx.coroutines.Job
import kotlinx.coroutines.ensureActive

/**
 * The one parked wait of a QP: which coroutine waits, for what, since when, and the ways a wait
 * ends other than its condition (cancelled, aborted, timed out). Apart from [QpDriver] because
 * this is the state the dispatcher's agent and the heartbeat read, while the driver decides what
 * each operation waits for and when that holds ([QpDriver.tryResume]). It holds no objects per
 * wait: the continuation is the caller's own, and the fields are reused. Dispatcher thread,
 * except [waitingFor].
 */
internal class QpWait(private val session: Session, private val engine: QpEngine, private val index: Int) {
    private var waiter: Continuation<Any?>? = null
    /** The parked coroutine's job, polled for cancellation ([releaseIfCancelled]); null when none waits. */
    private var waitJob: Job? = null
    var kind = NONE
        private set
    var target = 0L
        private set
    /** The operation a CREDIT or WINDOW wait posts once resumed. */
    var op = OpKind.SEND
    /** The buffer a BUFFER wait is for. */
    var buffer = 0
    private var since = 0L

    /** What this QP waits for now, for the peer's sentences (read by the heartbeat thread). */
    @Volatile
    var waitingFor: String? = null
        private set

    /** What a parked coroutine waits for, by wait kind: for this side's heartbeats ("it waits for ..."). */
    private val describeWait = arrayOf(
        "",
        "$RECEIVING on QP $index",
        "a credit to send on QP $index",
        "room in the send queue of QP $index",
        "a completion in awaitCompletion() on QP $index",
        "its work on QP $index to complete",
        "a credit update on QP $index to complete",
        "the peer's last messages on QP $index to arrive",
        "earlier work on a buffer of QP $index to complete",
    )

    val parked: Boolean get() = waiter != null

    /** This QP's coroutine waits in receive() (read by the heartbeat thread: the volatile [waitingFor] says so). */
    val waitsForMessage: Boolean get() = waitingFor === describeWait[MESSAGE]

    /** This QP's coroutine waits for a credit: only the peer's receive() gives one (read by the heartbeat thread). */
    val waitsForCredit: Boolean get() = waitingFor === describeWait[CREDIT]

    /**
     * The parked wait sits inside a kotlinx timeout of the scenario's code (`withTimeout { }`,
     * `withTimeoutOrNull { }`, at any depth below [Session.runJob]; one around the whole scenario
     * ends it as a deadlock verdict would): its expiry ends the wait and runs other code, so the wait
     * is not final. Read by the heartbeat thread after [waitingFor], whose volatile write at [park]
     * follows the job's.
     */
    @OptIn(ExperimentalCoroutinesApi::class)
    val bounded: Boolean
        get() {
            val root = session.runJob ?: return false
            return generateSequence(waitJob) { it.parent }.takeWhile { it !== root }.any { it.javaClass.name == TIMEOUT_COROUTINE }
        }

    /**
     * Where the script called the parked wait (`card.main.kts:14`), or null when unknown: the first
     * frame of the waiting coroutine that is neither the DSL's nor Kotlin's or kotlinx's. For
     * sentences only: read by the heartbeat thread while the wait lasts (a stall); it allocates
     * nothing but the result.
     */
    fun callSite(): String? {
        val e = scriptFrame(waiter as? CoroutineStackFrame) ?: return null
        return if (e.lineNumber > 0) "${e.fileName}:${e.lineNumber}" else e.fileName
    }

    fun park(c: Continuation<*>, kind: Int, target: Long): Any {
        if (waiter != null) {
            throw ScenarioException("two coroutines wait on QP $index at once (${describeWait[this.kind]} and ${describeWait[kind]}): " +
                "give each QP one coroutine, as forEachQp { } does")
        }
        @Suppress("UNCHECKED_CAST")
        waiter = c as Continuation<Any?>
        waitJob = c.context[Job]
        this.kind = kind
        this.target = target
        since = System.nanoTime()
        waitingFor = describeWait[kind]
        session.parked(kind == CREDIT)
        return COROUTINE_SUSPENDED
    }

    fun unpark(): Continuation<Any?> {
        val c = waiter!!
        session.unparked(kind == CREDIT)
        waiter = null
        waitJob = null
        kind = NONE
        waitingFor = null
        return c
    }

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
        if (kind == MESSAGE && !engine.hasMessage() && engine.stats().messagesReceived() >= session.progress.peerMessagesSent(index)) {
            // Everything the finished peer sent on this QP has arrived, and none is left for this receive().
            session.fail(session.progress.peerFinishedWithoutSending(index))
        } else if (session.progress.waitExpired(since, now)) {
            val what = when (kind) {
                MESSAGE -> "$RECEIVING on QP $index"
                CREDIT -> "a free receive at the peer to ${op.label()}() on QP $index"
                WINDOW -> "the completion of earlier work requests to post on QP $index (sendDepth ${session.settings.sendDepth} are in flight)"
                COMPLETION -> "the completion of a ${engine.kindOf(target).label()}() on QP $index"
                BUFFER -> "the completion of a ${engine.kindOf(target).label()}() that uses buffer $buffer of QP $index"
                ARRIVALS -> "the last ${target - engine.stats().messagesReceived()} of the ${target} messages that ${session.peerLabel} " +
                    "says it sent on QP $index to arrive"
                else -> "the work posted on QP $index to complete"
            }
            session.fail(session.progress.waitedTooLong(what, index, receiving = kind == MESSAGE, onCredit = kind == CREDIT))
        }
    }

    /** Wait kinds: what a parked coroutine waits for. */
    companion object {
        const val NONE = 0
        const val MESSAGE = 1
        const val CREDIT = 2
        const val WINDOW = 3
        const val COMPLETION = 4
        const val COMPLETED_ALL = 5
        const val CREDIT_IDLE = 6
        const val ARRIVALS = 7
        const val BUFFER = 8

        /** The job kotlinx's withTimeout { } and withTimeoutOrNull { } run their block in. */
        private const val TIMEOUT_COROUTINE = "kotlinx.coroutines.TimeoutCoroutine"

        /** How a heartbeat's `waiting` begins when a QP waits in receive(): the peer's checks read it so. */
        const val RECEIVING = "a message in receive()"
    }
}
