package dev.rdmarun.dsl

import java.lang.foreign.MemorySegment
import java.util.concurrent.ExecutionException
import java.util.concurrent.Executors
import java.util.concurrent.TimeoutException
import java.util.function.Consumer
import java.util.function.Supplier
import kotlin.coroutines.ContinuationInterceptor
import kotlin.coroutines.CoroutineContext
import kotlin.time.Duration.Companion.milliseconds
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.runInterruptible

/**
 * The DSL for Java (no suspend lambdas): the scenario's code runs on a thread of its own and each
 * operation blocks it until the scenario's thread has done it. Same operations, same meaning, same
 * results as `rdma { }` (a spec checks that every member of [ScenarioScope] and [QpScope] has its
 * counterpart here); the Kotlin-only forms have Java ones: `timeout(Duration)` is
 * [JavaScenario.timeoutMillis], suspend blocks are `Consumer`s and `Supplier`s. Each call costs a
 * thread hand-off, so latency-critical loops are better written in Kotlin.
 *
 * ```java
 * ScenarioResult result = RdmaJava.run(new RdmaOptions(), s -> {
 *     s.qps(4);
 *     s.connect(Peer.connect("10.77.0.1"));
 *     s.forEachQp(qp -> { for (int i = 0; i < 1000; i++) { qp.send(); qp.awaitCompletion(); } });
 * });
 * ```
 */
public object RdmaJava {
    /**
     * Runs [scenario] as `rdma(options) { }` runs its block; blocks the caller until both sides
     * finished. A wait that outlived the scenario's timeout ends the run with an
     * [RdmaTimeoutException], a checked `java.util.concurrent.TimeoutException` declared here
     * (the operations inside the scenario, called from `Consumer`s, do not declare it: catch it
     * around this call). Other failures are unchecked ([ScenarioException] and the like).
     */
    @JvmStatic
    @JvmOverloads
    @Throws(TimeoutException::class)
    public fun run(options: RdmaOptions = RdmaDefaults.options, scenario: Consumer<JavaScenario>): ScenarioResult = rdma(options) {
        val scope = this
        val thread = currentCoroutineContext()[ContinuationInterceptor]!!
        runInterruptible(Dispatchers.IO) { scenario.accept(JavaScenario(scope, thread)) }
    }
}

/** Runs [op] on the scenario's thread and waits for it there. */
private fun <T> on(thread: CoroutineContext, op: suspend () -> T): T = runBlocking(thread) { op() }

/**
 * What [JavaScenario] and [JavaQp] share, as [CommonScope] for Java: the role, the parameters,
 * the rounds of a loop, and blocks for one side ([T]: the scope the blocks get).
 */
public abstract class JavaCommon<T : JavaCommon<T>> internal constructor(private val common: CommonScope, internal val thread: CoroutineContext) {
    public val isServer: Boolean get() = common.isServer
    public val isClient: Boolean get() = common.isClient

    /** [CommonScope.pair]: the ranks of this scenario's pair (a two-peer run: the server is rank 0, the client rank 1). */
    public val pair: RankPair get() = common.pair
    public val rank: Int get() = common.rank
    public val peerRank: Int get() = common.peerRank
    public val ranks: Int get() = common.ranks

    /** [CommonScope.param]: the parameter's value, else [default]. */
    public fun param(name: String, default: String): String = common.param(name, default)

    /** [CommonScope.intParam]: the parameter as a whole number. */
    public fun intParam(name: String, default: Int): Int = common.intParam(name, default)

    /** [CommonScope.sizeParam]: the parameter as a size in bytes (4096, 4K, 1M). */
    public fun sizeParam(name: String, default: Int): Int = common.sizeParam(name, default)

    /** Runs [block] on the listening side only. */
    public fun server(block: Consumer<T>) {
        @Suppress("UNCHECKED_CAST")
        if (isServer) block.accept(this as T)
    }

    /** Runs [block] on the connecting side only. */
    public fun client(block: Consumer<T>) {
        @Suppress("UNCHECKED_CAST")
        if (isClient) block.accept(this as T)
    }

    /** [CommonScope.measureFromHere]: what this scope did so far was a warm-up. */
    public fun measureFromHere(): Unit = on(thread) { common.measureFromHere() }

    /** [CommonScope.roundsPlanned]: a loop is about to run [rounds] rounds (a launcher's progress line). */
    public fun roundsPlanned(rounds: Long): Unit = on(thread) { common.roundsPlanned(rounds) }

    /** [CommonScope.roundDone]: a loop finished a round. */
    public fun roundDone(): Unit = on(thread) { common.roundDone() }
}

/** [ScenarioScope] for Java: the same settings and operations, each one blocking. */
public class JavaScenario internal constructor(private val s: ScenarioScope, thread: CoroutineContext) : JavaCommon<JavaScenario>(s, thread) {
    public fun device(name: String): Unit = s.device(name)
    public fun port(port: Int): Unit = s.port(port)
    public fun gidIndex(index: Int): Unit = s.gidIndex(index)
    public fun qps(n: Int): Unit = s.qps(n)
    public fun sharedCq(): Unit = s.sharedCq()
    public fun perQpCq(): Unit = s.perQpCq()
    public fun bufferSize(bytes: Int): Unit = s.bufferSize(bytes)
    public fun bufferCount(n: Int): Unit = s.bufferCount(n)
    public fun sendDepth(n: Int): Unit = s.sendDepth(n)
    public fun recvDepth(n: Int): Unit = s.recvDepth(n)
    public fun inboxDepth(n: Int): Unit = s.inboxDepth(n)
    public fun mtu(bytes: Int): Unit = s.mtu(bytes)
    public fun inlineThreshold(bytes: Int): Unit = s.inlineThreshold(bytes)
    public fun signalEvery(n: Int): Unit = s.signalEvery(n)
    public fun rnrRetry(n: Int): Unit = s.rnrRetry(n)

    @JvmOverloads
    public fun retry(count: Int, timeout: Int = 14): Unit = s.retry(count, timeout)
    public fun completionMode(mode: CompletionMode): Unit = s.completionMode(mode)
    public fun remoteAccess(vararg access: RemoteAccess): Unit = s.remoteAccess(*access)
    public fun timeoutMillis(millis: Long): Unit = s.timeout(millis.milliseconds)

    /** [ScenarioScope.bufferReuse]: wait (default) or fail when an operation would spoil a buffer posted work uses. */
    public fun bufferReuse(reuse: BufferReuse): Unit = s.bufferReuse(reuse)

    public val peer: Peer get() = s.peer

    /** [ScenarioScope.qpCount]: the QP count set so far. */
    public val qpCount: Int get() = s.qpCount

    public fun connect(peer: Peer): Unit = on(thread) { s.connect(peer) }
    public fun barrier(): Unit = on(thread) { s.barrier() }

    /** Runs [block] on QP [index], on this thread. */
    public fun qp(index: Int, block: Consumer<JavaQp>) {
        val qp = on(thread) { s.qp(index) { this } }
        block.accept(JavaQp(qp, thread))
    }

    /** Runs [block] once per QP, each on a thread of its own (a virtual thread), and waits for all. */
    public fun forEachQp(block: Consumer<JavaQp>) {
        val qps = (0 until s.qpCount).map { i -> on(thread) { s.qp(i) { this } } }
        Executors.newVirtualThreadPerTaskExecutor().use { pool ->
            val running = qps.map { qp ->
                pool.submit {
                    try {
                        block.accept(JavaQp(qp, thread))
                    } catch (e: Throwable) {
                        s.abort(e) // the other QPs' threads may wait in an operation
                        throw e
                    }
                }
            }
            for (f in running) {
                try {
                    f.get()
                } catch (e: ExecutionException) {
                    throw e.cause ?: e
                }
            }
        }
    }

    /** [ScenarioScope.send] on every QP; [buffer] follows [QpScope]'s buffer rule (waits for a read or atomic still filling it). */
    @JvmOverloads
    public fun send(size: Int = -1, buffer: Int = 0): Unit = on(thread) { s.send(size, buffer) }

    /** [ScenarioScope.sendWithImm]: a SEND with immediate data on every QP. */
    @JvmOverloads
    public fun sendWithImm(imm: Int, size: Int = -1, buffer: Int = 0): Unit = on(thread) { s.sendWithImm(imm, size, buffer) }

    /** [ScenarioScope.receive]: one message from each QP, in QP order. */
    @JvmOverloads
    public fun receive(copyPayload: Boolean = true): List<Message> = on(thread) { s.receive(copyPayload) }

    /** [ScenarioScope.write]: an RDMA WRITE on every QP into the peer's buffer [remoteBuffer] of the same QP. */
    @JvmOverloads
    public fun write(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = 0): Unit = on(thread) { s.write(size, buffer, remoteBuffer) }

    /** [ScenarioScope.writeWithImm]: an RDMA WRITE with immediate data on every QP. */
    @JvmOverloads
    public fun writeWithImm(imm: Int, size: Int = -1, buffer: Int = 0, remoteBuffer: Int = 0): Unit = on(thread) { s.writeWithImm(imm, size, buffer, remoteBuffer) }

    /** [ScenarioScope.read]: an RDMA READ on every QP from the peer's buffer [remoteBuffer] of the same QP. */
    @JvmOverloads
    public fun read(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = 0): Unit = on(thread) { s.read(size, buffer, remoteBuffer) }

    /** [ScenarioScope.awaitCompletion]: the oldest unawaited completion of each QP, in QP order. */
    public fun awaitCompletion(): List<Completion> = on(thread) { s.awaitCompletion() }

    /** [ScenarioScope.awaitAll]: waits for every posted work request of every QP. */
    public fun awaitAll(): Unit = on(thread) { s.awaitAll() }
}

/**
 * [QpScope] for Java: one QP's operations, each one blocking. Every operation that takes a `buffer`
 * follows [QpScope]'s buffer rule: it waits while posted work would be spoiled by it
 * (`bufferReuse(BufferReuse.FAIL)`: fails at the call instead), and `send(byte[])` sends the bytes as
 * they are at the call.
 */
public class JavaQp internal constructor(private val q: QpScope, thread: CoroutineContext) : JavaCommon<JavaQp>(q, thread) {
    public val index: Int get() = q.index
    public val outstanding: Int get() = on(thread) { q.outstanding }

    /**
     * [QpScope.measure]: records how long [block] takes, on this thread, in the latency section
     * [name] (the hand-offs of the operations in it included, as for any Java call).
     */
    public fun <T> measure(name: String, block: Supplier<T>): T = timed(name, block, roundTrip = false)

    /** [QpScope.measureRoundTrip]: [measure] for a ping-pong's round trip (reported one way, with the round trip beside it). */
    public fun <T> measureRoundTrip(name: String, block: Supplier<T>): T = timed(name, block, roundTrip = true)

    private fun <T> timed(name: String, block: Supplier<T>, roundTrip: Boolean): T {
        val t0 = System.nanoTime()
        val result = block.get()
        val nanos = System.nanoTime() - t0
        // The block ran here, not on the scenario's thread, which alone writes the QP's counters.
        on(thread) { q.recordSection(name, nanos, roundTrip) }
        return result
    }

    @JvmOverloads
    public fun buffer(i: Int = 0): MemorySegment = q.buffer(i)

    /** [QpScope.send]: the device reads [buffer] until it completes; it waits for a read or atomic still filling it (the buffer rule). */
    @JvmOverloads
    public fun send(size: Int = -1, buffer: Int = 0): Unit = on(thread) { q.send(size, buffer) }

    /** [QpScope.send] of [payload] as it is at the call: waits until no posted work uses [buffer], then copies it there. */
    @JvmOverloads
    public fun send(payload: ByteArray, buffer: Int = 0): Unit = on(thread) { q.send(payload, buffer) }

    /** [QpScope.sendWithImm]; [buffer] as in [send] (the buffer rule). */
    @JvmOverloads
    public fun sendWithImm(imm: Int, size: Int = -1, buffer: Int = 0): Unit = on(thread) { q.sendWithImm(imm, size, buffer) }
    @JvmOverloads
    public fun receive(copyPayload: Boolean = true): Message = on(thread) { q.receive(copyPayload) }

    /** [QpScope.write]: the device reads [buffer] until it completes; it waits for a read or atomic still filling it (the buffer rule). */
    @JvmOverloads
    public fun write(size: Int = -1, buffer: Int = 0, remoteQp: Int = q.index, remoteBuffer: Int = 0, remoteOffset: Long = 0): Unit =
        on(thread) { q.write(size, buffer, remoteQp, remoteBuffer, remoteOffset) }

    /** [QpScope.read]: the device fills [buffer] until it completes; it waits for a send, write or atomic still using it (the buffer rule). */
    @JvmOverloads
    public fun read(size: Int = -1, buffer: Int = 0, remoteQp: Int = q.index, remoteBuffer: Int = 0, remoteOffset: Long = 0): Unit =
        on(thread) { q.read(size, buffer, remoteQp, remoteBuffer, remoteOffset) }

    /** [QpScope.fetchAndAdd]: its old value comes in its own [Completion] and, at its completion, at offset 0 of [buffer] (never waits for it). */
    @JvmOverloads
    public fun fetchAndAdd(add: Long, remoteQp: Int = q.index, remoteBuffer: Int = 0, remoteOffset: Long = 0, buffer: Int = 0): Unit =
        on(thread) { q.fetchAndAdd(add, remoteQp, remoteBuffer, remoteOffset, buffer) }

    /** [QpScope.compareAndSwap]: its old value comes in its own [Completion] and, at its completion, at offset 0 of [buffer] (never waits for it). */
    @JvmOverloads
    public fun compareAndSwap(compare: Long, swap: Long, remoteQp: Int = q.index, remoteBuffer: Int = 0, remoteOffset: Long = 0, buffer: Int = 0): Unit =
        on(thread) { q.compareAndSwap(compare, swap, remoteQp, remoteBuffer, remoteOffset, buffer) }

    /** [QpScope.writeWithImm]: an RDMA WRITE that also delivers [imm] to the peer's receive(). */
    @JvmOverloads
    public fun writeWithImm(imm: Int, size: Int = -1, buffer: Int = 0, remoteQp: Int = q.index, remoteBuffer: Int = 0, remoteOffset: Long = 0): Unit =
        on(thread) { q.writeWithImm(imm, size, buffer, remoteQp, remoteBuffer, remoteOffset) }

    public fun awaitCompletion(): Completion = on(thread) { q.awaitCompletion() }

    /** [QpScope.awaitCompletions]: the completions of the [n] oldest unawaited work requests, oldest first. */
    public fun awaitCompletions(n: Int): List<Completion> = on(thread) { q.awaitCompletions(n) }
    public fun awaitAll(): Unit = on(thread) { q.awaitAll() }
}
