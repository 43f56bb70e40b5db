package dev.rdmarun.scripts

import dev.rdmarun.runtime.FabricKey
import dev.rdmarun.runtime.Gid
import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.longs.shouldBeLessThan
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import java.net.InetSocketAddress
import java.net.ServerSocket
import java.net.Socket
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicBoolean

/** The TCP half of the ping-pong against itself and against a peer that behaves like ibv_rc_pingpong's C code. */
class PingpongExchangeSpec : FunSpec({
    val serverDest = PingpongDest(0, 0x11, 0x123456, Gid.parseHex("00000000000000000000ffff0a4d0001"))
    val clientDest = PingpongDest(0, 0x12, 0xabcdef, Gid.parseHex("00000000000000000000ffff0a4d0002"))

    fun freePort() = ServerSocket(0).use { it.localPort }
    fun exchange(peerTimeoutMs: Long = 5_000, overall: Long? = null) = PingpongExchange(Limits(peerTimeoutMs, overall), Interruption())
    fun <T> async(block: () -> T): CompletableFuture<T> = CompletableFuture.supplyAsync(block)
    fun Socket.readExactly(n: Int): ByteArray = getInputStream().readNBytes(n)
    fun wire(text: String) = text.toByteArray(Charsets.US_ASCII)

    test("server and client exchange addresses; the server connects its QP before it answers") {
        val port = freePort()
        val connected = AtomicBoolean(false)
        val server = async { exchange().asServer(port, serverDest) { remote -> remote shouldBe clientDest; connected.set(true) } }
        val fromServer = exchange().asClient("127.0.0.1", port, clientDest) // retries until the server listens
        connected.get() shouldBe true
        fromServer shouldBe serverDest
        server.get(10, TimeUnit.SECONDS) shouldBe clientDest
    }

    test("on soft0 the client's nonce follows its address and the server connects with it") {
        val port = freePort()
        val nonce = PingpongWire.nonce()
        val got = CompletableFuture<ByteArray>()
        val server = async { exchange().asSoftServer(port, serverDest) { remote, n -> remote shouldBe clientDest; got.complete(n) } }
        exchange().asClient("127.0.0.1", port, clientDest, nonce) shouldBe serverDest
        server.get(10, TimeUnit.SECONDS) shouldBe clientDest
        got.get().toList() shouldBe nonce.toList()
    }

    test("a soft0 server refuses a client without a valid nonce, and never connects") {
        val port = freePort()
        val connected = AtomicBoolean(false)
        val server = async { runCatching { exchange().asSoftServer(port, serverDest) { _, _ -> connected.set(true) } } }
        retryConnect(port).use { s ->
            s.getOutputStream().write(PingpongWire.encode(clientDest) + wire("Z".repeat(64) + "\u0000"))
            s.getInputStream().readAllBytes().size shouldBe 0 // no address in return
        }
        server.get(10, TimeUnit.SECONDS).exceptionOrNull()!!.message shouldContain "soft0 nonce is not 64 lowercase hex digits"
        connected.get() shouldBe false
    }

    test("the server runs its pre-flight after it listens and before it accepts: a C client that connects meanwhile waits") {
        val port = freePort()
        val listening = CompletableFuture<Unit>()
        val release = CompletableFuture<Unit>()
        val server = async {
            exchange().asServer(port, serverDest, beforeAccept = { listening.complete(Unit); release.get(10, TimeUnit.SECONDS) }) {}
        }
        listening.get(10, TimeUnit.SECONDS)
        Socket().use { s ->
            s.connect(InetSocketAddress("127.0.0.1", port), 5_000) // in the backlog: the pre-flight is still running
            s.getOutputStream().write(PingpongWire.encode(clientDest))
            release.complete(Unit)
            s.readExactly(PingpongWire.MESSAGE_SIZE).toList() shouldBe PingpongWire.encode(serverDest).toList()
            s.getOutputStream().write(wire("done\u0000"))
        }
        server.get(10, TimeUnit.SECONDS) shouldBe clientDest
    }

    test("the client may start before the server: it retries while the connection is refused") {
        val port = freePort()
        val client = async { exchange().asClient("localhost", port, clientDest) }
        Thread.sleep(700)
        exchange().asServer(port, serverDest) {} shouldBe clientDest
        client.get(10, TimeUnit.SECONDS) shouldBe serverDest
    }

    test("server against a client that does what ibv_rc_pingpong's C client does") {
        val port = freePort()
        val server = async { exchange().asServer(port, serverDest) {} }
        val answer = retryConnect(port).use { s ->
            s.getOutputStream().write(wire("0000:000012:abcdef:00000000000000000000ffff0a4d0002\u0000"))
            val answer = s.readExactly(52)
            s.getOutputStream().write(wire("done\u0000"))
            s.getInputStream().read() shouldBe -1 // the server closes after "done"
            answer
        }
        String(answer, Charsets.US_ASCII) shouldBe "0000:000011:123456:00000000000000000000ffff0a4d0001\u0000"
        server.get(10, TimeUnit.SECONDS) shouldBe clientDest
    }

    test("client against a server that does what ibv_rc_pingpong's C server does") {
        ServerSocket().use { listener ->
            listener.bind(InetSocketAddress("127.0.0.1", 0))
            val client = async { exchange().asClient("127.0.0.1", listener.localPort, clientDest) }
            listener.accept().use { s ->
                String(s.readExactly(52), Charsets.US_ASCII) shouldBe "0000:000012:abcdef:00000000000000000000ffff0a4d0002\u0000"
                s.getOutputStream().write(PingpongWire.encode(serverDest))
                String(s.readExactly(5), Charsets.US_ASCII) shouldBe "done\u0000"
            }
            client.get(10, TimeUnit.SECONDS) shouldBe serverDest
        }
    }

    test("a client that sends garbage gets the connection closed and the server fails with what it got") {
        val port = freePort()
        val server = async { runCatching { exchange().asServer(port, serverDest) {} } }
        retryConnect(port).use { s ->
            s.getOutputStream().write(wire("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n" + "x".repeat(12)))
            s.getInputStream().read() shouldBe -1
        }
        val e = server.get(10, TimeUnit.SECONDS).exceptionOrNull()
        (e is WireFormatException) shouldBe true
        e!!.message shouldContain "SSH-2.0"
    }

    test("a client that connects and says nothing: the server gives up after the peer timeout") {
        val port = freePort()
        val server = async { runCatching { exchange(peerTimeoutMs = 500).asServer(port, serverDest) {} } }
        retryConnect(port).use {
            val e = server.get(10, TimeUnit.SECONDS).exceptionOrNull()
            e!!.message shouldContain "--peer-timeout"
            e.message shouldContain "reading the client's address"
        }
    }

    test("a client that hangs up mid-message: the server says how much came") {
        val port = freePort()
        val server = async { runCatching { exchange().asServer(port, serverDest) {} } }
        retryConnect(port).use { it.getOutputStream().write(wire("0000:000012")) }
        server.get(10, TimeUnit.SECONDS).exceptionOrNull()!!.message shouldContain "after 11 of 52 bytes"
    }

    test("no server: the client gives up after the peer timeout") {
        val started = System.nanoTime()
        val e = shouldThrow<CommandFailure> { exchange(peerTimeoutMs = 600).asClient("127.0.0.1", freePort(), clientDest) }
        e.message shouldContain "cannot connect to 127.0.0.1 port"
        (System.nanoTime() - started) / 1_000_000 shouldBeLessThan 5_000
    }

    test("no server and a --timeout shorter than the peer timeout: the client says the connection was refused") {
        val port = freePort()
        val e = shouldThrow<CommandFailure> { exchange(overall = 300).asClient("127.0.0.1", port, clientDest) }
        e.message shouldContain "cannot connect to 127.0.0.1 port $port: Connection refused until --timeout (300ms) (is the server side running?"
    }

    test("no client: --timeout ends the wait") {
        val e = shouldThrow<CommandFailure> {
            exchange(overall = 300).asServer(freePort(), serverDest) {}
        }
        e.message shouldContain "--timeout (300ms) reached while"
    }

    test("an unknown host is one clear error") {
        shouldThrow<CommandFailure> { exchange().asClient("no-such-host.invalid", 18515, clientDest) }.message shouldContain
            "unknown host 'no-such-host.invalid'"
    }
})

/** Connects to a server that is starting in another thread. */
private fun retryConnect(port: Int): Socket {
    val giveUp = System.nanoTime() + 10_000_000_000
    while (true) {
        try {
            return Socket("127.0.0.1", port)
        } catch (e: java.net.ConnectException) {
            if (System.nanoTime() > giveUp) throw e
            Thread.sleep(20)
        }
    }
}
