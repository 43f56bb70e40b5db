package dev.rdmarun.dsl

import kotlinx.serialization.SerialName
import kotlinx.serialization.Serializable

/** A peer's memory region as the handshake carries it: address, rkey, length. */
@Serializable
data class BufferInfo(val addr: Long, val rkey: Int, val length: Long)

/**
 * One QP's half of the exchange: what the peer needs for INIT→RTR (qpn, psn, lid, gid, mtu) and
 * for addressing this side's memory: the data region (its access flags are this side's
 * remoteAccess), and the credit word the peer writes its re-posted receive count to.
 */
@Serializable
data class QpInfo(
    val qpn: Int,
    val psn: Int,
    val lid: Int,
    /** 32 hex digits. */
    val gid: String,
    /** Active MTU of the port in bytes. */
    val mtu: Int,
    val buffer: BufferInfo,
    val credit: BufferInfo,
)

/** Frames of the control connection: JSON objects named by "type". */
@Serializable
sealed class Frame

/**
 * The first frame each side sends. Both sides compare the two with [Handshake.mismatch], so a
 * mismatch fails on both peers with the same fact seen from each side.
 */
@Serializable
@SerialName("hello")
data class Hello(
    val version: Int,
    val role: Role,
    val qpCount: Int,
    /** Receives posted per QP: the peer's credit limit. */
    val recvDepth: Int,
    /** Incoming READ/atomic depth this side's QPs accept (the peer's max_rd_atomic must not exceed it). */
    val maxDestRdAtomic: Int,
    val fingerprint: String,
    val parameters: Map<String, String>,
    /** [ScenarioPlan.canonicalLines], to name the first difference when fingerprints differ. */
    val plan: List<String>,
    /** What this side's remoteAccess lets the peer do to its data buffers. */
    val access: Set<RemoteAccess> = emptySet(),
    val qps: List<QpInfo>,
) : Frame()

/** QPs are in RTS on the sending side. */
@Serializable
@SerialName("ready")
data object Ready : Frame()

@Serializable
@SerialName("barrier")
data class Barrier(val seq: Int) : Frame()

/**
 * Phase 1: this side's scenario ended and its work completed, after posting [messagesSent]
 * messages (sends and writeWithImm, which each take a receive at the peer) on each QP; phase 2:
 * it stopped returning credits. The counts let the peer wait for exactly those arrivals, and no
 * longer, before it counts what arrived.
 */
@Serializable
@SerialName("done")
data class Done(val phase: Int, val messagesSent: List<Long> = emptyList()) : Frame() {
    /** The same phase (the counts aside). */
    fun isPhase(p: Int) = phase == p
}

/**
 * Liveness and progress while the scenario runs: a silent peer is noticed within the timeout,
 * and one that is alive but stuck is told apart from one that makes progress.
 */
@Serializable
@SerialName("heartbeat")
data class Heartbeat(
    /** Grows whenever the sender posts, completes or receives anything. */
    val progress: Long = 0,
    /** What the sender waits for now ("receive() on QP 0"), or null. */
    val waiting: String? = null,
    /** Messages waiting for a receive() on each of the sender's QPs. */
    val messagesWaiting: List<Int> = emptyList(),
    /** QPs whose inbox is full (the sender withholds credits for them). */
    val inboxFull: List<Int> = emptyList(),
) : Frame()

/** The sender failed (or rejected the handshake) for this reason; it closes the connection next. */
@Serializable
@SerialName("failure")
data class Failure(val message: String) : Frame()

object Handshake {
    /** Version of the control protocol (frames and their fields). */
    const val VERSION = 2

    /**
     * The first way the remote's hello does not fit this side's, as one sentence seen from this
     * side ("remote has 2 QPs, this side 4"), or null when they fit.
     */
    fun mismatch(local: Hello, remote: Hello): String? {
        if (remote.version != local.version) {
            return "remote speaks control protocol version ${remote.version}, this side ${local.version}: use the same rdma-run version on both sides"
        }
        if (remote.role == local.role) {
            return "both sides are ${local.role.label}s: one side must listen and the other connect"
        }
        if (remote.qpCount != local.qpCount) {
            return "remote has ${remote.qpCount} QP${if (remote.qpCount == 1) "" else "s"}, this side ${local.qpCount}"
        }
        if (remote.qps.size != remote.qpCount) {
            return "the remote's hello lists ${remote.qps.size} QP endpoints for ${remote.qpCount} QPs: it is not a compatible rdma-run"
        }
        parameterMismatch(local.parameters, remote.parameters)?.let { return it }
        if (remote.fingerprint != local.fingerprint) {
            val mine = local.plan.toSet()
            val theirs = remote.plan.toSet()
            val remoteOnly = remote.plan.firstOrNull { it !in mine }
            val localOnly = local.plan.firstOrNull { it !in theirs }
            val diff = when {
                remoteOnly != null && localOnly != null -> ": remote has '$remoteOnly', this side '$localOnly'"
                remoteOnly != null -> ": remote has '$remoteOnly', this side does not"
                localOnly != null -> ": this side has '$localOnly', remote does not"
                else -> ""
            }
            return "remote runs a different scenario (plan ${remote.fingerprint.take(12)}, this side ${local.fingerprint.take(12)})$diff"
        }
        return null
    }

    private fun parameterMismatch(local: Map<String, String>, remote: Map<String, String>): String? {
        for (name in (local.keys + remote.keys).sorted()) {
            val l = local[name]
            val r = remote[name]
            when {
                l == r -> continue
                l == null -> return "parameter $name is set on the remote ($r) but not on this side"
                r == null -> return "parameter $name is set on this side ($l) but not on the remote"
                else -> return "parameter $name is $r on the remote, $l on this side"
            }
        }
        return null
    }
}
