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
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.withTimeout

/** The control protocol: codec, strict decoding, and mismatches seen from both ends of a real socket. */
class HandshakeSpec : FunSpec({
    val gid = "00000000000000000000ffff0a4d0001"

    fun hello(
        role: Role,
        qps: Int = 4,
        parameters: Map<String, String> = emptyMap(),
        plan: List<String> = listOf("rdma-run-plan-1", "op send count=10"),
        fingerprint: String = "a".repeat(64),
    ) = Hello(
        version = Handshake.VERSION,
        role = role,
        qpCount = qps,
        recvDepth = 64,
        maxDestRdAtomic = 1,
        fingerprint = fingerprint,
        parameters = parameters,
        plan = plan,
        qps = List(qps) { QpInfo(0x11 + it, 0x1234 + it, 0, gid, 1024, BufferInfo(0x7f00_0000_1000L + it * 4096L, 0x100 + it, 4096), BufferInfo(0x7f00_0010_0000L, 7, 8)) },
    )

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
            val frames = listOf(hello(Role.CLIENT), Ready, Barrier(3), Done(1), Done(2), Heartbeat, Failure("remote has 2 QPs, this side 4"))
            for (f in frames) FrameCodec.decode(FrameCodec.encode(f)) shouldBe f
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
            val v2 = """{"type":"hello","version":2,"somethingNew":true}"""
            shouldThrow<PeerException> { FrameCodec.decode(v2.toByteArray()) }.message shouldBe
                "remote speaks control protocol version 2, this side 1: use the same rdma-run version on both sides"
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
        }
        test("scenario fingerprint, naming the first difference") {
            val mine = hello(Role.SERVER, plan = listOf("f", "op send count=10"), fingerprint = "1".repeat(64))
            val theirs = hello(Role.CLIENT, plan = listOf("f", "op send count=20"), fingerprint = "2".repeat(64))
            Handshake.mismatch(mine, theirs) shouldBe
                "remote runs a different scenario (plan 222222222222, this side 111111111111): remote has 'op send count=20', this side 'op send count=10'"
        }
        test("two servers") {
            Handshake.mismatch(hello(Role.SERVER), hello(Role.SERVER)) shouldContain "both sides are servers"
        }
        test("matching hellos") {
            Handshake.mismatch(hello(Role.SERVER), hello(Role.CLIENT)) shouldBe null
        }
    }

    context("over TCP on 127.0.0.1") {
        test("matching hellos: each side gets the other's") {
            val (s, c) = connectedPair()
            val (atServer, atClient) = both({ server(s).use { it.handshake(hello(Role.SERVER)) } }, { client(c).use { it.handshake(hello(Role.CLIENT)) } })
            atServer.getOrThrow() shouldBe hello(Role.CLIENT)
            atClient.getOrThrow() shouldBe hello(Role.SERVER)
        }

        test("a QP count mismatch fails on both peers, each with its own sentence") {
            val (s, c) = connectedPair()
            val (atServer, atClient) = both({ server(s).use { it.handshake(hello(Role.SERVER, qps = 4)) } }, { client(c).use { it.handshake(hello(Role.CLIENT, qps = 2)) } })
            atServer.exceptionOrNull()!!.shouldBeInstanceOf<PeerException>().message shouldBe "remote has 2 QPs, this side 4"
            atClient.exceptionOrNull()!!.shouldBeInstanceOf<PeerException>().message shouldBe "remote has 4 QPs, this side 2"
        }

        test("the rejecting side also sends a failure frame before closing") {
            val (s, c) = connectedPair()
            val (atServer, atClient) = both({ server(s).use { it.handshake(hello(Role.SERVER, qps = 4)) } }, {
                // A raw client: hello with 2 QPs, then read what the server answers.
                val out = DataOutputStream(c.getOutputStream())
                val input = DataInputStream(c.getInputStream())
                FrameCodec.writeMagic(out)
                FrameCodec.write(out, hello(Role.CLIENT, qps = 2))
                FrameCodec.readMagic(input, "magic")
                listOf(FrameCodec.read(input, "hello"), FrameCodec.read(input, "failure")).also { c.close() }
            })
            atServer.exceptionOrNull()!!.message shouldBe "remote has 2 QPs, this side 4"
            atClient.getOrThrow() shouldBe listOf(hello(Role.SERVER, qps = 4), Failure("remote has 2 QPs, this side 4"))
        }

        test("a peer of another protocol version fails on both sides") {
            val (s, c) = connectedPair()
            val (atServer, atClient) = both({ server(s).use { it.handshake(hello(Role.SERVER)) } }, {
                val out = DataOutputStream(c.getOutputStream())
                val input = DataInputStream(c.getInputStream())
                FrameCodec.writeMagic(out)
                val v2 = FrameCodec.encode(hello(Role.CLIENT)).toString(Charsets.UTF_8).replace("\"version\":1", "\"version\":2").toByteArray()
                out.writeInt(v2.size)
                out.write(v2)
                out.flush()
                FrameCodec.readMagic(input, "magic")
                val answer = FrameCodec.read(input, "hello")
                // What a version-2 peer would do with this version-1 hello:
                Handshake.mismatch(hello(Role.CLIENT).copy(version = 2), answer as Hello).also { c.close() }
            })
            atServer.exceptionOrNull()!!.message shouldBe "remote speaks control protocol version 2, this side 1: use the same rdma-run version on both sides"
            atClient.getOrThrow() shouldBe "remote speaks control protocol version 1, this side 2: use the same rdma-run version on both sides"
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
            val e = shouldThrow<PeerException> { server(s, timeout = 200.milliseconds).use { it.handshake(hello(Role.SERVER)) } }
            e.message shouldBe "no answer from the peer while this side waited for the client's hello (the timeout passed)"
            c.close()
        }

        test("while watching, barriers arrive in order and a failure frame is reported once") {
            val (s, c) = connectedPair()
            val serverSide = server(s)
            val clientSide = client(c)
            both({ serverSide.handshake(hello(Role.SERVER)) }, { clientSide.handshake(hello(Role.CLIENT)) })
            val lost = CompletableDeferred<PeerException>()
            serverSide.startWatching { lost.complete(it) }
            clientSide.send(Barrier(1))
            clientSide.send(Heartbeat)
            clientSide.send(Barrier(2))
            withTimeout(5.seconds) {
                serverSide.await(Barrier(1), "barrier 1")
                serverSide.await(Barrier(2), "barrier 2")
            }
            clientSide.send(Failure("QP 1 failed"))
            withTimeout(5.seconds) { lost.await() }.message shouldBe "the client failed: QP 1 failed"
            serverSide.close()
            clientSide.close()
        }

        test("while watching, a vanished peer is reported") {
            val (s, c) = connectedPair()
            val serverSide = server(s)
            val clientSide = client(c)
            both({ serverSide.handshake(hello(Role.SERVER)) }, { clientSide.handshake(hello(Role.CLIENT)) })
            val lost = CompletableDeferred<PeerException>()
            serverSide.startWatching { lost.complete(it) }
            clientSide.close()
            withTimeout(5.seconds) { lost.await() }.message shouldBe "the client closed the control connection in the middle of the scenario (it crashed or was killed)"
            shouldThrow<PeerException> { serverSide.await(Barrier(1), "barrier 1") }
            serverSide.close()
        }
    }
})
