package dev.rdmarun.dsl

import java.lang.foreign.Arena
import java.lang.foreign.MemorySegment
import kotlin.time.Duration

/**
 * The plan pass: settings change the recorded [ScenarioSettings], operations check their
 * arguments against them and count themselves, then return placeholders. Both role branches
 * run; `runFor` and `forEachQp` bodies run once. The result is a [ScenarioPlan].
 */
internal class PlanRecorder(private val parameters: Map<String, String>, val givenPeer: Peer?) {
    var settings = ScenarioSettings()
        private set
    var connected = false
        private set
    private var peer: Peer? = null
    var side = Side.BOTH
        private set
    private var barriers = 0
    private var scratch: MemorySegment? = null

    private data class Key(val kind: OpKind, val side: Side, val qp: Int, val size: Int)

    fun param(name: String, default: String) = parameters[name] ?: default

    fun setting(call: String, change: (ScenarioSettings) -> ScenarioSettings) {
        if (connected) throw ScenarioException("$call after connect(): settings must come before connect(peer)")
        if (side != Side.BOTH) {
            throw ScenarioException("$call inside ${side.name.lowercase()} { }: settings apply to both sides, set them before the branches")
        }
        settings = change(settings)
    }

    fun connect(peer: Peer) {
        if (connected) throw ScenarioException("connect() is called twice: a scenario has one control connection")
        if (side != Side.BOTH) throw ScenarioException("connect() inside ${side.name.lowercase()} { }: both sides connect, call it before the branches")
        Validation.checkSettings(settings)
        this.peer = peer
        connected = true
    }

    fun requireConnected(what: String) {
        if (!connected) throw ScenarioException("$what before connect(peer): operations need the peer's QPs, connect first")
    }

    fun barrier() {
        requireConnected("barrier()")
        if (side != Side.BOTH) {
            throw ScenarioException("barrier() inside ${side.name.lowercase()} { }: both sides must reach every barrier, call it outside the branches")
        }
        barriers++
    }

    fun checkQp(index: Int) {
        requireConnected("qp($index) { }")
        if (index !in 0 until settings.qps) throw ScenarioException("qp($index) is outside 0..${settings.qps - 1} (qps(${settings.qps}))")
    }

    /** One distinct operation (all arguments) and how often it ran. */
    private data class Call(val kind: OpKind, val side: Side, val qp: Int, val size: Int, val buffer: Int,
                            val remoteBuffer: Int, val remoteOffset: Long) {
        var count = 0L
    }

    private val calls = LinkedHashMap<Call, Call>()

    // Loops run the same few operations millions of times and the plan pass runs before every
    // scenario: a call matching a recent one (checked already) only bumps its count, no allocation.
    private val recent = arrayOfNulls<Call>(8)
    private var recentNext = 0

    /** Validates one operation's arguments against the settings and counts it. */
    fun op(kind: OpKind, qp: Int, size: Int, buffer: Int, remoteBuffer: Int, remoteOffset: Long = 0) {
        for (c in recent) {
            if (c != null && c.kind === kind && c.side === side && c.qp == qp && c.size == size && c.buffer == buffer &&
                c.remoteBuffer == remoteBuffer && c.remoteOffset == remoteOffset
            ) {
                c.count++
                return
            }
        }
        val key = Call(kind, side, qp, size, buffer, remoteBuffer, remoteOffset)
        val call = calls[key] ?: key.also {
            check(kind, size, buffer, remoteBuffer, remoteOffset)
            calls[it] = it
        }
        call.count++
        recent[recentNext] = call
        recentNext = (recentNext + 1) % recent.size
    }

    private fun check(kind: OpKind, size: Int, buffer: Int, remoteBuffer: Int, remoteOffset: Long) {
        requireConnected("${kind.label}()")
        val s = settings
        val bytes = effectiveSize(kind, size)
        if (bytes < 0) throw ScenarioException("${kind.label}(size = $size): a size cannot be negative")
        if (bytes > s.bufferSize) {
            throw ScenarioException("${kind.label}(size = $bytes) is larger than bufferSize ${s.bufferSize}: raise bufferSize(...)")
        }
        if (buffer !in 0 until s.bufferCount) throw ScenarioException("${kind.label}(buffer = $buffer) is outside 0..${s.bufferCount - 1} (bufferCount(${s.bufferCount}))")
        if (kind.peerAccess != null && remoteBuffer !in 0 until s.bufferCount) {
            throw ScenarioException("${kind.label}(remoteBuffer = $remoteBuffer) is outside 0..${s.bufferCount - 1} (bufferCount(${s.bufferCount}))")
        }
        if (kind.isAtomic) {
            if (remoteOffset % 8 != 0L) throw ScenarioException("${kind.label}(remoteOffset = $remoteOffset): atomics need an 8-byte aligned offset")
            if (remoteOffset < 0 || remoteOffset + 8 > s.bufferSize) {
                throw ScenarioException("${kind.label}(remoteOffset = $remoteOffset) does not leave 8 bytes inside the ${s.bufferSize}-byte buffer")
            }
        }
    }

    fun effectiveSize(kind: OpKind, size: Int): Int = when {
        kind.isAtomic -> 8
        kind == OpKind.RECEIVE -> 0
        size == -1 -> settings.bufferSize
        else -> size
    }

    suspend fun <T> branch(role: Role, block: suspend () -> T) {
        if (side != Side.BOTH) throw ScenarioException("${role.label} { } inside ${side.name.lowercase()} { }: role branches do not nest")
        side = Side.of(role)
        try {
            block()
        } finally {
            side = Side.BOTH
        }
    }

    fun scratch(i: Int): MemorySegment {
        if (i !in 0 until settings.bufferCount) throw ScenarioException("buffer($i) is outside 0..${settings.bufferCount - 1} (bufferCount(${settings.bufferCount}))")
        val seg = scratch ?: Arena.ofAuto().allocate(settings.dataBytes, 8).also { scratch = it }
        return seg.asSlice(i.toLong() * settings.bufferSize, settings.bufferSize.toLong())
    }

    fun finish(): ScenarioPlan {
        if (!connected) throw ScenarioException("the scenario never calls connect(peer)")
        val uses = LinkedHashMap<Key, Long>()
        for (c in calls.values) uses.merge(Key(c.kind, c.side, c.qp, effectiveSize(c.kind, c.size)), c.count, Long::plus)
        val plan = ScenarioPlan(
            settings = settings,
            ops = uses.map { (k, n) -> OpUse(k.kind, k.side, k.qp, k.size, n) },
            barriers = barriers,
            peer = peer,
            parameters = parameters.toSortedMap(),
        )
        Validation.checkPlan(plan)
        return plan
    }
}

internal class PlanningScenarioScope(private val rec: PlanRecorder) : ScenarioScope {
    override val planning get() = true
    override fun param(name: String, default: String) = rec.param(name, default)

    override fun device(name: String) = rec.setting("device(\"$name\")") { it.copy(device = name) }
    override fun port(port: Int) = rec.setting("port($port)") { it.copy(port = port) }
    override fun gidIndex(index: Int) = rec.setting("gidIndex($index)") { it.copy(gidIndex = index) }
    override fun qps(n: Int) = rec.setting("qps($n)") { it.copy(qps = n) }
    override fun sharedCq() = rec.setting("sharedCq()") { it.copy(cqMode = CqMode.SHARED) }
    override fun perQpCq() = rec.setting("perQpCq()") { it.copy(cqMode = CqMode.PER_QP) }
    override fun bufferSize(bytes: Int) = rec.setting("bufferSize($bytes)") { it.copy(bufferSize = bytes) }
    override fun bufferCount(n: Int) = rec.setting("bufferCount($n)") { it.copy(bufferCount = n) }
    override fun sendDepth(n: Int) = rec.setting("sendDepth($n)") { it.copy(sendDepth = n) }
    override fun recvDepth(n: Int) = rec.setting("recvDepth($n)") { it.copy(recvDepth = n) }
    override fun mtu(bytes: Int) = rec.setting("mtu($bytes)") { it.copy(mtu = bytes) }
    override fun inlineThreshold(bytes: Int) = rec.setting("inlineThreshold($bytes)") { it.copy(inlineThreshold = bytes) }
    override fun signalEvery(n: Int) = rec.setting("signalEvery($n)") { it.copy(signalEvery = n) }
    override fun rnrRetry(n: Int) = rec.setting("rnrRetry($n)") { it.copy(rnrRetry = n) }
    override fun retry(count: Int, timeout: Int) = rec.setting("retry($count, $timeout)") { it.copy(retryCount = count, retryTimeout = timeout) }
    override fun completionMode(mode: CompletionMode) = rec.setting("completionMode($mode)") { it.copy(completionMode = mode) }
    override fun remoteAccess(vararg access: RemoteAccess) =
        rec.setting("remoteAccess(${access.joinToString()})") { it.copy(remoteAccess = access.toSet()) }
    override fun timeout(duration: Duration) = rec.setting("timeout($duration)") { it.copy(timeout = duration) }
    override val qpCount get() = rec.settings.qps

    override val peer: Peer get() = rec.givenPeer ?: throw ScenarioException(NO_PEER)
    override suspend fun connect(peer: Peer) = rec.connect(peer)
    override suspend fun barrier() = rec.barrier()
    override suspend fun server(block: suspend ScenarioScope.() -> Unit) = rec.branch(Role.SERVER) { block() }
    override suspend fun client(block: suspend ScenarioScope.() -> Unit) = rec.branch(Role.CLIENT) { block() }
    override suspend fun runFor(duration: Duration, block: suspend () -> Unit) = block()

    override suspend fun <T> qp(index: Int, block: suspend QpScope.() -> T): T {
        rec.checkQp(index)
        return PlanningQpScope(rec, index, index).block()
    }

    override suspend fun forEachQp(block: suspend QpScope.() -> Unit) {
        rec.requireConnected("forEachQp { }")
        PlanningQpScope(rec, 0, OpUse.ALL_QPS).block()
    }

    private fun all(kind: OpKind, size: Int, buffer: Int, remoteBuffer: Int) = rec.op(kind, OpUse.ALL_QPS, size, buffer, remoteBuffer)

    override suspend fun send(size: Int, buffer: Int) = all(OpKind.SEND, size, buffer, buffer)
    override suspend fun sendWithImm(imm: Int, size: Int, buffer: Int) = all(OpKind.SEND_WITH_IMM, size, buffer, buffer)
    override suspend fun receive(): List<Message> {
        all(OpKind.RECEIVE, -1, 0, 0)
        return List(rec.settings.qps) { Message(it, 0, null, ByteArray(0)) }
    }
    override suspend fun write(size: Int, buffer: Int, remoteBuffer: Int) = all(OpKind.WRITE, size, buffer, remoteBuffer)
    override suspend fun writeWithImm(imm: Int, size: Int, buffer: Int, remoteBuffer: Int) = all(OpKind.WRITE_WITH_IMM, size, buffer, remoteBuffer)
    override suspend fun read(size: Int, buffer: Int, remoteBuffer: Int) = all(OpKind.READ, size, buffer, remoteBuffer)
    override suspend fun postSend(size: Int, buffer: Int) = all(OpKind.SEND, size, buffer, buffer)
    override suspend fun postWrite(size: Int, buffer: Int, remoteBuffer: Int) = all(OpKind.WRITE, size, buffer, remoteBuffer)
    override suspend fun postRead(size: Int, buffer: Int, remoteBuffer: Int) = all(OpKind.READ, size, buffer, remoteBuffer)
    override suspend fun awaitCompletion() = rec.requireConnected("awaitCompletion()")
    override suspend fun awaitAll() = rec.requireConnected("awaitAll()")
}

internal class PlanningQpScope(private val rec: PlanRecorder, override val index: Int, private val recordAs: Int) : QpScope {
    private val placeholder = Message(index, 0, null, ByteArray(0))
    override val planning get() = true
    override fun param(name: String, default: String) = rec.param(name, default)
    override suspend fun server(block: suspend QpScope.() -> Unit) = rec.branch(Role.SERVER) { block() }
    override suspend fun client(block: suspend QpScope.() -> Unit) = rec.branch(Role.CLIENT) { block() }
    override suspend fun runFor(duration: Duration, block: suspend () -> Unit) = block()
    override fun buffer(i: Int): MemorySegment = rec.scratch(i)

    private fun op(kind: OpKind, size: Int, buffer: Int, remoteBuffer: Int, remoteOffset: Long = 0) =
        rec.op(kind, recordAs, size, buffer, remoteBuffer, remoteOffset)

    override suspend fun send(size: Int, buffer: Int) = op(OpKind.SEND, size, buffer, buffer)
    override suspend fun send(payload: ByteArray, buffer: Int) = op(OpKind.SEND, payload.size, buffer, buffer)
    override suspend fun sendWithImm(imm: Int, size: Int, buffer: Int) = op(OpKind.SEND_WITH_IMM, size, buffer, buffer)
    override suspend fun receive(): Message {
        op(OpKind.RECEIVE, -1, 0, 0)
        return placeholder
    }
    override suspend fun write(size: Int, buffer: Int, remoteBuffer: Int) = op(OpKind.WRITE, size, buffer, remoteBuffer)
    override suspend fun writeWithImm(imm: Int, size: Int, buffer: Int, remoteBuffer: Int) = op(OpKind.WRITE_WITH_IMM, size, buffer, remoteBuffer)
    override suspend fun read(size: Int, buffer: Int, remoteBuffer: Int) = op(OpKind.READ, size, buffer, remoteBuffer)
    override suspend fun compareAndSwap(compare: Long, swap: Long, remoteOffset: Long, remoteBuffer: Int, buffer: Int): Long {
        op(OpKind.COMPARE_AND_SWAP, 8, buffer, remoteBuffer, remoteOffset)
        return 0
    }
    override suspend fun fetchAndAdd(add: Long, remoteOffset: Long, remoteBuffer: Int, buffer: Int): Long {
        op(OpKind.FETCH_AND_ADD, 8, buffer, remoteBuffer, remoteOffset)
        return 0
    }
    override suspend fun postSend(size: Int, buffer: Int) = op(OpKind.SEND, size, buffer, buffer)
    override suspend fun postSendWithImm(imm: Int, size: Int, buffer: Int) = op(OpKind.SEND_WITH_IMM, size, buffer, buffer)
    override suspend fun postWrite(size: Int, buffer: Int, remoteBuffer: Int) = op(OpKind.WRITE, size, buffer, remoteBuffer)
    override suspend fun postWriteWithImm(imm: Int, size: Int, buffer: Int, remoteBuffer: Int) = op(OpKind.WRITE_WITH_IMM, size, buffer, remoteBuffer)
    override suspend fun postRead(size: Int, buffer: Int, remoteBuffer: Int) = op(OpKind.READ, size, buffer, remoteBuffer)
    override suspend fun postCompareAndSwap(compare: Long, swap: Long, remoteOffset: Long, remoteBuffer: Int, buffer: Int) =
        op(OpKind.COMPARE_AND_SWAP, 8, buffer, remoteBuffer, remoteOffset)
    override suspend fun postFetchAndAdd(add: Long, remoteOffset: Long, remoteBuffer: Int, buffer: Int) =
        op(OpKind.FETCH_AND_ADD, 8, buffer, remoteBuffer, remoteOffset)
    override suspend fun awaitCompletion() = Unit
    override suspend fun awaitCompletions(n: Int) = Unit
    override suspend fun awaitAll() = Unit
    override val outstanding get() = 0
    override suspend fun <T> measure(name: String, block: suspend () -> T): T = block()
}
