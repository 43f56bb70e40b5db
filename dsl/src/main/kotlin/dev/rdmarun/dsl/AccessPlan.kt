package dev.rdmarun.dsl

import dev.rdmarun.runtime.Access
import java.util.EnumSet

/**
 * The memory regions one side registers and their access flags, derived from the operations of
 * the scenario so that every region grants exactly what the operations need:
 *
 * - data region (bufferCount x bufferSize per QP): REMOTE_WRITE when the peer writes, REMOTE_READ
 *   when it reads, REMOTE_ATOMIC when it runs atomics; LOCAL_WRITE when one of those needs it
 *   (verbs rule) or when this side's READs and atomics land their data there. A send-only side's
 *   data region grants nothing.
 * - receive slots (recvDepth x bufferSize per QP), LOCAL_WRITE: only when the peer sends
 *   (send, sendWithImm, writeWithImm consume a receive here).
 * - credit words (8 bytes per QP), LOCAL_WRITE + REMOTE_WRITE: only when this side sends
 *   receive-consuming messages; the peer writes how many receives it re-posted there (see [QpSession]).
 *
 * The QP itself accepts the union of the remote flags ([qpAccess]).
 */
data class AccessPlan(
    val data: Set<Access>,
    val receiveSlots: Boolean,
    val creditWords: Boolean,
    /** This side runs receive() somewhere: arrivals wait in their slot for it (else they are counted and re-posted). */
    val holdsMessages: Boolean,
) {
    val qpAccess: Set<Access>
        get() {
            val remote = data.filterTo(EnumSet.noneOf(Access::class.java)) { it != Access.LOCAL_WRITE }
            if (creditWords) remote.add(Access.REMOTE_WRITE)
            return remote
        }

    fun describe(): String = buildString {
        append("data region ${flags(data)}")
        append(if (receiveSlots) ", receive slots LOCAL_WRITE" else ", no receive slots")
        if (creditWords) append(", credit words LOCAL_WRITE+REMOTE_WRITE")
    }

    companion object {
        private fun flags(s: Set<Access>) = if (s.isEmpty()) "(no access flags)" else Access.entries.filter { it in s }.joinToString("+")

        internal fun RemoteAccess.toAccess(): Access = when (this) {
            RemoteAccess.WRITE -> Access.REMOTE_WRITE
            RemoteAccess.READ -> Access.REMOTE_READ
            RemoteAccess.ATOMIC -> Access.REMOTE_ATOMIC
        }

        fun derive(plan: ScenarioPlan, role: Role): AccessPlan {
            val mine = plan.opsOf(role)
            val peers = plan.opsOf(role.other)
            val data = EnumSet.noneOf(Access::class.java)
            val explicit = plan.settings.remoteAccess
            if (explicit != null) {
                explicit.forEach { data.add(it.toAccess()) }
            } else {
                peers.forEach { op -> op.kind.peerAccess?.let { data.add(it) } }
            }
            if (mine.any { it.kind.writesLocalBuffer } || Access.REMOTE_WRITE in data || Access.REMOTE_ATOMIC in data) {
                data.add(Access.LOCAL_WRITE)
            }
            return AccessPlan(
                data = data,
                receiveSlots = peers.any { it.kind.consumesPeerReceive },
                creditWords = mine.any { it.kind.consumesPeerReceive },
                holdsMessages = mine.any { it.kind == OpKind.RECEIVE },
            )
        }
    }
}
