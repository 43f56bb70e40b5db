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
 * The handshake has three steps, and nothing about this side's QPs or memory goes out before the
 * peer passed the first two:
 *  1. [authenticate]: both sides write the magic and an [Intro] (version, role, a fresh nonce,
 *     the kind of secret) at once, and judge the other's: another version, a secret on one side
 *     only end the connection with one sentence. Nothing of the scenario is in it.
 *  2. also in [authenticate]: the client sends its [Proof] of the secret and of each part of the
 *     plan (HMACs over both nonces); the server checks it (constant time) and only then sends its
 *     own, which the client checks. Both derive soft0's fabric key; it never travels.
 *  3. [exchangeHellos]: the [Hello]s (QP endpoints, buffers, rkeys, PSNs), each validated field
 *     by field before use.
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
    private fun readFrame(what: String, magic: Boolean = false, max: Int = FrameCodec.MAX_FRAME): Frame {
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

    /** Blocking read of the next frame (before [startWatching], under the handshake deadline), [waitingFor] a noun ("ready signal"); a Failure frame becomes a [PeerException]. */
    fun receive(waitingFor: String): Frame {
        val frame = readFrame(waitingFor)
        if (frame is Failure) {
            peerFailed = true
            throw PeerException("$peerLabel failed: ${printable(frame.message)}")
        }
        return frame
    }

    /** Ends the handshake with [sentence]: the peer is told [toPeer] (once), this side throws. */
    private fun reject(sentence: String, toPeer: String = sentence, noteNow: Boolean = false): Nothing {
        trySend(Failure(toPeer))
        throw PeerException(sentence).also { it.worthNoting = noteNow }
    }

    /**
     * Reads the peer's next handshake frame of type [T] ([what] names it), of at most [max] bytes;
     * its failure report or another frame ends the handshake.
     */
    private inline fun <reified T : Frame> readStep(what: String, max: Int = FrameCodec.MAX_INTRO_FRAME): T =
        when (val f = readFrame(what, max = max)) {
            is T -> f
            is Failure -> {
                peerFailed = true
                throw PeerException("$peerLabel refused the connection: ${printable(f.message)}")
            }
            else -> throw PeerException("$peerLabel sent ${frameName(f)} where its $what was due: it is not a compatible rdma-run")
        }

    /**
     * Steps 1 and 2 of the handshake (see the class): returns soft0's fabric key for this
     * connection ([Handshake.fabricKey], derived on both sides, never sent) once the peer proved
     * that it knows the secret and runs the same plan. Sends nothing but this side's intro and
     * proof, the latter on the server only after the client's proof held. When both proved the
     * secret but their plans differ, both show their plan's lines and end with the first
     * difference, and the server stops waiting for another client ([PeerException.endsTheWait]).
     */
    fun authenticate(local: Handshake.Credentials): dev.rdmarun.runtime.FabricKey {
        val intro = Intro(CONTROL_PROTOCOL_VERSION, local.role, Handshake.nonce(), local.token.kind)
        // A peer that closed at once (a port scan) breaks this write: what it sent, or its EOF, says more.
        val unsent = try {
            synchronized(writeLock) {
                FrameCodec.io("$peerLabel to take the intro") {
                    writeMagicLocked()
                    FrameCodec.write(output, intro)
                }
            }
            null
        } catch (e: PeerException) {
            e
        }
        val frame = try {
            readFrame("hello", magic = true, max = FrameCodec.MAX_INTRO_FRAME).also { if (unsent != null) throw unsent }
        } catch (e: PeerException) {
            // Another version, another protocol, garbage: tell the peer, which may be an rdma-run.
            if (e.cause !is IOException) trySend(Failure(e.message.orEmpty()))
            throw e
        } catch (e: RdmaTimeoutException) {
            trySend(Failure(e.message.orEmpty())) // a silent or dripping peer may still read
            throw e
        }
        val remote = when (frame) {
            is Intro -> frame
            is Failure -> {
                peerFailed = true
                throw PeerException("$peerLabel refused the connection: ${printable(frame.message)}")
            }
            else -> throw PeerException("$peerLabel sent ${frameName(frame)} where its hello was due: it is not a compatible rdma-run")
        }
        Handshake.introMismatch(intro, remote, peerLabel)?.let { reject(printable(it)) }
        val secret = local.token.key()
        try {
            val client = local.role == Role.CLIENT
            val (cn, sn) = if (client) intro.nonce to remote.nonce else remote.nonce to intro.nonce
            val mine = Proof(Handshake.secretProof(secret, local.role, cn, sn), Handshake.sectionProofs(secret, local.sections, local.role, cn, sn))
            if (client) send(mine)
            val proof = readStep<Proof>("proof")
            if (!Handshake.proofMatches(Handshake.secretProof(secret, remote.role, cn, sn), proof.secret)) {
                when {
                    local.token.kind == SecretKind.NONE -> reject("$peerLabel sent a wrong proof: it is not a compatible rdma-run")
                    client -> reject("$peerLabel does not know the secret (its proof is wrong): it is not the peer this side expects")
                    else -> reject(Handshake.secretsDiffer(local.token.kind, remote.secret, peerLabel),
                        toPeer = Handshake.secretsDiffer(remote.secret, local.token.kind, "the ${local.role.label}"), noteNow = true)
                }
            }
            val differing = Handshake.differingSections(Handshake.sectionProofs(secret, local.sections, remote.role, cn, sn), proof.sections)
            if (differing.isNotEmpty() && local.token.kind == SecretKind.NONE) {
                // Without a secret the plan is all a client proves: show nothing more to one that does not match it.
                val words = Handshake.sectionWords(differing)
                reject("$peerLabel runs a different scenario: the $words differ",
                    toPeer = "the ${local.role.label} runs a different scenario: the $words differ", noteNow = true)
            }
            if (!client) send(mine)
            if (differing.isNotEmpty()) {
                // Both proved the secret: each shows its plan, and each names the first difference.
                if (!client) send(PlanLines(local.planLines))
                // Only a peer that proved the secret gets here: its plan may be as long as Handshake.validate allows.
                val theirs = readStep<PlanLines>("plan", max = FrameCodec.MAX_FRAME)
                if (client) send(PlanLines(local.planLines))
                if (theirs.lines.size > Handshake.MAX_LIST || theirs.lines.any { it.length > Handshake.MAX_STRING }) {
                    throw PeerException("$peerLabel sent an invalid plan: more than ${Handshake.MAX_LIST} lines or a line longer than ${Handshake.MAX_STRING} characters")
                }
                val difference = Handshake.planDifference(local.planLines, theirs.lines, remote.role)
                    ?: "the ${Handshake.sectionWords(differing)} differ"
                throw PeerException(printable("$peerLabel runs a different scenario: $difference")).also { it.endsTheWait = true }
            }
            return Handshake.fabricKey(local.token, local.fingerprint, cn, sn)
        } finally {
            secret?.fill(0)
        }
    }

    /**
     * Step 3: sends [local] and returns the remote's hello once it fits this side's
     * ([Handshake.mismatch]) and every field is valid ([Handshake.validate] against [expected]).
     * Both sides send at once: by now each knows the other is its peer.
     */
    fun exchangeHellos(local: Hello, expected: Handshake.Expected): Hello {
        send(local)
        val frame = readFrame("hello")
        if (frame is Failure) {
            peerFailed = true
            throw PeerException("${peerLabel} failed: ${printable(frame.message)}")
        }
        val remote = frame as? Hello ?: throw PeerException("$peerLabel sent ${frameName(frame)} where its hello was due: it is not a compatible rdma-run")
        // Both quote the remote's plan and parameters: escaped.
        Handshake.mismatch(local, remote)?.let { reject(printable(it)) }
        Handshake.validate(remote, expected, peerLabel)?.let { reject(printable(it)) }
        return remote
    }

    /** Steps 1 to 3 in one call (tests; a [local] hello of either role), with [token] or none. */
    fun handshake(local: Hello, token: ControlToken = ControlToken.none(), expected: Handshake.Expected? = null): Hello {
        authenticate(Handshake.Credentials(local.role, local.fingerprint, Fingerprint.sections(local.plan), local.plan, token))
        return exchangeHellos(local, expected ?: Handshake.Expected(local.qpCount, local.recvDepth,
            local.qps.firstOrNull()?.buffer?.length ?: 0))
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
                            throw PeerException("the ${peerRole.label} failed: ${printable(frame.message)}")
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
                    val lost: Exception = when (e.cause) {
                        is SocketTimeoutException -> if (deadlineInput.bytesSinceDeadline > 0) {
                            RdmaTimeoutException("the ${peerRole.label} sent its frames too slowly: no complete frame within $timeout", e)
                        } else {
                            RdmaTimeoutException("the ${peerRole.label} sent nothing for $timeout (not even heartbeats): it hangs or the network is down", e)
                        }
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
        private fun frameName(f: Frame): String = when (f) {
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

        /** Closes a connection whose write outlived its timeout ([send]); one daemon thread for all. */
        private val WRITE_WATCHDOG = ScheduledThreadPoolExecutor(1) { r ->
            Thread.ofPlatform().daemon(true).name("rdma-run-control-write-watchdog").unstarted(r)
        }.apply { removeOnCancelPolicy = true }

        /** At most this many accepted connections are judged at once; a newer one closes the oldest. */
        const val MAX_PENDING = 8

        /** A client that passed steps 1 and 2 ([authenticate]), when it connected, and the fabric key of the connection. */
        class Accepted(val connection: ControlConnection, val acceptedAt: Long, val fabricKey: dev.rdmarun.runtime.FabricKey)

        /** Refusals a waiting server says at once ([PeerException.worthNoting]); later ones are only counted. */
        private const val MAX_REFUSAL_NOTES = 3

        /** How "the client at 10.0.0.2:41234" reads. */
        private fun describe(address: java.net.SocketAddress?): String = when (address) {
            is InetSocketAddress -> (address.address?.hostAddress ?: address.hostString) + ":" + address.port
            else -> printable(address.toString(), 80)
        }

        /**
         * Accepts connections on [listener] until one passes steps 1 and 2 of the handshake
         * ([authenticate] with [local]), for at most [timeout]. Every other connection (a port
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
                   note: (String) -> Unit = {}): Accepted {
            val end = deadlineAfter(timeout)
            val lock = Object()
            val pending = ArrayDeque<ControlConnection>()
            val threads = ArrayList<Thread>()
            var chosen: Accepted? = null
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
                while (synchronized(lock) { chosen == null && fatal == null }) {
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
                        ControlConnection(socket, timeout, Role.CLIENT, "the client at ${describe(socket.remoteSocketAddress)}")
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
                                if (chosen == null && fatal == null) Accepted(c, acceptedAt, key).also { chosen = it } else null
                            }
                            if (won == null) {
                                c.trySend(Failure("the server already has its client"))
                                stray(c, "${c.peerLabel} came after the server had its client")
                            }
                        } catch (e: Exception) {
                            val dropped = synchronized(lock) { pending.remove(c); c in abandoned }
                            if (!dropped && e is PeerException && e.endsTheWait) {
                                synchronized(lock) { if (fatal == null && chosen == null) fatal = e }
                                c.close()
                            } else {
                                val say = !dropped && e is PeerException && e.worthNoting && synchronized(lock) { notes++ < MAX_REFUSAL_NOTES }
                                stray(c, if (dropped) "${c.peerLabel} was still in its hello when the server closed it" else e.message)
                                if (say) note("refused a connection (${printable(e.message.orEmpty())}); still waiting for the client")
                            }
                        }
                    }
                    synchronized(lock) {
                        threads.removeIf { !it.isAlive } // a port scan must not pile up finished threads
                        threads.add(t)
                    }
                    t.start()
                }
            } catch (e: IOException) {
                throw PeerException("accepting the client on TCP port $port failed: ${e.message}", e)
            } finally {
                // The wait is over, one way or the other: the rest are strays (or the cancelled wait's).
                // Past the end their own deadlines have passed too: let them say so before closing them.
                if (System.nanoTime() - end >= 0) synchronized(lock) { threads.toList() }.forEach { it.join(200) }
                val rest = synchronized(lock) { pending.toList().also { abandoned.addAll(it) } }
                rest.forEach { it.close() }
                threads.forEach { it.join(1000) }
            }
            synchronized(lock) { fatal }?.let { throw it }
            val found = synchronized(lock) { chosen }
            if (found == null) {
                val words = strayWords()
                throw RdmaTimeoutException("no client completed the hello on TCP port $port within $timeout" + if (words.isEmpty()) "" else "; $words")
            }
            strayWords().takeIf { it.isNotEmpty() }?.let { note("$it; ${found.connection.peerLabel} completed it") }
            return found
        }

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
                    return ControlConnection(socket, timeout, Role.SERVER, "the server at ${printable(peer.host, 80)}:${peer.port}")
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
            val sentence = "cannot connect to ${peer.host}:${peer.port} within $timeout: ${last.message ?: "no answer"} (is the server started with --listen ${peer.port}?)"
            throw if (timedOut) RdmaTimeoutException(sentence, last) else PeerException(sentence, last)
        }

        /** A connection over an already connected socket (tests; launchers that accept themselves). */
        fun over(socket: Socket, timeout: Duration, peerRole: Role): ControlConnection = ControlConnection(socket, timeout, peerRole)
    }
}
