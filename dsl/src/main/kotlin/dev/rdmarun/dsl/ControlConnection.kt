package dev.rdmarun.dsl

import java.io.BufferedInputStream
import java.io.BufferedOutputStream
import java.io.Closeable
import java.io.DataInputStream
import java.io.DataOutputStream
import java.io.IOException
import java.net.ConnectException
import java.net.InetAddress
import java.net.InetSocketAddress
import java.net.NoRouteToHostException
import java.net.ServerSocket
import java.net.Socket
import java.net.SocketTimeoutException
import java.net.UnknownHostException
import java.util.concurrent.CancellationException
import kotlin.time.Duration
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.ExperimentalCoroutinesApi
import kotlinx.coroutines.selects.onTimeout
import kotlinx.coroutines.selects.select

/**
 * The scenario's one TCP connection to its peer: the handshake ([handshake]), then, while the
 * scenario runs, barriers and the end-of-run phases ([await]), failure reports and heartbeats.
 *
 * Every blocking read has the socket timeout; while the scenario runs a reader thread treats a
 * peer that sends nothing (heartbeats go out every third of the timeout) as lost, and so does
 * a closed connection: a dead or hung peer ends the scenario with a sentence, never a hang.
 */
internal class ControlConnection private constructor(
    private val socket: Socket,
    private val timeout: Duration,
    /** The peer's role, for messages ("the client failed: ..."). */
    private val peerRole: Role,
) : Closeable {
    private val input = DataInputStream(BufferedInputStream(socket.getInputStream()))
    private val output = DataOutputStream(BufferedOutputStream(socket.getOutputStream()))
    private val writeLock = Any()
    private val inbox = Channel<Frame>(Channel.UNLIMITED)

    @Volatile
    private var closing = false
    private var reader: Thread? = null
    private var heartbeat: Thread? = null

    init {
        socket.tcpNoDelay = true
        socket.soTimeout = timeout.inWholeMilliseconds.coerceIn(1, Int.MAX_VALUE.toLong()).toInt()
    }

    fun send(frame: Frame) {
        synchronized(writeLock) {
            FrameCodec.io("the peer to take frame ${frame::class.simpleName}") { FrameCodec.write(output, frame) }
        }
    }

    /** Sends, ignoring a connection that is already gone (for failure reports on the way out). */
    fun trySend(frame: Frame) {
        try {
            send(frame)
        } catch (_: RuntimeException) {
            // the peer is gone; there is nobody left to tell
        }
    }

    /** Blocking read of the next frame (before [startWatching]); a Failure frame becomes a [PeerException]. */
    fun receive(waitingFor: String): Frame {
        val frame = FrameCodec.read(input, waitingFor)
        if (frame is Failure) throw PeerException("the ${peerRole.label} failed: ${printable(frame.message)}")
        return frame
    }

    /**
     * Exchanges hellos and judges the remote's. The client speaks first and the server answers
     * even a hello it will reject, so both sides see both hellos and report the same mismatch.
     * On a mismatch this side also sends a Failure frame before throwing.
     */
    fun handshake(local: Hello): Hello {
        val what = "the ${peerRole.label}'s hello"
        val remote: Hello
        if (local.role == Role.CLIENT) {
            synchronized(writeLock) {
                FrameCodec.io("the server to accept the hello") {
                    FrameCodec.writeMagic(output)
                    FrameCodec.write(output, local)
                }
            }
            FrameCodec.readMagic(input, what)
            remote = expectHello(receive(what))
        } else {
            FrameCodec.readMagic(input, what)
            val length = FrameCodec.io(what) { input.readInt() }
            val raw = if (length in 1..FrameCodec.MAX_FRAME) ByteArray(length).also { b -> FrameCodec.io(what) { input.readFully(b) } } else null
            // Answer before judging, so that the client can report the mismatch from its side too.
            synchronized(writeLock) {
                FrameCodec.io("the client to take the hello") {
                    FrameCodec.writeMagic(output)
                    FrameCodec.write(output, local)
                }
            }
            if (raw == null) {
                throw PeerException("the peer sent a frame of $length bytes while this side waited for $what " +
                    "(frames are 1..${FrameCodec.MAX_FRAME} bytes): it is not a compatible rdma-run, or the stream is corrupt")
            }
            remote = try {
                expectHello(FrameCodec.decode(raw).also { if (it is Failure) throw PeerException("the client failed: ${printable(it.message)}") })
            } catch (e: PeerException) {
                trySend(Failure(e.message ?: "bad hello"))
                throw e
            }
        }
        Handshake.mismatch(local, remote)?.let { printable(it) }?.let { sentence -> // it quotes the remote's plan and parameters
            trySend(Failure(sentence))
            throw PeerException(sentence)
        }
        return remote
    }

    private fun expectHello(frame: Frame): Hello =
        frame as? Hello ?: throw PeerException("the ${peerRole.label} sent ${frameName(frame)} where its hello was due: it is not a compatible rdma-run")

    /**
     * From now on a reader thread takes the frames: barriers and done frames go to [await],
     * heartbeats go to [onHeartbeat] (they prove the peer alive and carry its progress); a Failure
     * frame, a closed connection or silence longer than the timeout is reported once to [onLost].
     * This side's heartbeats ([heartbeat] makes each) go out every quarter of the timeout, at
     * least once a second.
     */
    fun startWatching(onLost: (PeerException) -> Unit, onHeartbeat: (Heartbeat) -> Unit, onFrame: (Frame) -> Unit, heartbeat: () -> Heartbeat) {
        reader = Thread.ofPlatform().daemon(true).name("rdma-run-control-reader").start {
            try {
                while (!closing) {
                    val frame = FrameCodec.read(input, "the ${peerRole.label}'s next frame")
                    when (frame) {
                        is Heartbeat -> {
                            onHeartbeat(frame)
                            continue
                        }
                        is Failure -> throw PeerException("the ${peerRole.label} failed: ${printable(frame.message)}")
                        else -> {
                            onFrame(frame)
                            inbox.trySend(frame)
                        }
                    }
                    // The peer closes right after its last frame: stop reading before that EOF.
                    if (frame is Done && frame.isPhase(2)) break
                }
            } catch (e: PeerException) {
                if (!closing) {
                    val lost = when (e.cause) {
                        is SocketTimeoutException ->
                            PeerException("the ${peerRole.label} sent nothing for $timeout (not even heartbeats): it hangs or the network is down", e)
                        is java.io.EOFException ->
                            PeerException("the ${peerRole.label} closed the control connection in the middle of the scenario (it crashed or was killed)", e)
                        else -> e
                    }
                    inbox.close(lost)
                    onLost(lost)
                }
            }
        }
        val period = (timeout.inWholeMilliseconds / 4).coerceIn(1, 1000)
        this.heartbeat = Thread.ofPlatform().daemon(true).name("rdma-run-control-heartbeat").start {
            try {
                while (!closing) {
                    Thread.sleep(period)
                    if (!closing) send(heartbeat())
                }
            } catch (_: InterruptedException) {
                // closing
            } catch (_: RuntimeException) {
                // the reader reports a lost connection
            }
        }
    }

    /**
     * Waits for [expected] as the peer's next frame; anything else means the scenarios differ.
     * [check] runs every 100 ms while it waits and ends the wait by throwing (a deadline).
     * Returns the frame (a [Done] frame matches any of the same phase, whatever its counts).
     */
    @OptIn(ExperimentalCoroutinesApi::class)
    suspend fun await(expected: Frame, waitingFor: String, check: () -> Unit): Frame {
        var frame: Frame? = null
        while (frame == null) {
            frame = try {
                // select, not withTimeout around receive(): a timeout racing a receive could drop the frame.
                select {
                    inbox.onReceive { it }
                    onTimeout(100) { null }
                }
            } catch (e: PeerException) {
                throw e
            } catch (e: kotlinx.coroutines.channels.ClosedReceiveChannelException) {
                throw PeerException("the control connection closed while this side waited for $waitingFor", e)
            }
            if (frame == null) check()
        }
        val matches = if (expected is Done) frame is Done && frame.isPhase(expected.phase) else frame == expected
        if (!matches) {
            if (frame is Done && frame.isPhase(1)) throw PeerException("the ${peerRole.label} finished its scenario while this side waited for $waitingFor")
            throw PeerException("the ${peerRole.label} sent ${frameName(frame)} while this side waited for $waitingFor: the two sides run different scenarios")
        }
        return frame
    }

    override fun close() {
        closing = true
        heartbeat?.interrupt()
        try {
            socket.close()
        } catch (_: IOException) {
            // closing anyway
        }
        inbox.close()
    }

    companion object {
        private fun frameName(f: Frame): String = when (f) {
            is Barrier -> "barrier ${f.seq}"
            is Done -> if (f.phase == 1) "its end of scenario" else "its final frame"
            is Hello -> "a hello"
            Ready -> "its ready signal"
            is Heartbeat -> "a heartbeat"
            is Failure -> "a failure report"
        }

        /** Binds the server's port before any RDMA setup, so a busy port fails first. */
        fun listen(peer: Peer.Listen, timeout: Duration): ServerSocket = try {
            ServerSocket().apply {
                reuseAddress = true
                soTimeout = timeout.inWholeMilliseconds.coerceIn(1, Int.MAX_VALUE.toLong()).toInt()
                bind(InetSocketAddress(peer.bindAddress?.let { InetAddress.getByName(it) }, peer.port))
            }
        } catch (e: IOException) {
            throw ScenarioException("cannot listen on TCP port ${peer.port}: ${e.message}", e)
        }

        /** Accepts one client within the timeout. */
        fun accept(listener: ServerSocket, timeout: Duration): ControlConnection = try {
            ControlConnection(listener.accept(), timeout, Role.CLIENT)
        } catch (e: SocketTimeoutException) {
            throw PeerException("no client connected to TCP port ${listener.localPort} within $timeout", e)
        } catch (e: IOException) {
            throw PeerException("accepting the client on TCP port ${listener.localPort} failed: ${e.message}", e)
        }

        /**
         * Connects, retrying refused connections until the timeout: the server may start later.
         * Stops early, with a CancellationException, once [keepTrying] says no (checked every second at most).
         */
        fun connect(peer: Peer.Connect, timeout: Duration, keepTrying: () -> Boolean = { true }): ControlConnection {
            val deadline = System.nanoTime() + timeout.inWholeNanoseconds
            var last: IOException
            while (true) {
                if (!keepTrying()) throw CancellationException("connecting to ${peer.host}:${peer.port} was cancelled")
                val socket = Socket()
                try {
                    val left = ((deadline - System.nanoTime()) / 1_000_000).coerceAtLeast(1)
                    // At most a second per attempt (a timed-out attempt is retried): keepTrying is checked in between.
                    socket.connect(InetSocketAddress(peer.host, peer.port), left.coerceAtMost(1000).toInt())
                    return ControlConnection(socket, timeout, Role.SERVER)
                } catch (e: UnknownHostException) {
                    socket.close()
                    throw ScenarioException("unknown host '${peer.host}'", e)
                } catch (e: IOException) {
                    socket.close()
                    last = e
                    if (e !is ConnectException && e !is NoRouteToHostException && e !is SocketTimeoutException) break
                }
                if (System.nanoTime() >= deadline) break
                Thread.sleep(100) // the server may not listen yet
            }
            throw PeerException("cannot connect to ${peer.host}:${peer.port} within $timeout: ${last.message ?: "no answer"} (is the server started with --listen ${peer.port}?)", last)
        }

        /** A connection over an already connected socket (tests; launchers that accept themselves). */
        fun over(socket: Socket, timeout: Duration, peerRole: Role): ControlConnection = ControlConnection(socket, timeout, peerRole)
    }
}

/** Peer text made safe for a terminal: control characters (escape sequences among them) become \uXXXX. */
internal fun printable(text: String): String = buildString(text.length) {
    for (c in text) {
        if (c.isISOControl() || c in '\u2028'..'\u2029' || c == '\u200e' || c == '\u200f' || c in '\u202a'..'\u202e') {
            append("\\u%04x".format(c.code))
        } else {
            append(c)
        }
    }
}
