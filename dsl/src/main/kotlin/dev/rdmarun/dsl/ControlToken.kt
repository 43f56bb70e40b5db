package dev.rdmarun.dsl

/**
 * A secret both sides of a scenario share (the launcher's `--token` or `RDMA_RUN_TOKEN`, an
 * application's [RdmaOptions.token]): with one set, each side proves it knows the token
 * (HMAC-SHA256 over both sides' fresh nonces) before the other sends anything about its QPs or
 * memory. Without one, any process that runs the same scenario can be the peer. Never printed.
 */
class ControlToken private constructor(private val bytes: ByteArray) {
    internal fun key(): ByteArray = bytes.clone()

    override fun toString() = "ControlToken[redacted]"

    companion object {
        /** The token this text (UTF-8) makes; it must not be empty. */
        @JvmStatic
        fun of(text: String): ControlToken {
            require(text.isNotEmpty()) { "the token is empty" }
            return ControlToken(text.toByteArray(Charsets.UTF_8))
        }
    }
}
