package dev.rdmarun.dsl

import kotlinx.serialization.EncodeDefault
import kotlinx.serialization.ExperimentalSerializationApi
import kotlinx.serialization.SerialName
import kotlinx.serialization.Serializable

/** A peer's memory region as the handshake carries it: address, rkey, length. */
@Serializable
internal data class BufferInfo(val addr: Long, val rkey: Int, val length: Long)

/**
 * One QP's half of the exchange: what the peer needs for INIT→RTR (qpn, psn, lid, gid, mtu) and
 * for addressing this side's memory: the data region (its access flags are this side's
 * remoteAccess), and the credit word the peer writes its re-posted receive count to.
 */
@Serializable
internal data class QpInfo(
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
internal sealed class Frame

/**
 * Step 1 of the handshake, the first frame each side sends: the protocol [version], the [role], a
 * fresh [nonce] and what kind of [secret] this side uses. Nothing about the scenario (not even its
 * fingerprint, which a stranger could echo back), nor anything an attacker could use (addresses,
 * rkeys, QPNs, PSNs): those wait for step 3, the [Hello].
 */
@Serializable
// Named "hello" on the wire, as the first frame of every version was: a peer of an older version
// judges its version first and says "remote speaks control protocol version 3".
@SerialName("hello")
internal data class Intro(
    val version: Int,
    val role: Role,
    /** 32 random bytes as 64 hex digits. */
    val nonce: String,
    val secret: SecretKind,
) : Frame()

/**
 * Step 2: what proves, without showing them, that the sender knows the secret and runs the same
 * scenario: [secret] is an HMAC of the transcript keyed by the secret ([Handshake.secretProof]),
 * [sections] one HMAC per part of the plan (settings, parameters, script) keyed by the secret and
 * that part's digest ([Handshake.sectionProofs]), so a mismatch names the part that differs. All
 * are bound to both nonces and the sender's role: an echoed, reflected or replayed proof fails.
 * The client sends its proof first; the server answers with its own only once the client's held.
 */
@Serializable
@SerialName("proof")
internal data class Proof(val secret: String, val sections: Map<String, String>) : Frame()

/**
 * Sent by both sides, after both proved the secret, when their plans differ: the plan's lines
 * ([ScenarioPlan.canonicalLines]), so that each names the first difference ("--set count is 100
 * here and 99 on the client") before both end. Never sent without a secret, nor to a peer that
 * did not prove it.
 */
@Serializable
@SerialName("plan")
internal data class PlanLines(val lines: List<String>) : Frame()

/**
 * Step 3 of the handshake, sent only to a peer that passed steps 1 and 2 ([Intro], [Proof]):
 * QP endpoints, buffers, rkeys. Both sides compare the two with [Handshake.mismatch] and check
 * every field of the remote's with [Handshake.validate] before using any of it. soft0's fabric
 * key is not in it: each side derives it ([Handshake.fabricKey]).
 */
@Serializable
@SerialName("endpoints")
internal data class Hello(
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
internal data object Ready : Frame()

@Serializable
@SerialName("barrier")
internal data class Barrier(val seq: Int) : Frame()

/**
 * The end of warm-up round [round] of the [loop]-th `repeat { }` (or `runFor`) on QP [qp] (null:
 * the scenario's block): [more] says whether the sender wants another round. Both sides run
 * another when either wants one, so both run the same number. [sent] is the sender's count of
 * messages sent so far on that QP (on each QP, for the scenario's block): the receiver waits for
 * them all, so the warm-up's messages are all in before the measurement starts.
 */
@Serializable
@SerialName("round")
internal data class Round(val qp: Int?, val loop: Int, val round: Int, val more: Boolean, val sent: List<Long> = emptyList()) : Frame()

/**
 * Phase 1: this side's scenario ended and its work completed, after posting [messagesSent]
 * messages (sends and writeWithImm, which each take a receive at the peer) on each QP; phase 2:
 * it stopped returning credits. The counts let the peer wait for exactly those arrivals, and no
 * longer, before it counts what arrived. [latency]: this side measured a `measure` or
 * `measureRoundTrip` section, which makes the scenario a latency test on both sides
 * ([ScenarioResult.latencyTest]).
 */
@Serializable
@SerialName("done")
internal data class Done(val phase: Int, val messagesSent: List<Long> = emptyList(), val latency: Boolean = false) : Frame() {
    /** The same phase (the counts aside). */
    fun isPhase(p: Int) = phase == p
}

/**
 * Liveness and progress while the scenario runs: a silent peer is noticed within the timeout,
 * and one that is alive but stuck is told apart from one that makes progress.
 */
@Serializable
@SerialName("heartbeat")
internal data class Heartbeat(
    /** Grows whenever the sender posts, completes or receives anything. */
    val progress: Long = 0,
    /** What the sender waits for now ("receive() on QP 0"), or null. */
    val waiting: String? = null,
    /** Messages waiting for a receive() on each of the sender's QPs. */
    val messagesWaiting: List<Int> = emptyList(),
    /** QPs whose inbox is full (the sender withholds credits for them). */
    val inboxFull: List<Int> = emptyList(),
    /**
     * Every coroutine of the sender's scenario waits in receive() or for a credit to send, nothing
     * it posted is still in flight and no message waits for its receive()s: only the peer can end
     * the wait. Sent only when
     * true, so the heartbeats of a running scenario read as before.
     */
    @OptIn(ExperimentalSerializationApi::class)
    @EncodeDefault(EncodeDefault.Mode.NEVER)
    val stalled: Boolean = false,
) : Frame()

/** The sender failed (or rejected the handshake) for this reason; it closes the connection next. */
@Serializable
@SerialName("failure")
internal data class Failure(val message: String) : Frame()

/**
 * A rank's first frame at the rendezvous, sent to rank 0 once both passed steps 1 and 2 of the
 * handshake ([Intro], [Proof]): who it is, and the TCP port it listens on for each higher rank
 * ([ports]`[i]` for rank `rank + 1 + i`), each bound before it is published. Its host is the
 * address rank 0 sees the connection come from, never a name the rank gives.
 */
@Serializable
@SerialName("rank")
internal data class RankHello(val version: Int, val rank: Int, val ranks: Int, val pid: Long, val ports: List<Int>) : Frame()

/**
 * Rank 0's answer to each rank's [RankHello] once every rank said hello: every rank's host and
 * pid (for sentences and to connect), and [ports]`[i]`, for each lower rank i, the port it
 * listens on for the receiver.
 */
@Serializable
@SerialName("ranks")
internal data class RankTable(val hosts: List<String>, val pids: List<Long>, val ports: List<Int>) : Frame()

/** A barrier across ranks, through rank 0: each rank sends it when it arrives, rank 0 when all did. */
@Serializable
@SerialName("rank-barrier")
internal data class RankBarrier(val seq: Int) : Frame()

/** A rank's pair results, sent to rank 0 before the run's last barrier ([RankTeam.gather]), checked there before use. */
@Serializable
@SerialName("rank-results")
internal data class RankResults(val results: List<ScenarioResult>) : Frame()
