package dev.rdmarun.dsl

import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.nulls.shouldBeNull
import io.kotest.matchers.nulls.shouldNotBeNull
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import io.kotest.matchers.string.shouldStartWith
import io.kotest.matchers.types.shouldBeInstanceOf
import java.io.DataInputStream
import java.io.DataOutputStream
import java.io.IOException
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.reflect.KClass
import kotlin.time.Duration
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.coroutineScope

/**
 * The control connection against hostile peers: one deadline for the handshake (a drip is cut
 * off), a server that survives stray connections and tells them nothing but its intro, the token
 * proofs, the validation of every hello field, escaped peer text, one framed failure report.
 */
class ControlSecuritySpec : FunSpec({
    val gid = "00000000000000000000ffff0a4d0001"
    val loopback = InetAddress.getLoopbackAddress()
    val fingerprint = "f".repeat(64)

    fun hello(role: Role, qps: Int = 2, parameters: Map<String, String> = emptyMap()) = Hello(
        version = Handshake.VERSION, role = role, qpCount = qps, recvDepth = 64, maxDestRdAtomic = 1,
        fingerprint = fingerprint, parameters = parameters, plan = listOf("rdma-run-plan-2"),
        qps = List(qps) { QpInfo(0x11 + it, 0x1234 + it, 0, gid, 1024, BufferInfo(0x7f00_0000_1000L + it * 4096L, 0x100 + it, 4096), BufferInfo(0x7f00_0010_0000L, 7, 8)) },
        fabricKey = if (role == Role.SERVER) "ab".repeat(32) else null,
    )

    val expected = Handshake.Expected(qpCount = 2, recvDepth = 64, dataBytes = 4096)

    fun intro(role: Role, token: Boolean = false, print: String = fingerprint) =
        Intro(Handshake.VERSION, role, print, mapOf("settings" to print, "parameters" to "1".repeat(64)), Handshake.nonce(), token)

    /** Everything a raw peer receives on [socket] until the other side closes: the magic's presence and the frames. */
    fun readAll(socket: Socket): Pair<Boolean, List<Frame>> {
        val input = DataInputStream(socket.getInputStream())
        val magic = runCatching { input.readInt() }.getOrNull()
        val frames = generateSequence { runCatching { FrameCodec.read(input, "more") }.getOrNull() }.toList()
        return (magic == FrameCodec.MAGIC) to frames
    }

    fun kinds(frames: List<Frame>): List<KClass<out Frame>> = frames.map { it::class }

    class Served<T>(val accepted: Result<ControlConnection.Companion.Accepted>, val body: T, val notes: List<String>)

    /** A server's accept on an ephemeral port (on the IO pool) while [body] plays the peers. */
    suspend fun <T> withServer(timeout: Duration, token: ControlToken?, body: suspend (port: Int) -> T): Served<T> {
        val listener = ServerSocket(0, 50, loopback)
        val notes = CopyOnWriteArrayList<String>()
        return try {
            coroutineScope {
                val accepted = async(Dispatchers.IO) {
                    runCatching { ControlConnection.accept(listener, timeout, intro(Role.SERVER, token != null), token) { notes.add(it) } }
                }
                val b = async(Dispatchers.IO) { body(listener.localPort) }
                val a = accepted.await()
                a.getOrNull()?.connection?.close()
                Served(a, b.await(), notes)
            }
        } finally {
            listener.close()
        }
    }

    fun client(port: Int, timeout: Duration = 10.seconds) = ControlConnection.connect(Peer.Connect("127.0.0.1", port), timeout)

    context("one deadline for the whole handshake") {
        test("a server that drips its intro a byte at a time is cut off at the deadline, with one sentence") {
            ServerSocket(0, 1, loopback).use { listener ->
                val bytes = FrameCodec.encode(intro(Role.SERVER))
                val dripper = Thread.ofPlatform().start {
                    runCatching {
                        listener.accept().use { s ->
                            val out = DataOutputStream(s.getOutputStream())
                            out.writeInt(FrameCodec.MAGIC)
                            out.writeInt(bytes.size)
                            out.flush()
                            for (b in bytes) {
                                out.write(b.toInt())
                                out.flush()
                                Thread.sleep(300) // each byte well within the timeout: a per-read timeout never fires
                            }
                        }
                    }
                }
                val e = shouldThrow<PeerException> {
                    client(listener.localPort, timeout = 1.seconds).use { it.authenticate(intro(Role.CLIENT), null) }
                }
                e.message shouldBe "the server at 127.0.0.1:${listener.localPort} sent its hello too slowly: no complete hello within 1s"
                dripper.join() // its next write fails on the closed connection
            }
        }

        test("a client that drips is a stray: the server's wait ends at its deadline and says so") {
            val accepted = withServer(1.seconds, null) { port ->
                Socket(loopback, port).use { s ->
                    val out = s.getOutputStream()
                    runCatching {
                        // "RDRN" and more, a byte at a time, until the server closes the connection.
                        while (true) {
                            for (b in byteArrayOf(0x52, 0x44, 0x52, 0x4e, 0, 0, 0, 10, 0x7b)) {
                                out.write(b.toInt())
                                out.flush()
                                Thread.sleep(200)
                            }
                        }
                    }
                }
            }.accepted
            val e = accepted.exceptionOrNull().shouldBeInstanceOf<PeerException>()
            e.message shouldStartWith "no client completed the hello on TCP port "
            e.message shouldContain "within 1s; closed 1 stray connection that did not complete the hello (the last: the client at 127.0.0.1:"
            e.message shouldContain "sent its hello too slowly: no complete hello within 1s)"
        }

        test("while the scenario runs, a peer that drips its frames is lost within the timeout") {
            val (serverSide, raw) = ServerSocket(0, 1, loopback).use { l ->
                val c = Socket(loopback, l.localPort)
                ControlConnection.over(l.accept(), 1.seconds, Role.CLIENT) to c
            }
            val lost = java.util.concurrent.CompletableFuture<PeerException>()
            serverSide.startWatching(onLost = { lost.complete(it) }, onHeartbeat = {}, onFrame = {}, heartbeat = { Heartbeat() })
            val dripper = Thread.ofPlatform().start {
                runCatching {
                    val out = raw.getOutputStream()
                    out.write(byteArrayOf(0, 0, 0, 100))
                    while (true) {
                        out.write(' '.code)
                        out.flush()
                        Thread.sleep(200)
                    }
                }
            }
            lost.get(30, java.util.concurrent.TimeUnit.SECONDS).message shouldBe "the client sent its frames too slowly: no complete frame within 1s"
            serverSide.close()
            raw.close()
            dripper.join()
        }
    }

    context("a listening server survives strays") {
        test("port scans, garbage, 8 bytes, wrong magic, another scenario and a wrong token are closed and counted; they get the intro only; the client still completes") {
            val token = ControlToken.of("s3cret-token")
            val received = CopyOnWriteArrayList<Pair<Boolean, List<Frame>>>()
            val served = withServer(20.seconds, token) { port ->
                fun stray(send: (DataOutputStream) -> Unit) = Socket(loopback, port).use { s ->
                    val out = DataOutputStream(s.getOutputStream())
                    runCatching { send(out); out.flush() }
                    received.add(readAll(s))
                }
                // A silent one stays open the whole time: it must not hold up the others or the client.
                val silent = Socket(loopback, port)
                Socket(loopback, port).close() // a port scan
                stray { it.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n".toByteArray()) }
                stray { it.write(ByteArray(8)) } // 8 bytes
                stray { it.writeInt(FrameCodec.MAGIC); it.writeInt(0) } // 8 bytes that start right
                stray { it.writeInt(0x52445258); FrameCodec.write(it, intro(Role.CLIENT, token = true)) } // wrong magic
                stray { FrameCodec.writeMagic(it); FrameCodec.write(it, intro(Role.CLIENT, token = true, print = "e".repeat(64))) }
                stray { FrameCodec.writeMagic(it); FrameCodec.write(it, intro(Role.CLIENT, token = false)) } // no token
                stray { // the wrong token
                    FrameCodec.writeMagic(it)
                    FrameCodec.write(it, intro(Role.CLIENT, token = true))
                    FrameCodec.write(it, Proof("0".repeat(64)))
                }
                stray { FrameCodec.writeMagic(it); FrameCodec.write(it, hello(Role.CLIENT)) } // a hello instead of the intro
                val real = client(port)
                try {
                    real.authenticate(intro(Role.CLIENT, token = true), token)
                    "authenticated"
                } finally {
                    real.close()
                    silent.close()
                }
            }
            served.body shouldBe "authenticated"
            served.accepted.getOrThrow().connection.peerLabel shouldStartWith "the client at 127.0.0.1:"
            // Nothing but step 1 (and at most one failure report) reached a stray: no proof, no hello, no token.
            received.size shouldBe 8
            for ((magic, frames) in received) {
                magic shouldBe true
                frames.first().shouldBeInstanceOf<Intro>()
                frames.size shouldBe (if (frames.size > 1) 2 else 1)
                frames.drop(1).forEach { it.shouldBeInstanceOf<Failure>() }
                frames.forEach { FrameCodec.encode(it).toString(Charsets.UTF_8) shouldNotContain "s3cret" }
            }
            // Each connection gets its own nonce: a proof made for one is worthless on another.
            received.map { (_, frames) -> (frames.first() as Intro).nonce }.toSet().size shouldBe received.size
            val failures = received.map { (_, frames) -> (frames.getOrNull(1) as Failure?)?.message }
            failures[0] shouldBe "the peer is not an rdma-run scenario: its connection starts with 0x47455420 (GET ) instead of 'RDRN'"
            failures[1] shouldBe "the peer is not an rdma-run scenario: its connection starts with 0x00000000 (\\x00\\x00\\x00\\x00) instead of 'RDRN'"
            failures[2]!! shouldContain "the peer sent a frame of 0 bytes"
            failures[3] shouldBe "the peer is not an rdma-run scenario: its connection starts with 0x52445258 (RDRX) instead of 'RDRN'"
            failures[4]!! shouldContain "runs a different scenario (plan eeeeeeeeeeee, this side ffffffffffff): the shared settings differ"
            failures[5]!! shouldContain "this side has a token (--token or RDMA_RUN_TOKEN) but the client at 127.0.0.1:"
            failures[6] shouldBe "the tokens differ: give both sides the same --token or RDMA_RUN_TOKEN"
            failures[7].shouldBeNull() // a hello where the intro was due: closed without a word
            // The port scan, the 8 above and the silent one, counted in one escaped line.
            served.notes.size shouldBe 1
            served.notes[0] shouldStartWith "closed 10 stray connections that did not complete the hello (the last: "
            served.notes[0] shouldContain "; the client at 127.0.0.1:"
        }

        test("more pending connections than the bound: the oldest is closed, the client still completes") {
            val served = withServer(20.seconds, null) { port ->
                val silent = List(ControlConnection.MAX_PENDING + 3) { Socket(loopback, port) }
                val real = client(port)
                try {
                    real.authenticate(intro(Role.CLIENT), null)
                    "authenticated"
                } finally {
                    real.close()
                    silent.forEach { it.close() }
                }
            }
            served.body shouldBe "authenticated"
            served.accepted.isSuccess shouldBe true
            served.notes.single() shouldStartWith "closed ${ControlConnection.MAX_PENDING + 3} stray connections"
        }

        test("a client that connects to a server of another scenario fails with one sentence, the server keeps waiting") {
            val served = withServer(1.seconds, null) { port ->
                runCatching { client(port).use { it.authenticate(intro(Role.CLIENT, print = "e".repeat(64)), null) } }
            }
            served.body.exceptionOrNull()!!.message shouldStartWith
                "the server at 127.0.0.1:"
            served.body.exceptionOrNull()!!.message shouldContain "runs a different scenario (plan ffffffffffff, this side eeeeeeeeeeee): the shared settings differ"
            served.accepted.exceptionOrNull()!!.message shouldContain "within 1s; closed 1 stray connection that did not complete the hello (the last: the client at 127.0.0.1:"
        }
    }

    context("the token") {
        suspend fun pair(serverToken: ControlToken?, clientToken: ControlToken?): Pair<Result<Unit>, Result<Unit>> {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            return coroutineScope {
                val a = async(Dispatchers.IO) {
                    runCatching { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.authenticate(intro(Role.SERVER, serverToken != null), serverToken) } }
                }
                val b = async(Dispatchers.IO) {
                    runCatching { ControlConnection.over(c, 10.seconds, Role.SERVER).use { it.authenticate(intro(Role.CLIENT, clientToken != null), clientToken) } }
                }
                a.await() to b.await()
            }
        }

        test("the same token on both sides: both pass") {
            val (a, b) = pair(ControlToken.of("secret"), ControlToken.of("secret"))
            a.getOrThrow()
            b.getOrThrow()
        }

        test("different tokens: the server names it, the client hears it") {
            val (a, b) = pair(ControlToken.of("secret"), ControlToken.of("other"))
            a.exceptionOrNull()!!.message shouldBe "the tokens differ: give both sides the same --token or RDMA_RUN_TOKEN"
            b.exceptionOrNull()!!.message shouldBe "the server refused the connection: the tokens differ: give both sides the same --token or RDMA_RUN_TOKEN"
        }

        test("a token on one side only is a mismatch, said from each side") {
            val (a, b) = pair(null, ControlToken.of("secret"))
            a.exceptionOrNull()!!.message shouldBe "the client requires a token (--token or RDMA_RUN_TOKEN) and this side has none: give both sides the same token"
            b.exceptionOrNull()!!.message shouldBe "this side has a token (--token or RDMA_RUN_TOKEN) but the server has none: give both sides the same token"
        }

        test("a server that does not know the token (a bad proof) is refused by the client") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            val impostor = Thread.ofPlatform().start {
                runCatching {
                    val out = DataOutputStream(s.getOutputStream())
                    val input = DataInputStream(s.getInputStream())
                    FrameCodec.writeMagic(out)
                    FrameCodec.write(out, intro(Role.SERVER, token = true))
                    FrameCodec.readMagic(input, "magic")
                    FrameCodec.read(input, "intro")
                    FrameCodec.read(input, "proof")
                    FrameCodec.write(out, Proof("1".repeat(64)))
                    readAll(s)
                }
                s.close()
            }
            val e = shouldThrow<PeerException> {
                ControlConnection.over(c, 10.seconds, Role.SERVER).use { it.authenticate(intro(Role.CLIENT, true), ControlToken.of("secret")) }
            }
            e.message shouldBe "the server does not know the token (its proof is wrong): it is not the peer this side expects, or the tokens differ"
            impostor.join()
        }

        test("a proof is bound to the sender's role and both nonces: a reflected or replayed one does not match") {
            val key = "k".toByteArray()
            val p = Handshake.proof(key, Role.CLIENT, "a".repeat(64), "b".repeat(64), fingerprint)
            Handshake.proofMatches(p, Handshake.proof(key, Role.CLIENT, "a".repeat(64), "b".repeat(64), fingerprint)) shouldBe true
            Handshake.proofMatches(p, Handshake.proof(key, Role.SERVER, "a".repeat(64), "b".repeat(64), fingerprint)) shouldBe false
            Handshake.proofMatches(p, Handshake.proof(key, Role.CLIENT, "c".repeat(64), "b".repeat(64), fingerprint)) shouldBe false
            Handshake.proofMatches(p, Handshake.proof("j".toByteArray(), Role.CLIENT, "a".repeat(64), "b".repeat(64), fingerprint)) shouldBe false
        }

        test("a token is never printed") {
            ControlToken.of("hunter2").toString() shouldNotContain "hunter2"
            RdmaOptions().withToken("hunter2").toString() shouldNotContain "hunter2"
            shouldThrow<IllegalArgumentException> { ControlToken.of("") }
        }
    }

    context("every field of a hello is validated") {
        val peer = "the server"
        fun invalid(h: Hello) = Handshake.validate(h, expected, peer)

        test("a valid hello passes") {
            invalid(hello(Role.SERVER)).shouldBeNull()
            invalid(hello(Role.CLIENT)).shouldBeNull()
        }

        test("each lying field is named") {
            val h = hello(Role.SERVER)
            fun qp0(change: (QpInfo) -> QpInfo) = h.copy(qps = listOf(change(h.qps[0])) + h.qps.drop(1))
            val cases = listOf(
                h.copy(qpCount = 3) to "qpCount is 3, not the 2 of this scenario",
                h.copy(qps = h.qps.take(1)) to "qps lists 1 QP endpoints, not 2",
                h.copy(recvDepth = -1) to "recvDepth is -1, not the 64 of this scenario",
                h.copy(maxDestRdAtomic = -5) to "maxDestRdAtomic is -5, outside 0..255",
                h.copy(fingerprint = "x") to "fingerprint is not 64 hex digits",
                h.copy(parameters = (0..Handshake.MAX_LIST).associate { "p$it" to "" }) to "parameters has 1025 entries, more than 1024",
                h.copy(parameters = mapOf("x".repeat(5000) to "1")) to "parameters has a name or value longer than 4096 characters",
                h.copy(plan = List(2000) { "l" }) to "plan has 2000 lines, more than 1024",
                h.copy(plan = listOf("l".repeat(5000))) to "plan has a line longer than 4096 characters",
                qp0 { it.copy(qpn = 0x1000000) } to "qps[0].qpn is 16777216, not a 24-bit QP number",
                qp0 { it.copy(qpn = -1) } to "qps[0].qpn is -1, not a 24-bit QP number",
                qp0 { it.copy(psn = 0x1000000) } to "qps[0].psn is 16777216, not a 24-bit PSN",
                qp0 { it.copy(psn = -1) } to "qps[0].psn is -1, not a 24-bit PSN",
                qp0 { it.copy(lid = 70000) } to "qps[0].lid is 70000, not a 16-bit LID",
                qp0 { it.copy(gid = "abcd") } to "qps[0].gid 'abcd' is not 16 bytes in 32 hex digits",
                qp0 { it.copy(mtu = 1000) } to "qps[0].mtu is 1000, not 256, 512, 1024, 2048 or 4096",
                qp0 { it.copy(buffer = it.buffer.copy(length = -5)) } to "qps[0].buffer length is -5, not the 4096 bytes this scenario registers",
                qp0 { it.copy(buffer = it.buffer.copy(length = Long.MAX_VALUE)) } to
                    "qps[0].buffer length is 9223372036854775807, not the 4096 bytes this scenario registers",
                qp0 { it.copy(buffer = it.buffer.copy(addr = -100)) } to "qps[0].buffer address 0xffffffffffffff9c plus length 4096 overflows 64 bits",
                qp0 { it.copy(credit = it.credit.copy(length = -5)) } to "qps[0].credit length is -5, not the 8 bytes this scenario registers",
                qp0 { it.copy(credit = it.credit.copy(length = Long.MAX_VALUE)) } to "qps[0].credit length is 9223372036854775807, not the 8 bytes this scenario registers",
                qp0 { it.copy(credit = it.credit.copy(addr = -1)) } to "qps[0].credit address 0xffffffffffffffff plus length 8 overflows 64 bits",
                h.copy(fabricKey = null) to "fabricKey is missing (the server chooses one for each scenario)",
                h.copy(fabricKey = "ab") to "fabricKey is not 32 bytes in 64 hex digits",
                h.copy(fabricKey = "AB".repeat(32)) to "fabricKey is not 32 bytes in 64 hex digits",
                hello(Role.CLIENT).copy(fabricKey = "ab".repeat(32)) to "fabricKey is set, but only the server chooses it",
            )
            for ((lying, field) in cases) invalid(lying) shouldBe "the server sent an invalid hello: $field"
        }

        test("over TCP, a lying hello fails this side with the sentence and tells the peer once") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            val lying = hello(Role.SERVER).let { h -> h.copy(qps = listOf(h.qps[0].copy(credit = h.qps[0].credit.copy(length = -5))) + h.qps.drop(1)) }
            coroutineScope {
                val raw = async(Dispatchers.IO) {
                    val out = DataOutputStream(s.getOutputStream())
                    FrameCodec.writeMagic(out)
                    FrameCodec.write(out, intro(Role.SERVER))
                    FrameCodec.write(out, lying)
                    readAll(s).also { s.close() }
                }
                val e = shouldThrow<PeerException> {
                    ControlConnection.over(c, 10.seconds, Role.SERVER).use {
                        it.authenticate(intro(Role.CLIENT), null)
                        it.exchangeHellos(hello(Role.CLIENT), expected)
                    }
                }
                e.message shouldBe "the server sent an invalid hello: qps[0].credit length is -5, not the 8 bytes this scenario registers"
                val (magic, frames) = raw.await()
                magic shouldBe true
                kinds(frames) shouldBe listOf(Intro::class, Hello::class, Failure::class)
                (frames[2] as Failure).message shouldBe e.message
            }
        }

        test("a frame length is bounded before anything is allocated") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            DataOutputStream(c.getOutputStream()).apply { writeInt(FrameCodec.MAGIC); writeInt(-5); flush() }
            val e = shouldThrow<PeerException> { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.authenticate(intro(Role.SERVER), null) } }
            e.message shouldContain "the peer sent a frame of -5 bytes"
            c.close()
        }

        test("before the intro passed, a frame is at most 16 KiB: a stray gets no 4 MiB buffer") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            DataOutputStream(c.getOutputStream()).apply { writeInt(FrameCodec.MAGIC); writeInt(FrameCodec.MAX_FRAME); flush() }
            val e = shouldThrow<PeerException> { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.authenticate(intro(Role.SERVER), null) } }
            e.message shouldBe "the peer sent a frame of ${FrameCodec.MAX_FRAME} bytes while this side waited for the client's hello " +
                "(frames are 1..${FrameCodec.MAX_INTRO_FRAME} bytes): it is not a compatible rdma-run, or the stream is corrupt"
            c.close()
        }
    }

    context("peer text is escaped wherever it is shown") {
        val esc = "\u001b[2J\u001b]0;x\u0007\u202e\n"

        test("printable() escapes every control, separator and bidi character, and bounds the length") {
            printable(esc) shouldBe "\\u001b[2J\\u001b]0;x\\u0007\\u202e\\u000a"
            printable("\u2066a\u2069\u200b\ufeff\u061c\ud800") shouldBe "\\u2066a\\u2069\\u200b\\ufeff\\u061c\\ud800"
            printable("emoji \ud83d\ude00 ok") shouldBe "emoji \ud83d\ude00 ok"
            val long = printable("x".repeat(1000))
            long shouldBe "x".repeat(MAX_PEER_TEXT) + "... (${1000 - MAX_PEER_TEXT} more characters)"
        }

        test("parameter names and values in a mismatch sentence") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            val (a, b) = coroutineScope {
                val x = async(Dispatchers.IO) { runCatching { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.handshake(hello(Role.SERVER)) } } }
                val y = async(Dispatchers.IO) {
                    runCatching { ControlConnection.over(c, 10.seconds, Role.SERVER).use { it.handshake(hello(Role.CLIENT, parameters = mapOf(esc to esc))) } }
                }
                x.await() to y.await()
            }
            for (m in listOf(a.exceptionOrNull()!!.message!!, b.exceptionOrNull()!!.message!!)) {
                m shouldContain "parameter \\u001b[2J"
                m.none { it.isISOControl() || it == '\u202e' } shouldBe true
            }
        }

        test("a GID, a frame type, a failure message") {
            val h = hello(Role.SERVER).let { it.copy(qps = listOf(it.qps[0].copy(gid = esc)) + it.qps.drop(1)) }
            Handshake.validate(h, expected, "the server")!! shouldContain "qps[0].gid '\\u001b[2J"
            val typed = shouldThrow<PeerException> { FrameCodec.decode("{\"type\":\"$esc\"}".toByteArray()) }
            typed.message!!.none { it.isISOControl() || it == '\u202e' } shouldBe true
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            DataOutputStream(c.getOutputStream()).apply { FrameCodec.writeMagic(this); FrameCodec.write(this, Failure(esc.repeat(100))) }
            val e = shouldThrow<PeerException> { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.authenticate(intro(Role.SERVER), null) } }
            e.message shouldStartWith "the client refused the connection: \\u001b[2J"
            e.message shouldContain "more characters)"
            e.message!!.none { it.isISOControl() || it == '\u202e' } shouldBe true
            c.close()
        }
    }

    context("protocol versions") {
        test("a peer of version 2 (whose first frame is a hello) is told the version, and its own check of the first frame says it too") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            val old = """{"type":"hello","version":2,"role":"CLIENT","qpCount":1}""".toByteArray()
            DataOutputStream(c.getOutputStream()).apply { writeInt(FrameCodec.MAGIC); writeInt(old.size); write(old); flush() }
            val e = shouldThrow<PeerException> { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.authenticate(intro(Role.SERVER), null) } }
            e.message shouldBe "remote speaks control protocol version 2, this side ${Handshake.VERSION}: use the same rdma-run version on both sides"
            val input = DataInputStream(c.getInputStream())
            input.readInt() shouldBe FrameCodec.MAGIC
            val first = ByteArray(input.readInt()).also { input.readFully(it) }.toString(Charsets.UTF_8)
            first shouldStartWith """{"type":"hello","version":${Handshake.VERSION},"""
            // The failure report follows, once.
            FrameCodec.read(input, "failure") shouldBe Failure(e.message!!)
            c.close()
        }

        test("the step-3 frame of another version is judged by its version first") {
            val next = Handshake.VERSION + 1
            shouldThrow<PeerException> { FrameCodec.decode("""{"type":"endpoints","version":$next}""".toByteArray()) }.message shouldBe
                "remote speaks control protocol version $next, this side ${Handshake.VERSION}: use the same rdma-run version on both sides"
        }
    }

    context("failure reports") {
        test("a failure report goes out once, after the magic") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            val conn = ControlConnection.over(s, 10.seconds, Role.CLIENT)
            conn.trySend(Failure("first"))
            conn.trySend(Failure("second"))
            conn.close()
            val (magic, frames) = readAll(c)
            magic shouldBe true
            frames shouldBe listOf(Failure("first"))
            c.close()
        }
    }
})
