package dev.rdmarun.dsl

import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.atomic.AtomicLong
import kotlinx.coroutines.Job

/**
 * What this side knows of the peer while the scenario runs, from its heartbeats and its "done 1":
 * when it last made progress (every wait's deadline counts from there, [waitExpired]), whether it
 * finished and what it sent, and this side's own heartbeat ([progressReport]). Both sides waiting
 * at once for what only the other can give (a message in receive(), or a credit, which the peer's
 * receive() gives) is a deadlock that nothing can end: seen here, in the heartbeats, long before
 * the timeout. It also words the sentence of a wait that ran out ([waitedTooLong]).
 */
internal class PeerProgress(private val session: Session) {
    private val role = session.role
    private val peerLabel = session.peerLabel
    private val timeout = session.settings.timeout
    private val timeoutNanos = timeout.inWholeNanoseconds
    private val drivers get() = session.drivers

    @Volatile
    private var peerProgress = -1L

    /** When the peer last made progress (or this side started waiting, whichever is later: see [waitExpired]). */
    @Volatile
    private var peerProgressAt = System.nanoTime()

    @Volatile
    var lastHeartbeat: Heartbeat? = null
        private set

    /** When the peer's "done 1" arrived: it finished its block and its work completed. 0: not yet. */
    @Volatile
    var peerFinishedAt = 0L
        private set

    /** The messages the finished peer says it sent on each QP (its "done 1"); null while it runs. */
    @Volatile
    private var peerSent: List<Long>? = null

    /** Messages the peer sent on [qp], once it finished; Long.MAX_VALUE while it runs (or sent no usable count). */
    fun peerMessagesSent(qp: Int): Long = peerSent?.getOrNull(qp) ?: Long.MAX_VALUE

    /** The scenario runs from now: no wait's deadline counts from before. */
    fun startClock() {
        peerProgressAt = System.nanoTime()
    }

    /**
     * A wait that started at [since] has lasted too long: the peer made no progress for the
     * timeout since then.
     */
    fun waitExpired(since: Long, now: Long): Boolean = now - maxOf(since, peerProgressAt) > timeoutNanos

    /** On the reader thread: the peer's heartbeat. */
    fun heartbeat(h: Heartbeat) {
        lastHeartbeat = h
        peerStalls = if (h.stalled && h.progress == peerProgress) peerStalls + 1 else if (h.stalled) 1 else 0
        if (h.progress != peerProgress) {
            peerProgress = h.progress
            peerProgressAt = System.nanoTime()
        }
        checkBothStalled()
    }

    // ---- both sides waiting for the other, seen in the heartbeats long before the timeout ----

    /**
     * Consecutive heartbeats in which this side, and the peer, reported a stall ([Heartbeat.stalled])
     * with unchanged progress. A stall is only the peer's to end, so both stalled at once for
     * [STALLED_HEARTBEATS] heartbeats each (at least two heartbeat periods, in which any message in
     * flight would have arrived and changed a progress counter) is a deadlock nothing can end.
     */
    @Volatile
    private var localStalls = 0
    @Volatile
    var peerStalls = 0
        private set
    /** Written by the heartbeat thread only. */
    private var localProgress = -1L
    @Volatile
    private var localWait: String? = null

    private fun checkBothStalled() {
        if (localStalls < STALLED_HEARTBEATS || peerStalls < STALLED_HEARTBEATS) return
        val mine = localWait ?: return
        val theirs = lastHeartbeat?.waiting?.let { printable(it) } ?: return
        val cause = if (mine.startsWith(QpWait.RECEIVING) && theirs.startsWith(QpWait.RECEIVING)) BOTH_RECEIVE else BOTH_BLOCKED
        session.fail(ScenarioException("the ${role.label} waits for $mine; $peerLabel waits too, for $theirs: $cause " +
            STALL_END))
    }

    /**
     * What this side's only possible progress waits for, or null: every coroutine of the scenario
     * waits in receive() or for a credit to send (as many coroutines are alive as QPs wait so, so
     * one busy in its own code, or in withContext elsewhere, is seen), nothing posted (a credit
     * update too; unsignaled sends are made to report, [Session.requestCompletionOfAll]) is still
     * in flight and no message waits in the inbox of a QP that receives (a
     * QP that waits for a credit may hold messages: it will not take them). The heartbeat thread
     * reads the dispatcher's state without locking; [waitingFor][QpDriver.waitsForMessage] is read
     * before the counters, so a message taken since shows as progress. A wait inside withTimeout { }
     * or withTimeoutOrNull { } is not final (its expiry runs other code): no stall; nor is a side
     * with a coroutine in delay() or another timer ([VerbsDispatcher.delaysPending]: a parent in
     * delay() while its child waits has an active child, so the job tree alone shows it as waiting
     * for that child), nor one whose dispatcher was given a coroutine to run since the last check (a
     * `yield()` loop), nor one whose dispatcher thread did not run the probe the last heartbeat gave
     * it (a coroutine blocks that thread in its own code: Thread.sleep, a busy loop). Not seen: a parent suspended
     * on something else that another thread ends (a channel, a Deferred) while its child waits.
     * Under RdmaJava the code runs on threads of its own and [Session.runJob] (connect's call) has
     * ended: no coroutine is seen, nothing is called a deadlock, and the timeout ends the wait as before.
     */
    private fun stalledOn(): String? {
        if (controlWait != null || peerFinishedAt != 0L || session.failure != null) return null
        var blocked = 0
        var what: String? = null
        var whatDriver: QpDriver? = null
        var whatReceives = false
        for (d in drivers) {
            // waitsFor* before the counters below: a message taken since shows as progress.
            val receiving = d.waitsForMessage
            if (receiving || d.waitsForCredit) {
                if (d.waitBounded) return null
                blocked++
                // A credit wait names the cause whichever QP it is on: prefer it to a receive().
                if (what == null || (whatReceives && !receiving)) {
                    what = d.waitingFor
                    whatDriver = d
                    whatReceives = receiving
                }
            }
            if (receiving && d.messagesWaiting != 0) return null
        }
        if (blocked == 0) return null
        var unsignaled = false
        for (d in drivers) {
            val e = d.engine
            if (e.completedThrough() < e.lastSignaled() || e.creditWriteInFlight()) return null
            if (e.completedThrough() < e.posted()) unsignaled = true
        }
        val job = session.runJob ?: return null
        if (liveCoroutines(job) != blocked) return null
        val dispatcher = this.dispatcher ?: return null
        if (dispatcher.delaysPending != 0 || dispatchedSinceLastCheck(dispatcher) || !probeAnswered(dispatcher)) return null
        if (unsignaled) {
            // Selective signaling left sends that report no completion, and nothing will post the
            // signaled one behind them: have the engine post it, and look again at the next heartbeat.
            session.requestCompletionOfAll()
            return null
        }
        return whatDriver?.waitCallSite()?.let { "$what (at $it)" } ?: what
    }

    /** The scenario's dispatcher, set with [Session.runJob]. */
    @Volatile
    var dispatcher: VerbsDispatcher? = null

    /** [VerbsDispatcher.dispatched] at the last check (-1: none yet). Heartbeat thread. */
    private var dispatchedAtCheck = -1L

    /** Whether the dispatcher was given a coroutine to run since the last check (a `yield()` loop runs). */
    private fun dispatchedSinceLastCheck(dispatcher: VerbsDispatcher): Boolean {
        val n = dispatcher.dispatched
        val before = dispatchedAtCheck
        dispatchedAtCheck = n
        return before != -1L && n != before
    }

    /** The last probe the heartbeat thread gave the dispatcher thread, and the last that thread ran. */
    private var probeSent = 0L
    private val probeRan = AtomicLong()

    /**
     * Whether the dispatcher thread ran the probe given at the last check (the first check has
     * none to wait for); gives it the next one. Heartbeat thread.
     */
    private fun probeAnswered(dispatcher: VerbsDispatcher): Boolean {
        if (probeRan.get() != probeSent) return false
        val next = probeSent + 1
        try {
            dispatcher.polling.execute { probeRan.set(next) }
        } catch (_: RejectedExecutionException) {
            return false // the scenario is ending
        }
        probeSent = next
        return true
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

    /** On the reader thread: the peer's "done 1" arrived, with what it sent on each QP. */
    fun peerFinished(sent: List<Long>) {
        peerSent = sent
        peerFinishedAt = System.nanoTime()
        peerProgressAt = peerFinishedAt
    }

    /** This side's heartbeat: its progress, what it waits for, its inboxes. Called on the heartbeat thread. */
    fun progressReport(): Heartbeat {
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
        val total = progress + session.barriers + session.warmup.roundsAgreed
        localWait = stalled
        localStalls = if (stalled != null && total == localProgress) localStalls + 1 else if (stalled != null) 1 else 0
        localProgress = total
        checkBothStalled()
        // Stalled: the wait that names the cause, which the peer's verdict reads.
        return Heartbeat(total, stalled ?: waiting ?: controlWait, messages, full, stalled = stalled != null)
    }

    /** What this side waits for on the control connection (a barrier, a round, the end), for its heartbeats; null: nothing. */
    @Volatile
    var controlWait: String? = null

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
            peerWaits != null && receiving && peerWaits.startsWith(QpWait.RECEIVING) ->
                "; $peerLabel waits too, for $peerWaits: $BOTH_RECEIVE"
            peerWaits != null -> "; $peerLabel made no progress either: it waits for $peerWaits"
            h == null -> "; $peerLabel sent no progress report"
            else -> "; $peerLabel is alive but made no progress for $timeout (busy in its own code?)"
        }
        return RdmaTimeoutException("the ${role.label} waited $timeout for $what$peerPart")
    }

    /** The sentence for a receive() the peer can no longer answer. */
    fun peerFinishedWithoutSending(qp: Int): ScenarioException =
        ScenarioException("$peerLabel finished without sending the message that the ${role.label} waits for in receive() on QP $qp")

    internal companion object {
        /** Heartbeats of each side that must show it stalled (in receive() or on a credit) before it is called a deadlock. */
        const val STALLED_HEARTBEATS = 3

        const val BOTH_RECEIVE = "both sides wait to receive, one of them has to send first"

        private const val STALL_END = "(neither side made progress for $STALLED_HEARTBEATS heartbeats)"

        /** Whether [message] (a peer's failure report) is a side's deadlock verdict. */
        fun isStallVerdict(message: String) = message.endsWith(STALL_END)

        /** A send's credit comes from the peer's receive(): with both sides blocked, none will come. */
        const val BOTH_BLOCKED = "a credit to send comes only when the peer's receive() takes a message from its full inbox, " +
            "and neither side can call receive() now: receive() on one side, raise inboxDepth(...), or send fewer messages"
    }
}
