package dev.rdmarun.dsl

import java.io.IOException
import java.net.ConnectException
import java.net.InetSocketAddress
import java.net.NoRouteToHostException
import java.net.Socket
import java.net.SocketTimeoutException
import java.net.UnknownHostException
import java.util.concurrent.CancellationException
import kotlin.time.Duration

/** The client's side of the control connection before the handshake: it connects to its server. */
internal object ControlClient {
    /**
     * Connects, retrying refused connections until the timeout (then an [RdmaTimeoutException]):
     * the server may start later. Another I/O error ends it at once ([PeerException]). Stops early,
     * with a CancellationException, once [keepTrying] says no (checked every second at most).
     */
    fun connect(peer: Peer.Connect, timeout: Duration, keepTrying: () -> Boolean = { true }): ControlConnection {
        val deadline = deadlineAfter(timeout)
        var last: IOException
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
                last = e
                if (e !is ConnectException && e !is NoRouteToHostException && e !is SocketTimeoutException) {
                    timedOut = false
                    break
                }
            }
            if (System.nanoTime() - deadline >= 0) break
            Thread.sleep(100) // the server may not listen yet
        }
        // Refused until the deadline: no server listened, or it had stopped waiting (its own timeout).
        val hint = if (last is ConnectException) " (is a server listening on port ${peer.port}, and still waiting for its client?)" else ""
        val sentence = "cannot connect to ${peer.host}:${peer.port} within $timeout: ${last.message ?: "no answer"}$hint"
        throw if (timedOut) RdmaTimeoutException(sentence, last) else PeerException(sentence, last)
    }
}
