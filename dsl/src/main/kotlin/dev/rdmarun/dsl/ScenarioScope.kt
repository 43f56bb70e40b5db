package dev.rdmarun.dsl

import kotlin.time.Duration

/**
 * The block of `rdma { }`: settings first, then `connect(peer)`, then operations. Operations
 * here act on every QP (each posted on all QPs, then awaited QP by QP); `qp(i) { }` and
 * `forEachQp { }` address QPs one by one.
 */
@RdmaDsl
public abstract class ScenarioScope internal constructor() : CommonScope {
    // ---- settings (before connect; after it they are an error) ----
    public fun device(name: String): Unit = setting("device(\"$name\")") { it.copy(device = name) }
    public fun port(port: Int): Unit = setting("port($port)") { it.copy(port = port) }
    public fun gidIndex(index: Int): Unit = setting("gidIndex($index)") { it.copy(gidIndex = index) }
    public fun qps(n: Int): Unit = setting("qps($n)") { it.copy(qps = n) }
    public fun sharedCq(): Unit = setting("sharedCq()") { it.copy(cqMode = CqMode.SHARED) }
    public fun perQpCq(): Unit = setting("perQpCq()") { it.copy(cqMode = CqMode.PER_QP) }
    public fun bufferSize(bytes: Int): Unit = setting("bufferSize($bytes)", sizeGiven = true) { it.copy(bufferSize = bytes) }
    public fun bufferCount(n: Int): Unit = setting("bufferCount($n)") { it.copy(bufferCount = n) }
    public fun sendDepth(n: Int): Unit = setting("sendDepth($n)") { it.copy(sendDepth = n) }
    public fun recvDepth(n: Int): Unit = setting("recvDepth($n)") { it.copy(recvDepth = n) }

    /** Messages per QP held for a later receive() beyond the posted receives (default 1024; 0: only the receive slots). */
    public fun inboxDepth(n: Int): Unit = setting("inboxDepth($n)") { it.copy(inboxDepth = n) }
    public fun mtu(bytes: Int): Unit = setting("mtu($bytes)") { it.copy(mtu = bytes) }
    public fun inlineThreshold(bytes: Int): Unit = setting("inlineThreshold($bytes)") { it.copy(inlineThreshold = bytes) }

    /** Signals one work request in [n] (selective signaling, as perftest's cq_mod). */
    public fun signalEvery(n: Int): Unit = setting("signalEvery($n)") { it.copy(signalEvery = n) }
    public fun rnrRetry(n: Int): Unit = setting("rnrRetry($n)") { it.copy(rnrRetry = n) }

    /** ACK timeout exponent (4.096 us * 2^timeout) and transport retry count. */
    public fun retry(count: Int, timeout: Int = 14): Unit =
        setting("retry($count, $timeout)") { it.copy(retryCount = count, retryTimeout = timeout) }
    public fun completionMode(mode: CompletionMode): Unit = setting("completionMode($mode)") { it.copy(completionMode = mode) }

    /**
     * What the peer may do to this side's data buffers (default: nothing): the buffers are
     * registered with exactly these flags, and the peer's write/read/atomics fail at its call
     * without them. Declare it on the side whose buffers are the target (`if (isServer)`), or on
     * both.
     */
    public fun remoteAccess(vararg access: RemoteAccess): Unit =
        setting("remoteAccess(${access.joinToString()})") { it.copy(remoteAccess = it.remoteAccess + access) }

    /**
     * Bound on waits: connecting, the handshake, and any wait during which the peer makes no
     * progress. A wait that outlives it throws an [RdmaTimeoutException], which ends the scenario.
     */
    public fun timeout(duration: Duration): Unit = setting("timeout($duration)") { it.copy(timeout = duration) }

    /**
     * What an operation does when it would spoil a buffer posted work still uses (see [QpScope]'s
     * buffer rule): [BufferReuse.WAIT] (default) waits for that work, [BufferReuse.FAIL] fails at the call.
     */
    public fun bufferReuse(reuse: BufferReuse): Unit = setting("bufferReuse($reuse)") { it.copy(bufferReuse = reuse) }

    /** The QP count set so far. */
    public abstract val qpCount: Int

    /** Runs [block] on the listening side only. */
    public suspend fun server(block: suspend ScenarioScope.() -> Unit) {
        if (isServer) block()
    }

    /** Runs [block] on the connecting side only. */
    public suspend fun client(block: suspend ScenarioScope.() -> Unit) {
        if (isClient) block()
    }

    /**
     * The peer the launcher (`--listen`, `--peer`, `--loopback`) or the application
     * ([RdmaOptions.peer]) gave, for `connect(peer)`. Reading it when none was given is a
     * [ScenarioException].
     */
    public abstract val peer: Peer

    /**
     * Validates the settings (before any device is touched), then opens the device, creates the
     * verbs objects and connects every QP to the peer's over the control connection [peer].
     */
    public abstract suspend fun connect(peer: Peer)

    /**
     * Waits until the peer reaches its matching barrier (over the control connection); first this
     * side's posted work completes. Its deadline is the scenario's: an [RdmaTimeoutException] once
     * the peer has made no progress for `timeout`. Not one to cancel alone (`withTimeout` around
     * it): the peer's barrier frame would then meet this side's next barrier, out of step.
     */
    public abstract suspend fun barrier()

    /** Runs [block] on QP [index]. */
    public abstract suspend fun <T> qp(index: Int, block: suspend QpScope.() -> T): T

    /** Runs [block] once per QP, each in its own coroutine, and waits for all. */
    public abstract suspend fun forEachQp(block: suspend QpScope.() -> Unit)

    // ---- operations on every QP (each follows [QpScope]'s buffer rule on its QP) ----
    /** [QpScope.send] on every QP (the buffer rule: waits for a read or atomic still filling [buffer]). */
    public suspend fun send(size: Int = -1, buffer: Int = 0): Unit = everyQp("send()").forEach { it.send(size, buffer) }

    /** [QpScope.sendWithImm] on every QP (the buffer rule: waits for a read or atomic still filling [buffer]). */
    public suspend fun sendWithImm(imm: Int, size: Int = -1, buffer: Int = 0): Unit =
        everyQp("sendWithImm()").forEach { it.sendWithImm(imm, size, buffer) }

    /** One message from each QP, in QP order ([copyPayload] as in [QpScope.receive]). */
    public suspend fun receive(copyPayload: Boolean = true): List<Message> = everyQp("receive()").map { it.receive(copyPayload) }

    /** [QpScope.write] on every QP (the buffer rule: waits for a read or atomic still filling [buffer]). */
    public suspend fun write(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = 0): Unit =
        everyQp("write()").forEach { it.write(size, buffer, it.index, remoteBuffer, 0) }

    /** [QpScope.writeWithImm] on every QP (the buffer rule: waits for a read or atomic still filling [buffer]). */
    public suspend fun writeWithImm(imm: Int, size: Int = -1, buffer: Int = 0, remoteBuffer: Int = 0): Unit =
        everyQp("writeWithImm()").forEach { it.writeWithImm(imm, size, buffer, it.index, remoteBuffer, 0) }

    /** [QpScope.read] on every QP (the buffer rule: waits for a send, write or atomic still using [buffer]). */
    public suspend fun read(size: Int = -1, buffer: Int = 0, remoteBuffer: Int = 0): Unit =
        everyQp("read()").forEach { it.read(size, buffer, it.index, remoteBuffer, 0) }

    /** The oldest unawaited completion of each QP, in QP order. */
    public suspend fun awaitCompletion(): List<Completion> = everyQp("awaitCompletion()").map { it.awaitCompletion() }
    /** Waits for every posted work request of every QP. */
    public suspend fun awaitAll(): Unit = everyQp("awaitAll()").forEach { it.awaitAll() }

    /**
     * Not the scenario's: a section times one QP's work, so [QpScope.measure] is called in
     * `qp(i) { }` or `forEachQp { }`. Declared here only so that the compiler says so where a
     * script calls it in `rdma { }`, instead of "unresolved reference".
     */
    @Deprecated(SECTION_IS_A_QPS, level = DeprecationLevel.ERROR)
    public suspend fun <T> measure(name: String, block: suspend () -> T): T = throw ScriptCallException(SECTION_IS_A_QPS)

    /** Not the scenario's, as [measure] is not: [QpScope.measureRoundTrip] in `qp(i) { }` or `forEachQp { }`. */
    @Deprecated(SECTION_IS_A_QPS, level = DeprecationLevel.ERROR)
    public suspend fun <T> measureRoundTrip(name: String, block: suspend () -> T): T = throw ScriptCallException(SECTION_IS_A_QPS)

    /** The QPs, in index order, for [what] (an operation on every QP); before connect, a [ScenarioException] naming [what]. */
    internal abstract fun everyQp(what: String): List<QpScope>

    /**
     * Applies one setting, named [call] in the sentence that refuses it after connect(peer);
     * [sizeGiven]: the script chose the buffer size (then the `size` parameter leaves it alone).
     */
    internal abstract fun setting(call: String, sizeGiven: Boolean = false, change: (ScenarioSettings) -> ScenarioSettings)

    /** Ends the scenario with [cause]: parked operations of every QP fail with it. */
    internal abstract fun abort(cause: Throwable)
}

private const val SECTION_IS_A_QPS = "a section times one QP's work: call measure and measureRoundTrip in qp(i) { } or forEachQp { }"
