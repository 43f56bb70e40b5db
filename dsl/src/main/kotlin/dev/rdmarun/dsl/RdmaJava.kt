package dev.rdmarun.dsl

import java.lang.foreign.MemorySegment
import java.util.concurrent.ExecutionException
import java.util.concurrent.Executors
import java.util.function.Consumer
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
 * results as `rdma { }`; each call costs a thread hand-off, so latency-critical loops are better
 * written in Kotlin.
 *
 * ```java
 * ScenarioResult result = RdmaJava.run(new RdmaOptions(), s -> {
 *     s.qps(4);
 *     s.connect(Peer.connect("10.77.0.1"));
 *     s.forEachQp(qp -> { for (int i = 0; i < 1000; i++) { qp.send(); qp.awaitCompletion(); } });
 * });
 * ```
 */
object RdmaJava {
    /** Runs [scenario] as `rdma(options) { }` runs its block; blocks the caller until both sides finished. */
    @JvmStatic
    @JvmOverloads
    fun run(options: RdmaOptions = RdmaDefaults.options, scenario: Consumer<JavaScenario>): ScenarioResult = rdma(options) {
        val scope = this
        val thread = currentCoroutineContext()[ContinuationInterceptor]!!
        runInterruptible(Dispatchers.IO) { scenario.accept(JavaScenario(scope, thread)) }
    }
}

/** Runs [op] on the scenario's thread and waits for it there. */
private fun <T> on(thread: CoroutineContext, op: suspend () -> T): T = runBlocking(thread) { op() }

/** [ScenarioScope] for Java: the same settings and operations, each one blocking. */
class JavaScenario internal constructor(private val s: ScenarioScope, private val thread: CoroutineContext) {
    fun device(name: String) = s.device(name)
    fun port(port: Int) = s.port(port)
    fun gidIndex(index: Int) = s.gidIndex(index)
    fun qps(n: Int) = s.qps(n)
    fun sharedCq() = s.sharedCq()
    fun perQpCq() = s.perQpCq()
    fun bufferSize(bytes: Int) = s.bufferSize(bytes)
    fun bufferCount(n: Int) = s.bufferCount(n)
    fun sendDepth(n: Int) = s.sendDepth(n)
    fun recvDepth(n: Int) = s.recvDepth(n)
    fun inboxDepth(n: Int) = s.inboxDepth(n)
    fun mtu(bytes: Int) = s.mtu(bytes)
    fun inlineThreshold(bytes: Int) = s.inlineThreshold(bytes)
    fun signalEvery(n: Int) = s.signalEvery(n)
    fun rnrRetry(n: Int) = s.rnrRetry(n)

    @JvmOverloads
    fun retry(count: Int, timeout: Int = 14) = s.retry(count, timeout)
    fun completionMode(mode: CompletionMode) = s.completionMode(mode)
    fun remoteAccess(vararg access: RemoteAccess) = s.remoteAccess(*access)
    fun timeoutMillis(millis: Long) = s.timeout(millis.milliseconds)

    /** [ScenarioScope.bufferReuse]: wait (default) or fail when an operation would spoil a buffer posted work uses. */
    fun bufferReuse(reuse: BufferReuse) = s.bufferReuse(reuse)

    val isServer: Boolean get() = s.isServer
    val isClient: Boolean get() = s.isClient
    val peer: Peer get() = s.peer
    fun param(name: String, default: String) = s.param(name, default)
    fun intParam(name: String, default: Int) = s.intParam(name, default)
    fun sizeParam(name: String, default: Int) = s.sizeParam(name, default)

    /** [CommonScope.measureFromHere]: what happened so far was a warm-up. */
    fun measureFromHere() = on(thread) { s.measureFromHere() }

    fun connect(peer: Peer) = on(thread) { s.connect(peer) }
    fun barrier() = on(thread) { s.barrier() }

    /** Runs [block] on QP [index], on this thread. */
    fun qp(index: Int, block: Consumer<JavaQp>) {
        val qp = on(thread) { s.qp(index) { this } }
        block.accept(JavaQp(qp, thread))
    }

    /** Runs [block] once per QP, each on a thread of its own (a virtual thread), and waits for all. */
    fun forEachQp(block: Consumer<JavaQp>) {
        val qps = (0 until s.qpCount).map { i -> on(thread) { s.qp(i) { this } } }
        Executors.newVirtualThreadPerTaskExecutor().use { pool ->
            val running = qps.map { qp ->
                pool.submit {
                    try {
                        block.accept(JavaQp(qp, thread))
                    } catch (e: Throwable) {
                        (s as? Scenario)?.abort(e) // the other QPs' threads may wait in an operation
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
    fun send(size: Int = -1, buffer: Int = 0) = on(thread) { s.send(size, buffer) }
    @JvmOverloads
    fun receive(copyPayload: Boolean = true): List<Message> = on(thread) { s.receive(copyPayload) }
    fun awaitCompletion(): List<Completion> = on(thread) { s.awaitCompletion() }
    fun awaitAll() = on(thread) { s.awaitAll() }
}

/**
 * [QpScope] for Java: one QP's operations, each one blocking. Every operation that takes a `buffer`
 * follows [QpScope]'s buffer rule: it waits while posted work would be spoiled by it
 * (`bufferReuse(BufferReuse.FAIL)`: fails at the call instead), and `send(byte[])` sends the bytes as
 * they are at the call.
 */
class JavaQp internal constructor(private val q: QpScope, private val thread: CoroutineContext) {
    val index: Int get() = q.index
    val isServer: Boolean get() = q.isServer
    val isClient: Boolean get() = q.isClient
    val outstanding: Int get() = on(thread) { q.outstanding }

    /** [CommonScope.measureFromHere] for this QP. */
    fun measureFromHere() = on(thread) { q.measureFromHere() }

    @JvmOverloads
    fun buffer(i: Int = 0): MemorySegment = q.buffer(i)

    /** [QpScope.send]: the device reads [buffer] until it completes; it waits for a read or atomic still filling it (the buffer rule). */
    @JvmOverloads
    fun send(size: Int = -1, buffer: Int = 0) = on(thread) { q.send(size, buffer) }

    /** [QpScope.send] of [payload] as it is at the call: waits until no posted work uses [buffer], then copies it there. */
    @JvmOverloads
    fun send(payload: ByteArray, buffer: Int = 0) = on(thread) { q.send(payload, buffer) }

    /** [QpScope.sendWithImm]; [buffer] as in [send] (the buffer rule). */
    @JvmOverloads
    fun sendWithImm(imm: Int, size: Int = -1, buffer: Int = 0) = on(thread) { q.sendWithImm(imm, size, buffer) }
    @JvmOverloads
    fun receive(copyPayload: Boolean = true): Message = on(thread) { q.receive(copyPayload) }

    /** [QpScope.write]: the device reads [buffer] until it completes; it waits for a read or atomic still filling it (the buffer rule). */
    @JvmOverloads
    fun write(size: Int = -1, buffer: Int = 0, remoteQp: Int = q.index, remoteBuffer: Int = 0, remoteOffset: Long = 0) =
        on(thread) { q.write(size, buffer, remoteQp, remoteBuffer, remoteOffset) }

    /** [QpScope.read]: the device fills [buffer] until it completes; it waits for a send, write or atomic still using it (the buffer rule). */
    @JvmOverloads
    fun read(size: Int = -1, buffer: Int = 0, remoteQp: Int = q.index, remoteBuffer: Int = 0, remoteOffset: Long = 0) =
        on(thread) { q.read(size, buffer, remoteQp, remoteBuffer, remoteOffset) }

    /** [QpScope.fetchAndAdd]: its old value comes in its own [Completion] and, at its completion, at offset 0 of [buffer] (never waits for it). */
    @JvmOverloads
    fun fetchAndAdd(add: Long, remoteQp: Int = q.index, remoteBuffer: Int = 0, remoteOffset: Long = 0, buffer: Int = 0) =
        on(thread) { q.fetchAndAdd(add, remoteQp, remoteBuffer, remoteOffset, buffer) }

    /** [QpScope.compareAndSwap]: its old value comes in its own [Completion] and, at its completion, at offset 0 of [buffer] (never waits for it). */
    @JvmOverloads
    fun compareAndSwap(compare: Long, swap: Long, remoteQp: Int = q.index, remoteBuffer: Int = 0, remoteOffset: Long = 0, buffer: Int = 0) =
        on(thread) { q.compareAndSwap(compare, swap, remoteQp, remoteBuffer, remoteOffset, buffer) }

    fun awaitCompletion(): Completion = on(thread) { q.awaitCompletion() }
    fun awaitAll() = on(thread) { q.awaitAll() }
}
