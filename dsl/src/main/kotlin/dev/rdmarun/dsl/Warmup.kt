package dev.rdmarun.dsl

import java.lang.management.ManagementFactory
import java.util.Locale
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.withTimeoutOrNull
import kotlinx.serialization.Serializable

/**
 * What a `repeat { }` or `runFor` did before it measured, as the results show it (table and JSON).
 * [mode] is `auto` (rounds until the JIT was quiet, the default), `fixed` (`--set warmup=N`
 * iterations), `none` (`--set warmup=0`: the figures include this loop's JIT warm-up) or `noLoop`
 * (the side moved data without any such loop, and its figures include the JIT's warm-up).
 */
@Serializable
public data class WarmupSummary(
    /** The QP whose loop it was, or null for a loop of the scenario's block (all QPs). */
    val qp: Int?,
    val mode: String,
    /** Warm-up rounds run (auto), 1 (fixed) or 0 (none). */
    val rounds: Int,
    /** Iterations of the loop's body in each warm-up round. */
    val iterationsPerRound: Long,
    /** From the loop's start to its first measured iteration. */
    val nanos: Long,
    /** Auto only: the JIT had been quiet when the rounds ended (else the time bound ended them). */
    val quiet: Boolean = false,
    /** Milliseconds the JIT spent compiling while the measured iterations ran (all threads of this JVM); -1 when unknown. */
    val compileMillisMeasured: Long = -1,
    /** Auto only: the peer answered this loop's messages without a partner loop, so the rounds were not agreed. */
    val alone: Boolean = false,
    /** Its end left out what this scope had measured before it (a section, an earlier loop's measured run). */
    val leftOutMeasured: Boolean = false,
    /**
     * The JVM's uptime when the measured iterations began, in milliseconds: the time from start to
     * steady state (JVM start, script, connect and its pre-flight, this warm-up); -1 when unknown.
     */
    val jvmUptimeMillis: Long = -1,
) {
    /** One line: "warm-up on QP 0: 7 rounds of 1000 in 2.3 s, until no compilation for 0.5 s". */
    public fun describe(): String {
        val where = if (qp == null) "" else " on QP $qp"
        val what = when (mode) {
            MODE_NONE -> "none (--set warmup=0): the figures include this loop's JIT warm-up"
            MODE_NO_LOOP -> "none: this side measured without a repeat { } or runFor loop, so the figures include the JIT's warm-up " +
                "(write the measured loop as repeat { } to have it warmed up)"
            MODE_FIXED -> "$iterationsPerRound iterations in ${seconds()} (--set warmup=$iterationsPerRound), not watched for the JIT"
            else -> "$rounds rounds of $iterationsPerRound in ${seconds()}, " + if (quiet) {
                "until no compilation for ${JitQuiet.QUIET_NANOS / 1_000_000_000.0} s"
            } else {
                "stopped at its ${LIMIT_NANOS / 1_000_000_000} s bound with the JIT still compiling"
            }
        }
        val unpaired = if (alone) " (the peer answered without a repeat { } of its own: rounds not agreed)" else ""
        val lost = if (leftOutMeasured) "; its end left out what ${if (qp == null) "this side" else "QP $qp"} had measured before it " +
            "(a section or an earlier loop: the figures are this loop's; measure in one loop, or give --set warmup=0)" else ""
        val during = if (compileMillisMeasured >= 0) "; the JIT compiled for $compileMillisMeasured ms during the measurement" else ""
        val since = if (jvmUptimeMillis >= 0) String.format(Locale.ROOT, "; measured from %.1f s after the JVM started", jvmUptimeMillis / 1e3) else ""
        return "warm-up$where: $what$unpaired$since$during$lost"
    }

    private fun seconds() = String.format(Locale.ROOT, "%.1f s", nanos / 1e9)

    public companion object {
        public const val MODE_AUTO: String = "auto"
        public const val MODE_FIXED: String = "fixed"
        public const val MODE_NONE: String = "none"

        /** No `repeat { }` or `runFor` on a side that moved data: a hand-written loop, measured cold. */
        public const val MODE_NO_LOOP: String = "noLoop"

        /** The warm-up ends after this long even if the JIT still compiles (under emulation one C2 compilation takes seconds). */
        public const val LIMIT_NANOS: Long = 30_000_000_000L

        /** Iterations per warm-up round, at most: rounds short enough to notice a quiet JIT soon. */
        public const val ROUND: Long = 1000L
    }
}

/** What a loop of [repeat] or [runFor] needs of its scope; the QP scope and the scenario scope provide it. */
internal interface LoopHost {
    /** False before connect(peer): a loop there moves nothing over RDMA and runs as written. */
    val canWarmUp: Boolean

    /** The QP of this scope, or null for the scenario's block. */
    val loopQp: Int?

    fun loopParam(name: String): String?

    /** Messages this scope sent and a receive() took so far (and barriers passed): a round that moved any must be agreed with the peer's. */
    fun messagesMoved(): Long

    /** Messages a receive() of this scope took so far. */
    fun messagesTaken(): Long

    /** The next loop number of this scope (1, 2, ...): a QP's loops pair with the peer's loops on that QP in order. */
    fun nextLoop(): Int

    /**
     * Tells the peer whether this side wants [round] to be followed by another, and returns whether
     * either does; with [dropLeftovers] (this loop takes no message) the peer's warm-up messages
     * that wait here are dropped. Null: the peer has no partner loop (it answers in code of its
     * own), and this loop goes on alone.
     */
    suspend fun agreeOnRound(loop: Int, round: Int, more: Boolean, dropLeftovers: Boolean, measured: Boolean = false): Boolean?

    /**
     * The warm-up is over: what this scope did so far is left out of the figures. Returns whether
     * that left out something measured (a section, or an earlier loop's measured run), which the
     * results then say.
     */
    fun startMeasuring(): Boolean

    /** This loop warms up now: the side's other warming loops wait for it before they measure. */
    fun warmupStarted()

    /**
     * This loop's warm-up is over: suspends until every loop of this side that warms up is over
     * too (bounded), so that all QPs measure over the same span and no figure divides one QP's
     * bytes by another's time.
     */
    suspend fun warmupOver()

    /** The measured run plans [iterations] (0 for a timed one); the [warmupIterations] done so far were the warm-up's, not progress. */
    fun planned(iterations: Long, warmupIterations: Long)

    fun warmedUp(summary: WarmupSummary)
}

/**
 * The rounds of one `repeat { }` or `runFor`: first warm-up rounds of the same body, then the
 * measured run. The caller's inline loop runs the body the number of times [nextRound] returns,
 * for warm-up and measurement alike, so the measured iterations run the code the warm-up compiled
 * (a separate warm-up loop would be compiled apart, and the measured loop would start cold).
 */
@PublishedApi
internal class RepeatLoop(private val host: LoopHost?, private val iterations: Long, private val durationNanos: Long?, private val warmup: Warmup) {
    /** The time the current round's iterations stop at (far ahead for rounds of a count). */
    @JvmField
    var roundEnd: Long = 0

    private var phase = START
    private var loop = 0
    private var rounds = 0
    private var startedAt = 0L
    private var movedAtRoundStart = 0L
    private var takenAtRoundStart = 0L
    private var jit: JitQuiet? = null
    /** The JIT's compilation time when the measured iterations began (null: the JVM does not say). */
    private var compiledAtMeasure: Long? = null
    /** The peer answers this loop without a partner loop: no more agreement. */
    private var alone = false
    private var summary: WarmupSummary? = null
    /** Iterations the warm-up rounds ran: not the measured ones a progress line counts. */
    private var warmupIterations = 0L
    /** Whether the warm-up moved messages (null: no warm-up, not known). */
    private var exchanges: Boolean? = null
    /** A timed run's end. */
    private var deadline = 0L

    /** How many iterations to run next; 0 when the loop is over. */
    suspend fun nextRound(): Long {
        val now = System.nanoTime()
        when (phase) {
            START -> {
                startedAt = now
                roundEnd = now + FAR
                // Numbered in every mode: a timed run agrees its rounds with the peer's loop too.
                if (host != null) {
                    loop = host.nextLoop()
                    movedAtRoundStart = host.messagesMoved()
                }
                return when {
                    warmup.none || host == null -> measured(now, WarmupSummary.MODE_NONE, 0, 0, false)
                    warmup.fixed != null -> {
                        phase = FIXED
                        host.warmupStarted()
                        takenAtRoundStart = host.messagesTaken()
                        warmupIterations = warmup.fixed
                        warmup.fixed
                    }
                    else -> {
                        phase = AUTO
                        host.warmupStarted()
                        exchanges = false
                        jit = JitQuiet()
                        takenAtRoundStart = host.messagesTaken()
                        warmupIterations = roundLength()
                        roundLength()
                    }
                }
            }
            FIXED -> {
                val h = host!!
                val moved = h.messagesMoved() - movedAtRoundStart
                exchanges = moved != 0L
                // Agreed with the peer's loop as an auto round's end is: the peer's warm-up messages
                // still on their way here are then its warm-up's, not this side's measured arrivals.
                if (moved != 0L) h.agreeOnRound(loop, 1, false, dropLeftovers = h.messagesTaken() == takenAtRoundStart) ?: run { alone = true }
                h.warmupOver()
                return measured(System.nanoTime(), WarmupSummary.MODE_FIXED, 1, warmup.fixed!!, false, alone)
            }
            AUTO -> {
                val h = host!!
                rounds++
                val quiet = jit!!.roundEnded()
                val more = !quiet && now - startedAt < WarmupSummary.LIMIT_NANOS
                val moved = h.messagesMoved() - movedAtRoundStart
                if (moved != 0L) exchanges = true
                // A loop that sends and takes nothing (the design card) would fill the peer's inbox round after
                // round: each side drops what the peer's warm-up sent it, which no code of this loop would take.
                val again = if (moved != 0L && !alone) {
                    h.agreeOnRound(loop, rounds, more, dropLeftovers = h.messagesTaken() == takenAtRoundStart) ?: more.also { alone = true }
                } else more
                if (again) {
                    warmupIterations += roundLength()
                    movedAtRoundStart = h.messagesMoved()
                    takenAtRoundStart = h.messagesTaken()
                    roundEnd = System.nanoTime() + FAR
                    return roundLength()
                }
                h.warmupOver()
                return measured(System.nanoTime(), WarmupSummary.MODE_AUTO, rounds, roundLength(), quiet, alone)
            }
            TIMED -> {
                val h = host!!
                val moved = h.messagesMoved() - movedAtRoundStart
                if (moved == 0L || alone) {
                    // Nothing the peer waits for: the deadline alone ends the run.
                    if (now - deadline >= 0) return finish()
                    phase = MEASURED
                    roundEnd = deadline
                    return Long.MAX_VALUE
                }
                rounds++
                val more = now - deadline < 0
                val again = h.agreeOnRound(loop, rounds, more, dropLeftovers = false, measured = true) ?: more.also { alone = true }
                if (!again) return finish()
                movedAtRoundStart = h.messagesMoved()
                roundEnd = System.nanoTime() + FAR
                return WarmupSummary.ROUND
            }
            MEASURED -> return finish()
            else -> return 0
        }
    }

    private fun finish(): Long {
        phase = DONE
        val during = compiledAtMeasure?.let { at -> JitQuiet.totalCompilationMillis()?.minus(at) } ?: -1
        summary?.let { host?.warmedUp(it.copy(compileMillisMeasured = during)) }
        return 0
    }

    private fun roundLength() = if (durationNanos != null) WarmupSummary.ROUND else minOf(iterations, WarmupSummary.ROUND).coerceAtLeast(1)

    private fun measured(now: Long, mode: String, rounds: Int, perRound: Long, quiet: Boolean, alone: Boolean = false): Long {
        phase = MEASURED
        if (host != null) {
            val lost = mode != WarmupSummary.MODE_NONE && host.startMeasuring()
            summary = WarmupSummary(host.loopQp, mode, rounds, perRound, now - startedAt, quiet, alone = alone, leftOutMeasured = lost,
                jvmUptimeMillis = ManagementFactory.getRuntimeMXBean().uptime)
        }
        compiledAtMeasure = JitQuiet.totalCompilationMillis()
        val start = System.nanoTime()
        if (durationNanos != null) {
            host?.planned(0, warmupIterations)
            deadline = deadlineAfterNanos(durationNanos, start)
            if (host != null && !alone && exchanges != false) {
                // Messages move (or, without a warm-up, may): both sides run whole rounds, agreed
                // after each, so that they make as many exchanges and neither waits for a message
                // the other's deadline stopped (a timed ping-pong).
                phase = TIMED
                movedAtRoundStart = host.messagesMoved()
                roundEnd = start + FAR
                return WarmupSummary.ROUND
            }
            roundEnd = deadline
            return Long.MAX_VALUE
        }
        roundEnd = start + FAR
        host?.planned(iterations, warmupIterations)
        return iterations
    }

    private companion object {
        const val START = 0
        const val FIXED = 1
        const val AUTO = 2
        const val MEASURED = 3
        const val DONE = 4
        const val TIMED = 5

        /** A round's end that never comes: its count ends it (146 years, and nanoTime differences keep their sign). */
        const val FAR = Long.MAX_VALUE / 2
    }
}

/** The parameter `warmup`: `auto` (absent), `0` (none) or a number of iterations. */
@PublishedApi
internal class Warmup private constructor(val none: Boolean, val fixed: Long?) {
    companion object {
        val AUTO = Warmup(false, null)

        fun parse(text: String?): Warmup = when {
            text == null || text.equals("auto", ignoreCase = true) -> AUTO
            else -> {
                val n = text.toLongOrNull()?.takeIf { it >= 0 }
                    ?: throw ScenarioException("parameter warmup must be auto, 0 (none) or a number of iterations, not '${printable(text)}'")
                if (n == 0L) Warmup(true, null) else Warmup(false, n)
            }
        }
    }
}

/** The loop of `repeat { }` ([duration] null: the parameter `seconds`, else `iterations`) or of `runFor` ([duration] in nanoseconds). */
@PublishedApi
internal fun CommonScope.repeatLoop(durationNanos: Long?): RepeatLoop {
    val host = (this as? LoopHost)?.takeIf { it.canWarmUp }
    val warmup = Warmup.parse(host?.loopParam(StandardParameters.WARMUP))
    if (durationNanos != null) return RepeatLoop(host, 0, durationNanos, warmup)
    val seconds = param(StandardParameters.SECONDS, "")
    if (seconds.isNotEmpty()) {
        val s = seconds.toDoubleOrNull()?.takeIf { it >= 0 && it <= MAX_DURATION_SECONDS }
            ?: throw ScenarioException("parameter seconds must be a number of seconds from 0 to $MAX_DURATION_SECONDS ($MAX_DURATION), not '${printable(seconds)}'")
        return RepeatLoop(host, 0, (s * 1e9).toLong(), warmup)
    }
    val n = intParam(StandardParameters.ITERATIONS, 1000)
    if (n < 0) throw ScenarioException("parameter iterations must be 0 or more, not $n")
    return RepeatLoop(host, n.toLong(), null, warmup)
}

/**
 * The loops of one side that warm up at the same time (one per QP under `forEachQp`): each that
 * is done waits here until all are, so that every QP starts measuring at the same moment. A QP
 * whose warm-up ended first would otherwise be measured alone, before the others, and the side's
 * bandwidth would divide all QPs' bytes by the span of the last one. Both peers' loops agree on
 * their rounds QP by QP, so a loop waiting here has no round its peer waits for.
 */
internal class WarmupGate {
    private var warming = 0
    private var open = CompletableDeferred<Unit>()

    @Synchronized
    fun started() {
        warming++
    }

    suspend fun over() {
        val wait = synchronized(this) {
            if (--warming <= 0) {
                warming = 0
                open.complete(Unit)
                open = CompletableDeferred()
                return
            }
            open
        }
        // Bounded: a loop left by a jump out of its body never arrives.
        withTimeoutOrNull(WarmupSummary.LIMIT_NANOS / 1_000_000) { wait.await() }
    }
}
