package dev.rdmarun.dsl

import java.lang.foreign.MemorySegment
import java.lang.foreign.ValueLayout
import kotlin.time.Duration
import kotlin.time.TimeSource
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.ensureActive
import kotlinx.coroutines.launch

/** The run pass: the same block as the plan, now on the dispatcher thread with real QPs. */
internal class RunningScenarioScope(private val s: Session) : ScenarioScope {
    private val qpScopes = s.qps.map { RunningQpScope(s, it) }

    override val planning get() = false
    override fun param(name: String, default: String) = s.parameter(name) ?: default

    // Settings were applied by the plan pass; the run pass only passes over them.
    override fun device(name: String) = Unit
    override fun port(port: Int) = Unit
    override fun gidIndex(index: Int) = Unit
    override fun qps(n: Int) = Unit
    override fun sharedCq() = Unit
    override fun perQpCq() = Unit
    override fun bufferSize(bytes: Int) = Unit
    override fun bufferCount(n: Int) = Unit
    override fun sendDepth(n: Int) = Unit
    override fun recvDepth(n: Int) = Unit
    override fun mtu(bytes: Int) = Unit
    override fun inlineThreshold(bytes: Int) = Unit
    override fun signalEvery(n: Int) = Unit
    override fun rnrRetry(n: Int) = Unit
    override fun retry(count: Int, timeout: Int) = Unit
    override fun completionMode(mode: CompletionMode) = Unit
    override fun remoteAccess(vararg access: RemoteAccess) = Unit
    override fun timeout(duration: Duration) = Unit
    override val qpCount get() = s.settings.qps

    override val peer: Peer get() = s.givenPeer ?: throw ScenarioException(NO_PEER)

    /** The QPs were connected before the run pass started. */
    override suspend fun connect(peer: Peer) = Unit
    override suspend fun barrier() = s.barrier()
    override suspend fun server(block: suspend ScenarioScope.() -> Unit) {
        if (s.role == Role.SERVER) block()
    }
    override suspend fun client(block: suspend ScenarioScope.() -> Unit) {
        if (s.role == Role.CLIENT) block()
    }
    override suspend fun runFor(duration: Duration, block: suspend () -> Unit) = loopFor(duration, block)

    override suspend fun <T> qp(index: Int, block: suspend QpScope.() -> T): T {
        if (index !in qpScopes.indices) throw ScenarioException("qp($index) is outside 0..${qpScopes.size - 1}")
        return qpScopes[index].block()
    }

    override suspend fun forEachQp(block: suspend QpScope.() -> Unit) = coroutineScope {
        for (q in qpScopes) launch { q.block() }
    }

    /** Posts on every QP first, then waits for each: the QPs work in parallel. */
    private suspend fun onAll(kind: OpKind, size: Int, buffer: Int, remoteBuffer: Int, imm: Int = 0, wait: Boolean) {
        val seqs = LongArray(s.qps.size) { s.qps[it].start(kind, size, buffer, remoteBuffer, 0, imm, 0, 0, awaitable = !wait) }
        if (wait) s.qps.forEachIndexed { i, q -> q.awaitSeq(seqs[i]) }
    }

    override suspend fun send(size: Int, buffer: Int) = onAll(OpKind.SEND, size, buffer, buffer, wait = true)
    override suspend fun sendWithImm(imm: Int, size: Int, buffer: Int) = onAll(OpKind.SEND_WITH_IMM, size, buffer, buffer, imm, wait = true)
    override suspend fun receive(): List<Message> = s.qps.map { it.receive() }
    override suspend fun write(size: Int, buffer: Int, remoteBuffer: Int) = onAll(OpKind.WRITE, size, buffer, remoteBuffer, wait = true)
    override suspend fun writeWithImm(imm: Int, size: Int, buffer: Int, remoteBuffer: Int) =
        onAll(OpKind.WRITE_WITH_IMM, size, buffer, remoteBuffer, imm, wait = true)
    override suspend fun read(size: Int, buffer: Int, remoteBuffer: Int) = onAll(OpKind.READ, size, buffer, remoteBuffer, wait = true)
    override suspend fun postSend(size: Int, buffer: Int) = onAll(OpKind.SEND, size, buffer, buffer, wait = false)
    override suspend fun postWrite(size: Int, buffer: Int, remoteBuffer: Int) = onAll(OpKind.WRITE, size, buffer, remoteBuffer, wait = false)
    override suspend fun postRead(size: Int, buffer: Int, remoteBuffer: Int) = onAll(OpKind.READ, size, buffer, remoteBuffer, wait = false)
    override suspend fun awaitCompletion() = s.qps.forEach { it.awaitCompletion() }
    override suspend fun awaitAll() = s.qps.forEach { it.awaitAll() }
}

internal class RunningQpScope(private val s: Session, private val q: QpSession) : QpScope {
    override val planning get() = false
    override val index get() = q.index
    override fun param(name: String, default: String) = s.parameter(name) ?: default
    override suspend fun server(block: suspend QpScope.() -> Unit) {
        if (s.role == Role.SERVER) block()
    }
    override suspend fun client(block: suspend QpScope.() -> Unit) {
        if (s.role == Role.CLIENT) block()
    }
    override suspend fun runFor(duration: Duration, block: suspend () -> Unit) = loopFor(duration, block)
    override fun buffer(i: Int): MemorySegment = q.buffer(i)

    private suspend fun run(kind: OpKind, size: Int, buffer: Int, remoteBuffer: Int, remoteOffset: Long = 0, imm: Int = 0, a: Long = 0, b: Long = 0) =
        q.awaitSeq(q.start(kind, size, buffer, remoteBuffer, remoteOffset, imm, a, b, awaitable = false))

    private suspend fun post(kind: OpKind, size: Int, buffer: Int, remoteBuffer: Int, remoteOffset: Long = 0, imm: Int = 0, a: Long = 0, b: Long = 0) {
        q.start(kind, size, buffer, remoteBuffer, remoteOffset, imm, a, b, awaitable = true)
    }

    override suspend fun send(size: Int, buffer: Int) = run(OpKind.SEND, size, buffer, buffer)
    override suspend fun send(payload: ByteArray, buffer: Int) {
        val target = q.buffer(buffer)
        if (payload.size > target.byteSize()) throw ScenarioException("send(payload) of ${payload.size} bytes is larger than bufferSize ${target.byteSize()}")
        MemorySegment.copy(payload, 0, target, ValueLayout.JAVA_BYTE, 0, payload.size)
        run(OpKind.SEND, payload.size, buffer, buffer)
    }
    override suspend fun sendWithImm(imm: Int, size: Int, buffer: Int) = run(OpKind.SEND_WITH_IMM, size, buffer, buffer, imm = imm)
    override suspend fun receive(): Message = q.receive()
    override suspend fun write(size: Int, buffer: Int, remoteBuffer: Int) = run(OpKind.WRITE, size, buffer, remoteBuffer)
    override suspend fun writeWithImm(imm: Int, size: Int, buffer: Int, remoteBuffer: Int) = run(OpKind.WRITE_WITH_IMM, size, buffer, remoteBuffer, imm = imm)
    override suspend fun read(size: Int, buffer: Int, remoteBuffer: Int) = run(OpKind.READ, size, buffer, remoteBuffer)
    override suspend fun compareAndSwap(compare: Long, swap: Long, remoteOffset: Long, remoteBuffer: Int, buffer: Int): Long {
        run(OpKind.COMPARE_AND_SWAP, 8, buffer, remoteBuffer, remoteOffset, a = compare, b = swap)
        return q.atomicResult(buffer)
    }
    override suspend fun fetchAndAdd(add: Long, remoteOffset: Long, remoteBuffer: Int, buffer: Int): Long {
        run(OpKind.FETCH_AND_ADD, 8, buffer, remoteBuffer, remoteOffset, a = add)
        return q.atomicResult(buffer)
    }
    override suspend fun postSend(size: Int, buffer: Int) = post(OpKind.SEND, size, buffer, buffer)
    override suspend fun postSendWithImm(imm: Int, size: Int, buffer: Int) = post(OpKind.SEND_WITH_IMM, size, buffer, buffer, imm = imm)
    override suspend fun postWrite(size: Int, buffer: Int, remoteBuffer: Int) = post(OpKind.WRITE, size, buffer, remoteBuffer)
    override suspend fun postWriteWithImm(imm: Int, size: Int, buffer: Int, remoteBuffer: Int) = post(OpKind.WRITE_WITH_IMM, size, buffer, remoteBuffer, imm = imm)
    override suspend fun postRead(size: Int, buffer: Int, remoteBuffer: Int) = post(OpKind.READ, size, buffer, remoteBuffer)
    override suspend fun postCompareAndSwap(compare: Long, swap: Long, remoteOffset: Long, remoteBuffer: Int, buffer: Int) =
        post(OpKind.COMPARE_AND_SWAP, 8, buffer, remoteBuffer, remoteOffset, a = compare, b = swap)
    override suspend fun postFetchAndAdd(add: Long, remoteOffset: Long, remoteBuffer: Int, buffer: Int) =
        post(OpKind.FETCH_AND_ADD, 8, buffer, remoteBuffer, remoteOffset, a = add)
    override suspend fun awaitCompletion() = q.awaitCompletion()
    override suspend fun awaitCompletions(n: Int) = repeat(n) { q.awaitCompletion() }
    override suspend fun awaitAll() = q.awaitAll()
    override val outstanding get() = q.outstanding

    override suspend fun <T> measure(name: String, block: suspend () -> T): T {
        val t0 = System.nanoTime()
        val result = block()
        q.counters.recordSection(name, System.nanoTime() - t0)
        return result
    }
}

internal suspend fun loopFor(duration: Duration, block: suspend () -> Unit) {
    val end = TimeSource.Monotonic.markNow() + duration
    while (end.hasNotPassedNow()) {
        currentCoroutineContext().ensureActive()
        block()
    }
}
