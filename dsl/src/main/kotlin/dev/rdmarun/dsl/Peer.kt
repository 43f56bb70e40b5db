package dev.rdmarun.dsl

import kotlinx.serialization.Serializable

/** Which end of the control connection this side is: the listener is the server. */
@Serializable
enum class Role {
    SERVER, CLIENT;

    val other: Role get() = if (this == SERVER) CLIENT else SERVER
    val label: String get() = name.lowercase()
}

/**
 * How to reach the other side over TCP: the control connection carries the handshake (QP
 * endpoints, buffer addresses and rkeys) and barriers. A launcher or an application makes one;
 * scripts get it injected as `peer`.
 */
sealed class Peer {
    abstract val role: Role

    /** Wait for the peer on this TCP port ([bindAddress] null: all addresses; port 0: any free port). */
    data class Listen(val port: Int, val bindAddress: String? = null) : Peer() {
        init {
            require(port in 0..65535) { "TCP port must be 0..65535, not $port" }
        }

        override val role get() = Role.SERVER
        override fun toString() = "listen on ${bindAddress ?: "*"}:$port"
    }

    /** Connect to a listening peer (retried until the scenario's timeout: the server may start later). */
    data class Connect(val host: String, val port: Int) : Peer() {
        init {
            require(port in 1..65535) { "TCP port must be 1..65535, not $port" }
        }

        override val role get() = Role.CLIENT
        override fun toString() = "connect to $host:$port"
    }

    companion object {
        /** perftest's and ibv_rc_pingpong's default port. */
        const val DEFAULT_PORT = 18515

        fun listen(port: Int = DEFAULT_PORT, bindAddress: String? = null): Peer = Listen(port, bindAddress)

        fun connect(host: String, port: Int = DEFAULT_PORT): Peer = Connect(host, port)

        /** "HOST", "HOST:PORT" or "[v6]:PORT" as a client peer. */
        fun parse(text: String): Peer {
            val t = text.trim()
            if (t.startsWith("[")) {
                val end = t.indexOf(']')
                require(end > 0) { "not HOST[:PORT]: '$text'" }
                val rest = t.substring(end + 1)
                val port = if (rest.isEmpty()) DEFAULT_PORT else rest.removePrefix(":").toIntOrNull()
                    ?: throw IllegalArgumentException("not HOST[:PORT]: '$text'")
                return Connect(t.substring(1, end), port)
            }
            val colon = t.lastIndexOf(':')
            if (colon < 0) return Connect(t, DEFAULT_PORT)
            val port = t.substring(colon + 1).toIntOrNull() ?: throw IllegalArgumentException("not HOST[:PORT]: '$text'")
            return Connect(t.substring(0, colon), port)
        }
    }
}
