package dev.rdmarun.scripts

import dev.rdmarun.dsl.ControlToken
import dev.rdmarun.runtime.FabricKey
import dev.rdmarun.runtime.Gid

/**
 * One side's address in ibv_rc_pingpong's out-of-band exchange: LID, QP number, first PSN and GID
 * (all zero when no GID index is used, as ibv_rc_pingpong does without -g).
 */
data class PingpongDest(val lid: Int, val qpn: Int, val psn: Int, val gid: Gid) {
    init {
        require(lid in 0..0xffff) { "LID out of range: $lid" }
        require(qpn in 1..0xffffff) { "QPN out of range: $qpn" }
        require(psn in 0..0xffffff) { "PSN out of range: $psn" }
    }

    /** ibv_rc_pingpong's "LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID <inet_ntop>" description. */
    fun describe(): String =
        "LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s".format(lid, qpn, psn, inetNtop6(gid.raw()))
}

/** The peer sent something that is not ibv_rc_pingpong's exchange. */
class WireFormatException(message: String) : IllegalArgumentException(message)

/**
 * ibv_rc_pingpong's TCP exchange, byte for byte: each side sends the C string
 * `"%04x:%06x:%06x:%s"` (LID, QPN, PSN, GID as 32 hex digits of its 16 bytes in wire order) with
 * its NUL, 52 bytes in all (sizeof the C buffer); the client ends with `"done"` and its NUL.
 * Decoding is strict: exactly that shape, hex digits of either case, the NUL last.
 */
object PingpongWire {
    /** sizeof "0000:000000:000000:00000000000000000000000000000000". */
    const val MESSAGE_SIZE = 52

    /** sizeof "done": the client's last message. */
    const val DONE_SIZE = 5

    private val DONE = byteArrayOf('d'.code.toByte(), 'o'.code.toByte(), 'n'.code.toByte(), 'e'.code.toByte(), 0)
    private val SHAPE = Regex("([0-9a-fA-F]{4}):([0-9a-fA-F]{6}):([0-9a-fA-F]{6}):([0-9a-fA-F]{32})")

    fun encode(dest: PingpongDest): ByteArray {
        val text = "%04x:%06x:%06x:%s".format(dest.lid, dest.qpn, dest.psn, dest.gid.toHex())
        check(text.length == MESSAGE_SIZE - 1) { "encoded address has ${text.length} characters: $text" }
        return (text + "\u0000").toByteArray(Charsets.US_ASCII)
    }

    fun decode(message: ByteArray): PingpongDest {
        if (message.size != MESSAGE_SIZE) {
            throw WireFormatException("the peer's address message has ${message.size} bytes, not $MESSAGE_SIZE: ${show(message)}")
        }
        if (message[MESSAGE_SIZE - 1] != 0.toByte() || message.any { it < 0 }) {
            throw WireFormatException("the peer's address message is not LLLL:QQQQQQ:PPPPPP:<32 hex digits> and a NUL: ${show(message)}")
        }
        val text = String(message, 0, MESSAGE_SIZE - 1, Charsets.US_ASCII)
        val m = SHAPE.matchEntire(text)
            ?: throw WireFormatException("the peer's address message is not LLLL:QQQQQQ:PPPPPP:<32 hex digits>: ${show(message)}")
        val (lid, qpn, psn, gid) = m.destructured
        val qpNum = qpn.toInt(16)
        if (qpNum == 0) throw WireFormatException("the peer's address message names QP 0, which is not an RC QP: ${show(message)}")
        return PingpongDest(lid.toInt(16), qpNum, psn.toInt(16), Gid.parseHex(gid))
    }

    /** Bytes of the soft0 nonce the client sends ([encodeNonce]). */
    const val NONCE_BYTES = 32

    /** sizeof the soft0 nonce message: 64 hex digits and a NUL (soft0 only; see [encodeNonce]). */
    const val NONCE_SIZE = 2 * NONCE_BYTES + 1

    /** A fresh nonce for [encodeNonce]. */
    fun nonce(): ByteArray = ByteArray(NONCE_BYTES).also { java.security.SecureRandom().nextBytes(it) }

    /**
     * soft0's addition to the exchange: a fresh nonce of the client's as 64 lowercase hex digits
     * and a NUL, right after its address. Both sides derive the QPs' fabric key from it and the
     * secret they share ([fabricKey]); the key itself never travels. Never sent to or expected from
     * ibv_rc_pingpong (it has no soft0).
     */
    fun encodeNonce(nonce: ByteArray): ByteArray {
        require(nonce.size == NONCE_BYTES) { "a nonce has $NONCE_BYTES bytes" }
        return (java.util.HexFormat.of().formatHex(nonce) + "\u0000").toByteArray(Charsets.US_ASCII)
    }

    /** Strict: exactly 64 lowercase hex digits and the NUL. */
    fun decodeNonce(message: ByteArray): ByteArray {
        val text = if (message.size == NONCE_SIZE && message.last() == 0.toByte() && message.all { it >= 0 })
            String(message, 0, NONCE_SIZE - 1, Charsets.US_ASCII) else null
        if (text == null || !text.all { it in '0'..'9' || it in 'a'..'f' }) {
            throw WireFormatException("the peer's soft0 nonce is not 64 lowercase hex digits and a NUL" +
                " (is it rdma-run pingpong on soft0?)")
        }
        return java.util.HexFormat.of().parseHex(text)
    }

    /** The fabric key both soft0 peers derive from their shared [secret] and the client's [nonce]. */
    fun fabricKey(secret: ControlToken, nonce: ByteArray): FabricKey = secret.fabricKey(nonce, "rdma-run pingpong soft0 fabric key")

    fun done(): ByteArray = DONE.clone()

    fun checkDone(message: ByteArray) {
        if (!message.contentEquals(DONE)) {
            throw WireFormatException("expected the peer's \"done\" and a NUL, got ${show(message)}")
        }
    }

    /** The bytes as a quoted, escaped string for error messages. */
    fun show(bytes: ByteArray): String = buildString {
        append('"')
        for (b in bytes) {
            val c = b.toInt() and 0xff
            when {
                c == 0 -> append("\\0")
                c in 0x20..0x7e && c != '"'.code && c != '\\'.code -> append(c.toChar())
                else -> append("\\x%02x".format(c))
            }
        }
        append('"')
    }
}

/**
 * An IPv6 address as glibc's inet_ntop(AF_INET6) writes it, which is what ibv_rc_pingpong prints:
 * lowercase hex groups without leading zeros, the longest run (first of equals) of two or more zero
 * groups as "::", and the last 32 bits as dotted IPv4 for ::ffff:a.b.c.d and ::a.b.c.d.
 */
fun inetNtop6(raw: ByteArray): String {
    require(raw.size == 16) { "an IPv6 address has 16 bytes, not ${raw.size}" }
    val words = IntArray(8) { ((raw[2 * it].toInt() and 0xff) shl 8) or (raw[2 * it + 1].toInt() and 0xff) }
    var bestBase = -1
    var bestLen = 0
    var curBase = -1
    var curLen = 0
    for (i in 0 until 8) {
        if (words[i] == 0) {
            if (curBase == -1) { curBase = i; curLen = 1 } else curLen++
        } else if (curBase != -1) {
            if (bestBase == -1 || curLen > bestLen) { bestBase = curBase; bestLen = curLen }
            curBase = -1
        }
    }
    if (curBase != -1 && (bestBase == -1 || curLen > bestLen)) { bestBase = curBase; bestLen = curLen }
    if (bestBase != -1 && bestLen < 2) bestBase = -1
    val sb = StringBuilder(46)
    var i = 0
    while (i < 8) {
        if (bestBase != -1 && i >= bestBase && i < bestBase + bestLen) {
            if (i == bestBase) sb.append(':')
            i++
            continue
        }
        if (i != 0) sb.append(':')
        if (i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && words[5] == 0xffff))) {
            sb.append(raw[12].toInt() and 0xff).append('.').append(raw[13].toInt() and 0xff).append('.')
                .append(raw[14].toInt() and 0xff).append('.').append(raw[15].toInt() and 0xff)
            return sb.toString()
        }
        sb.append(Integer.toHexString(words[i]))
        i++
    }
    if (bestBase != -1 && bestBase + bestLen == 8) sb.append(':')
    return sb.toString()
}
