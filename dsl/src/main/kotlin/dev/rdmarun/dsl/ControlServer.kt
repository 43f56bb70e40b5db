package dev.rdmarun.dsl

import java.io.IOException
import java.net.InetAddress
import java.net.InetSocketAddress
import java.net.ServerSocket
import java.net.SocketAddress
import java.net.SocketTimeoutException
import kotlin.time.Duration

/**
 * The server's side of the control connection before the handshake's third step: it binds the
 * port ([listen]) and waits for its client among every connection that comes ([accept]).
 */
internal object ControlServer {
    /** Binds the server's port before any RDMA setup, so a busy port fails first. */
    fun listen(peer: Peer.Listen, timeout: Duration): ServerSocket = try {
        ServerSocket().apply {
            reuseAddress = true
            soTimeout = timeout.inWholeMilliseconds.coerceIn(1, Int.MAX_VALUE.toLong()).toInt()
            bind(InetSocketAddress(peer.bindAddress?.let { InetAddress.getByName(it) }, peer.port))
        }
    } catch (e: IOException) {
        throw ScenarioException("cannot listen on ${peer.bindAddress?.let { "${printable(it, 80)} " } ?: ""}TCP port ${peer.port}: ${e.message}", e)
    }

    /** At most this many accepted connections are judged at once; a newer one closes the oldest. */
    const val MAX_PENDING = 8

    /** A client that passed steps 1 and 2 ([ControlConnection.authenticate]), when it connected, and the fabric key of the connection. */
    class Accepted(val connection: ControlConnection, val acceptedAt: Long, val fabricKey: dev.rdmarun.runtime.FabricKey)

    /** Refusals a waiting server says at once ([PeerException.worthNoting]); later ones are only counted. */
    private const val MAX_REFUSAL_NOTES = 3

    /** How "the client at 10.0.0.2:41234" reads. */
    private fun describe(address: SocketAddress?): String = when (address) {
        is InetSocketAddress -> (address.address?.hostAddress ?: address.hostString) + ":" + address.port
        else -> printable(address.toString(), 80)
    }

    /**
     * Accepts connections on [listener] until one passes steps 1 and 2 of the handshake
     * ([ControlConnection.authenticate] with [local]), for at most [timeout]. Every other connection (a port
     * scan, garbage, an echo or replay, another scenario, the wrong secret, one that drips) is
     * a stray: closed and counted, never fatal; one that sent a proof of the wrong secret or
     * plan is also said at once through [note] (the first [MAX_REFUSAL_NOTES]). The exception
     * is a client that proved the secret but runs another plan: the wait ends with its
     * difference. Each accepted connection is judged on its own thread
     * under its own deadline (the timeout from its accept, at most the end of the wait), at
     * most [MAX_PENDING] at once (a newer one closes the oldest), so no stray holds up the
     * client. [note] gets one line, if strays were closed, when the client is found; when
     * none is, the exception says how many were closed.
     */
    fun accept(listener: ServerSocket, timeout: Duration, local: Handshake.Credentials,
               keepWaiting: () -> Boolean = { true }, note: (String) -> Unit = {}): Accepted =
        acceptAll(listener, timeout, local, 1, keepWaiting, note).single()

    /**
     * [accept] for [count] clients (rank 0 at the rendezvous: every other rank), under one
     * deadline; the first [count] that pass steps 1 and 2 are taken, in the order they passed.
     * Stops with a CancellationException once [keepWaiting] says no (checked every 100 ms): a
     * listener that outlives the wait (a rank's, reused by each pair scenario) is not closed to end it.
     * [who] names a connection in sentences until it says who it is ("a rank at 10.0.0.2:41234").
     */
    fun acceptAll(listener: ServerSocket, timeout: Duration, local: Handshake.Credentials, count: Int,
                  keepWaiting: () -> Boolean = { true }, note: (String) -> Unit = {}, who: String = "the client"): List<Accepted> {
        val end = deadlineAfter(timeout)
        val lock = Object()
        val pending = ArrayDeque<ControlConnection>()
        val threads = ArrayList<Thread>()
        val chosen = ArrayList<Accepted>()
        var fatal: PeerException? = null
        var notes = 0
        var strays = 0
        var lastStray: String? = null
        val abandoned = HashSet<ControlConnection>()
        val port = listener.localPort
        fun stray(c: ControlConnection, why: String?) {
            synchronized(lock) {
                strays++
                if (why != null) lastStray = why
            }
            c.close() // after counting: whoever sees it closed sees it counted
        }
        fun strayWords(): String = synchronized(lock) {
            if (strays == 0) "" else "closed $strays stray connection${if (strays == 1) "" else "s"} that did not complete the hello" +
                (lastStray?.let { " (the last: ${printable(it)})" } ?: "")
        }
        try {
            while (synchronized(lock) { chosen.size < count && fatal == null }) {
                if (!keepWaiting()) throw java.util.concurrent.CancellationException("waiting for a client on TCP port $port was cancelled")
                val left = end - System.nanoTime()
                if (left <= 0) break
                // At most 100 ms per accept: a client found by a judging thread ends the loop.
                listener.soTimeout = ((left + 999_999) / 1_000_000).coerceIn(1, 100).toInt()
                val socket = try {
                    listener.accept()
                } catch (_: SocketTimeoutException) {
                    continue
                }
                val acceptedAt = System.nanoTime()
                val c = try {
                    ControlConnection.over(socket, timeout, Role.CLIENT, "$who at ${describe(socket.remoteSocketAddress)}")
                } catch (e: IOException) {
                    socket.close()
                    synchronized(lock) { strays++ }
                    continue
                }
                c.handshakeDeadline(minOf(deadlineAfter(timeout, acceptedAt), end))
                val evicted = synchronized(lock) {
                    pending.addLast(c)
                    if (pending.size > MAX_PENDING) pending.removeFirst() else null
                }
                evicted?.let {
                    synchronized(lock) { abandoned.add(it) }
                    it.close() // its thread counts it
                }
                val t = Thread.ofPlatform().daemon(true).name("rdma-run-control-judge").unstarted {
                    try {
                        // authenticate() draws a fresh nonce for each connection: a proof seen on one cannot be replayed on another.
                        val key = c.authenticate(local)
                        val won = synchronized(lock) {
                            pending.remove(c)
                            if (chosen.size < count && fatal == null) Accepted(c, acceptedAt, key).also { chosen.add(it) } else null
                        }
                        if (won == null) {
                            c.trySend(Failure("the server already has its client"))
                            stray(c, "${c.peerLabel} came after the server had its client")
                        }
                    } catch (e: Exception) {
                        val dropped = synchronized(lock) { pending.remove(c); c in abandoned }
                        if (!dropped && e is PeerException && e.endsTheWait) {
                            synchronized(lock) { if (fatal == null && chosen.size < count) fatal = e }
                            c.close()
                        } else {
                            val say = !dropped && e is PeerException && e.worthNoting && synchronized(lock) { notes++ < MAX_REFUSAL_NOTES }
                            stray(c, if (dropped) "${c.peerLabel} was still in its hello when the server closed it" else e.message)
                            if (say) note("refused a connection (${printable(e.message.orEmpty())}); still waiting for ${if (count == 1) "the client" else "the others"}")
                        }
                    }
                }
                synchronized(lock) {
                    threads.removeIf { !it.isAlive } // a port scan must not pile up finished threads
                    threads.add(t)
                }
                t.start()
            }
        } catch (e: Throwable) {
            synchronized(lock) { chosen.toList() }.forEach { it.connection.close() } // a wait that ends early hands none out
            if (e is IOException) throw PeerException("accepting the client on TCP port $port failed: ${e.message}", e)
            throw e
        } finally {
            // The wait is over, one way or the other: the rest are strays (or the cancelled wait's).
            // Past the end their own deadlines have passed too: let them say so before closing them.
            if (System.nanoTime() - end >= 0) synchronized(lock) { threads.toList() }.forEach { it.join(200) }
            val rest = synchronized(lock) { pending.toList().also { abandoned.addAll(it) } }
            rest.forEach { it.close() }
            threads.forEach { it.join(1000) }
        }
        val found = synchronized(lock) { chosen.toList() }
        // The clients taken so far (rank 0's other ranks) hear why the wait ended, then go.
        fun release(sentence: String) = found.forEach {
            it.connection.trySend(Failure("the server stopped waiting for its other clients: $sentence"))
            it.connection.close()
        }
        synchronized(lock) { fatal }?.let { e ->
            release(e.message.orEmpty())
            throw e
        }
        if (found.size < count) {
            val words = strayWords()
            val who = if (count == 1) "no client" else "${found.size} of the $count clients"
            val sentence = "$who completed the hello on TCP port $port within $timeout" + if (words.isEmpty()) "" else "; $words"
            release(sentence)
            throw RdmaTimeoutException(sentence)
        }
        strayWords().takeIf { it.isNotEmpty() }?.let { note("$it; " + if (count == 1) "${found[0].connection.peerLabel} completed it" else "the $count clients completed it") }
        return found
    }
}
