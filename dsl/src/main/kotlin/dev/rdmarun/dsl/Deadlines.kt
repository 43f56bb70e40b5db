package dev.rdmarun.dsl

import kotlin.time.Duration
import kotlin.time.Duration.Companion.days

/**
 * The longest timeout or run length rdma-run accepts, 7 days: the launcher's `--timeout`, `-D`
 * (parameter `seconds`) and `--interval`, `pingpong`'s `--timeout` and `--peer-timeout`, and the DSL's
 * `timeout(...)`. Anything longer is a typo rather than a plan (`1000000d`), and it keeps every
 * deadline far from where `System.nanoTime() + timeout` overflows (then a wait would end at once)
 * and every timeout in milliseconds within a socket timeout's `Int`.
 */
public val MAX_DURATION: Duration = 7.days

/** [MAX_DURATION] in seconds, for options given in seconds: 604800. */
public const val MAX_DURATION_SECONDS: Int = 7 * 24 * 60 * 60

/**
 * The [System.nanoTime] at which a wait of [duration] from [now] ends. Any length is safe, however
 * an application got it (`runFor(Duration.INFINITE)`): it is cut to about 146 years (Long.MAX_VALUE / 2
 * nanoseconds) so that `deadline - System.nanoTime()` keeps its sign; a negative one ends at [now].
 * Compare deadlines by difference (`System.nanoTime() - deadline >= 0`), as [System.nanoTime] asks.
 */
internal fun deadlineAfter(duration: Duration, now: Long = System.nanoTime()): Long = deadlineAfterNanos(duration.inWholeNanoseconds, now)

/** [deadlineAfter] for a length in nanoseconds. */
internal fun deadlineAfterNanos(nanos: Long, now: Long = System.nanoTime()): Long = now + nanos.coerceIn(0, Long.MAX_VALUE / 2)
