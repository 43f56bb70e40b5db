package dev.rdmarun.dsl

import java.lang.foreign.MemorySegment
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

/**
 * Operations on one QP: `qp(i) { }`, or each QP's own coroutine in `forEachQp { }`.
 *
 * The operations that move data **post** one work request and return once it is on the device's
 * queue; they suspend only for flow control (the peer has no receive free yet, or `sendDepth`
 * work requests are in flight) and for the buffer rule below.
 *
 * **The buffer rule.** An inline payload (`inlineThreshold`) is copied at the call; any other
 * buffer is read by the device until its send or write completes, and a read's buffer is filled
 * until the read completes. An operation that would change a buffer posted work still reads, or
 * read one posted work still fills, waits until that work has completed (with
 * `bufferReuse(BufferReuse.FAIL)` it fails at the call instead). Sends and writes of one buffer in a
 * loop, reads into one buffer in a loop, and atomics (each gets a result word of its own) do not
 * wait. `send(payload)` always waits until no posted work uses its buffer, then copies: a message
 * given as bytes is never changed by a later call. What the script writes into [buffer]'s memory
 * itself is not watched: change a buffer only after the work that uses it completed
 * ([awaitCompletion]).
 *
 * Sizes default to the buffer size; `buffer` picks one of the QP's `bufferCount` buffers. The
 * operations that touch peer memory address buffer [remoteBuffer] of the peer's QP [remoteQp]
 * (default: this QP's index) at [remoteOffset], so any QP can target any buffer the peer granted;
 * an operation the peer did not grant with `remoteAccess(...)` fails at the call.
 *
 * Every wait ends, at the latest, once the peer has made no progress for the scenario's timeout,
 * with an [RdmaTimeoutException] (a `java.util.concurrent.TimeoutException`) whose sentence names
 * what this side waited for and what the peer last did; that ends the scenario. Every wait is
 * cancellable too, as kotlinx's suspending functions are: `withTimeout(d) { receive() }` (or
 * `withTimeoutOrNull`) ends just that wait, which then took nothing (see [RdmaTimeoutException]).
 */
@RdmaDsl
public interface QpScope : CommonScope {
    /** This QP's index, 0 until qps - 1. */
    public val index: Int

    /** Runs [block] on the listening side only. */
    public suspend fun server(block: suspend QpScope.() -> Unit)

    /** Runs [block] on the connecting side only. */
    public suspend fun client(block: suspend QpScope.() -> Unit)

    /** Buffer [i] of this QP's data region (the send source, write source, read target). */
    public fun buffer(i: Int = 0): MemorySegment

    /**
     * Posts a SEND of the first [size] bytes of [buffer] (default: all of it). The device reads
     * [buffer] until the SEND completes; it waits first for a read or atomic still filling it (the buffer rule).
     */
    public suspend fun send(size: Int = -1, buffer: Int = 0)

    /**
     * Sends [payload] as it is at the call: waits until no posted work uses [buffer] (the buffer
     * rule, whatever `bufferReuse` says), copies [payload] into it and posts a SEND of it.
     */
    public suspend fun send(payload: ByteArray, buffer: Int = 0)

    /** Posts a SEND with 32-bit immediate data; [buffer] as in [send] (the buffer rule). */
    public suspend fun sendWithImm(imm: Int, size: Int = -1, buffer: Int = 0)

    /**
     * The next message the peer sent on this QP (waits for it). Messages that arrive before a
     * receive asks wait in this QP's inbox (`inboxDepth`). Fails with a [ScenarioException] when
     * the peer has finished and every message it sent on this QP was taken, or when the peer made
     * no progress for `timeout`.
     *
     * With [copyPayload] false the message is taken without reading its payload: [Message.bytes]
     * is empty ([Message.length] and [Message.immediate] are set) and nothing is allocated when the
     * same length and immediate come again. That is what a loop that only waits for the peer's
     * message needs (perftest's latency tests never read the data): copying a 4 KiB payload costs
     * more than the rest of a receive.
     */
    public suspend fun receive(copyPayload: Boolean = true): Message

    /**
     * Posts an RDMA WRITE of [buffer] into the peer's buffer (needs the peer's remoteAccess(WRITE)).
     * The device reads [buffer] until it completes; it waits first for a read or atomic still filling it (the buffer rule).
     */
    public suspend fun write(size: Int = -1, buffer: Int = 0, remoteQp: Int = index, remoteBuffer: Int = 0, remoteOffset: Long = 0)

    /** Posts an RDMA WRITE that also delivers [imm] to the peer's receive() (needs remoteAccess(WRITE)); [buffer] as in [write]. */
    public suspend fun writeWithImm(imm: Int, size: Int = -1, buffer: Int = 0, remoteQp: Int = index, remoteBuffer: Int = 0, remoteOffset: Long = 0)

    /**
     * Posts an RDMA READ of the peer's buffer into [buffer] (needs the peer's remoteAccess(READ)).
     * The device fills [buffer] until it completes; it waits first for a send or write still
     * reading it and for an atomic whose old value goes there (the buffer rule).
     */
    public suspend fun read(size: Int = -1, buffer: Int = 0, remoteQp: Int = index, remoteBuffer: Int = 0, remoteOffset: Long = 0)

    /**
     * Posts a 64-bit compare-and-swap on the peer's word at [remoteOffset] (8-byte aligned; needs
     * remoteAccess(ATOMIC)); the old value comes back in this work request's [Completion] and, at
     * its completion, at offset 0 of [buffer]. Atomics in flight never share a result (each has a
     * word of its own), so they do not wait for each other (the buffer rule).
     */
    public suspend fun compareAndSwap(compare: Long, swap: Long, remoteQp: Int = index, remoteBuffer: Int = 0, remoteOffset: Long = 0, buffer: Int = 0)

    /**
     * Posts a 64-bit fetch-and-add on the peer's word; the old value comes back in this work
     * request's [Completion] and at offset 0 of [buffer], as for [compareAndSwap] (the buffer rule).
     */
    public suspend fun fetchAndAdd(add: Long, remoteQp: Int = index, remoteBuffer: Int = 0, remoteOffset: Long = 0, buffer: Int = 0)

    /**
     * Waits for the oldest posted work request not yet awaited and returns its completion (with
     * `signalEvery(n)`, a work request that is not signaled is known complete once a later one is).
     * Calling it with nothing outstanding is an error.
     */
    public suspend fun awaitCompletion(): Completion

    /**
     * Waits for the [n] oldest posted work requests not yet awaited and returns their completions,
     * oldest first: what [n] calls of [awaitCompletion] would return, in the order they would
     * return it (the order the work requests were posted). `awaitCompletions(0)` is an empty list;
     * [n] larger than [outstanding] fails at the call, before anything is awaited.
     *
     * It allocates the list, one per call: a hot loop that needs no list, only its work done,
     * is `repeat(n) { awaitCompletion() }` (nothing allocated while the completions repeat) or [awaitAll].
     *
     * A work request that completes with an error ends the scenario, as it does for
     * [awaitCompletion]: this call then throws that failure and returns nothing, the completions
     * before it included. Each of the [n] waits has the scenario's deadline of its own (it ends
     * once the peer has made no progress for `timeout`, with an [RdmaTimeoutException]), not one
     * for all [n]; `withTimeout` around the call cancels it as a whole, and the completions it
     * awaited by then are awaited (they do not come back).
     */
    public suspend fun awaitCompletions(n: Int): List<Completion>

    /** Waits for every posted work request. */
    public suspend fun awaitAll()

    /** Work requests posted and not yet awaited. */
    public val outstanding: Int

    /** Records how long [block] takes in the latency section [name] of the results. */
    public suspend fun <T> measure(name: String, block: suspend () -> T): T

    /**
     * [measure] for a ping-pong's round trip: the results report section [name] one way (half the
     * round trip, as perftest's latency tests do) with the round trip beside it.
     */
    public suspend fun <T> measureRoundTrip(name: String, block: suspend () -> T): T
}

/**
 * The block of `rdma { }`: settings first, then `connect(peer)`, then operations. Operations
 * here act on every QP (each posted on all QPs, then awaited QP by QP); `qp(i) { }` and
 * `forEachQp { }` address QPs one by one.
 */
@RdmaDsl
public interface ScenarioScope : CommonScope {
    // ---- settings (before connect; after it they are an error) ----
    public fun device(name: String)
    public fun port(port: Int)
    public fun gidIndex(index: Int)
    public fun qps(n: Int)
    public fun sharedCq()
    public fun perQpCq()
    public fun bufferSize(bytes: Int)
    public fun bufferCount(n: Int)
    public fun sendDepth(n: Int)
    public fun recvDepth(n: Int)

    /** Messages per QP held for a later receive() beyond the posted receives (default 1024; 0: only the receive slots). */
    public fun inboxDepth(n: Int)
    public fun mtu(bytes: Int)
    public fun inlineThreshold(bytes: Int)

    /** Signals one work request in [n] (selective signaling, as perftest's cq_mod). */
    public fun signalEvery(n: Int)
    public fun rnrRetry(n: Int)

    /** ACK timeout exponent (4.096 us * 2^timeout) and transport retry count. */
    public fun retry(count: Int, timeout: Int = 14)
    public fun completionMode(mode: CompletionMode)

    /**
     * What the peer may do to this side's data buffers (default: nothing): the buffers are
     * registered with exactly these flags, and the peer's write/read/atomics fail at its call
     * without them. Declare it on the side whose buffers are the target (`if (isServer)`), or on
     * both.
     */
    public fun remoteAccess(vararg access: RemoteAccess)

    /**
     * Bound on waits: connecting, the handshake, and any wait during which the peer makes no
     * progress. A wait that outlives it throws an [RdmaTimeoutException], which ends the scenario.
     */
    public fun timeout(duration: Duration)

    /**
     * What an operation does when it would spoil a buffer posted work still uses (see [QpScope]'s
     * buffer rule): [BufferReuse.WAIT] (default) waits for that work, [BufferReuse.FAIL] fails at the call.
     */
    public fun bufferReuse(reuse: BufferReuse)

    /** The QP count set so far. */
    public val qpCount: Int

    /** Runs [block] on the listening side only. */
    public suspend fun server(block: suspend ScenarioScope.() -> Unit)

    /** Runs [block] on the connecting side only. */
    public suspend fun client(block: suspend ScenarioScope.() -> Unit)

    /**
     * The peer the launcher (`--listen`, `--peer`, `--loopback`) or the application
     * ([RdmaOptions.peer]) gave, for `connect(peer)`. Reading it when none was given is a
     * [ScenarioException].
     */
    public val peer: Peer

    /**
     * Validates the settings (before any device is touched), then opens the device, creates the
     * verbs objects and connects every QP to the peer's over the control connection [peer].
     */
    public suspend fun connect(peer: Peer)

    /**
     * Waits until the peer reaches its matching barrier (over the control connection); first this
     * side's posted work completes. Its deadline is the scenario's: an [RdmaTimeoutException] once
     * the peer has made no progress for `timeout`. Not one to cancel alone (`withTimeout` around
     * it): the peer's barrier frame would then meet this side's next barrier, out of step.
     */
    public suspend fun barrier()

    /** Runs [block] on QP [index]. */
    public suspend fun <T> qp(index: Int, block: suspend QpScope.() -> T): T

    /** Runs [block] once per QP, each in its own coroutine, and waits for all. */
    public suspend fun forEachQp(block: suspend QpScope.() -> Unit)

    // ---- operations on every QP (each follows [QpScope]'s buffer rule on its QP) ----
    /** [QpScope.send] on every QP (the buffer rule: waits for a read or atomic still filling [buffer]). */
    public suspend fun send(size: Int = -1, buffer: Int = 0)

    /** [QpScope.sendWithImm] on every QP (the buffer rule: waits for a read or atomic still filling [buffer]). */
    public suspend fun sendWithImm(imm: Int, size: Int = -1, buffer: Int = 0)

    /** One message from each QP, in QP order ([copyPayload] as in [QpScope.receive]). */
    public suspend fun receive(copyPayload: Boolean = true): List<Message>

    /** [QpScope.write] on every QP (the buffer rule: waits for a read or atomic still filling [buffer]). */
    public suspend fun write(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = 0)

    /** [QpScope.writeWithImm] on every QP (the buffer rule: waits for a read or atomic still filling [buffer]). */
    public suspend fun writeWithImm(imm: Int, size: Int = -1, buffer: Int = 0, remoteBuffer: Int = 0)

    /** [QpScope.read] on every QP (the buffer rule: waits for a send, write or atomic still using [buffer]). */
    public suspend fun read(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = 0)

    /** The oldest unawaited completion of each QP, in QP order. */
    public suspend fun awaitCompletion(): List<Completion>
    public suspend fun awaitAll()
}
