package dev.rdmarun.dsl

import dev.rdmarun.runtime.engine.QpStats
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Job

/**
 * Rounds of `repeat { }` in one scope (the scenario's, or a QP's): planned and done, for a
 * progress line. Written by the scope's coroutine, read by a display thread without locking (it
 * may lag a little; the loop pays one field write per round).
 */
internal class Rounds {
    @Volatile
    var planned = 0L

    // Plain: a display that sees it a little late does not mind, and the loop pays no fence.
    var done = 0L
}

/**
 * This side's traffic so far in the measured phase, as a [ScenarioMonitor] read it (see
 * [TrafficResult] for what counts): the figures the results will have once the run ends.
 */
public data class LiveTotals(
    /**
     * The side's measured time so far, as its results' duration counts it: from its first post or
     * arrival of the measured phase to its last completion or arrival (now, while it has none).
     * Until it posted or received anything ([started] false), since the measured phase began:
     * connect(peer) finished (QPs connected), or a warm-up ended.
     */
    val elapsedNanos: Long,
    val bytesSent: Long,
    val bytesReceived: Long,
    /** Work requests completed. */
    val operations: Long,
    val messagesReceived: Long,
    /** Warm-ups ended so far (all QPs): when it changes, the figures started again from 0. */
    val phase: Int = 0,
    /** Which of the monitor's scenarios this reading is of (1 for the first). */
    val run: Int = 0,
    /** Whether the side posted or received anything in the measured phase: [elapsedNanos] then runs from its first post or arrival. */
    val started: Boolean = true,
)

/**
 * A launcher's handle on the scenarios run with the [RdmaOptions] that carry it: [totals] while
 * one runs (for a progress line), [onRunning] when its QPs are connected, and [cancel] (Ctrl-C),
 * which ends it as cancelling its coroutine does: the session tears every verbs object down.
 *
 * The totals are the per-QP counters the dispatcher thread keeps anyway, read here from another
 * thread without synchronization: they may lag a little, which a display does not mind, and the
 * data path pays nothing for them.
 */
public class ScenarioMonitor(
    /** Called once per scenario when connect(peer) finished (on the scenario's thread: keep it short). */
    private val onRunning: (() -> Unit)? = null,
    /** A line about the connection worth telling the user (stray connections the server closed), already escaped. */
    private val onNote: ((String) -> Unit)? = null,
) {
    @Volatile
    private var counters: List<QpStats> = emptyList()

    @Volatile
    private var rounds: List<Rounds> = emptyList()

    @Volatile
    private var runningSince = 0L

    @Volatile
    private var run = 0

    @Volatile
    private var job: Job? = null

    @Volatile
    public var cancelled: Boolean = false
        private set

    /** This side's totals while a scenario runs after connect(peer), else null (before it, tearing down, done). */
    public fun totals(): LiveTotals? {
        val started = runningSince
        if (started == 0L) return null
        val run = run
        var phase = 0
        var sent = 0L
        var received = 0L
        var operations = 0L
        var messages = 0L
        val measured = counters.map { it.measured() }
        for (m in measured) {
            phase += m.phase
            sent += m.bytesSent
            received += m.bytesReceived
            operations += m.operations
            messages += m.messagesReceived
        }
        val time = MeasuredTime(started, System.nanoTime(), measured)
        return LiveTotals(time.nanos, sent, received, operations, messages, phase, run, time.started)
    }

    /**
     * How far the running scenario is, 0 to 1: its `repeat { }` rounds done of those planned (all
     * scopes together; a time-based `repeat` plans none); null when none are planned or nothing runs.
     */
    public fun fractionDone(): Double? {
        if (runningSince == 0L) return null
        var planned = 0L
        var done = 0L
        for (r in rounds) {
            planned += r.planned
            done += r.done
        }
        return if (planned == 0L) null else (done.toDouble() / planned).coerceIn(0.0, 1.0)
    }

    /**
     * Ends the running scenario (and any later one run with this monitor); its `rdma { }` throws a
     * CancellationException. [reason] is what the peer reads: `the client was <reason>`.
     */
    public fun cancel(reason: String = "cancelled") {
        cancelReason = reason
        cancelled = true
        job?.cancel(CancellationException(reason))
    }

    /** The [cancel] reason given, null before. */
    @Volatile
    internal var cancelReason: String? = null
        private set

    internal fun attach(job: Job) {
        this.job = job
        failure = null
        failedAtNanos = 0L
        blockEnded = false
        if (cancelled) job.cancel(CancellationException("cancelled"))
    }

    /**
     * The running scenario's failure, as soon as this side knows it (the peer's included), while
     * its `rdma { }` block may still be ending; null when it has none. Reset when the next starts.
     */
    @Volatile
    public var failure: Throwable? = null
        private set

    @Volatile
    private var failedAtNanos = 0L

    @Volatile
    private var blockEnded = false

    /**
     * How long the `rdma { }` block has kept running since its scenario failed, in ns; 0 when it
     * has not failed or the block ended. A failure cancels the block, which ends at its next
     * suspension point; one that keeps running is busy in its own code (a loop that never
     * suspends), which no cancellation reaches: a launcher then gives up on it ([failure]).
     */
    public fun runningAfterFailureNanos(): Long {
        val at = failedAtNanos
        return if (at == 0L || blockEnded) 0L else maxOf(1L, System.nanoTime() - at)
    }

    internal fun failed(cause: Throwable) {
        if (failure != null) return
        failure = cause
        failedAtNanos = System.nanoTime()
    }

    /** The scenario's block ended (its teardown follows): it is not running its own code any more. */
    internal fun blockEnded() {
        blockEnded = true
    }

    internal fun detach(job: Job) {
        if (this.job === job) this.job = null
    }

    internal fun note(line: String) {
        onNote?.invoke(line) ?: System.err.println("rdma-run: $line")
    }

    /** The scenario's QPs are connected, at [startNanos] (System.nanoTime(), its results' start). */
    internal fun running(perQp: List<QpStats>, rounds: List<Rounds>, startNanos: Long) {
        counters = perQp
        this.rounds = rounds
        run++
        runningSince = startNanos
        onRunning?.invoke()
    }

    /**
     * The last scenario's figures as it stopped (its work complete: they are its results' own), or
     * null before one ran; its [LiveTotals.elapsedNanos] runs a little past the results' duration.
     */
    @Volatile
    public var lastTotals: LiveTotals? = null
        private set

    /** Scenarios started so far with this monitor (the [LiveTotals.run] of the latest). */
    public val runs: Int get() = run

    internal fun stopped() {
        if (runningSince != 0L) lastTotals = totals()
        runningSince = 0L
        counters = emptyList()
        rounds = emptyList()
    }
}
