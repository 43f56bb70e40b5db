package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.UsageError
import com.github.ajalt.clikt.parameters.groups.OptionGroup
import com.github.ajalt.clikt.parameters.options.convert
import com.github.ajalt.clikt.parameters.options.flag
import com.github.ajalt.clikt.parameters.options.NullableOption
import com.github.ajalt.clikt.parameters.options.RawOption
import com.github.ajalt.clikt.parameters.options.option
import com.github.ajalt.clikt.parameters.types.int
import com.github.ajalt.clikt.parameters.types.restrictTo
import dev.rdmarun.dsl.MAX_DURATION
import dev.rdmarun.dsl.MAX_DURATION_SECONDS
import dev.rdmarun.dsl.StandardParameters
import dev.rdmarun.runtime.Mtu

/** A message size in bytes as every command's `-s` takes it: 4096, 4K, 64KiB, 1M ([StandardParameters.parseSize]). */
internal fun RawOption.messageSize(): NullableOption<Int, Int> =
    convert { text -> StandardParameters.parseSize(text)?.takeIf { it > 0 } ?: fail("'$text' ${StandardParameters.sizeProblem(text)}") }

/**
 * perftest's flags on a scenario run, under perftest's names, so a perftest command line means
 * the same here. Those with a value set a standard parameter ([StandardParameters]) exactly as
 * `--set NAME=VALUE` does, so scripts see one thing whichever way it was given; `-F` is accepted
 * and has nothing to do; `-l` is refused with a sentence ([refuseUnsupported]) rather than
 * clikt's "no such option". (`-d`, `-i`, `-x` and `-p` are the command's: local choices and the
 * control connection, not parameters.)
 */
class PerftestOptions : OptionGroup(
    "perftest's options",
    "-s -n -q -t -D -I -m -Q each set a standard parameter, as --set NAME=VALUE does (both peers must give the same)",
) {
    private val messageSize by option("-s", "--size", metavar = "BYTES",
        help = "Message size (parameter size; 4096, 4K, 64KiB, 1M)")
        .messageSize()
    private val iterations by option("-n", "--iters", metavar = "N", help = "Rounds of repeat { } (parameter iterations)")
        .int().restrictTo(min = 1)
    private val qps by option("-q", "--qp", metavar = "N", help = "QPs (parameter qps)").int().restrictTo(1..4096)
    private val depth by option("-t", "--tx-depth", metavar = "N", help = "Send queue depth (parameter depth)").int().restrictTo(min = 1)
    private val duration by option("-D", "--duration", metavar = "SECONDS", help = "Run repeat { } for SECONDS instead of -n rounds (parameter seconds)")
        .convert { text -> text.toDoubleOrNull()?.takeIf { it > 0 && it <= MAX_DURATION_SECONDS } ?: fail("'$text' is not a positive number of seconds up to $MAX_DURATION_SECONDS ($MAX_DURATION)") }
    private val inline by option("-I", "--inline-size", "--inline_size", metavar = "BYTES", help = "Largest inline send or write (parameter inline)")
        .int().restrictTo(min = 0)
    private val mtu by option("-m", "--mtu", metavar = "BYTES", help = "Path MTU cap: 256, 512, 1024, 2048 or 4096 (parameter mtu; default: the smaller active MTU of both ports)")
        .int().convert { m -> m.takeIf { Mtu.entries.any { it.bytes() == m } } ?: fail("$m is not a path MTU: 256, 512, 1024, 2048 or 4096") }
    private val signal by option("-Q", "--cq-mod", metavar = "N", help = "Signal one work request in N, perftest's CQ moderation (parameter signal)")
        .int().restrictTo(min = 1)

    /** `-F`: perftest's leave to run despite CPU frequency warnings; rdma-run times with a monotonic clock, so there are none. */
    @Suppress("unused")
    private val cpuFreq by option("-F", "--CPU-freq",
        help = "Accepted for perftest's command lines; does nothing: rdma-run reads no CPU frequency (it times with a monotonic clock)").flag()

    /** `-l`: perftest's list of N work requests per ibv_post_send; refused by [refuseUnsupported]. */
    private val postList by option("-l", "--post_list", metavar = "N", help = "Refused, with a sentence: rdma-run has no lists of work requests to post at once")

    /**
     * `-e`: perftest's wait for completion events instead of polling: the dispatcher sleeps on the
     * completion channel ([dev.rdmarun.dsl.CompletionMode.EVENT]), over what the script chose.
     * For many processes on few cores (a run of many ranks on one host), where spinning ones
     * take the cores the others need.
     */
    val events by option("-e", "--events",
        help = "Wait for completion events instead of polling (completion mode EVENT, over the script's choice): for many processes on few cores").flag()

    /** `-a`: run the script once per size, 2 B to 8 MiB (perftest's sweep). */
    val all by option("-a", "--all", help = "Run the script once per message size, 2 B to 8 MiB, powers of two (parameter size)").flag()

    /** `--report_gbits`: every rate of the run in Gb/sec (10^9 bits) instead of perftest's MB/sec (2^20 bytes). */
    val reportGbits by option("--report_gbits", "--report-gbits", help = "Bandwidth in Gb/s instead of MB/s").flag()

    /** The parameters these flags set. */
    fun parameters(): Map<String, String> = buildMap {
        messageSize?.let { put(StandardParameters.SIZE, it.toString()) }
        iterations?.let { put(StandardParameters.ITERATIONS, it.toString()) }
        qps?.let { put(StandardParameters.QPS, it.toString()) }
        depth?.let { put(StandardParameters.DEPTH, it.toString()) }
        duration?.let { put(StandardParameters.SECONDS, it.toString()) }
        inline?.let { put(StandardParameters.INLINE, it.toString()) }
        mtu?.let { put(StandardParameters.MTU, it.toString()) }
        signal?.let { put(StandardParameters.SIGNAL, it.toString()) }
    }

    /** A usage error, one sentence, for a perftest flag given that rdma-run cannot honor. */
    fun refuseUnsupported() {
        if (postList != null) throw UsageError("-l/--post_list: $POST_LIST_REFUSAL")
    }

    companion object {
        /** Why `-l` is refused. */
        const val POST_LIST_REFUSAL = "rdma-run posts every work request with its own ibv_post_send (the DSL has no lists of them), " +
            "so there is no list length to set: leave -l out"

        /** perftest's -a: 2 B to 8 MiB. */
        val SWEEP_SIZES: List<Int> = (1..23).map { 1 shl it }
    }
}
