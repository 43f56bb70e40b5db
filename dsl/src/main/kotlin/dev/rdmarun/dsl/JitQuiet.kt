package dev.rdmarun.dsl

import java.lang.management.ManagementFactory
import javax.management.ObjectName

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
 * unchanged) during the last [QUIET_ROUNDS] rounds and for [QUIET_NANOS], and none is running or
 * queued (HotSpot's `Compiler.queue` diagnostic command, asked only then: under emulation one C2
 * compilation can outlast the quiet time, and the loop it replaces would otherwise be measured
 * while it runs); on a JVM that does not report compilation times ([monitored] false), after
 * [UNMONITORED_ROUNDS] rounds. Bound the rounds in time as well, as a JIT kept busy by other threads
 * is never quiet (the DSL's warm-up stops at 30 s, the pre-flights at 10 s and 20 s). Not
 * thread-safe: one per loop.
 */
public class JitQuiet internal constructor(
    private val compiledMillis: () -> Long?,
    private val clock: () -> Long,
    private val compiling: () -> Boolean? = { null },
) {
    /** Watches this JVM's JIT from now on. */
    public constructor() : this(::totalCompilationMillis, System::nanoTime, ::compilationPending)

    private var compiled = compiledMillis()
    private var changedAt = clock()
    private var quietRounds = 0
    private var rounds = 0

    /** Whether this JVM reports compilation times (HotSpot does, unless it runs without a JIT). */
    public val monitored: Boolean = compiled != null

    /** Ends a round; true once the JIT counts as quiet (see the class). */
    public fun roundEnded(): Boolean {
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
        if (quietRounds < QUIET_ROUNDS || now - changedAt < QUIET_NANOS) return false
        if (compiling() == true) { // as if one had just ended: the count starts again
            changedAt = now
            quietRounds = 0
            return false
        }
        return true
    }

    /** How [roundEnded] decided: "no compilation for 0.5 s", or the fixed count of an unmonitored JVM. */
    public fun rule(): String = if (monitored) "no compilation for ${QUIET_NANOS / 1e9} s"
        else "a fixed $UNMONITORED_ROUNDS rounds (this JVM does not report compilation times)"

    public companion object {
        /** Quiet: no compilation ended for this long... */
        public const val QUIET_NANOS: Long = 500_000_000L

        /** ...and during this many rounds. */
        public const val QUIET_ROUNDS: Int = 2

        /** Rounds that count as a warm-up on a JVM that does not report compilation times. */
        public const val UNMONITORED_ROUNDS: Int = 10

        /** Milliseconds this JVM's JIT has spent compiling (all threads), or null when it does not say. */
        @JvmStatic
        public fun totalCompilationMillis(): Long? = BEAN?.totalCompilationTime

        /**
         * Whether HotSpot's JIT is compiling or has methods queued (the `Compiler.queue` diagnostic
         * command, as `jcmd PID Compiler.queue` prints it), or null when this JVM cannot say. About
         * half a millisecond a call.
         */
        @JvmStatic
        public fun compilationPending(): Boolean? = try {
            val text = ManagementFactory.getPlatformMBeanServer()
                .invoke(DIAGNOSTIC_COMMAND, "compilerQueue", arrayOf<Any?>(null), arrayOf(Array<String>::class.java.name)) as? String
            text?.let(::queueBusy)
        } catch (e: Exception) { // no such MBean (not HotSpot) or no permission: the rule without it
            null
        }

        /**
         * Whether a `Compiler.queue` listing names a compilation: every line but the section
         * headers (`Current compiles:`, `C2 compile queue:`), blank lines and `Empty` is one.
         */
        internal fun queueBusy(listing: String): Boolean = listing.lineSequence().map(String::trim)
            .any { it.isNotEmpty() && it != "Empty" && !it.endsWith(":") }

        private val DIAGNOSTIC_COMMAND = ObjectName("com.sun.management:type=DiagnosticCommand")
        private val BEAN = ManagementFactory.getCompilationMXBean()?.takeIf { it.isCompilationTimeMonitoringSupported }
    }
}
