package dev.rdmarun.dsl

import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.IdleMode
import dev.rdmarun.runtime.engine.EngineConfig
import kotlin.time.Duration
import kotlin.time.Duration.Companion.seconds
import kotlinx.serialization.Serializable

/** Where completions of the QPs go: one CQ for all (the seeds' layout) or one per QP. */
@Serializable
public enum class CqMode { SHARED, PER_QP }

/** How the dispatcher thread waits for completions (see [IdleMode]). */
@Serializable
public enum class CompletionMode(public val idleMode: IdleMode) {
    /**
     * Spin on the CQs: lowest latency, one core at 100% while this side's block runs. While the
     * side waits for its peer to connect, and once the block has returned and it only waits for
     * its peer to end, it backs off (spin, yield, park up to 1 ms) instead of taking a core its
     * peer or the device may need.
     */
    BUSY(IdleMode.BUSY_SPIN),

    /** Spin, then yield, then park with growing back-off. */
    BACKOFF(IdleMode.BACKOFF),

    /** Sleep on the completion channel until the next completion event. */
    EVENT(IdleMode.EVENT),
}

/**
 * What an operation does when it would change a buffer that posted work still reads, or read one
 * posted work still fills (a `read(buffer = 0)` while a `send(buffer = 0)` is in flight, a
 * `send(buffer = 0)` while a `read(buffer = 0)` is): `bufferReuse(...)` chooses.
 */
@Serializable
public enum class BufferReuse {
    /** The operation waits until that work has completed, then posts (the default: the data is what the script wrote). */
    WAIT,

    /** The operation fails at the call with a sentence naming the work in flight (to find such places in a script). */
    FAIL,
}

/** What the peer may do to this side's data buffers, as `remoteAccess(...)` declares it (default: nothing). */
@Serializable
public enum class RemoteAccess(public val access: Access) {
    /** The peer may write() and writeWithImm() into them. */
    WRITE(Access.REMOTE_WRITE),

    /** The peer may read() them. */
    READ(Access.REMOTE_READ),

    /** The peer may run compareAndSwap() and fetchAndAdd() on them. */
    ATOMIC(Access.REMOTE_ATOMIC),
    ;

    public companion object {
        /** The declaration that grants [access], for sentences. */
        public fun granting(access: Access): RemoteAccess = entries.first { it.access == access }
    }
}

/**
 * Everything a scenario can set before `connect(peer)`, with safe defaults: one RC QP on port 1 of
 * the first device, the automatic RoCE v2 GID, a shared CQ, one 4 KiB buffer per QP, 64-deep
 * queues, an inbox of 1024 messages, every work request signaled, rnr_retry 7 (retry forever),
 * busy polling, and no remote access to this side's buffers.
 *
 * [device], [port], [gidIndex], [completionMode], [timeout] and [bufferReuse] are local choices (peers may use
 * different devices); [remoteAccess] is this side's grant, which the peer learns in the handshake;
 * everything else is part of the scenario and must match the peer's.
 */
@Serializable
public data class ScenarioSettings(
    /** RDMA device name; null: the first device. */
    val device: String? = null,
    val port: Int = 1,
    /** Local GID index; null: the first RoCE v2 IPv4 GID (Context.defaultGid). */
    val gidIndex: Int? = null,
    val qps: Int = 1,
    val cqMode: CqMode = CqMode.SHARED,
    /** Bytes per buffer; also the largest message a send may carry (it must fit a receive slot). */
    val bufferSize: Int = 4096,
    /** Buffers per QP in its data region (operations pick one with `buffer = i`). */
    val bufferCount: Int = 1,
    /** Work requests this side keeps in flight per QP (plus one slot the DSL reserves for credit updates). */
    val sendDepth: Int = 64,
    /** Receives posted per QP; the peer may have this many messages outstanding on a QP. */
    val recvDepth: Int = 64,
    /** Messages per QP held for a later receive() (copied out of their receive slot, which is posted again). */
    val inboxDepth: Int = 1024,
    /** Path MTU cap in bytes (256..4096); null: the smaller of both ports' active MTU. */
    val mtu: Int? = null,
    /** Sends and writes up to this many bytes are posted inline (0: never). */
    val inlineThreshold: Int = 0,
    /** One work request in this many is signaled (asks for a completion); awaits signal the rest as needed. */
    val signalEvery: Int = 1,
    val rnrRetry: Int = 7,
    val retryCount: Int = 7,
    /** Local ACK timeout exponent: 4.096 us * 2^retryTimeout. */
    val retryTimeout: Int = 14,
    val completionMode: CompletionMode = CompletionMode.BUSY,
    /** What the peer may do to this side's data buffers; registered exactly so. */
    val remoteAccess: Set<RemoteAccess> = emptySet(),
    /**
     * Bound on every wait: accepting (a server keeps accepting, closing stray connections, until a
     * client passes the handshake's first steps within it) or connecting (retried within it); the
     * whole handshake, under one deadline of this length from the connection on (not per read: a
     * peer that drips bytes is cut off); each control frame while the scenario runs; and any wait
     * during which the peer makes no progress.
     */
    val timeout: Duration = 30.seconds,
    /** An operation on a buffer that posted work still uses waits for it, or fails at the call. */
    val bufferReuse: BufferReuse = BufferReuse.WAIT,
) {
    /** Bytes of one QP's data region. */
    val dataBytes: Long get() = bufferSize.toLong() * bufferCount

    /** The engine's shape for each QP. */
    public fun engineConfig(): EngineConfig = EngineConfig(bufferSize, bufferCount, sendDepth, recvDepth, inboxDepth, signalEvery, inlineThreshold)

    /** The settings both peers must agree on: what goes into the scenario fingerprint. */
    internal fun shared(): Map<String, String> = linkedMapOf(
        "qps" to qps.toString(),
        "bufferSize" to bufferSize.toString(),
        "bufferCount" to bufferCount.toString(),
        "sendDepth" to sendDepth.toString(),
        "recvDepth" to recvDepth.toString(),
        "inboxDepth" to inboxDepth.toString(),
        "mtu" to (mtu?.toString() ?: "auto"),
        "inlineThreshold" to inlineThreshold.toString(),
        "signalEvery" to signalEvery.toString(),
        "cqMode" to cqMode.name,
        "rnrRetry" to rnrRetry.toString(),
        "retryCount" to retryCount.toString(),
        "retryTimeout" to retryTimeout.toString(),
    )
}

/**
 * Local choices given outside the scenario (a launcher's -d/-g/-i options): they win over what
 * the scenario says, so the same script runs on hosts with different devices.
 */
public data class SettingsOverrides(
    val device: String? = null,
    val gidIndex: Int? = null,
    val port: Int? = null,
    val completionMode: CompletionMode? = null,
    val timeout: Duration? = null,
) {
    public fun applyTo(s: ScenarioSettings): ScenarioSettings = s.copy(
        device = device ?: s.device,
        gidIndex = gidIndex ?: s.gidIndex,
        port = port ?: s.port,
        completionMode = completionMode ?: s.completionMode,
        timeout = timeout ?: s.timeout,
    )
}
