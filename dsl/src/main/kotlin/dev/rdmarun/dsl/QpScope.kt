package dev.rdmarun.dsl

import java.lang.foreign.MemorySegment

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
public abstract class QpScope internal constructor() : CommonScope {
    /** This QP's index, 0 until qps - 1. */
    public abstract val index: Int

    /** Runs [block] on the listening side only. */
    public suspend fun server(block: suspend QpScope.() -> Unit) {
        if (isServer) block()
    }

    /** Runs [block] on the connecting side only. */
    public suspend fun client(block: suspend QpScope.() -> Unit) {
        if (isClient) block()
    }

    /** Buffer [i] of this QP's data region (the send source, write source, read target). */
    public abstract fun buffer(i: Int = 0): MemorySegment

    /**
     * Posts a SEND of the first [size] bytes of [buffer] (default: all of it). The device reads
     * [buffer] until the SEND completes; it waits first for a read or atomic still filling it (the buffer rule).
     */
    public suspend fun send(size: Int = -1, buffer: Int = 0): Unit = post(OpKind.SEND, size, buffer, index, 0, 0, 0, 0, 0)

    /**
     * Sends [payload] as it is at the call: waits until no posted work uses [buffer] (the buffer
     * rule, whatever `bufferReuse` says), copies [payload] into it and posts a SEND of it.
     */
    public suspend fun send(payload: ByteArray, buffer: Int = 0) {
        copyWhenFree(payload, buffer)
        post(OpKind.SEND, payload.size, buffer, index, 0, 0, 0, 0, 0)
    }

    /** Posts a SEND with 32-bit immediate data; [buffer] as in [send] (the buffer rule). */
    public suspend fun sendWithImm(imm: Int, size: Int = -1, buffer: Int = 0): Unit =
        post(OpKind.SEND_WITH_IMM, size, buffer, index, 0, 0, imm, 0, 0)

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
    public abstract suspend fun receive(copyPayload: Boolean = true): Message

    /**
     * Posts an RDMA WRITE of [buffer] into the peer's buffer (needs the peer's remoteAccess(WRITE)).
     * The device reads [buffer] until it completes; it waits first for a read or atomic still filling it (the buffer rule).
     */
    public suspend fun write(size: Int = -1, buffer: Int = 0, remoteQp: Int = index, remoteBuffer: Int = 0, remoteOffset: Long = 0): Unit =
        post(OpKind.WRITE, size, buffer, remoteQp, remoteBuffer, remoteOffset, 0, 0, 0)

    /** Posts an RDMA WRITE that also delivers [imm] to the peer's receive() (needs remoteAccess(WRITE)); [buffer] as in [write]. */
    public suspend fun writeWithImm(imm: Int, size: Int = -1, buffer: Int = 0, remoteQp: Int = index, remoteBuffer: Int = 0, remoteOffset: Long = 0): Unit =
        post(OpKind.WRITE_WITH_IMM, size, buffer, remoteQp, remoteBuffer, remoteOffset, imm, 0, 0)

    /**
     * Posts an RDMA READ of the peer's buffer into [buffer] (needs the peer's remoteAccess(READ)).
     * The device fills [buffer] until it completes; it waits first for a send or write still
     * reading it and for an atomic whose old value goes there (the buffer rule).
     */
    public suspend fun read(size: Int = -1, buffer: Int = 0, remoteQp: Int = index, remoteBuffer: Int = 0, remoteOffset: Long = 0): Unit =
        post(OpKind.READ, size, buffer, remoteQp, remoteBuffer, remoteOffset, 0, 0, 0)

    /**
     * Posts a 64-bit compare-and-swap on the peer's word at [remoteOffset] (8-byte aligned; needs
     * remoteAccess(ATOMIC)); the old value comes back in this work request's [Completion] and, at
     * its completion, at offset 0 of [buffer]. Atomics in flight never share a result (each has a
     * word of its own), so they do not wait for each other (the buffer rule).
     */
    public suspend fun compareAndSwap(compare: Long, swap: Long, remoteQp: Int = index, remoteBuffer: Int = 0, remoteOffset: Long = 0, buffer: Int = 0): Unit =
        post(OpKind.COMPARE_AND_SWAP, 8, buffer, remoteQp, remoteBuffer, remoteOffset, 0, compare, swap)

    /**
     * Posts a 64-bit fetch-and-add on the peer's word; the old value comes back in this work
     * request's [Completion] and at offset 0 of [buffer], as for [compareAndSwap] (the buffer rule).
     */
    public suspend fun fetchAndAdd(add: Long, remoteQp: Int = index, remoteBuffer: Int = 0, remoteOffset: Long = 0, buffer: Int = 0): Unit =
        post(OpKind.FETCH_AND_ADD, 8, buffer, remoteQp, remoteBuffer, remoteOffset, 0, add, 0)

    /**
     * Waits for the oldest posted work request not yet awaited and returns its completion (with
     * `signalEvery(n)`, a work request that is not signaled is known complete once a later one is).
     * Calling it with nothing outstanding is an error. A QP keeps what its last 256 work requests
     * were (4 × `sendDepth` when larger, rounded up to a power of two): one posted before those and
     * never awaited is forgotten, so a loop that posts and never awaits costs no memory, and
     * awaiting it fails with one sentence; [awaitAll] still waits for every one.
     */
    public abstract suspend fun awaitCompletion(): Completion

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
    public suspend fun awaitCompletions(n: Int): List<Completion> {
        if (n < 0) throw ScriptCallException("awaitCompletions($n) on QP $index: n cannot be negative")
        checkNotStopped()
        val outstanding = outstanding
        if (n > outstanding) {
            throw ScriptCallException("awaitCompletions($n) on QP $index: only $outstanding work request${if (outstanding == 1) " is" else "s are"} " +
                "outstanding (posted and not awaited yet)")
        }
        if (n == 0) return emptyList()
        val all = ArrayList<Completion>(n)
        for (i in 0 until n) all.add(awaitCompletion())
        return all
    }

    /** Waits for every posted work request. */
    public abstract suspend fun awaitAll()

    /** Work requests posted and not yet awaited ([awaitAll] awaits them all), forgotten ones included ([awaitCompletion]). */
    public abstract val outstanding: Int

    /**
     * Records how long [block] takes in the latency section [name] of the results; the samples of
     * every QP that uses [name] make one section. A name keeps the kind of its first use for the
     * whole scenario, on every QP and across loops and [measureFromHere]: using it with
     * [measureRoundTrip] after [measure], or the other way round, fails at that call, before its
     * block runs (the launcher names the script's line).
     */
    public abstract suspend fun <T> measure(name: String, block: suspend () -> T): T

    /**
     * [measure] for a ping-pong's round trip: the results report section [name] one way (half the
     * round trip, as perftest's latency tests do) with the round trip beside it. A name is either
     * kind, never both ([measure]).
     */
    public abstract suspend fun <T> measureRoundTrip(name: String, block: suspend () -> T): T

    // ---- what the operations above stand on: the one QP's driver implements them ----

    /**
     * Posts one work request of [kind] through this QP's engine, or parks until the engine can
     * take it (window, credit, the buffer rule); each operation above is one call of it.
     */
    internal abstract suspend fun post(kind: OpKind, size: Int, buffer: Int, remoteQp: Int, remoteBuffer: Int, remoteOffset: Long, imm: Int, a: Long, b: Long)

    /** Waits until no posted work uses [buffer], then copies [payload] into it (send(payload)'s value semantics). */
    internal abstract suspend fun copyWhenFree(payload: ByteArray, buffer: Int)

    /** Throws the scenario's failure, if it has failed. */
    internal abstract fun checkNotStopped()

    /** Records [nanos] in the latency section [name], timed elsewhere (the Java entry point's blocks). */
    internal abstract fun recordSection(name: String, nanos: Long, roundTrip: Boolean)
}
