package dev.rdmarun.dsl

import dev.rdmarun.runtime.Access
import java.util.EnumSet

/**
 * What `connect(peer)` creates on this side, from the validated settings, before any device is
 * touched: what `rdma-run --check` prints ([describe]), and what the peers compare ([fingerprint]).
 */
public data class ScenarioPlan(
    val settings: ScenarioSettings,
    /** The peer given to `connect`. */
    val peer: Peer,
    val parameters: Map<String, String> = emptyMap(),
    /** SHA-256 (hex) of [RdmaOptions.scenarioSource], or null. */
    val sourceDigest: String? = null,
    /** False under `--check` without `--listen`/`--peer`: [peer] is a stand-in. */
    val peerGiven: Boolean = true,
) {
    val role: Role get() = peer.role

    /** The flags of each QP's data region: LOCAL_WRITE (READ data and atomic results land there) plus what remoteAccess grants. */
    val dataAccess: Set<Access>
        get() = EnumSet.of(Access.LOCAL_WRITE).apply { settings.remoteAccess.forEach { add(it.access) } }

    /** The QP's remote access: the data region's grant plus REMOTE_WRITE for the credit words. */
    val qpAccess: Set<Access>
        get() = EnumSet.of(Access.REMOTE_WRITE).apply { settings.remoteAccess.forEach { add(it.access) } }

    /** Same settings, parameters and script give the same fingerprint on both peers; see [Fingerprint]. */
    val fingerprint: String by lazy { Fingerprint.of(this) }

    /** Lines both peers compare (and show) when fingerprints differ. */
    public fun canonicalLines(): List<String> = Fingerprint.canonicalLines(this)

    /** What `--check` prints: the QPs, CQs and memory regions `connect` would create, with their sizes and access flags. */
    public fun describe(): String = buildString {
        val s = settings
        val engine = s.engineConfig()
        appendLine("scenario plan${if (peerGiven) " of the ${role.label}" else ""} (fingerprint ${fingerprint.take(16)})")
        appendLine("  device: ${s.device ?: "(first)"} port ${s.port} GID index ${s.gidIndex ?: "(auto RoCE v2)"}, " +
            "MTU ${s.mtu ?: "auto"}, completion ${s.completionMode.name.lowercase()}, timeout ${s.timeout}")
        appendLine("  QPs: ${s.qps} RC, send depth ${s.sendDepth} (+1 for credit updates), receive depth ${s.recvDepth}, " +
            "signal every ${s.signalEvery}, inline up to ${s.inlineThreshold} B, rnr_retry ${s.rnrRetry}, retry ${s.retryCount}/${s.retryTimeout}")
        val cqs = if (s.cqMode == CqMode.SHARED) "1 shared CQ of ${engine.completionQueueEntries().toLong() * s.qps} entries"
            else "${s.qps} CQs (one per QP) of ${engine.completionQueueEntries()} entries"
        appendLine("  CQs: $cqs")
        appendLine("  per QP: data region ${s.bufferCount} x ${s.bufferSize} B = ${s.dataBytes} B ${flags(dataAccess)}; " +
            "receive slots ${s.recvDepth} x ${s.bufferSize} B (+8 B credit source word, ${s.sendDepth} x 8 B atomic result words) = ${engine.receiveRegionBytes()} B LOCAL_WRITE; " +
            "inbox up to ${s.inboxDepth} messages")
        appendLine("  credit words: ${s.qps} x 8 B LOCAL_WRITE+REMOTE_WRITE (the peer reports its re-posted receives there)")
        appendLine("  QP access: ${flags(qpAccess)}; the peer may ${grants()}")
        if (parameters.isNotEmpty()) appendLine("  parameters: " + parameters.toSortedMap().entries.joinToString { "${it.key}=${it.value}" })
        append("  peer: ${if (peerGiven) peer.toString() else "(none given: checked as the server; give --peer HOST to check the client's side)"}")
    }

    private fun grants(): String =
        if (settings.remoteAccess.isEmpty()) "not touch the data buffers (remoteAccess not declared)"
        else RemoteAccess.entries.filter { it in settings.remoteAccess }.joinToString(", ") {
            when (it) {
                RemoteAccess.WRITE -> "write into"
                RemoteAccess.READ -> "read"
                RemoteAccess.ATOMIC -> "run atomics on"
            }
        } + " the data buffers"

    private companion object {
        fun flags(s: Set<Access>) = Access.entries.filter { it in s }.joinToString("+")
    }
}
