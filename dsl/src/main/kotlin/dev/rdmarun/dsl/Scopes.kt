package dev.rdmarun.dsl

import kotlin.time.Duration

/** Keeps an outer scope's members out of a nested block (no `send()` of the scenario inside `qp(0) { }`). */
@DslMarker
public annotation class RdmaDsl

/** The kinds of work request (`send`, `write`, `fetchAndAdd`, ...), as a [Completion] names them. */
public typealias OpKind = dev.rdmarun.runtime.engine.OpKind

/**
 * What every scope offers: the role, parameters and loops.
 *
 * The block of `rdma { }` runs once, as written: settings, `connect(peer)`, then operations that
 * really post. Any Kotlin works between them: branch on [isServer], on a QP's `index`, on received
 * data.
 */
@RdmaDsl
public interface CommonScope {
    /** This side listens (`--listen`, [Peer.listen]): the server. Known before `connect` when the launcher gave the peer. */
    public val isServer: Boolean

    /** This side connects (`--peer`, [Peer.connect]): the client. */
    public val isClient: Boolean

    /**
     * The ranks of this scenario's pair: in a run of ranks ([rdmaRanks]) this process's and its
     * peer's; in a two-peer run the server is rank 0 and the client rank 1, of 2. Known before
     * `connect` when the launcher gave the peer (or the ranks).
     */
    public val pair: RankPair get() = twoPeerPair(if (isServer) Role.SERVER else Role.CLIENT)

    /** This side's rank ([pair]). */
    public val rank: Int get() = pair.rank

    /** The rank at the other end of this scenario ([pair]). */
    public val peerRank: Int get() = pair.peerRank

    /** How many ranks the run has ([pair]): 2 in a two-peer run. */
    public val ranks: Int get() = pair.ranks

    /** Parameter value given by the launcher (--set NAME=VALUE) or the application, else [default]. */
    public fun param(name: String, default: String): String

    /** [param] as a whole number; anything else is an error that names the parameter. */
    public fun intParam(name: String, default: Int): Int =
        param(name, default.toString()).let { it.toIntOrNull() ?: throw ScenarioException("parameter $name must be a whole number, not '${printable(it)}'") }

    /**
     * Counts from here: what this side did so far (in a QP's scope: this QP) was a warm-up and is
     * left out of every figure of the results (bytes, work requests, messages, rates, latencies,
     * `measure` sections, and the duration). `repeat { }` and `runFor` call it after their warm-up.
     */
    public fun measureFromHere()

    /** `repeat { }` is about to run [rounds] rounds (for a launcher's progress line and its ETA). */
    public fun roundsPlanned(rounds: Long)

    /** `repeat { }` finished a round. */
    public fun roundDone()

    /**
     * [param] as a size in bytes: a whole number, or one with a suffix K, M or G (KiB, MiB, GiB:
     * powers of 1024), as the launcher's `-s 4K` gives it; anything else is an error that names the parameter.
     * In the scenario's block before connect, `sizeParam("size", n)` also makes n the buffer size
     * when the script calls no bufferSize(n) and `-s` gives none.
     */
    public fun sizeParam(name: String, default: Int): Int =
        param(name, default.toString()).let {
            StandardParameters.parseSize(it)
                ?: throw ScenarioException("parameter $name must be a size in bytes like 4096, 4K or 1M, not '${printable(it)}'")
        }

}

/**
 * The design card's loop: runs [block] `iterations` times (parameter `iterations`, `-n`, default
 * 1000), or, when the parameter `seconds` (`-D`) is set, for that many seconds, and measures
 * compiled code, as JMH does.
 *
 * **Warm-up.** Before the measured iterations it runs warm-up rounds of the same [block] (1000
 * iterations each, or `iterations` when fewer) until the JIT is quiet: no compilation ended during
 * the last two rounds nor for 0.5 s, and none is running or queued ([JitQuiet]), within 30 s.
 * What the warm-up did is left out of every figure ([CommonScope.measureFromHere]); its effects
 * on memory stay (a fetchAndAdd's word counts the warm-up's adds too). A round in which this QP
 * (in the scenario's block: any QP) sent or took a message is agreed with the peer over the control connection, so both sides run the same number
 * of rounds and a ping-pong never loses its partner: such a loop needs its partner `repeat { }`
 * (or `runFor`) on the peer, on the same QP and in the same scope, and a loop of one-sided
 * operations (write, read, atomics) warms up alone. The results say what was done, one line per
 * loop ([WarmupSummary]): `warm-up on QP 0: 7 rounds of 1000 in 2.3 s, until no compilation for
 * 0.5 s; the JIT compiled for 0 ms during the measurement`.
 *
 * The parameter `warmup` chooses: `auto` (default) as above; `0` for none, the cold figure on
 * purpose; `N` for exactly N warm-up iterations, with no agreement and no watch on the JIT.
 * The loops of one side that warm up at the same time (one per QP under `forEachQp`) start
 * measuring together: a loop whose warm-up ended first waits for the others, so every QP is
 * measured over the same span.
 *
 * **Timed runs** (`seconds`, or [runFor]): a loop whose QP sends or takes messages runs whole
 * rounds of 1000 iterations, agreed with the peer's partner loop after each (either side's
 * time not yet over means one more round), so both sides make as many exchanges and neither
 * waits for a message the other's deadline stopped; it can run up to one round past its time.
 * A loop of one-sided operations stops at its time.
 *
 * Inline, so the loop body is part of the caller's coroutine: nothing is allocated per iteration,
 * and warm-up and measurement run the same compiled loop. `repeat(n) { }` is Kotlin's: a loop of
 * your own is not warmed up (call [CommonScope.measureFromHere] after a warm-up of your own).
 */
public suspend inline fun CommonScope.repeat(block: () -> Unit): Unit = loop(repeatLoop(null), block)

/**
 * Repeats [block] until [duration] has passed, after warm-up rounds as [repeat] runs them
 * (parameter `warmup`); inline: nothing is allocated per iteration.
 */
public suspend inline fun CommonScope.runFor(duration: Duration, block: () -> Unit): Unit =
    loop(repeatLoop(if (duration.isInfinite()) Long.MAX_VALUE else duration.inWholeNanoseconds.coerceAtLeast(0)), block)

/** The rounds [loop] gives, each [block] run that many times or until the round's end time. */
@PublishedApi
internal suspend inline fun CommonScope.loop(loop: RepeatLoop, block: () -> Unit) {
    while (true) {
        val n = loop.nextRound()
        if (n == 0L) break
        val end = loop.roundEnd
        var i = 0L
        // One loop for warm-up and measurement; the time check's branch is taken only at a timed run's end.
        while (i < n && System.nanoTime() - end < 0) {
            block()
            roundDone()
            i++
        }
    }
}
