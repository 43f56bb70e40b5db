package dev.rdmarun.dsl

import kotlinx.serialization.Serializable

/**
 * What the pre-flight warm-up did before `connect(peer)` met the peer ([Preflight]): [rounds]
 * rounds of [exchanges] local operations in all, over [nanos] nanoseconds, on [device]; [quiet]:
 * it ended because the JIT had finished no compilation for [quietMillis] ms and two rounds, not at
 * its time bound.
 */
@Serializable
public data class PreflightReport(
    val device: String,
    val rounds: Int,
    val exchanges: Long,
    val nanos: Long,
    val quiet: Boolean,
    val quietMillis: Long = JitQuiet.QUIET_NANOS / 1_000_000,
) {
    /**
     * E.g. `pre-flight on soft0: 6 rounds of 1000 local exchanges in 1.9 s, until no compilation
     * for 0.5 s`; a round the bound cut short makes it `7 rounds, 6413 local exchanges in 10.0 s, ...`.
     */
    public fun describe(): String {
        val took = "%.1f s".format(java.util.Locale.ROOT, nanos / 1e9)
        val end = if (quiet) "until no compilation for ${"%.1f".format(java.util.Locale.ROOT, quietMillis / 1e3)} s"
            else "stopped at its time bound with the JIT still compiling"
        val counted = "$rounds round${if (rounds == 1) "" else "s"}" +
            if (rounds > 0 && exchanges > 0 && exchanges % rounds == 0L) " of ${exchanges / rounds} local exchanges"
            else ", $exchanges local exchange${if (exchanges == 1L) "" else "s"}"
        return "pre-flight on $device: $counted in $took, $end"
    }
}
