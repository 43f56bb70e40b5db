package dev.rdmarun.dsl

import java.io.BufferedInputStream
import java.io.BufferedOutputStream
import java.io.Closeable
import java.io.DataInputStream
import java.io.DataOutputStream
import java.io.IOException
import java.net.Socket
import java.net.SocketException
import java.net.SocketTimeoutException
import java.util.concurrent.ScheduledThreadPoolExecutor
import java.util.concurrent.TimeUnit
import kotlin.time.Duration
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.ExperimentalCoroutinesApi
import kotlinx.coroutines.selects.onTimeout
import kotlinx.coroutines.selects.select

/**
 * The scenario's one TCP connection to its peer: the handshake, then, while the scenario runs,
 * barriers and the end-of-run phases ([await]), failure reports and heartbeats.
 *
 * The handshake's steps ([authenticate], [exchangeHellos]) are in ControlHandshake.kt: nothing about
 * this side's QPs or memory goes out before the peer passed the first two.
 *
 * One deadline, the scenario's timeout, bounds the whole handshake (set with [handshakeDeadline]),
 * not each read: before every read the socket timeout is what is left of it ([DeadlineInput]), so
 * a peer that drips a byte a second is cut off when the deadline passes. While the scenario runs
 * a reader thread gives every frame the timeout: a peer that sends no complete frame (heartbeats
 * go out every quarter of the timeout) is lost, and so is a closed connection: a dead, hung or
 * dripping peer ends the scenario with a sentence, never a hang.
 *
 * A failure report ([Failure]) goes out at most once per connection, always after the magic.
 */
internal class ControlConnection private constructor(
    private val socket: Socket,
    private val timeout: Duration,
    /** The peer's role, for messages ("the client failed: ..."). */
    private val peerRole: Role,
    /**
     * The peer in the handshake's sentences: "the server at host:port" (which of several
     * connections, a stray or the peer); once the scenario runs, sentences say "the server".
     */
    val peerLabel: String = "the ${peerRole.label}",
) : Closeable {
    private val deadlineInput = DeadlineInput(socket)
    private val input = DataInputStream(BufferedInputStream(deadlineInput))
    private val output = DataOutputStream(BufferedOutputStream(socket.getOutputStream()))
    private val writeLock = Any()
    private val inbox = Channel<Frame>(Channel.UNLIMITED)

    @Volatile
    private var closing = false
    private var reader: Thread? = null
    private var heartbeat: Thread? = null

    /** The write watchdog closed the socket: the peer stopped reading (see [send]). */
    @Volatile
    private var writeStalled = false

    /** Guarded by [writeLock]: the magic went out, a failure report went out. */
    private var magicSent = false
    private var failureSent = false

    /** The peer reported a failure: it is closing, telling it ours is pointless. */
    @Volatile
    private var peerFailed = false

    init {
        socket.tcpNoDelay = true
        handshakeDeadline(deadlineAfter(timeout))
    }

    /** The deadline (System.nanoTime()) for every read until [startWatching]. */
    fun handshakeDeadline(nanoTime: Long) {
        deadlineInput.deadline = nanoTime
    }

    /**
     * Writes the handshake's first frame, [intro], after the magic, without the write watchdog
     * ([authenticate]: a peer that closed at once breaks it, and what it sent says more).
     */
    fun sendIntro(intro: Intro) {
        synchronized(writeLock) {
            FrameCodec.io("$peerLabel to take the intro") {
                writeMagicLocked()
                FrameCodec.write(output, intro)
            }
        }
    }

    /** The peer refused the connection with [failure] in the handshake: the sentence; telling it ours is pointless now. */
    fun refusal(failure: Failure): PeerException {
        peerFailed = true
        return PeerException("$peerLabel refused the connection: ${printable(failure.message)}")
    }

    private fun writeMagicLocked() {
        if (!magicSent) {
            FrameCodec.writeMagic(output)
            magicSent = true
        }
    }

    /**
     * Writes [frame] within the timeout. A peer that stops reading fills the socket's buffers and
     * blocks the write, which Java cannot bound: a watchdog closes the connection when the timeout
     * passes, and the write then fails with an [RdmaTimeoutException] that says so.
     */
    fun send(frame: Frame) {
        synchronized(writeLock) {
            if (frame is Failure) {
                // Once: a rejected handshake and the scenario's end would otherwise both report.
                if (failureSent || peerFailed) return
                failureSent = true
            }
            val name = frame::class.simpleName
            writeStalled = false
            val watch = WRITE_WATCHDOG.schedule({
                writeStalled = true
                runCatching { socket.close() }
            }, timeout.inWholeNanoseconds, TimeUnit.NANOSECONDS)
            try {
                FrameCodec.io("$peerLabel to take frame $name") {
                    writeMagicLocked()
                    FrameCodec.write(output, frame)
                }
            } catch (e: PeerException) {
                if (!writeStalled) throw e
                throw RdmaTimeoutException("$peerLabel did not take frame $name within $timeout: it stopped reading the control connection", e)
            } finally {
                watch.cancel(false)
            }
        }
    }

    /** Sends, ignoring a connection that is already gone (for failure reports on the way out). */
    fun trySend(frame: Frame) {
        try {
            send(frame)
        } catch (_: RuntimeException) {
            // the peer is gone; there is nobody left to tell
        } catch (_: RdmaTimeoutException) {
            // nor when it stopped reading
        }
    }

    /**
     * Reads one frame under the current deadline; [what] names it in sentences ("hello").
     * An expired deadline is an [RdmaTimeoutException] that says whether the peer was silent or too slow.
     */
    fun readFrame(what: String, magic: Boolean = false, max: Int = FrameCodec.MAX_FRAME): Frame {
        try {
            if (magic) FrameCodec.readMagic(input, "$peerLabel's $what")
            return FrameCodec.read(input, "$peerLabel's $what", max)
        } catch (e: PeerException) {
            if (e.cause !is SocketTimeoutException) throw e
            throw if (deadlineInput.bytesSinceDeadline > 0) {
                RdmaTimeoutException("$peerLabel sent its $what too slowly: no complete $what within $timeout", e)
            } else {
                RdmaTimeoutException("no answer from $peerLabel within $timeout while this side waited for its $what", e)
            }
        }
    }

    /** The peer's Failure frame as this side's exception: "[who]: what it said", escaped once for both. */
    private fun peerFailure(who: String, message: String): PeerException {
        val said = printable(message, MAX_PEER_SENTENCE)
        return PeerException("$who: $said").also { it.peerSaid = said }
    }

    /** Blocking read of the next frame (before [startWatching], under the handshake deadline), [waitingFor] a noun ("ready signal"); a Failure frame becomes a [PeerException]. */
    fun receive(waitingFor: String): Frame {
        val frame = readFrame(waitingFor)
        if (frame is Failure) {
            peerFailed = true
            throw peerFailure("$peerLabel failed", frame.message)
        }
        return frame
    }


    /**
     * From now on a reader thread takes the frames: barriers and done frames go to [await],
     * heartbeats go to [onHeartbeat] (they prove the peer alive and carry its progress); a Failure
     * frame or a closed connection ([PeerException]), or silence longer than the timeout
     * ([RdmaTimeoutException]), is reported once to [onLost].
     * This side's heartbeats ([heartbeat] makes each) go out every quarter of the timeout, at
     * least once a second.
     */
    fun startWatching(onLost: (Exception) -> Unit, onHeartbeat: (Heartbeat) -> Unit, onFrame: (Frame) -> Unit, heartbeat: () -> Heartbeat) {
        reader = Thread.ofPlatform().daemon(true).name("rdma-run-${peerRole.other.label}-control-reader").start {
            try {
                while (!closing) {
                    // Each frame within the timeout: a silent peer and one that drips are both lost.
                    deadlineInput.expireIn(timeout.inWholeNanoseconds)
                    val frame = FrameCodec.read(input, "the ${peerRole.label}'s next frame")
                    when (frame) {
                        is Heartbeat -> {
                            onHeartbeat(frame)
                            continue
                        }
                        is Round -> {
                            onFrame(frame) // a QP's warm-up agreement, beside the scenario's own frames
                            continue
                        }
                        is Failure -> {
                            peerFailed = true
                            // The peer's deadlock verdict is about both sides, not a failure of the peer's own.
                            val how = if (PeerProgress.isStallVerdict(frame.message)) "found both sides stalled" else "failed"
                            throw peerFailure("the ${peerRole.label} $how", frame.message)
                        }
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
                    val lost: Exception = when (val cause = e.cause) {
                        is SocketTimeoutException -> if (deadlineInput.bytesSinceDeadline > 0) {
                            RdmaTimeoutException("the ${peerRole.label} sent its frames too slowly: no complete frame within $timeout", e)
                        } else {
                            RdmaTimeoutException("the ${peerRole.label} sent nothing for $timeout (not even heartbeats): it hangs or the network is down", e)
                        }
                        // A killed peer's kernel sends FIN, or RST when our last heartbeat was still unread there.
                        is java.io.EOFException -> closedMidScenario(e)
                        is SocketException -> if (cause.message == "Connection reset") closedMidScenario(e) else e
                        else -> e
                    }
                    inbox.close(lost)
                    onLost(lost)
                }
            }
        }
        val period = (timeout.inWholeMilliseconds / 4).coerceIn(1, 1000)
        this.heartbeat = Thread.ofPlatform().daemon(true).name("rdma-run-${peerRole.other.label}-control-heartbeat").start {
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

    private fun closedMidScenario(e: PeerException) =
        PeerException("the ${peerRole.label} closed the control connection in the middle of the scenario (it crashed or was killed)", e)

    /**
     * Waits for [expected] as the peer's next frame; anything else means the scenarios differ.
     * [check] runs every 100 ms while it waits and ends the wait by throwing (a deadline).
     * Returns the frame (a [Done] frame matches any of the same phase, whatever its counts; a
     * [RankResults] frame any other).
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
        val matches = when (expected) {
            is Done -> frame is Done && frame.isPhase(expected.phase)
            is RankResults -> frame is RankResults // whatever the results
            else -> frame == expected
        }
        if (!matches) {
            if (frame is Done && frame.isPhase(1)) throw PeerException("the ${peerRole.label} finished its scenario while this side waited for $waitingFor")
            throw PeerException("the ${peerRole.label} sent ${frameName(frame)} while this side waited for $waitingFor: the two sides run different scenarios")
        }
        return frame
    }

    /** The peer's address as this side sees the connection come from it. */
    val remoteHost: String get() = (socket.remoteSocketAddress as? java.net.InetSocketAddress)?.address?.hostAddress ?: "?"

    /** This side's address on the connection: where the peer reached it. */
    val localHost: String get() = socket.localAddress?.hostAddress ?: "?"

    /** A frame of the scenario (a barrier, its end) arrived that no one awaited yet. */
    val framePending: Boolean get() = !inbox.isEmpty

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
        /** How [f] reads in sentences ("the server sent a proof where ..."). */
        fun frameName(f: Frame): String = when (f) {
            is Barrier -> "barrier ${f.seq}"
            is Round -> "the end of a warm-up round"
            is Done -> if (f.phase == 1) "its end of scenario" else "its final frame"
            is Hello -> "a hello"
            is Intro -> "an intro"
            is Proof -> "a proof"
            is PlanLines -> "its plan"
            Ready -> "its ready signal"
            is Heartbeat -> "a heartbeat"
            is Failure -> "a failure report"
            is RankHello -> "a rank's hello"
            is RankTable -> "the table of ranks"
            is RankBarrier -> "rank barrier ${f.seq}"
            is RankResults -> "its results"
        }

        /** Closes a connection whose write outlived its timeout ([send]); one daemon thread for all. */
        private val WRITE_WATCHDOG = ScheduledThreadPoolExecutor(1) { r ->
            Thread.ofPlatform().daemon(true).name("rdma-run-control-write-watchdog").unstarted(r)
        }.apply { removeOnCancelPolicy = true }

        /**
         * A connection over an already connected socket (tests; launchers that accept themselves;
         * [ControlServer], [ControlClient]), whose sentences call the peer [peerLabel].
         */
        fun over(socket: Socket, timeout: Duration, peerRole: Role, peerLabel: String = "the ${peerRole.label}"): ControlConnection =
            ControlConnection(socket, timeout, peerRole, peerLabel)
    }
}
