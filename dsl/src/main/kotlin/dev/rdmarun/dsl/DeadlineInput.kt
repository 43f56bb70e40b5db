package dev.rdmarun.dsl

import java.io.InputStream
import java.net.Socket
import java.net.SocketTimeoutException

/**
 * A socket's input under one deadline ([deadline], System.nanoTime()) rather than a timeout per
 * read: before each read the socket timeout is set to the time that is left, and a read that
 * starts after the deadline fails at once. A peer that drips one byte a second therefore cannot
 * stretch a wait beyond its deadline, as it could with a per-read timeout.
 *
 * [bytesSinceDeadline] counts what arrived since the deadline was last set, so that an expired
 * wait can tell a silent peer from a slow one.
 */
internal class DeadlineInput(private val socket: Socket) : InputStream() {
    private val input = socket.getInputStream()

    @Volatile
    var deadline: Long = Long.MAX_VALUE
        set(value) {
            field = value
            bytesSinceDeadline = 0
        }

    var bytesSinceDeadline = 0L
        private set

    /** Sets the deadline [nanos] from now. */
    fun expireIn(nanos: Long) {
        deadline = deadlineAfterNanos(nanos)
    }

    private fun arm() {
        val left = deadline - System.nanoTime()
        if (left <= 0) throw SocketTimeoutException("the deadline passed")
        // Round up: a timeout of 0 would mean "wait forever".
        socket.soTimeout = ((left + 999_999) / 1_000_000).coerceIn(1, Int.MAX_VALUE.toLong()).toInt()
    }

    override fun read(): Int {
        arm()
        val b = input.read()
        if (b >= 0) bytesSinceDeadline++
        return b
    }

    override fun read(b: ByteArray, off: Int, len: Int): Int {
        if (len == 0) return 0
        arm()
        val n = input.read(b, off, len)
        if (n > 0) bytesSinceDeadline += n
        return n
    }

    override fun available(): Int = input.available()

    override fun close() = input.close()
}
