package dev.rdmarun.dsl

import dev.rdmarun.runtime.Access
import kotlinx.serialization.Serializable

/**
 * The operations a scenario can issue, with what each needs from the two peers: whether it
 * consumes a receive at the peer (and so a credit), which access the peer's data buffer must
 * grant, and whether the HCA writes into this side's buffer (READ data, atomic results).
 */
@Serializable
enum class OpKind(
    val label: String,
    val consumesPeerReceive: Boolean,
    val peerAccess: Access?,
    val writesLocalBuffer: Boolean,
) {
    SEND("send", true, null, false),
    SEND_WITH_IMM("sendWithImm", true, null, false),
    RECEIVE("receive", false, null, false),
    WRITE("write", false, Access.REMOTE_WRITE, false),
    WRITE_WITH_IMM("writeWithImm", true, Access.REMOTE_WRITE, false),
    READ("read", false, Access.REMOTE_READ, true),
    COMPARE_AND_SWAP("compareAndSwap", false, Access.REMOTE_ATOMIC, true),
    FETCH_AND_ADD("fetchAndAdd", false, Access.REMOTE_ATOMIC, true),
    ;

    val isAtomic: Boolean get() = this == COMPARE_AND_SWAP || this == FETCH_AND_ADD

    /** Goes on the send queue (everything but RECEIVE). */
    val isSendQueue: Boolean get() = this != RECEIVE
}

/** Which peers run an operation: both, or only the one in a `server { }` / `client { }` branch. */
@Serializable
enum class Side {
    BOTH, SERVER, CLIENT;

    fun includes(role: Role): Boolean = this == BOTH || name == role.name

    companion object {
        fun of(role: Role): Side = if (role == Role.SERVER) SERVER else CLIENT
    }
}

/**
 * One kind of operation as the plan pass saw it: who runs it, on which QP ([qp] = [ALL_QPS] for
 * scenario-level operations and `forEachQp { }` bodies), with which size, how many times.
 */
@Serializable
data class OpUse(val kind: OpKind, val side: Side, val qp: Int, val size: Int, val count: Long) {
    fun describe(): String {
        val where = if (qp == ALL_QPS) "every QP" else "QP $qp"
        val who = when (side) {
            Side.BOTH -> "both sides"
            Side.SERVER -> "server"
            Side.CLIENT -> "client"
        }
        val bytes = if (kind == OpKind.RECEIVE) "" else ", $size B"
        return "${kind.label} x$count on $where by $who$bytes"
    }

    companion object {
        const val ALL_QPS = -1
    }
}

/**
 * A scenario as its plan pass recorded it: final settings, the operations used, barriers, and the
 * peer given to `connect`. It is validated before any device is touched, and decides the access
 * flags of every memory region ([accessFor]).
 */
data class ScenarioPlan(
    val settings: ScenarioSettings,
    val ops: List<OpUse>,
    val barriers: Int,
    val peer: Peer?,
    val parameters: Map<String, String> = emptyMap(),
) {
    /** Operations the side with this role runs. */
    fun opsOf(role: Role): List<OpUse> = ops.filter { it.side.includes(role) }

    fun uses(role: Role, kind: OpKind): Boolean = ops.any { it.kind == kind && it.side.includes(role) }

    /** The memory regions and access flags this side needs (see [AccessPlan]). */
    fun accessFor(role: Role): AccessPlan = AccessPlan.derive(this, role)

    /** Same scenario and parameters give the same fingerprint on both peers; see [Fingerprint]. */
    val fingerprint: String by lazy { Fingerprint.of(this) }

    /** Plan lines both peers compare (and show) when fingerprints differ. */
    fun canonicalLines(): List<String> = Fingerprint.canonicalLines(this)

    /** What `--check` prints: QPs, buffers, access flags per role, operations. */
    fun describe(): String = buildString {
        val s = settings
        appendLine("scenario plan (fingerprint ${fingerprint.take(16)})")
        appendLine("  QPs: ${s.qps} RC, ${if (s.cqMode == CqMode.SHARED) "one shared CQ" else "one CQ per QP"}, " +
            "send depth ${s.sendDepth}, receive depth ${s.recvDepth}, signal every ${s.signalEvery}")
        appendLine("  buffers: ${s.bufferCount} x ${s.bufferSize} B per QP" +
            (if (s.inlineThreshold > 0) ", inline up to ${s.inlineThreshold} B" else ""))
        appendLine("  device: ${s.device ?: "(first)"} port ${s.port} GID index ${s.gidIndex ?: "(auto RoCE v2)"}, " +
            "MTU ${s.mtu ?: "auto"}, completion ${s.completionMode.name.lowercase()}, rnr_retry ${s.rnrRetry}, control timeout ${s.timeout}")
        for (role in Role.entries) {
            val a = accessFor(role)
            appendLine("  ${role.label}: ${a.describe()}")
        }
        if (parameters.isNotEmpty()) appendLine("  parameters: " + parameters.toSortedMap().entries.joinToString { "${it.key}=${it.value}" })
        appendLine("  operations:")
        if (ops.isEmpty()) appendLine("    (none)")
        for (op in ops) appendLine("    " + op.describe())
        if (barriers > 0) appendLine("    barrier x$barriers")
        append("  peer: ${peer ?: "(none given)"}")
    }
}
