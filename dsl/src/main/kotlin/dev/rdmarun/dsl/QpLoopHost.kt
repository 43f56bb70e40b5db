package dev.rdmarun.dsl

import dev.rdmarun.runtime.engine.QpEngine

/**
 * What a QP's `repeat { }` and `runFor` ask of their scope ([LoopHost]): agreeing rounds with the
 * peer, where the measured run starts, and whether a warm-up leaves out something measured. Apart
 * from [QpDriver] because this is bookkeeping between loop rounds, not the post/await path; the
 * driver is the loop's host by delegating [LoopHost] here. Dispatcher thread.
 */
internal class QpLoopHost(private val session: Session, private val engine: QpEngine, private val index: Int, val counters: QpCounters) : LoopHost {
    /** This QP's `repeat { }` rounds, for a progress line. */
    val rounds = Rounds()

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
        measuredBeforeWarmup = counters.measuredAny() || measuredRunEnded
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

    /** [CommonScope.measureFromHere] for this QP: its engine, its sections and its measured time. */
    fun measureFromHere() {
        val now = System.nanoTime()
        if (peerWarmupWaiting >= 0) engine.measureFromHere(now, peerWarmupWaiting) else engine.measureFromHere(now)
        peerWarmupWaiting = -1
        counters.measureFromHere()
    }
}
