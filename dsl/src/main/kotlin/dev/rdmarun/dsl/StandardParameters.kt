package dev.rdmarun.dsl

/**
 * The parameters every scenario understands, with the names perftest users know: the launcher's
 * `-s`, `-n`, `-q`, `-t`, `-D`, `-I`, `-m`, `-Q` set them (as `--set` does), and the DSL itself
 * reads them, so a script need not: `repeat { }` reads [WARMUP], [ITERATIONS] and [SECONDS]; at
 * `connect(peer)`, [WARMUP], [QPS], [DEPTH], [INLINE], [MTU] and [SIGNAL], when given, replace what
 * `qps(n)`, `sendDepth(n)`, `inlineThreshold(n)`, `mtu(n)` and `signalEvery(n)` said (the script's
 * numbers are the defaults), and [SIZE] is the buffer size of a script that does not call
 * `bufferSize(n)` (so `send()` moves [SIZE] bytes). A script reads them as it reads any parameter
 * (`sizeParam("size", 4096)`) to use them otherwise.
 */
public object StandardParameters {
    /** Message size in bytes (`-s`), suffixes allowed: `4K`, `1M`. */
    public const val SIZE: String = "size"

    /** Rounds of `repeat { }` (`-n`). */
    public const val ITERATIONS: String = "iterations"

    /**
     * The warm-up of each loop, left out of every figure: `auto` (default) for rounds of `repeat { }`
     * and `runFor` until the JIT is quiet, `0` for none (the cold figure: the loop's first iterations,
     * after connect's pre-flight), `N` for N iterations of each loop.
     */
    public const val WARMUP: String = "warmup"

    /**
     * connect's pre-flight warm-up on two local QPs, before it meets the peer: `auto` (default) or
     * `0` for none (with `warmup=0`, the figures of a JVM that has run nothing yet).
     */
    public const val PREFLIGHT: String = "preflight"

    /** Seconds `repeat { }` runs for instead (`-D`). */
    public const val SECONDS: String = "seconds"

    /** QPs (`-q`). */
    public const val QPS: String = "qps"

    /** Send queue depth (`-t`). */
    public const val DEPTH: String = "depth"

    /** Largest inline send or write in bytes (`-I`). */
    public const val INLINE: String = "inline"

    /** Path MTU cap in bytes, 256..4096 (`-m`): part of the scenario, since both ends of a QP must use one MTU. */
    public const val MTU: String = "mtu"

    /** One work request in this many is signaled (`-Q`, perftest's cq_mod; the samples' `signal`). */
    public const val SIGNAL: String = "signal"

    /** The launcher's perftest flag of each standard parameter it has one for (short/long): sentences name what the user typed. */
    public val FLAGS: Map<String, String> = mapOf(
        SIZE to "-s/--size",
        ITERATIONS to "-n/--iters",
        QPS to "-q/--qp",
        DEPTH to "-t/--tx-depth",
        SECONDS to "-D/--duration",
        INLINE to "-I/--inline-size",
        MTU to "-m/--mtu",
        SIGNAL to "-Q/--cq-mod",
    )

    /** The names the DSL reads at `connect(peer)` in every scenario. */
    public val READ_AT_CONNECT: List<String> = listOf(QPS, DEPTH, INLINE, MTU, SIGNAL)

    private val SIZE_TEXT = Regex("(\\d+)\\s*([kmg]i?b?|b)?", RegexOption.IGNORE_CASE)

    /**
     * Why [text] is no message size for `-s` (1 byte to 2G - 1), in words after the quoted text:
     * not a size at all, or one out of range; null when it is one.
     */
    public fun sizeProblem(text: String): String? = when {
        SIZE_TEXT.matchEntire(text.trim()) == null -> "is not a size like 4096, 4K or 1M"
        parseSize(text).let { it == null || it < 1 } -> "is outside 1 byte to ${Int.MAX_VALUE} bytes (2G - 1), the sizes a message can have"
        else -> null
    }

    /**
     * `4096`, `4K`, `4KiB`, `1M`, `1g` (powers of 1024) as bytes; null when [text] is not such a
     * size or does not fit in an Int.
     */
    public fun parseSize(text: String): Int? {
        val m = SIZE_TEXT.matchEntire(text.trim()) ?: return null
        val shift = when (m.groupValues[2].firstOrNull()?.lowercaseChar()) {
            'k' -> 10
            'm' -> 20
            'g' -> 30
            else -> 0
        }
        val n = m.groupValues[1].toLongOrNull() ?: return null
        val bytes = n shl shift
        return if (n < (1L shl (62 - shift)) && bytes <= Int.MAX_VALUE) bytes.toInt() else null
    }

    /** [settings] with the standard parameters of [parameters] applied (see the class). */
    internal fun applyTo(settings: ScenarioSettings, parameters: Map<String, String>, bufferSizeSet: Boolean): ScenarioSettings {
        fun whole(name: String): Int? = parameters[name]?.let {
            it.trim().toIntOrNull() ?: throw ScenarioException("parameter $name must be a whole number, not '${printable(it)}'")
        }
        var s = settings
        whole(QPS)?.let { s = s.copy(qps = it) }
        whole(DEPTH)?.let { s = s.copy(sendDepth = it) }
        whole(INLINE)?.let { s = s.copy(inlineThreshold = it) }
        whole(MTU)?.let { s = s.copy(mtu = it) }
        whole(SIGNAL)?.let { s = s.copy(signalEvery = it) }
        if (!bufferSizeSet) parameters[SIZE]?.let { text ->
            s = s.copy(bufferSize = parseSize(text)
                ?: throw ScenarioException("parameter $SIZE must be a size in bytes like 4096, 4K or 1M, not '${printable(text)}'"))
        }
        return s
    }
}
