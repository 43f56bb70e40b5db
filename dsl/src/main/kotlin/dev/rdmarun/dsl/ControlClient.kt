package dev.rdmarun.dsl

import dev.rdmarun.runtime.FabricKey
import java.io.EOFException
import java.io.IOException
import java.net.ConnectException
import java.net.InetSocketAddress
import java.net.NoRouteToHostException
import java.net.Socket
import java.net.SocketException
import java.net.SocketTimeoutException
import java.net.UnknownHostException
import java.util.concurrent.CancellationException
import kotlin.time.Duration

/** The client's side of the control connection before the handshake: it connects to its server, and proves itself. */
internal object ControlClient {
    /**
     * Connects, retrying refused connections until the timeout (then an [RdmaTimeoutException]):
     * the server may start later. Another I/O error ends it at once ([PeerException]). Stops early,
     * with a CancellationException, once [keepTrying] says no (checked every second at most).
     * [deadline] ends the connecting (by default [timeout] from now: [authenticated] gives its own);
     * the handshake then has [timeout] from the connection, as a server may have started late.
     */
    fun connect(peer: Peer.Connect, timeout: Duration, deadline: Long = deadlineAfter(timeout), keepTrying: () -> Boolean = { true }): ControlConnection {
        var last: IOException? = null
        var timedOut = true
        while (true) {
            if (!keepTrying()) throw CancellationException("connecting to ${peer.host}:${peer.port} was cancelled")
            val socket = Socket()
            try {
                val left = ((deadline - System.nanoTime()) / 1_000_000).coerceAtLeast(1)
                // At most a second per attempt (a timed-out attempt is retried): keepTrying is checked in between.
                socket.connect(InetSocketAddress(peer.host, peer.port), left.coerceAtMost(1000).toInt())
                // The handshake's deadline starts now: connecting may have waited for a late server.
                return ControlConnection.over(socket, timeout, Role.SERVER, "the server at ${printable(peer.host, 80)}:${peer.port}")
            } catch (e: UnknownHostException) {
                socket.close()
                throw ScenarioException("unknown host '${peer.host}'", e)
            } catch (e: IOException) {
                socket.close()
                // The last attempt may have had a millisecond of the deadline left and timed out
                // before the refusal came back: it says less than the earlier refusals, keep those.
                if (e !is SocketTimeoutException || last !is ConnectException) last = e
                if (e !is ConnectException && e !is NoRouteToHostException && e !is SocketTimeoutException) {
                    timedOut = false
                    break
                }
            }
            if (System.nanoTime() - deadline >= 0) break
            Thread.sleep(RETRY_PAUSE_MS) // the server may not listen yet
        }
        // Refused until the deadline: no server listened, or it had stopped waiting (its own timeout).
        val hint = if (last is ConnectException) " (is a server listening on port ${peer.port}, and still waiting for its client?)" else ""
        val sentence = "cannot connect to ${peer.host}:${peer.port} within $timeout: ${last?.message ?: "no answer"}$hint"
        throw if (timedOut) RdmaTimeoutException(sentence, last) else PeerException(sentence, last)
    }

    /**
     * [connect], then the handshake's steps 1 and 2 ([authenticate]): the connection and soft0's
     * fabric key, within [timeout]. A server that closes the connection in them without a word
     * dropped it (a server judges a few connections at once and closes the oldest for a new one: a
     * flood of strangers' connections) or is gone: this side connects again until the timeout,
     * as it does while none listens. A server that refuses says why (a Failure frame), which ends
     * it at once. [opened] hears each connection as it opens, and null once it was dropped, so
     * that a cancellation can close the current one.
     */
    fun authenticated(peer: Peer.Connect, timeout: Duration, credentials: Handshake.Credentials, keepTrying: () -> Boolean,
                      opened: (ControlConnection?) -> Unit): Pair<ControlConnection, FabricKey> {
        val deadline = deadlineAfter(timeout)
        var dropped = 0
        while (true) {
            val c = connect(peer, timeout, deadline, keepTrying)
            opened(c)
            try {
                return c to c.authenticate(credentials)
            } catch (e: PeerException) {
                if ((e.cause !is EOFException && e.cause !is SocketException) || !keepTrying()) throw e
                c.close()
                opened(null)
                dropped++
                if (System.nanoTime() - deadline >= 0) throw PeerException("${e.message} ($dropped times within $timeout: a flood of connections to it?)", e)
                Thread.sleep(RETRY_PAUSE_MS)
            }
        }
    }

    /** Between two attempts: a refused connection, or one the server dropped. */
    private const val RETRY_PAUSE_MS = 100L
}
