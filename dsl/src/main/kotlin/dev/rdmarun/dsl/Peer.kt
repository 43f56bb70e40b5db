package dev.rdmarun.dsl

import kotlinx.serialization.Serializable

/** Which end of the control connection this side is: the listener is the server. */
@Serializable
public enum class Role {
    SERVER, CLIENT;

    public val other: Role get() = if (this == SERVER) CLIENT else SERVER
    public val label: String get() = name.lowercase()
}

/**
 * How to reach the other side over TCP: the control connection carries the handshake (QP
 * endpoints, buffer addresses and rkeys) and barriers. A launcher or an application makes one;
 * scripts get it injected as `peer`.
 */
public sealed class Peer {
    public abstract val role: Role

    /** Wait for the peer on this TCP port ([bindAddress] null: all addresses; port 0: any free port). */
    public data class Listen(val port: Int, val bindAddress: String? = null) : Peer() {
        init {
            require(port in 0..65535) { "TCP port must be 0..65535, not $port" }
        }

        override val role: Role get() = Role.SERVER
        override fun toString(): String = "listen on ${bindAddress ?: "*"}:$port"
    }

    /** Connect to a listening peer (retried until the scenario's timeout: the server may start later). */
    public data class Connect(val host: String, val port: Int) : Peer() {
        init {
            require(port in 1..65535) { "TCP port must be 1..65535, not $port" }
        }

        override val role: Role get() = Role.CLIENT
        override fun toString(): String = "connect to $host:$port"
    }

    public companion object {
        /** perftest's and ibv_rc_pingpong's default port. */
        public const val DEFAULT_PORT: Int = 18515

        @JvmStatic
        @JvmOverloads
        public fun listen(port: Int = DEFAULT_PORT, bindAddress: String? = null): Peer = Listen(port, bindAddress)

        @JvmStatic
        @JvmOverloads
        public fun connect(host: String, port: Int = DEFAULT_PORT): Peer = Connect(host, port)

        /** "HOST", "HOST:PORT" or "[v6]:PORT" as a client peer. */
        @JvmStatic
        public fun parse(text: String): Peer {
            val (host, portText) = splitHostPort(text) ?: throw IllegalArgumentException("not HOST[:PORT]: '$text'")
            val port = if (portText == null) DEFAULT_PORT
                else portText.toIntOrNull() ?: throw IllegalArgumentException("not HOST[:PORT]: '$text'")
            return Connect(host, port)
        }

        /** "PORT", "ADDR:PORT" or "[v6]:PORT" as a listening peer: the port is required, 1..65535. */
        public fun parseListen(text: String): Listen {
            val t = text.trim()
            val (address, portText) = if (t.all(Char::isDigit)) null to t else splitHostPort(t) ?: (null to null)
            val port = portText?.toIntOrNull()?.takeIf { it in 1..65535 }
                ?: throw IllegalArgumentException("'$text' is not [ADDR:]PORT with a TCP port 1..65535")
            return Listen(port, address?.takeIf { it.isNotEmpty() })
        }

        /** The host and port texts of "HOST", "HOST:PORT" or "[v6]:PORT" (port null when absent); null if malformed. */
        private fun splitHostPort(text: String): Pair<String, String?>? {
            val t = text.trim()
            if (t.startsWith("[")) {
                val end = t.indexOf(']')
                if (end <= 0) return null
                val rest = t.substring(end + 1)
                return t.substring(1, end) to if (rest.isEmpty()) null else rest.removePrefix(":")
            }
            val colon = t.lastIndexOf(':')
            return if (colon < 0) t to null else t.substring(0, colon) to t.substring(colon + 1)
        }
    }
}
