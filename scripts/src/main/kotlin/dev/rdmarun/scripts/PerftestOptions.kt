package dev.rdmarun.scripts

import com.github.ajalt.clikt.parameters.groups.OptionGroup
import com.github.ajalt.clikt.parameters.options.convert
import com.github.ajalt.clikt.parameters.options.flag
import com.github.ajalt.clikt.parameters.options.option
import com.github.ajalt.clikt.parameters.types.int
import com.github.ajalt.clikt.parameters.types.restrictTo
import dev.rdmarun.dsl.MAX_DURATION
import dev.rdmarun.dsl.MAX_DURATION_SECONDS
import dev.rdmarun.dsl.StandardParameters

/**
 * perftest's flags on a scenario run. Each one sets a standard parameter ([StandardParameters])
 * exactly as `--set NAME=VALUE` does, so scripts see one thing whichever way it was given.
 */
class PerftestOptions : OptionGroup(
    "perftest's options",
    "Each sets a standard parameter, as --set NAME=VALUE does (both peers must give the same)",
) {
    private val messageSize by option("-s", "--size", metavar = "BYTES",
        help = "Message size (parameter size; 4096, 4K, 64KiB, 1M)")
        .convert { text -> StandardParameters.parseSize(text)?.takeIf { it > 0 } ?: fail("'$text' is not a size like 4096, 4K or 1M") }
    private val iterations by option("-n", "--iters", metavar = "N", help = "Rounds of repeat { } (parameter iterations)")
        .int().restrictTo(min = 1)
    private val qps by option("-q", "--qp", metavar = "N", help = "QPs (parameter qps)").int().restrictTo(1..4096)
    private val depth by option("-t", "--tx-depth", metavar = "N", help = "Send queue depth (parameter depth)").int().restrictTo(min = 1)
    private val duration by option("-D", "--duration", metavar = "SECONDS", help = "Run repeat { } for SECONDS instead of -n rounds (parameter seconds)")
        .convert { text -> text.toDoubleOrNull()?.takeIf { it > 0 && it <= MAX_DURATION_SECONDS } ?: fail("'$text' is not a positive number of seconds up to $MAX_DURATION_SECONDS ($MAX_DURATION)") }
    private val inline by option("-I", "--inline-size", metavar = "BYTES", help = "Largest inline send or write (parameter inline)")
        .int().restrictTo(min = 0)

    /** `-a`: run the script once per size, 2 B to 8 MiB (perftest's sweep). */
    val all by option("-a", "--all", help = "Run the script once per message size, 2 B to 8 MiB, powers of two (parameter size)").flag()

    /** `--report_gbits`: bandwidth in Gb/s (10^9 bits) instead of perftest's MB/s (2^20 bytes). */
    val reportGbits by option("--report_gbits", "--report-gbits", help = "Bandwidth in Gb/s instead of MB/s").flag()

    /** The parameters these flags set. */
    fun parameters(): Map<String, String> = buildMap {
        messageSize?.let { put(StandardParameters.SIZE, it.toString()) }
        iterations?.let { put(StandardParameters.ITERATIONS, it.toString()) }
        qps?.let { put(StandardParameters.QPS, it.toString()) }
        depth?.let { put(StandardParameters.DEPTH, it.toString()) }
        duration?.let { put(StandardParameters.SECONDS, it.toString()) }
        inline?.let { put(StandardParameters.INLINE, it.toString()) }
    }

    companion object {
        /** The flag that sets a standard parameter, for messages (`-s/--size`). */
        val FLAGS = mapOf(
            StandardParameters.SIZE to "-s/--size",
            StandardParameters.ITERATIONS to "-n/--iters",
            StandardParameters.QPS to "-q/--qp",
            StandardParameters.DEPTH to "-t/--tx-depth",
            StandardParameters.SECONDS to "-D/--duration",
            StandardParameters.INLINE to "-I/--inline-size",
        )

        /** perftest's -a: 2 B to 8 MiB. */
        val SWEEP_SIZES: List<Int> = (1..23).map { 1 shl it }
    }
}
