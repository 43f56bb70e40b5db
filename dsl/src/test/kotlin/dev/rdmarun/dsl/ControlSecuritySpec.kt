package dev.rdmarun.dsl

import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.nulls.shouldBeNull
import io.kotest.matchers.nulls.shouldNotBeNull
import io.kotest.matchers.shouldBe
import io.kotest.matchers.shouldNotBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import io.kotest.matchers.string.shouldStartWith
import io.kotest.matchers.types.shouldBeInstanceOf
import java.io.DataInputStream
import java.io.DataOutputStream
import java.io.IOException
import java.net.InetAddress
import java.net.InetSocketAddress
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
        version = CONTROL_PROTOCOL_VERSION, role = role, qpCount = qps, recvDepth = 64, maxDestRdAtomic = 1,
        fingerprint = fingerprint, parameters = parameters, plan = listOf("rdma-run-plan-2"),
        qps = List(qps) { QpInfo(0x11 + it, 0x1234 + it, 0, gid, 1024, BufferInfo(0x7f00_0000_1000L + it * 4096L, 0x100 + it, 4096), BufferInfo(0x7f00_0010_0000L, 7, 8)) },
    )

    val expected = Handshake.Expected(qpCount = 2, recvDepth = 64, dataBytes = 4096)

    fun intro(role: Role, secret: SecretKind = SecretKind.NONE) = Intro(CONTROL_PROTOCOL_VERSION, role, Handshake.nonce(), secret)

    /** A plan's lines: the settings, one parameter, the script's digest. */
    fun plan(qps: Int = 2, count: Int = 100, script: String = "a".repeat(64)) =
        listOf("rdma-run-plan-2", "setting qps=$qps", "parameter count=$count", "script sha256=$script")

    fun creds(role: Role, token: ControlToken = ControlToken.none(), lines: List<String> = plan()) =
        Handshake.Credentials(role, Fingerprint.sha256(lines.joinToString("") { it + "\n" }), Fingerprint.sections(lines), lines, token)

    /** Everything a raw peer receives on [socket] until the other side closes: the magic's presence and the frames. */
    fun readAll(socket: Socket): Pair<Boolean, List<Frame>> {
        val input = DataInputStream(socket.getInputStream())
        val magic = runCatching { input.readInt() }.getOrNull()
        val frames = generateSequence { runCatching { FrameCodec.read(input, "more") }.getOrNull() }.toList()
        return (magic == FrameCodec.MAGIC) to frames
    }

    fun kinds(frames: List<Frame>): List<KClass<out Frame>> = frames.map { it::class }

    class Served<T>(val accepted: Result<ControlServer.Accepted>, val body: T, val notes: List<String>, val port: Int)

    /** A server's accept on an ephemeral port (on the IO pool) while [body] plays the peers. */
    suspend fun <T> withServer(timeout: Duration, token: ControlToken, body: suspend (port: Int) -> T): Served<T> {
        val listener = ServerSocket(0, 50, loopback)
        val notes = CopyOnWriteArrayList<String>()
        return try {
            coroutineScope {
                val accepted = async(Dispatchers.IO) {
                    runCatching { ControlServer.accept(listener, timeout, creds(Role.SERVER, token)) { notes.add(it) } }
                }
                val b = async(Dispatchers.IO) { body(listener.localPort) }
                val a = accepted.await()
                a.getOrNull()?.connection?.close()
                Served(a, b.await(), notes, listener.localPort)
            }
        } finally {
            listener.close()
        }
    }

    fun client(port: Int, timeout: Duration = 10.seconds) = ControlClient.connect(Peer.Connect("127.0.0.1", port), timeout)

    /** The real client passes steps 1 and 2 with [token] ("authenticated"), then closes [also]. */
    fun authenticates(port: Int, token: ControlToken, vararg also: java.io.Closeable): String = try {
        client(port).use { it.authenticate(creds(Role.CLIENT, token)) }
        "authenticated"
    } finally {
        also.forEach { it.close() }
    }

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
                val e = shouldThrow<RdmaTimeoutException> {
                    client(listener.localPort, timeout = 1.seconds).use { it.authenticate(creds(Role.CLIENT)) }
                }
                e.message shouldBe "the server at 127.0.0.1:${listener.localPort} sent its hello too slowly: no complete hello within 1s"
                dripper.join() // its next write fails on the closed connection
            }
        }

        test("a client that drips is a stray: the server's wait ends at its deadline and says so") {
            val accepted = withServer(1.seconds, ControlToken.none()) { port ->
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
            val e = accepted.exceptionOrNull().shouldBeInstanceOf<RdmaTimeoutException>()
            e.message shouldStartWith "no client completed the hello on TCP port "
            e.message shouldContain "within 1s; closed 1 stray connection that did not complete the hello (the last: the client at 127.0.0.1:"
            e.message shouldContain "sent its hello too slowly: no complete hello within 1s)"
        }

        test("a peer that stops reading fails a send within the timeout, in one sentence") {
            // Small buffers on both ends, so that a few kilobytes of frames block the write.
            val (side, raw) = ServerSocket(0, 1, loopback).use { l ->
                val c = Socket().apply { receiveBufferSize = 4096; connect(InetSocketAddress(loopback, l.localPort)) }
                ControlConnection.over(l.accept().apply { sendBufferSize = 4096 }, 1.seconds, Role.CLIENT) to c
            }
            raw.use {
                val outcome = java.util.concurrent.CompletableFuture<Throwable?>()
                // On a thread of its own: without a write deadline this send never returns, and the
                // test must then fail rather than hang (closing the socket below unblocks it).
                Thread.ofPlatform().daemon(true).start {
                    outcome.complete(runCatching { repeat(1_000_000) { side.send(Heartbeat(progress = it.toLong())) } }.exceptionOrNull())
                }
                val failure = runCatching { outcome.get(60, java.util.concurrent.TimeUnit.SECONDS) }.getOrElse { raw.close(); side.close(); outcome.get() }
                failure.shouldBeInstanceOf<RdmaTimeoutException>().message shouldBe
                    "the client did not take frame Heartbeat within 1s: it stopped reading the control connection"
            }
        }

        test("while the scenario runs, a peer that drips its frames is lost within the timeout") {
            val (serverSide, raw) = ServerSocket(0, 1, loopback).use { l ->
                val c = Socket(loopback, l.localPort)
                ControlConnection.over(l.accept(), 1.seconds, Role.CLIENT) to c
            }
            val lost = java.util.concurrent.CompletableFuture<Exception>()
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
            lost.get(30, java.util.concurrent.TimeUnit.SECONDS).shouldBeInstanceOf<RdmaTimeoutException>().message shouldBe
                "the client sent its frames too slowly: no complete frame within 1s"
            serverSide.close()
            raw.close()
            dripper.join()
        }
    }

    context("a listening server survives strays") {
        test("port scans, garbage, 8 bytes, wrong magic, no secret and a wrong secret are closed and counted; they get the intro only; the client still completes") {
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
                stray { it.writeInt(0x52445258); FrameCodec.write(it, intro(Role.CLIENT, SecretKind.TOKEN)) } // wrong magic
                stray { FrameCodec.writeMagic(it); FrameCodec.write(it, intro(Role.CLIENT, SecretKind.NONE)) } // no secret
                stray { // the wrong secret
                    FrameCodec.writeMagic(it)
                    FrameCodec.write(it, intro(Role.CLIENT, SecretKind.TOKEN))
                    FrameCodec.write(it, Proof("0".repeat(64), Handshake.SECTIONS.associateWith { "0".repeat(64) }))
                }
                stray { FrameCodec.writeMagic(it); FrameCodec.write(it, hello(Role.CLIENT)) } // a hello instead of the intro
                authenticates(port, token, silent)
            }
            served.body shouldBe "authenticated"
            served.accepted.getOrThrow().connection.peerLabel shouldStartWith "the client at 127.0.0.1:"
            // Nothing but step 1 (and at most one failure report) reached a stray: no proof, no hello, no token.
            received.size shouldBe 7
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
            failures[4]!! shouldStartWith "the client at 127.0.0.1:"
            failures[4]!! shouldContain "runs without a secret (--no-token) and this side with a token (--token or RDMA_RUN_TOKEN)"
            failures[5] shouldBe "the tokens differ: give both sides the same --token or RDMA_RUN_TOKEN"
            failures[6].shouldBeNull() // a hello where the intro was due: closed without a word
            // The wrong secret is said at once; the port scan, the 6 above and the silent one, counted in one escaped line.
            served.notes.size shouldBe 2
            served.notes[0] shouldBe "refused a connection (the tokens differ: give both sides the same --token or RDMA_RUN_TOKEN); still waiting for the client"
            served.notes[1] shouldStartWith "closed 9 stray connections that did not complete the hello (the last: "
            served.notes[1] shouldContain "; the client at 127.0.0.1:"
        }

        test("more pending connections than the bound: the oldest is closed, the client still completes") {
            val served = withServer(20.seconds, ControlToken.none()) { port ->
                val silent = List(ControlServer.MAX_PENDING + 3) { Socket(loopback, port) }
                authenticates(port, ControlToken.none(), *silent.toTypedArray())
            }
            served.body shouldBe "authenticated"
            served.accepted.isSuccess shouldBe true
            served.notes.single() shouldStartWith "closed ${ControlServer.MAX_PENDING + 3} stray connections"
        }

        test("without a secret, a client of another scenario fails with one sentence; the server says so at once and keeps waiting") {
            val served = withServer(1.seconds, ControlToken.none()) { port ->
                runCatching { client(port).use { it.authenticate(creds(Role.CLIENT, lines = plan(qps = 4))) } }
            }
            served.body.exceptionOrNull()!!.message shouldBe
                "the server at 127.0.0.1:${served.port} refused the connection: the server runs a different scenario: the shared settings differ"
            served.notes.first() shouldStartWith "refused a connection (the client at 127.0.0.1:"
            served.notes.first() shouldContain "runs a different scenario: the shared settings differ); still waiting for the client"
            served.accepted.exceptionOrNull()!!.message shouldContain "within 1s; closed 1 stray connection that did not complete the hello (the last: the client at 127.0.0.1:"
        }

        test("with the secret proved, a client of another scenario ends both sides at once, each naming the first difference") {
            val token = ControlToken.of("shared")
            // A wait of a minute: the server's sentence must come from the refusal, not from its deadline.
            val served = withServer(60.seconds, token) { port ->
                runCatching { client(port).use { it.authenticate(creds(Role.CLIENT, token, plan(count = 99))) } }
            }
            served.body.exceptionOrNull()!!.message shouldBe
                "the server at 127.0.0.1:${served.port} runs a different scenario: --set count is 99 here and 100 on the server"
            val e = served.accepted.exceptionOrNull().shouldBeInstanceOf<PeerException>()
            e.message shouldStartWith "the client at 127.0.0.1:"
            e.message shouldContain "runs a different scenario: --set count is 100 here and 99 on the client"
        }
        test("a plan longer than the hello's 16 KiB limit is read whole, once the secret is proved") {
            val token = ControlToken.of("shared")
            val long = plan(count = 99) + (1..8).map { "parameter p$it=" + "x".repeat(Handshake.MAX_STRING - 20) }
            val served = withServer(60.seconds, token) { port ->
                runCatching { client(port).use { it.authenticate(creds(Role.CLIENT, token, long)) } }
            }
            served.accepted.exceptionOrNull()!!.message shouldContain "runs a different scenario: --set count is 100 here and 99 on the client"
        }
    }

    context("an attacker who can connect, or who saw a run, gets no endpoint") {
        /**
         * Runs [body] with a port that relays to [port], recording what the client side sends
         * into [upstream] and what the server side sends into [downstream].
         */
        suspend fun <T> relayed(port: Int, upstream: java.io.ByteArrayOutputStream, downstream: java.io.ByteArrayOutputStream = java.io.ByteArrayOutputStream(),
                                body: suspend (Int) -> T): T = ServerSocket(0, 1, loopback).use { relay ->
            coroutineScope {
                val result = async(Dispatchers.IO) { body(relay.localPort) }
                relay.accept().use { fromClient ->
                    Socket(loopback, port).use { toServer ->
                        fun pump(from: Socket, to: Socket, record: java.io.ByteArrayOutputStream) = Thread.ofPlatform().start {
                            runCatching {
                                val buf = ByteArray(4096)
                                while (true) {
                                    val n = from.getInputStream().read(buf)
                                    if (n < 0) break
                                    synchronized(record) { record.write(buf, 0, n) }
                                    to.getOutputStream().write(buf, 0, n)
                                }
                            }
                            runCatching { to.shutdownOutput() }
                        }
                        val up = pump(fromClient, toServer, upstream)
                        val down = pump(toServer, fromClient, downstream)
                        val r = result.await()
                        up.join()
                        down.join()
                        r
                    }
                }
            }
        }

        /** Reads one frame's JSON text, after the magic when [magic]. */
        fun rawFrame(input: DataInputStream, magic: Boolean = false): String {
            if (magic) input.readInt() shouldBe FrameCodec.MAGIC
            val bytes = ByteArray(input.readInt())
            input.readFully(bytes)
            return bytes.toString(Charsets.UTF_8)
        }

        fun writeRaw(out: DataOutputStream, json: String, magic: Boolean = false) {
            if (magic) out.writeInt(FrameCodec.MAGIC)
            val bytes = json.toByteArray(Charsets.UTF_8)
            out.writeInt(bytes.size)
            out.write(bytes)
            out.flush()
        }

        for (token in listOf(ControlToken.none(), ControlToken.of("shared"))) {
            test("echoing the server's own frames back as a client is a stray ($token): no endpoint, the real client still connects") {
                val seen = CopyOnWriteArrayList<String>()
                val served = withServer(20.seconds, token) { port ->
                    Socket(loopback, port).use { s ->
                        val input = DataInputStream(s.getInputStream())
                        val out = DataOutputStream(s.getOutputStream())
                        val intro = rawFrame(input, magic = true)
                        // The server's intro, as a client's: its own nonce is refused, so also with a fresh one.
                        intro shouldContain "\"role\":\"SERVER\""
                        writeRaw(out, intro.replace("\"role\":\"SERVER\"", "\"role\":\"CLIENT\"")
                            .replace(Regex("\"nonce\":\"[0-9a-f]{64}\""), "\"nonce\":\"${Handshake.nonce()}\""), magic = true)
                        // The server waits for the client's proof first: the echo has none to copy, so it sends one made of nothing.
                        writeRaw(out, FrameCodec.encode(Proof("0".repeat(64), emptyMap())).toString(Charsets.UTF_8))
                        // Whatever comes next is echoed too, until the server closes.
                        s.soTimeout = 10_000
                        runCatching {
                            while (true) {
                                val f = rawFrame(input)
                                seen.add(f)
                                writeRaw(out, f.replace("\"role\":\"SERVER\"", "\"role\":\"CLIENT\""))
                            }
                        }
                    }
                    authenticates(port, token)
                }
                served.body shouldBe "authenticated"
                // The echo got no proof, no plan, no endpoint: at most a failure report.
                seen.forEach { it shouldStartWith "{\"type\":\"failure\"" }
                served.notes.last() shouldStartWith "closed 1 stray connection that did not complete the hello"
            }
        }

        test("a client's handshake recorded on the path and replayed to a new server of the same scenario is refused") {
            val token = ControlToken.of("shared")
            val recorded = java.io.ByteArrayOutputStream()
            // Server A, with a recording relay between it and the real client.
            val first = withServer(20.seconds, token) { port ->
                relayed(port, recorded) { relayPort -> client(relayPort).use { it.authenticate(creds(Role.CLIENT, token)) } }
            }
            first.accepted.isSuccess shouldBe true
            // Server B: the same scenario and secret, fed the recording.
            val second = withServer(2.seconds, token) { port ->
                Socket(loopback, port).use { s ->
                    runCatching { s.getOutputStream().write(synchronized(recorded) { recorded.toByteArray() }) }
                    readAll(s)
                }
            }
            second.body.second.map { it::class } shouldContainExactly listOf(Intro::class, Failure::class)
            (second.body.second[1] as Failure).message shouldBe "the tokens differ: give both sides the same --token or RDMA_RUN_TOKEN"
            second.accepted.exceptionOrNull()!!.message shouldContain "within 2s; closed 1 stray connection"
        }

        test("the whole handshake's transcript holds neither the secret nor soft0's fabric key, which both sides derive alike") {
            val token = ControlToken.of("s3cret-token")
            val up = java.io.ByteArrayOutputStream()
            val down = java.io.ByteArrayOutputStream()
            val served = withServer(20.seconds, token) { port ->
                relayed(port, up, down) { relayPort -> client(relayPort).use { it.authenticate(creds(Role.CLIENT, token)) } }
            }
            val key = served.accepted.getOrThrow().fabricKey
            served.body shouldBe key
            val transcript = (up.toByteArray() + down.toByteArray()).toString(Charsets.ISO_8859_1)
            transcript shouldContain "\"type\":\"proof\"" // the relay saw the whole of steps 1 and 2
            transcript shouldNotContain java.util.HexFormat.of().formatHex(key.toBytes())
            transcript shouldNotContain key.toBytes().toString(Charsets.ISO_8859_1)
            transcript shouldNotContain "s3cret"
            // What an observer could try: every 64-hex-digit string it saw, as the key.
            Regex("[0-9a-f]{64}").findAll(transcript).map { it.value }.toList().forEach {
                dev.rdmarun.runtime.FabricKey.of(java.util.HexFormat.of().parseHex(it)) shouldNotBe key
            }
        }
    }

    context("the secret") {
        suspend fun pair(serverToken: ControlToken, clientToken: ControlToken): Pair<Result<dev.rdmarun.runtime.FabricKey>, Result<dev.rdmarun.runtime.FabricKey>> {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            return coroutineScope {
                val a = async(Dispatchers.IO) {
                    runCatching { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.authenticate(creds(Role.SERVER, serverToken)) } }
                }
                val b = async(Dispatchers.IO) {
                    runCatching { ControlConnection.over(c, 10.seconds, Role.SERVER).use { it.authenticate(creds(Role.CLIENT, clientToken)) } }
                }
                a.await() to b.await()
            }
        }

        test("the same token on both sides: both pass and derive the same fabric key; another pair of nonces, another key") {
            val (a, b) = pair(ControlToken.of("secret"), ControlToken.of("secret"))
            a.getOrThrow() shouldBe b.getOrThrow()
            val (c, _) = pair(ControlToken.of("secret"), ControlToken.of("secret"))
            (c.getOrThrow() == a.getOrThrow()) shouldBe false
        }

        test("different tokens: the server names it, the client hears it") {
            val (a, b) = pair(ControlToken.of("secret"), ControlToken.of("other"))
            a.exceptionOrNull()!!.message shouldBe "the tokens differ: give both sides the same --token or RDMA_RUN_TOKEN"
            b.exceptionOrNull()!!.message shouldBe "the server refused the connection: the tokens differ: give both sides the same --token or RDMA_RUN_TOKEN"
        }

        test("different per-user secrets: both sentences say how to share the file, and neither holds the secret or its path") {
            val dir = java.nio.file.Files.createTempDirectory("secrets")
            val one = ControlToken.userSecret(dir.resolve("one/rdma-run/secret"))
            val two = ControlToken.userSecret(dir.resolve("two/rdma-run/secret"))
            val (a, b) = pair(one, two)
            val sentence = "the per-user secrets differ: copy the file \$XDG_CONFIG_HOME/rdma-run/secret (by default ~/.config/rdma-run/secret) " +
                "from one host to the same place on the other (mode 0600, e.g. with scp -p), or give both sides the same --token"
            a.exceptionOrNull()!!.message shouldBe sentence
            b.exceptionOrNull()!!.message shouldBe "the server refused the connection: $sentence"
            val secretHex = java.nio.file.Files.readAllLines(dir.resolve("one/rdma-run/secret"))[1]
            a.exceptionOrNull()!!.message shouldNotContain secretHex
            a.exceptionOrNull()!!.message shouldNotContain dir.toString()
        }

        test("a secret on one side only is a mismatch, said from each side") {
            val (a, b) = pair(ControlToken.none(), ControlToken.of("secret"))
            a.exceptionOrNull()!!.message shouldBe "the client uses a token (--token or RDMA_RUN_TOKEN) and this side runs without one (--no-token): give both sides the same secret, or --no-token to both"
            b.exceptionOrNull()!!.message shouldBe "the server runs without a secret (--no-token) and this side with a token (--token or RDMA_RUN_TOKEN): give both sides the same secret, or --no-token to both"
        }

        test("a server that does not know the secret (a bad proof) is refused by the client") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            val impostor = Thread.ofPlatform().start {
                runCatching {
                    val out = DataOutputStream(s.getOutputStream())
                    val input = DataInputStream(s.getInputStream())
                    FrameCodec.writeMagic(out)
                    FrameCodec.write(out, intro(Role.SERVER, SecretKind.TOKEN))
                    FrameCodec.readMagic(input, "magic")
                    FrameCodec.read(input, "intro")
                    FrameCodec.read(input, "proof")
                    FrameCodec.write(out, Proof("1".repeat(64), emptyMap()))
                    readAll(s)
                }
                s.close()
            }
            val e = shouldThrow<PeerException> {
                ControlConnection.over(c, 10.seconds, Role.SERVER).use { it.authenticate(creds(Role.CLIENT, ControlToken.of("secret"))) }
            }
            e.message shouldBe "the server does not know the secret (its proof is wrong): it is not the peer this side expects"
            impostor.join()
        }

        test("a proof is bound to the sender's role, both nonces, the secret and each part of the plan") {
            val key = "k".toByteArray()
            val (a, b, c) = listOf("a", "b", "c").map { it.repeat(64) }
            val p = Handshake.secretProof(key, Role.CLIENT, a, b)
            Handshake.proofMatches(p, Handshake.secretProof(key, Role.CLIENT, a, b)) shouldBe true
            Handshake.proofMatches(p, Handshake.secretProof(key, Role.SERVER, a, b)) shouldBe false
            Handshake.proofMatches(p, Handshake.secretProof(key, Role.CLIENT, c, b)) shouldBe false
            Handshake.proofMatches(p, Handshake.secretProof("j".toByteArray(), Role.CLIENT, a, b)) shouldBe false
            Handshake.proofMatches(p, Handshake.secretProof(null, Role.CLIENT, a, b)) shouldBe false
            val digests = Fingerprint.sections(plan())
            val sections = Handshake.sectionProofs(key, digests, Role.CLIENT, a, b)
            Handshake.differingSections(sections, Handshake.sectionProofs(key, Fingerprint.sections(plan(count = 1)), Role.CLIENT, a, b)) shouldBe listOf("parameters")
            Handshake.differingSections(sections, Handshake.sectionProofs("j".toByteArray(), digests, Role.CLIENT, a, b)) shouldBe Handshake.SECTIONS
            Handshake.differingSections(sections, Handshake.sectionProofs(key, digests, Role.SERVER, a, b)) shouldBe Handshake.SECTIONS
            // No digest of the plan is shown: the proofs are not the digests.
            sections.values.toSet().intersect(digests.values.toSet()) shouldBe emptySet()
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
            )
            for ((lying, field) in cases) invalid(lying) shouldBe "the server sent an invalid hello: $field"
        }

        test("over TCP, a lying hello fails this side with the sentence and tells the peer once") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            val lying = hello(Role.SERVER).let { h -> h.copy(qps = listOf(h.qps[0].copy(credit = h.qps[0].credit.copy(length = -5))) + h.qps.drop(1)) }
            coroutineScope {
                val raw = async(Dispatchers.IO) {
                    val out = DataOutputStream(s.getOutputStream())
                    val input = DataInputStream(s.getInputStream())
                    // A raw server that passes steps 1 and 2 honestly (no secret, the same plan), then lies.
                    val mine = intro(Role.SERVER)
                    FrameCodec.writeMagic(out)
                    FrameCodec.write(out, mine)
                    FrameCodec.readMagic(input, "magic")
                    val theirs = FrameCodec.read(input, "intro") as Intro
                    FrameCodec.read(input, "proof")
                    FrameCodec.write(out, Proof(Handshake.secretProof(null, Role.SERVER, theirs.nonce, mine.nonce),
                        Handshake.sectionProofs(null, Fingerprint.sections(plan()), Role.SERVER, theirs.nonce, mine.nonce)))
                    FrameCodec.write(out, lying)
                    // What the client sends after its proof, until it closes.
                    generateSequence { runCatching { FrameCodec.read(input, "more") }.getOrNull() }.toList().also { s.close() }
                }
                val e = shouldThrow<PeerException> {
                    ControlConnection.over(c, 10.seconds, Role.SERVER).use {
                        it.authenticate(creds(Role.CLIENT))
                        it.exchangeHellos(hello(Role.CLIENT), expected)
                    }
                }
                e.message shouldBe "the server sent an invalid hello: qps[0].credit length is -5, not the 8 bytes this scenario registers"
                val frames = raw.await()
                kinds(frames) shouldBe listOf(Hello::class, Failure::class)
                (frames[1] as Failure).message shouldBe e.message
            }
        }

        test("a frame length is bounded before anything is allocated") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            DataOutputStream(c.getOutputStream()).apply { writeInt(FrameCodec.MAGIC); writeInt(-5); flush() }
            val e = shouldThrow<PeerException> { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.authenticate(creds(Role.SERVER)) } }
            e.message shouldContain "the peer sent a frame of -5 bytes"
            c.close()
        }

        test("before the intro passed, a frame is at most 16 KiB: a stray gets no 4 MiB buffer") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            DataOutputStream(c.getOutputStream()).apply { writeInt(FrameCodec.MAGIC); writeInt(FrameCodec.MAX_FRAME); flush() }
            val e = shouldThrow<PeerException> { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.authenticate(creds(Role.SERVER)) } }
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
            val e = shouldThrow<PeerException> { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.authenticate(creds(Role.SERVER)) } }
            e.message shouldStartWith "the client refused the connection: \\u001b[2J"
            e.message shouldContain "more characters)"
            e.message!!.none { it.isISOControl() || it == '\u202e' } shouldBe true
            c.close()
        }
    }

    test("a peer's failure sentence is shown whole up to MAX_PEER_SENTENCE: a deadlock verdict ends with its hint") {
        val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
        val verdict = "the server waits for a credit to send on QP 0 (at card.main.kts:14); ".repeat(6) + "(neither side made progress for 3 heartbeats)"
        DataOutputStream(c.getOutputStream()).apply { FrameCodec.write(this, Failure(verdict)) }
        val e = shouldThrow<PeerException> { ControlConnection.over(s, 10.seconds, Role.SERVER).use { it.receive("ready signal") } }
        e.message shouldBe "the server failed: $verdict"
        c.close()
    }

    context("protocol versions") {
        test("a peer of version 2 (whose first frame is a hello) is told the version, and its own check of the first frame says it too") {
            val (s, c) = ServerSocket(0, 1, loopback).use { l -> Socket(loopback, l.localPort).let { l.accept() to it } }
            val old = """{"type":"hello","version":2,"role":"CLIENT","qpCount":1}""".toByteArray()
            DataOutputStream(c.getOutputStream()).apply { writeInt(FrameCodec.MAGIC); writeInt(old.size); write(old); flush() }
            val e = shouldThrow<PeerException> { ControlConnection.over(s, 10.seconds, Role.CLIENT).use { it.authenticate(creds(Role.SERVER)) } }
            e.message shouldBe "remote speaks control protocol version 2, this side ${CONTROL_PROTOCOL_VERSION}: use the same rdma-run version on both sides"
            val input = DataInputStream(c.getInputStream())
            input.readInt() shouldBe FrameCodec.MAGIC
            val first = ByteArray(input.readInt()).also { input.readFully(it) }.toString(Charsets.UTF_8)
            first shouldStartWith """{"type":"hello","version":${CONTROL_PROTOCOL_VERSION},"""
            // The failure report follows, once.
            FrameCodec.read(input, "failure") shouldBe Failure(e.message!!)
            c.close()
        }

        test("the step-3 frame of another version is judged by its version first") {
            val next = CONTROL_PROTOCOL_VERSION + 1
            shouldThrow<PeerException> { FrameCodec.decode("""{"type":"endpoints","version":$next}""".toByteArray()) }.message shouldBe
                "remote speaks control protocol version $next, this side ${CONTROL_PROTOCOL_VERSION}: use the same rdma-run version on both sides"
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
