package dev.rdmarun.dsl

import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldStartWith
import io.kotest.matchers.types.shouldBeInstanceOf
import java.io.DataInputStream
import java.io.DataOutputStream
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.withTimeout

/** The control protocol: codec, strict decoding, and mismatches seen from both ends of a real socket. */
class HandshakeSpec : FunSpec({
    val gid = "00000000000000000000ffff0a4d0001"

    fun hello(
        role: Role,
        qps: Int = 4,
        parameters: Map<String, String> = emptyMap(),
        plan: List<String> = listOf("rdma-run-plan-2", "setting qps=$qps", "setting bufferSize=4096"),
        fingerprint: String = "a".repeat(64),
        access: Set<RemoteAccess> = emptySet(),
    ) = Hello(
        version = CONTROL_PROTOCOL_VERSION,
        role = role,
        qpCount = qps,
        recvDepth = 64,
        maxDestRdAtomic = 1,
        fingerprint = fingerprint,
        parameters = parameters,
        plan = plan,
        access = access,
        qps = List(qps) { QpInfo(0x11 + it, 0x1234 + it, 0, gid, 1024, BufferInfo(0x7f00_0000_1000L + it * 4096L, 0x100 + it, 4096), BufferInfo(0x7f00_0010_0000L, 7, 8)) },
    )

    /** The step-1 frame a raw test peer sends for [h]. */
    fun introFor(h: Hello) = Intro(h.version, h.role, Handshake.nonce(), SecretKind.NONE)

    /** Two connected sockets over 127.0.0.1: (server side, client side). */
    fun connectedPair(): Pair<Socket, Socket> = ServerSocket(0, 1, InetAddress.getLoopbackAddress()).use { listener ->
        val client = Socket(InetAddress.getLoopbackAddress(), listener.localPort)
        listener.accept() to client
    }

    suspend fun <A, B> both(a: suspend () -> A, b: suspend () -> B): Pair<Result<A>, Result<B>> = coroutineScope {
        val x = async(Dispatchers.IO) { runCatching { a() } }
        val y = async(Dispatchers.IO) { runCatching { b() } }
        x.await() to y.await()
    }

    fun server(socket: Socket, timeout: Duration = 5.seconds) = ControlConnection.over(socket, timeout, Role.CLIENT)
    fun client(socket: Socket, timeout: Duration = 5.seconds) = ControlConnection.over(socket, timeout, Role.SERVER)

    context("codec") {
        test("every frame survives a round trip") {
            val frames = listOf(
                hello(Role.CLIENT),
                hello(Role.SERVER, access = setOf(RemoteAccess.WRITE, RemoteAccess.ATOMIC)),
                Ready, Barrier(3), Done(1), Done(1, listOf(3, 0)), Done(2),
                Heartbeat(),
                Heartbeat(progress = 42, waiting = "receive() on QP 0", messagesWaiting = listOf(0, 3), inboxFull = listOf(1)),
                Failure("remote has 2 QPs, this side 4"),
                Intro(CONTROL_PROTOCOL_VERSION, Role.CLIENT, "c".repeat(64), SecretKind.USER),
                Proof("d".repeat(64), Handshake.SECTIONS.associateWith { "e".repeat(64) }),
                PlanLines(listOf("rdma-run-plan-2", "parameter count=100")),
            )
            for (f in frames) FrameCodec.decode(FrameCodec.encode(f)) shouldBe f
        }

        test("a heartbeat carries the sender's progress, what it waits for and its inboxes") {
            val h = Heartbeat(progress = 42, waiting = "receive() on QP 0", messagesWaiting = listOf(0, 3), inboxFull = listOf(1))
            FrameCodec.encode(h).toString(Charsets.UTF_8) shouldBe
                """{"type":"heartbeat","progress":42,"waiting":"receive() on QP 0","messagesWaiting":[0,3],"inboxFull":[1]}"""
            val back = FrameCodec.decode(FrameCodec.encode(h)).shouldBeInstanceOf<Heartbeat>()
            back.progress shouldBe 42
            back.waiting shouldBe "receive() on QP 0"
            back.messagesWaiting shouldBe listOf(0, 3)
            back.inboxFull shouldBe listOf(1)
            Heartbeat() shouldBe Heartbeat(progress = 0, waiting = null, messagesWaiting = emptyList(), inboxFull = emptyList())
        }

        test("a hello carries this side's remote access; its QPs' credit words are required") {
            val h = hello(Role.SERVER, qps = 1, access = setOf(RemoteAccess.READ))
            val text = FrameCodec.encode(h).toString(Charsets.UTF_8)
            text shouldContain "\"access\":[\"READ\"]"
            text shouldContain "\"credit\":{\"addr\":"
            (FrameCodec.decode(text.toByteArray()) as Hello).access shouldBe setOf(RemoteAccess.READ)
            val noCredit = text.replace(Regex("\"credit\":\\{[^}]*\\}"), "\"credit\":null")
            noCredit shouldContain "\"credit\":null"
            shouldThrow<PeerException> { FrameCodec.decode(noCredit.toByteArray()) }.message shouldStartWith "the peer sent a malformed frame"
        }

        test("the wire form is JSON named by type") {
            FrameCodec.encode(Barrier(2)).toString(Charsets.UTF_8) shouldBe """{"type":"barrier","seq":2}"""
        }

        test("decoding is strict: unknown keys, missing fields and unknown types are errors") {
            for (text in listOf("""{"type":"barrier","seq":1,"extra":2}""", """{"type":"barrier"}""", """{"type":"teleport"}""", """{type:barrier,seq:1}""")) {
                shouldThrow<PeerException> { FrameCodec.decode(text.toByteArray()) }.message shouldStartWith "the peer sent a malformed frame"
            }
        }

        test("garbage is an error, not a crash") {
            shouldThrow<PeerException> { FrameCodec.decode(byteArrayOf(0, 1, 2, -1)) }.message shouldStartWith "the peer sent a malformed frame"
        }

        test("a hello of another version is reported as a version mismatch before its fields are judged") {
            val next = CONTROL_PROTOCOL_VERSION + 1
            val newer = """{"type":"hello","version":$next,"somethingNew":true}"""
            shouldThrow<PeerException> { FrameCodec.decode(newer.toByteArray()) }.message shouldBe
                "remote speaks control protocol version $next, this side ${CONTROL_PROTOCOL_VERSION}: use the same rdma-run version on both sides"
        }
    }

    context("mismatch sentences") {
        test("QP count, seen from each side") {
            Handshake.mismatch(hello(Role.SERVER, qps = 4), hello(Role.CLIENT, qps = 2)) shouldBe "remote has 2 QPs, this side 4"
            Handshake.mismatch(hello(Role.CLIENT, qps = 2), hello(Role.SERVER, qps = 4)) shouldBe "remote has 4 QPs, this side 2"
            Handshake.mismatch(hello(Role.CLIENT, qps = 4), hello(Role.SERVER, qps = 1)) shouldBe "remote has 1 QP, this side 4"
        }
        test("parameters") {
            Handshake.mismatch(hello(Role.SERVER, parameters = mapOf("size" to "64")), hello(Role.CLIENT, parameters = mapOf("size" to "4096"))) shouldBe
                "parameter size is 4096 on the remote, 64 on this side"
            Handshake.mismatch(hello(Role.SERVER), hello(Role.CLIENT, parameters = mapOf("n" to "1"))) shouldBe
                "parameter n is set on the remote (1) but not on this side"
            Handshake.mismatch(hello(Role.SERVER, parameters = mapOf("n" to "1")), hello(Role.CLIENT)) shouldBe
                "parameter n is set on this side (1) but not on the remote"
        }
        test("scenario fingerprint, naming the first difference") {
            val mine = hello(Role.SERVER, plan = listOf("f", "setting bufferSize=64"), fingerprint = "1".repeat(64))
            val theirs = hello(Role.CLIENT, plan = listOf("f", "setting bufferSize=4096"), fingerprint = "2".repeat(64))
            Handshake.mismatch(mine, theirs) shouldBe
                "remote runs a different scenario (plan 222222222222, this side 111111111111): remote has 'setting bufferSize=4096', this side 'setting bufferSize=64'"
            val scripted = hello(Role.CLIENT, plan = listOf("f", "setting bufferSize=64", "script sha256=abc"), fingerprint = "3".repeat(64))
            Handshake.mismatch(mine, scripted) shouldBe
                "remote runs a different scenario (plan 333333333333, this side 111111111111): remote has 'script sha256=abc', this side does not"
            Handshake.mismatch(scripted.copy(role = Role.SERVER), mine.copy(role = Role.CLIENT)) shouldBe
                "remote runs a different scenario (plan 111111111111, this side 333333333333): this side has 'script sha256=abc', remote does not"
        }
        test("the real plans of two scenarios: the differing shared setting is named") {
            val server = Fixtures.checkPlan(RdmaOptions(peer = Peer.listen(18515))) { qps(4); inboxDepth(16); connect(peer) }
            val client = Fixtures.checkPlan(RdmaOptions(peer = Peer.connect("h"))) { qps(4); connect(peer) }
            val mine = hello(Role.SERVER, plan = server.canonicalLines(), fingerprint = server.fingerprint)
            val theirs = hello(Role.CLIENT, plan = client.canonicalLines(), fingerprint = client.fingerprint)
            Handshake.mismatch(mine, theirs)!! shouldContain ": remote has 'setting inboxDepth=1024', this side 'setting inboxDepth=16'"
        }
        test("a parameter a launcher flag gives is named by the flag too: the user may have typed -q, not --set qps") {
            val mine = listOf("rdma-run plan 1", "parameter qps=2", "setting qps=2")
            val theirs = listOf("rdma-run plan 1", "parameter qps=4", "setting qps=4")
            Handshake.planDifference(mine, theirs, Role.CLIENT) shouldBe "-q (--set qps) is 2 here and 4 on the client"
            Handshake.planDifference(listOf("f", "parameter count=1"), listOf("f", "parameter count=2"), Role.SERVER) shouldBe
                "--set count is 1 here and 2 on the server"
        }
        test("a hello listing fewer QP endpoints than its QP count") {
            val remote = hello(Role.CLIENT).let { it.copy(qps = it.qps.take(3)) }
            Handshake.mismatch(hello(Role.SERVER), remote) shouldBe
                "the remote's hello lists 3 QP endpoints for 4 QPs: it is not a compatible rdma-run"
        }
        test("the version comes first") {
            Handshake.mismatch(hello(Role.SERVER), hello(Role.SERVER, qps = 2).copy(version = 9)) shouldBe
                "remote speaks control protocol version 9, this side ${CONTROL_PROTOCOL_VERSION}: use the same rdma-run version on both sides"
        }
        test("remote access does not have to match: each side grants its own") {
            Handshake.mismatch(hello(Role.SERVER, access = setOf(RemoteAccess.WRITE)), hello(Role.CLIENT)) shouldBe null
        }
        test("two servers") {
            Handshake.mismatch(hello(Role.SERVER), hello(Role.SERVER)) shouldContain "both sides are servers"
        }
        test("matching hellos") {
            Handshake.mismatch(hello(Role.SERVER), hello(Role.CLIENT)) shouldBe null
        }
    }

    context("over TCP on 127.0.0.1") {
        test("matching hellos: each side gets the other's, with its remote access") {
            val (s, c) = connectedPair()
            val serverHello = hello(Role.SERVER, access = setOf(RemoteAccess.WRITE, RemoteAccess.READ))
            val (atServer, atClient) = both({ server(s).use { it.handshake(serverHello) } }, { client(c).use { it.handshake(hello(Role.CLIENT)) } })
            atServer.getOrThrow() shouldBe hello(Role.CLIENT)
            atClient.getOrThrow() shouldBe serverHello
            atClient.getOrThrow().access shouldBe setOf(RemoteAccess.WRITE, RemoteAccess.READ)
        }

        test("a QP count mismatch fails on both peers, each with its own sentence") {
            val (s, c) = connectedPair()
            // The same plan (steps 1 and 2 pass), hellos that disagree: the hellos' own check names it.
            val plan = hello(Role.SERVER).plan
            val (atServer, atClient) = both({ server(s).use { it.handshake(hello(Role.SERVER, qps = 4, plan = plan)) } },
                { client(c).use { it.handshake(hello(Role.CLIENT, qps = 2, plan = plan)) } })
            atServer.exceptionOrNull()!!.shouldBeInstanceOf<PeerException>().message shouldBe "remote has 2 QPs, this side 4"
            atClient.exceptionOrNull()!!.shouldBeInstanceOf<PeerException>().message shouldBe "remote has 4 QPs, this side 2"
        }

        test("the rejecting side also sends a failure frame before closing") {
            val (s, c) = connectedPair()
            val plan = hello(Role.SERVER).plan
            val (atServer, atClient) = both({ server(s).use { it.handshake(hello(Role.SERVER, qps = 4, plan = plan)) } }, {
                // A raw client: intro, an honest proof (no secret, the same plan), hello with 2 QPs, then read what the server answers until it closes.
                val out = DataOutputStream(c.getOutputStream())
                val input = DataInputStream(c.getInputStream())
                val mine = introFor(hello(Role.CLIENT, qps = 2))
                FrameCodec.writeMagic(out)
                FrameCodec.write(out, mine)
                FrameCodec.readMagic(input, "magic")
                val intro = FrameCodec.read(input, "intro") as Intro
                FrameCodec.write(out, Proof(Handshake.secretProof(null, Role.CLIENT, mine.nonce, intro.nonce),
                    Handshake.sectionProofs(null, Fingerprint.sections(plan), Role.CLIENT, mine.nonce, intro.nonce)))
                val proof = FrameCodec.read(input, "proof")
                FrameCodec.write(out, hello(Role.CLIENT, qps = 2, plan = plan))
                val frames = generateSequence { runCatching { FrameCodec.read(input, "more") }.getOrNull() }.toList()
                c.close()
                listOf(intro::class, proof::class) + frames
            })
            atServer.exceptionOrNull()!!.message shouldBe "remote has 2 QPs, this side 4"
            // One failure report, framed after the magic, after the server's hello.
            atClient.getOrThrow() shouldBe listOf(Intro::class, Proof::class, hello(Role.SERVER, qps = 4, plan = plan), Failure("remote has 2 QPs, this side 4"))
        }

        test("a peer of another protocol version fails on both sides") {
            val v = CONTROL_PROTOCOL_VERSION
            val (s, c) = connectedPair()
            val (atServer, atClient) = both({ server(s).use { it.handshake(hello(Role.SERVER)) } }, {
                val out = DataOutputStream(c.getOutputStream())
                val input = DataInputStream(c.getInputStream())
                FrameCodec.writeMagic(out)
                val mine = introFor(hello(Role.CLIENT)).copy(version = v + 1)
                val newer = FrameCodec.encode(mine).toString(Charsets.UTF_8).toByteArray()
                out.writeInt(newer.size)
                out.write(newer)
                out.flush()
                FrameCodec.readMagic(input, "magic")
                val answer = FrameCodec.read(input, "intro") as Intro
                val failure = FrameCodec.read(input, "failure")
                val more = runCatching { FrameCodec.read(input, "more") }
                // What a newer peer would do with this side's intro:
                Triple(Handshake.introMismatch(mine, answer, "the server"), failure, more.isFailure).also { c.close() }
            })
            val sentence = "remote speaks control protocol version ${v + 1}, this side $v: use the same rdma-run version on both sides"
            atServer.exceptionOrNull()!!.message shouldBe sentence
            // The newer peer sees the mismatch itself, and gets the server's sentence once.
            atClient.getOrThrow() shouldBe Triple("remote speaks control protocol version $v, this side ${v + 1}: use the same rdma-run version on both sides",
                Failure(sentence), true)
        }

        test("garbage instead of the magic is named as such") {
            val (s, c) = connectedPair()
            c.getOutputStream().write("GET / HTTP/1.1\r\n\r\n".toByteArray())
            val e = shouldThrow<PeerException> { server(s).use { it.handshake(hello(Role.SERVER)) } }
            e.message shouldBe "the peer is not an rdma-run scenario: its connection starts with 0x47455420 (GET ) instead of 'RDRN'"
            c.close()
        }

        test("an oversized frame is refused without reading it") {
            val (s, c) = connectedPair()
            DataOutputStream(c.getOutputStream()).apply { writeInt(FrameCodec.MAGIC); writeInt(Int.MAX_VALUE); flush() }
            val e = shouldThrow<PeerException> { server(s).use { it.handshake(hello(Role.SERVER)) } }
            e.message shouldContain "the peer sent a frame of 2147483647 bytes"
            c.close()
        }

        test("a closed connection is an error, not a hang") {
            val (s, c) = connectedPair()
            c.close()
            val e = shouldThrow<PeerException> { server(s).use { it.handshake(hello(Role.SERVER)) } }
            e.message shouldBe "the peer closed the control connection while this side waited for the client's hello"
        }

        test("a silent peer times out") {
            val (s, c) = connectedPair()
            val e = shouldThrow<RdmaTimeoutException> { server(s, timeout = 200.milliseconds).use { it.handshake(hello(Role.SERVER)) } }
            e.message shouldBe "no answer from the client within 200ms while this side waited for its hello"
            c.close()
        }

        test("a failure frame instead of the client's hello reaches the server's exception escaped") {
            val (s, c) = connectedPair()
            val (atServer, atClient) = both({ server(s).use { it.handshake(hello(Role.SERVER)) } }, {
                val out = DataOutputStream(c.getOutputStream())
                val input = DataInputStream(c.getInputStream())
                FrameCodec.writeMagic(out)
                FrameCodec.write(out, Failure("\u001b[2Jboom"))
                FrameCodec.readMagic(input, "magic")
                val frames = generateSequence { runCatching { FrameCodec.read(input, "more") }.getOrNull() }.toList()
                c.close()
                frames.map { it::class }
            })
            val e = atServer.exceptionOrNull()!!.shouldBeInstanceOf<PeerException>()
            e.message shouldBe "the client refused the connection: \\u001b[2Jboom"
            e.message!!.none { it.isISOControl() } shouldBe true
            // The server sent its intro only (no hello), and no failure back to a peer that failed.
            atClient.getOrThrow() shouldBe listOf(Intro::class)
        }

        test("a failure frame instead of the server's hello reaches the client's exception escaped") {
            val (s, c) = connectedPair()
            val (atServer, atClient) = both({
                val out = DataOutputStream(s.getOutputStream())
                val input = DataInputStream(s.getInputStream())
                FrameCodec.readMagic(input, "magic")
                val h = FrameCodec.read(input, "hello")
                FrameCodec.writeMagic(out)
                FrameCodec.write(out, Failure("\u001b]0;owned\u0007 \u202eevil\nline"))
                h
            }, { client(c).use { it.handshake(hello(Role.CLIENT)) } })
            atServer.getOrThrow().shouldBeInstanceOf<Intro>()
            val e = atClient.exceptionOrNull()!!.shouldBeInstanceOf<PeerException>()
            e.message shouldBe "the server refused the connection: \\u001b]0;owned\\u0007 \\u202eevil\\u000aline"
            s.close()
        }

        test("printable() turns control and bidi characters into \\uXXXX and leaves other text alone") {
            printable("plain text, café – ok ✓") shouldBe "plain text, café – ok ✓"
            printable("\u001b[2J\u0000\t\r\n\u007f\u009b") shouldBe "\\u001b[2J\\u0000\\u0009\\u000d\\u000a\\u007f\\u009b"
            printable("\u2028\u2029\u200e\u200f\u202a\u202e") shouldBe "\\u2028\\u2029\\u200e\\u200f\\u202a\\u202e"
        }

        /** A handshaken pair: (server side, client side), each a ControlConnection. */
        suspend fun handshaken(timeout: Duration = 5.seconds): Pair<ControlConnection, ControlConnection> {
            val (s, c) = connectedPair()
            val serverSide = server(s, timeout)
            val clientSide = client(c, timeout)
            val (a, b) = both({ serverSide.handshake(hello(Role.SERVER)) }, { clientSide.handshake(hello(Role.CLIENT)) })
            a.getOrThrow()
            b.getOrThrow()
            return serverSide to clientSide
        }

        class Watched(val lost: CompletableDeferred<Exception>, val heartbeats: Channel<Heartbeat>, val frames: Channel<Frame>)

        fun ControlConnection.watch(heartbeat: () -> Heartbeat = { Heartbeat() }): Watched {
            val w = Watched(CompletableDeferred(), Channel(Channel.UNLIMITED), Channel(Channel.UNLIMITED))
            startWatching(onLost = { w.lost.complete(it) }, onHeartbeat = { w.heartbeats.trySend(it) }, onFrame = { w.frames.trySend(it) },
                heartbeat = heartbeat)
            return w
        }

        test("while watching, barriers arrive in order, heartbeats go to onHeartbeat with their fields, a failure frame is reported") {
            val (serverSide, clientSide) = handshaken()
            val w = serverSide.watch()
            val beat = Heartbeat(progress = 7, waiting = "receive() on QP 1", messagesWaiting = listOf(0, 2), inboxFull = listOf(1))
            clientSide.send(Barrier(1))
            clientSide.send(beat)
            clientSide.send(Barrier(2))
            withTimeout(5.seconds) {
                serverSide.await(Barrier(1), "barrier 1") { }
                serverSide.await(Barrier(2), "barrier 2") { }
                w.heartbeats.receive() shouldBe beat
                w.frames.receive() shouldBe Barrier(1)
                w.frames.receive() shouldBe Barrier(2)
            }
            clientSide.send(Failure("QP 1 failed"))
            withTimeout(5.seconds) { w.lost.await() }.message shouldBe "the client failed: QP 1 failed"
            w.heartbeats.tryReceive().getOrNull() shouldBe null // the heartbeat was passed on once
            serverSide.close()
            clientSide.close()
        }

        test("while watching, a failure with escape sequences is reported escaped") {
            val (serverSide, clientSide) = handshaken()
            val w = serverSide.watch()
            clientSide.send(Failure("\u001b[2Jboom"))
            val lost = withTimeout(5.seconds) { w.lost.await() }
            lost.message shouldBe "the client failed: \\u001b[2Jboom"
            lost.message!!.none { it.isISOControl() } shouldBe true
            serverSide.close()
            clientSide.close()
        }

        test("while watching, this side sends the heartbeats its function makes") {
            val (serverSide, clientSide) = handshaken(timeout = 2.seconds)
            val beat = Heartbeat(progress = 9, waiting = "barrier 1", messagesWaiting = listOf(4), inboxFull = emptyList())
            serverSide.watch { beat }
            clientSide.receive("the server's heartbeat") shouldBe beat
            serverSide.close()
            clientSide.close()
        }

        test("while watching, the end of the peer's scenario or another frame than the awaited one is named") {
            val (serverSide, clientSide) = handshaken()
            serverSide.watch()
            clientSide.send(Barrier(2))
            clientSide.send(Done(1))
            withTimeout(5.seconds) {
                shouldThrow<PeerException> { serverSide.await(Barrier(1), "barrier 1") { } }.message shouldBe
                    "the client sent barrier 2 while this side waited for barrier 1: the two sides run different scenarios"
                shouldThrow<PeerException> { serverSide.await(Barrier(1), "barrier 1") { } }.message shouldBe
                    "the client finished its scenario while this side waited for barrier 1"
            }
            serverSide.close()
            clientSide.close()
        }

        test("an awaited done frame matches whatever its counts, and comes back with them") {
            val (serverSide, clientSide) = handshaken()
            serverSide.watch()
            clientSide.send(Done(1, listOf(5, 7)))
            withTimeout(5.seconds) { serverSide.await(Done(1), "the end of its scenario") { } } shouldBe Done(1, listOf(5, 7))
            serverSide.close()
            clientSide.close()
        }

        test("a wait's check ends it by throwing") {
            val (serverSide, clientSide) = handshaken()
            serverSide.watch()
            withTimeout(5.seconds) {
                shouldThrow<PeerException> { serverSide.await(Barrier(1), "barrier 1") { throw PeerException("the deadline passed") } }
                    .message shouldBe "the deadline passed"
            }
            serverSide.close()
            clientSide.close()
        }

        test("while watching, a vanished peer is reported") {
            val (serverSide, clientSide) = handshaken()
            val w = serverSide.watch()
            clientSide.close()
            withTimeout(5.seconds) { w.lost.await() }.message shouldBe
                "the client closed the control connection in the middle of the scenario (it crashed or was killed)"
            shouldThrow<PeerException> { serverSide.await(Barrier(1), "barrier 1") { } }
            serverSide.close()
        }

        test("while watching, a peer whose kernel resets the connection is reported as closed, as a FIN is") {
            // A killed peer's kernel sends RST instead of FIN when data it never read is left: SO_LINGER 0 sends it on close.
            val (s, c) = connectedPair()
            val serverSide = server(s)
            val clientSide = client(c)
            val (a, b) = both({ serverSide.handshake(hello(Role.SERVER)) }, { clientSide.handshake(hello(Role.CLIENT)) })
            a.getOrThrow()
            b.getOrThrow()
            val w = serverSide.watch()
            c.setSoLinger(true, 0)
            c.close()
            withTimeout(5.seconds) { w.lost.await() }.message shouldBe
                "the client closed the control connection in the middle of the scenario (it crashed or was killed)"
            serverSide.close()
        }

        test("while watching, a silent peer is reported once the timeout passes") {
            val (serverSide, clientSide) = handshaken(timeout = 1.seconds)
            val w = serverSide.watch()
            withTimeout(30.seconds) { w.lost.await() }.shouldBeInstanceOf<RdmaTimeoutException>().message shouldBe
                "the client sent nothing for 1s (not even heartbeats): it hangs or the network is down"
            serverSide.close()
            clientSide.close()
        }
    }
})
