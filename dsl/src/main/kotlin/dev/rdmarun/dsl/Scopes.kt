package dev.rdmarun.dsl

import java.lang.foreign.MemorySegment
import kotlin.time.Duration

/** Keeps an outer scope's members out of a nested block (no `send()` of the scenario inside `qp(0) { }`). */
@DslMarker
annotation class RdmaDsl

/**
 * A received message. [bytes] is a copy of the payload (empty for writeWithImm, whose data went
 * straight into this side's data region, and in the plan pass).
 */
class Message(
    val qp: Int,
    val length: Int,
    /** Immediate data of sendWithImm/writeWithImm (host order), else null. */
    val immediate: Int?,
    val bytes: ByteArray,
) {
    fun text(): String = bytes.toString(Charsets.UTF_8)
    override fun toString() = "Message(qp=$qp, length=$length, immediate=$immediate)"
}

/**
 * What every scope offers: branches by role, timed loops, and whether this is the plan pass.
 *
 * The block of `rdma { }` runs twice: first as a plan (operations only record what they are and
 * return placeholders: an empty [Message], 0 from atomics; both `server { }` and `client { }` run;
 * `runFor { }` runs its body once), then for real. Keep it deterministic, and guard checks of
 * received data and other side effects with [planning].
 */
@RdmaDsl
interface CommonScope {
    /** True in the plan pass, where operations return placeholders. */
    val planning: Boolean

    /** Repeats [block] until [duration] has passed (in the plan pass: once). */
    suspend fun runFor(duration: Duration, block: suspend () -> Unit)

    /** Parameter value given by the launcher (--set NAME=VALUE) or the application, else [default]. */
    fun param(name: String, default: String): String

    fun intParam(name: String, default: Int): Int =
        param(name, default.toString()).let { it.toIntOrNull() ?: throw ScenarioException("parameter $name must be a whole number, not '$it'") }
}

/**
 * Operations on one QP: `qp(i) { }`, or each QP's own coroutine in `forEachQp { }`.
 *
 * Waiting forms (send, write, ...) return when the operation completed. `post*` forms return once
 * the work request is queued; [awaitCompletion]/[awaitCompletions]/[awaitAll] wait for them, oldest
 * first. With `signalEvery(n)` post forms are handed to the device in groups of n (the last one
 * signaled); any wait, or the end of the scenario, hands over a partial group.
 *
 * Sizes default to the buffer size; `buffer` picks one of the QP's `bufferCount` buffers, and
 * remote operations address the peer's buffer of the same index unless `remoteBuffer` says otherwise.
 */
@RdmaDsl
interface QpScope : CommonScope {
    /** This QP's index, 0 until qps - 1 (0 in the plan pass of `forEachQp { }`). */
    val index: Int

    /** Runs [block] on the listening side only (in the plan pass: always, recorded as server-only). */
    suspend fun server(block: suspend QpScope.() -> Unit)

    /** Runs [block] on the connecting side only (in the plan pass: always, recorded as client-only). */
    suspend fun client(block: suspend QpScope.() -> Unit)

    /** Buffer [i] of this QP's data region (the send source, write source, read target). */
    fun buffer(i: Int = 0): MemorySegment

    suspend fun send(size: Int = -1, buffer: Int = 0)

    /** Copies [payload] into [buffer] and sends it. */
    suspend fun send(payload: ByteArray, buffer: Int = 0)

    suspend fun sendWithImm(imm: Int, size: Int = -1, buffer: Int = 0)

    /** The next message the peer sent on this QP (waits for it). */
    suspend fun receive(): Message

    suspend fun write(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)

    suspend fun writeWithImm(imm: Int, size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)

    suspend fun read(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)

    /** 64-bit CAS on the peer's buffer at [remoteOffset] (8-byte aligned); returns the old value. */
    suspend fun compareAndSwap(compare: Long, swap: Long, remoteOffset: Long = 0, remoteBuffer: Int = 0, buffer: Int = 0): Long

    /** 64-bit fetch-and-add on the peer's buffer at [remoteOffset] (8-byte aligned); returns the old value. */
    suspend fun fetchAndAdd(add: Long, remoteOffset: Long = 0, remoteBuffer: Int = 0, buffer: Int = 0): Long

    suspend fun postSend(size: Int = -1, buffer: Int = 0)
    suspend fun postSendWithImm(imm: Int, size: Int = -1, buffer: Int = 0)
    suspend fun postWrite(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)
    suspend fun postWriteWithImm(imm: Int, size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)
    suspend fun postRead(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)

    /** The old value lands in [buffer] at offset 0. */
    suspend fun postCompareAndSwap(compare: Long, swap: Long, remoteOffset: Long = 0, remoteBuffer: Int = 0, buffer: Int = 0)

    /** The old value lands in [buffer] at offset 0. */
    suspend fun postFetchAndAdd(add: Long, remoteOffset: Long = 0, remoteBuffer: Int = 0, buffer: Int = 0)

    /** Waits for the oldest post-form operation not yet awaited; returns at once when there is none. */
    suspend fun awaitCompletion()

    /** [awaitCompletion] [n] times (fewer when fewer are outstanding). */
    suspend fun awaitCompletions(n: Int)

    /** Waits for every outstanding post-form operation. */
    suspend fun awaitAll()

    /** Post-form operations posted and not yet awaited. */
    val outstanding: Int

    /** Records how long [block] takes in the latency section [name] of the results (e.g. a ping-pong round trip). */
    suspend fun <T> measure(name: String, block: suspend () -> T): T
}

/**
 * The block of `rdma { }`: settings first, then `connect(peer)`, then operations. Operations
 * here run on every QP (each posted on all QPs, then awaited); `qp(i) { }` and `forEachQp { }`
 * address QPs one by one.
 */
@RdmaDsl
interface ScenarioScope : CommonScope {
    // ---- settings (before connect) ----
    fun device(name: String)
    fun port(port: Int)
    fun gidIndex(index: Int)
    fun qps(n: Int)
    fun sharedCq()
    fun perQpCq()
    fun bufferSize(bytes: Int)
    fun bufferCount(n: Int)
    fun sendDepth(n: Int)
    fun recvDepth(n: Int)
    fun mtu(bytes: Int)
    fun inlineThreshold(bytes: Int)
    fun signalEvery(n: Int)
    fun rnrRetry(n: Int)

    /** ACK timeout exponent (4.096 us * 2^timeout) and transport retry count. */
    fun retry(count: Int, timeout: Int = 14)
    fun completionMode(mode: CompletionMode)

    /** Grants the peer exactly this access to the data buffers (instead of deriving it from the operations). */
    fun remoteAccess(vararg access: RemoteAccess)

    /** Bound on control-path waits (connect, handshake, silent peer, credits). */
    fun timeout(duration: Duration)

    /** The QP count set so far. */
    val qpCount: Int

    /** Runs [block] on the listening side only (in the plan pass: always, recorded as server-only). */
    suspend fun server(block: suspend ScenarioScope.() -> Unit)

    /** Runs [block] on the connecting side only (in the plan pass: always, recorded as client-only). */
    suspend fun client(block: suspend ScenarioScope.() -> Unit)

    /**
     * The peer the launcher (`--listen`, `--peer`, `--loopback`) or the application
     * ([RdmaOptions.peer]) gave, for `connect(peer)`. Reading it when none was given is a
     * [ScenarioException]; in a plan-only pass (`--check`) without one it is a placeholder.
     */
    val peer: Peer

    /** Sets up every QP and connects it to the peer's over the control connection [peer]. */
    suspend fun connect(peer: Peer)

    /** Waits until the peer reaches its matching barrier (over the control connection). */
    suspend fun barrier()

    /** Runs [block] on QP [index]. */
    suspend fun <T> qp(index: Int, block: suspend QpScope.() -> T): T

    /** Runs [block] once per QP, each in its own coroutine, and waits for all. */
    suspend fun forEachQp(block: suspend QpScope.() -> Unit)

    // ---- operations on every QP ----
    suspend fun send(size: Int = -1, buffer: Int = 0)
    suspend fun sendWithImm(imm: Int, size: Int = -1, buffer: Int = 0)

    /** One message from each QP, in QP order. */
    suspend fun receive(): List<Message>
    suspend fun write(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)
    suspend fun writeWithImm(imm: Int, size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)
    suspend fun read(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)
    suspend fun postSend(size: Int = -1, buffer: Int = 0)
    suspend fun postWrite(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)
    suspend fun postRead(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = buffer)
    suspend fun awaitCompletion()
    suspend fun awaitAll()
}
