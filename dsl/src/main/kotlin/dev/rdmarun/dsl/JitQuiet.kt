package dev.rdmarun.dsl

import java.lang.management.ManagementFactory

/**
 * Tells when the JIT has gone quiet: the one rule behind every warm-up of rdma-run (the rounds of
 * `repeat { }` and `runFor`, `connect`'s pre-flight, `rdma-run pingpong`'s pre-flight), and one a
 * self-timed loop whose peer takes no part (WRITEs, READs, atomics) can use too:
 *
 * ```kotlin
 * val jit = JitQuiet()
 * do { repeat(1000) { write(); awaitCompletion() } } while (!jit.roundEnded())   // then time your own loop
 * ```
 *
 * Not for a ping-pong: each side would decide alone when to stop, and one would wait for a message
 * the other never sends. `repeat { }` agrees its rounds with the peer's.
 *
 * Call [roundEnded] after each round of the work to be measured. It returns true once no
 * compilation has ended (the [java.lang.management.CompilationMXBean]'s total compilation time
 * unchanged) during the last [QUIET_ROUNDS] rounds and for [QUIET_NANOS]; on a JVM that does not
 * report compilation times ([monitored] false), after [UNMONITORED_ROUNDS] rounds. A compilation
 * still running is seen only when it ends, and under emulation one C2 compilation can outlast the
 * quiet time: bound the rounds in time as well (the DSL's warm-up stops at 30 s, the pre-flights at
 * 10 s and 20 s). Not thread-safe: one per loop.
 */
class JitQuiet internal constructor(private val compiledMillis: () -> Long?, private val clock: () -> Long) {
    /** Watches this JVM's JIT from now on. */
    constructor() : this(::totalCompilationMillis, System::nanoTime)

    private var compiled = compiledMillis()
    private var changedAt = clock()
    private var quietRounds = 0
    private var rounds = 0

    /** Whether this JVM reports compilation times (HotSpot does, unless it runs without a JIT). */
    val monitored: Boolean = compiled != null

    /** Ends a round; true once the JIT counts as quiet (see the class). */
    fun roundEnded(): Boolean {
        rounds++
        val now = clock()
        val total = compiledMillis() ?: return rounds >= UNMONITORED_ROUNDS
        if (total != compiled) {
            compiled = total
            changedAt = now
            quietRounds = 0
        } else {
            quietRounds++
        }
        return quietRounds >= QUIET_ROUNDS && now - changedAt >= QUIET_NANOS
    }

    /** How [roundEnded] decided: "no compilation for 0.5 s", or the fixed count of an unmonitored JVM. */
    fun rule(): String = if (monitored) "no compilation for ${QUIET_NANOS / 1e9} s"
        else "a fixed $UNMONITORED_ROUNDS rounds (this JVM does not report compilation times)"

    companion object {
        /** Quiet: no compilation ended for this long... */
        const val QUIET_NANOS: Long = 500_000_000L

        /** ...and during this many rounds. */
        const val QUIET_ROUNDS: Int = 2

        /** Rounds that count as a warm-up on a JVM that does not report compilation times. */
        const val UNMONITORED_ROUNDS: Int = 10

        /** Milliseconds this JVM's JIT has spent compiling (all threads), or null when it does not say. */
        @JvmStatic
        fun totalCompilationMillis(): Long? = BEAN?.totalCompilationTime

        private val BEAN = ManagementFactory.getCompilationMXBean()?.takeIf { it.isCompilationTimeMonitoringSupported }
    }
}
