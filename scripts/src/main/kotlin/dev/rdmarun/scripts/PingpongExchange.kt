package dev.rdmarun.scripts

import java.io.InputStream
import java.net.ConnectException
import java.net.InetAddress
import java.net.InetSocketAddress
import java.net.ServerSocket
import java.net.Socket
import java.net.SocketTimeoutException
import java.net.UnknownHostException
import kotlin.time.Duration.Companion.milliseconds

/**
 * Time limits of a ping-pong. [peerTimeoutMs] bounds every wait on the peer: for its TCP
 * connection (accept, or connect while the server is not listening yet), for each message of the
 * exchange, and between two completions of the ping-pong itself. [overallMs] (--timeout, or null)
 * bounds the whole run, counted from [startedAt] (System.nanoTime).
 */
class Limits(val peerTimeoutMs: Long, val overallMs: Long?, val startedAt: Long = System.nanoTime()) {
    /** When the run must end (System.nanoTime), or null. */
    val overallDeadline: Long? = overallMs?.let { startedAt + it * 1_000_000 }

    /** The same run's limits with another peer timeout. */
    fun withPeerTimeout(ms: Long) = Limits(ms, overallMs, startedAt)

    /** `--timeout (30s)`: the option and its value, in the units it was given in, as the failures name it. */
    val overallName: String get() = "--timeout (${(overallMs ?: 0).milliseconds})"

    /** The last wait was cut to what was left of the overall deadline: its timeout is --timeout's. */
    private var lastWaitOverall = false

    /** How long the next wait may take, at least 1 ms; throws once the overall deadline passed. */
    fun waitMs(what: String): Int {
        lastWaitOverall = false
        if (overallDeadline == null) return peerTimeoutMs.coerceIn(1, Int.MAX_VALUE.toLong()).toInt()
        val left = (overallDeadline - System.nanoTime()) / 1_000_000
        if (left <= 0) throw overallTimeout(what)
        lastWaitOverall = left < peerTimeoutMs
        return minOf(left, peerTimeoutMs).coerceIn(1, Int.MAX_VALUE.toLong()).toInt()
    }

    /** [hint]: as in [peerTimeout]. */
    fun overallTimeout(what: String, hint: String? = null) = CommandFailure("$overallName reached while $what" + (hint?.let { "; hint: $it" } ?: ""))

    /** [hint]: what the wait's likely cause is, after the sentence. */
    fun peerTimeout(what: String, hint: String? = null) =
        CommandFailure("the peer did not respond for ${peerTimeoutMs.milliseconds} while $what (--peer-timeout)" + (hint?.let { "; hint: $it" } ?: ""))

    /** Whether --timeout's deadline has passed. */
    fun overallPassed(): Boolean = overallDeadline != null && System.nanoTime() - overallDeadline >= 0

    /** The failure for a wait that timed out (a socket timeout may fire a little before the deadline it was cut to). */
    fun timeout(what: String): CommandFailure = if (lastWaitOverall || overallPassed()) overallTimeout(what) else peerTimeout(what)
}

/**
 * ibv_rc_pingpong's out-of-band exchange over TCP ([PingpongWire] has the bytes). Server: accept one
 * client, read its address, connect the QP ([connect]) and only then send its own address, then
 * wait for the client's "done". Client: send its address, read the server's, send "done". Each
 * message goes out in one write and is read in full, since ibv_rc_pingpong reads it with one read().
 *
 * On the software provider (soft0) the peer is always rdma-run, and its QPs need a shared
 * [FabricKey]: the client sends a fresh nonce right after its address ([PingpongWire.encodeNonce]),
 * the server reads it ([asSoftServer]) and both derive the key from it and their shared secret
 * ([PingpongWire.fabricKey]). The hardware exchange is unchanged.
 */
class PingpongExchange(private val limits: Limits, private val interruption: Interruption) {

    /**
     * [beforeAccept] runs once the port listens, before the client is accepted (the pre-flight
     * warm-up): a client that connects meanwhile waits in the backlog, its address unread.
     */
    fun asServer(tcpPort: Int, local: PingpongDest, beforeAccept: () -> Unit = {}, connect: (PingpongDest) -> Unit): PingpongDest =
        serve(tcpPort, local, withNonce = false, beforeAccept) { remote, _ -> connect(remote) }

    /** [asServer] for soft0: the client's nonce follows its address; [connect] gets both. */
    fun asSoftServer(tcpPort: Int, local: PingpongDest, beforeAccept: () -> Unit = {}, connect: (PingpongDest, ByteArray) -> Unit): PingpongDest =
        serve(tcpPort, local, withNonce = true, beforeAccept) { remote, nonce -> connect(remote, nonce!!) }

    private fun serve(tcpPort: Int, local: PingpongDest, withNonce: Boolean, beforeAccept: () -> Unit,
                      connect: (PingpongDest, ByteArray?) -> Unit): PingpongDest {
        val server = try {
            ServerSocket().apply {
                reuseAddress = true
                bind(InetSocketAddress(tcpPort), 1)
            }
        } catch (e: java.io.IOException) {
            throw CommandFailure("cannot listen on TCP port $tcpPort: ${e.message}", cause = e)
        }
        val socket = server.use {
            beforeAccept()
            interruption.blockingOn(server) { s ->
                s.soTimeout = limits.waitMs("waiting for a client on TCP port $tcpPort")
                try {
                    s.accept()
                } catch (e: SocketTimeoutException) {
                    throw limits.timeout("waiting for a client on TCP port $tcpPort")
                }
            }
        }
        return socket.use {
            interruption.blockingOn(socket) { s ->
                s.tcpNoDelay = true
                val remote = PingpongWire.decode(readExactly(s, PingpongWire.MESSAGE_SIZE, "reading the client's address"))
                val nonce = if (withNonce) {
                    PingpongWire.decodeNonce(readExactly(s, PingpongWire.NONCE_SIZE,
                        "reading the client's soft0 nonce (a soft0 peer must be rdma-run pingpong on soft0)"))
                } else null
                connect(remote, nonce)
                s.getOutputStream().write(PingpongWire.encode(local))
                PingpongWire.checkDone(readExactly(s, PingpongWire.DONE_SIZE, "waiting for the client's \"done\""))
                remote
            }
        }
    }

    /**
     * The client's side; with [nonce] (soft0) the nonce follows the address, in the same write.
     * [afterConnect] runs once connected, before the address is sent (the pre-flight warm-up): a
     * server that is not there is known at once, and the server waits on the address meanwhile.
     */
    fun asClient(host: String, tcpPort: Int, local: PingpongDest, nonce: ByteArray? = null, afterConnect: () -> Unit = {}): PingpongDest {
        val socket = connect(host, tcpPort)
        return socket.use {
            afterConnect()
            interruption.blockingOn(socket) { s ->
                s.tcpNoDelay = true
                val address = PingpongWire.encode(local)
                s.getOutputStream().write(if (nonce == null) address else address + PingpongWire.encodeNonce(nonce))
                val remote = PingpongWire.decode(readExactly(s, PingpongWire.MESSAGE_SIZE, "reading the server's address"))
                s.getOutputStream().write(PingpongWire.done())
                remote
            }
        }
    }

    /**
     * Connects to the first address of [host] that accepts. While every address refuses (the server
     * is not listening yet) it retries every [RETRY_MS] until the peer timeout or --timeout, and then
     * says that it was refused: the two sides may be started together.
     */
    private fun connect(host: String, tcpPort: Int): Socket {
        val addresses = try {
            InetAddress.getAllByName(host)
        } catch (e: UnknownHostException) {
            throw CommandFailure("unknown host '$host'", cause = e)
        }
        val what = "connecting to $host port $tcpPort"
        val giveUp = System.nanoTime() + limits.peerTimeoutMs * 1_000_000
        var refused: Exception? = null
        while (true) {
            for (address in addresses) {
                if (refused != null && limits.overallPassed()) break
                val socket = Socket()
                try {
                    interruption.blockingOn(socket) { it.connect(InetSocketAddress(address, tcpPort), limits.waitMs(what)) }
                    return socket
                } catch (e: ConnectException) {
                    socket.close()
                    refused = e
                } catch (e: SocketTimeoutException) {
                    socket.close()
                    throw limits.timeout(what)
                } catch (e: Exception) {
                    socket.close()
                    throw if (e is java.io.IOException) CommandFailure("cannot connect to $host port $tcpPort: ${e.message}", cause = e) else e
                }
            }
            val overall = limits.overallPassed()
            if (overall || System.nanoTime() - giveUp >= 0) {
                val until = if (overall) "until ${limits.overallName}" else "for ${limits.peerTimeoutMs.milliseconds} (--peer-timeout)"
                throw CommandFailure("cannot connect to $host port $tcpPort: ${refused?.message} $until" +
                    " (is the server side running? start `rdma-run pingpong` or `ibv_rc_pingpong` without HOST there)", cause = refused)
            }
            Thread.sleep(RETRY_MS)
            interruption.check()
        }
    }

    /** Reads exactly n bytes, each read bounded by the limits; EOF before that is an error. */
    private fun readExactly(socket: Socket, n: Int, what: String): ByteArray {
        val buffer = ByteArray(n)
        val input: InputStream = socket.getInputStream()
        var got = 0
        while (got < n) {
            socket.soTimeout = limits.waitMs(what)
            val r = try {
                input.read(buffer, got, n - got)
            } catch (e: SocketTimeoutException) {
                throw limits.timeout(what)
            }
            if (r < 0) {
                throw CommandFailure("the peer closed the connection after $got of $n bytes while $what" +
                    (if (got > 0) ": ${PingpongWire.show(buffer.copyOf(got))}" else "") +
                    " (it failed, or it does not speak ibv_rc_pingpong's exchange)")
            }
            got += r
        }
        return buffer
    }

    companion object {
        const val RETRY_MS = 200L
    }
}
