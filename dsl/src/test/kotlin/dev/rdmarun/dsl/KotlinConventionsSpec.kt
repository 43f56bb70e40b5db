package dev.rdmarun.dsl

import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldBeEmpty
import io.kotest.matchers.nulls.shouldBeNull
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldStartWith
import io.kotest.matchers.types.shouldBeInstanceOf
import java.net.ServerSocket
import java.util.concurrent.Executors
import java.util.concurrent.TimeoutException
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.async
import kotlinx.coroutines.asCoroutineDispatcher
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull

/**
 * The DSL's Kotlin conventions (the README's "Kotlin conventions"), on soft0 with both peers in
 * this JVM, one case each.
 */
class KotlinConventionsSpec : FunSpec({
    fun freePort() = ServerSocket(0).use { it.localPort }

    // The deadline of the cases that wait it out.
    val wait = (System.getenv("RDMA_TEST_WAIT_SECONDS")?.toIntOrNull() ?: 3).seconds

    fun options(peer: Peer) = RdmaOptions(parameters = mapOf("warmup" to "0", "preflight" to "0"), overrides = SettingsOverrides(device = "soft0"), peer = peer)

    /** Runs [block] as server and client at once (rdmaScope on the IO pool); returns both outcomes. */
    suspend fun pair(block: suspend ScenarioScope.() -> Unit): Pair<Result<ScenarioResult>, Result<ScenarioResult>> {
        val port = freePort()
        return coroutineScope {
            val server = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.listen(port)), block) } }
            val client = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.connect("127.0.0.1", port)), block) } }
            server.await() to client.await()
        }
    }

    test("rdmaScope suspends instead of blocking: both peers run on one thread") {
        val one = Executors.newSingleThreadExecutor().asCoroutineDispatcher()
        try {
            val port = freePort()
            // rdma { } here would hold the thread: the client would never start and the server would wait for it.
            val (server, client) = withContext(one) {
                val server = async { runCatching { rdmaScope(options(Peer.listen(port))) { timeout(wait * 3); connect(peer); barrier() } } }
                val client = async { runCatching { rdmaScope(options(Peer.connect("127.0.0.1", port))) { timeout(wait * 3); connect(peer); barrier() } } }
                server.await() to client.await()
            }
            server.getOrThrow().role shouldBe Role.SERVER
            client.getOrThrow().role shouldBe Role.CLIENT
        } finally {
            one.close()
        }
    }

    test("withTimeout around a wait ends just that wait: it took nothing, and the QP's next wait gets what comes") {
        var timedOut: Any? = "not yet"
        var thrown: Throwable? = null
        var late: String? = null
        var outstandingAfter = -1
        var sent: Any? = "not yet"
        val (server, client) = pair {
            // Far beyond the withTimeouts: a wait that ignored them would end here, and fail the case.
            timeout(10.seconds)
            recvDepth(1)
            inboxDepth(0) // one message at a time: a second send waits for a credit
            connect(peer)
            server {
                qp(0) {
                    timedOut = withTimeoutOrNull(100.milliseconds) { receive() } // a message wait
                    thrown = shouldThrow<TimeoutCancellationException> { withTimeout(100.milliseconds) { receive() } }
                }
                barrier()
                barrier() // the client's send waits for a credit meanwhile
                qp(0) {
                    late = receive().text()
                    receive().text() shouldBe "second"
                }
            }
            client {
                barrier()
                qp(0) {
                    send("late".toByteArray())
                    awaitCompletion()
                    // "late" holds the server's one receive slot until the server takes it: this send waits for a credit.
                    sent = withTimeoutOrNull(100.milliseconds) { send("never".toByteArray()) }
                    outstandingAfter = outstanding
                }
                barrier()
                qp(0) {
                    send("second".toByteArray())
                    awaitAll()
                }
            }
        }
        server.getOrThrow()
        client.getOrThrow()
        timedOut.shouldBeNull()
        thrown.shouldBeInstanceOf<TimeoutCancellationException>()
        late shouldBe "late"
        sent.shouldBeNull()
        outstandingAfter shouldBe 0 // the cancelled send was not posted
        client.getOrThrow().total.operations shouldBe 2 // "late" and "second"
    }

    test("a wait's deadline is an RdmaTimeoutException: a TimeoutException, no CancellationException, the same one sentence") {
        var caught: Throwable? = null
        val (server, client) = pair {
            timeout(if (isServer) wait else 60.seconds) // a local setting: the server's wait is the one that ends
            connect(peer)
            server {
                qp(0) {
                    try {
                        receive() // the client never sends
                    } catch (e: TimeoutException) {
                        caught = e
                        throw e
                    }
                }
            }
            barrier()
        }
        val e = server.exceptionOrNull()
        e.shouldBeInstanceOf<RdmaTimeoutException>()
        (e is CancellationException) shouldBe false
        e.message shouldStartWith "the server waited $wait for a message in receive() on QP 0; the client "
        describeFailure(e) shouldBe e.message
        // What the wait threw is what rdma { } throws (kotlinx's stack-trace recovery may hand the block a copy).
        caught.shouldBeInstanceOf<RdmaTimeoutException>().message shouldBe e.message
        // The client did not time out: its peer did, and said so.
        client.exceptionOrNull().shouldBeInstanceOf<PeerException>().message shouldStartWith "the server failed: the server waited $wait for"
    }

    test("a barrier's deadline is an RdmaTimeoutException too") {
        val (server, client) = pair {
            timeout(if (isClient) wait else 60.seconds)
            connect(peer)
            server { qp(0) { receive() } }
            barrier()
        }
        client.exceptionOrNull().shouldBeInstanceOf<RdmaTimeoutException>().message shouldStartWith
            "the client waited $wait for the server to reach barrier 1; "
        server.exceptionOrNull().shouldBeInstanceOf<PeerException>()
    }

    test("a client that finds no server times out with an RdmaTimeoutException, as connect(peer)'s other waits") {
        val port = freePort()
        val e = shouldThrow<RdmaTimeoutException> {
            rdmaScope(options(Peer.connect("127.0.0.1", port))) {
                // Long enough for the setup before it and a first attempt's refusal on a loaded host;
                // a last attempt the deadline cuts short no longer hides the refusals before it.
                timeout(3.seconds)
                connect(peer)
            }
        }
        // The hint names no launcher flag: a DSL user has none, and a --loopback server had listened.
        e.message shouldBe "cannot connect to 127.0.0.1:$port within 3s: Connection refused " +
            "(is a server listening on port $port, and still waiting for its client?)"
    }

    test("a server that cannot bind its address names the address, not only the port") {
        val port = freePort()
        val e = shouldThrow<ScenarioException> {
            // 192.0.2.1 (TEST-NET-1) is no address of this host.
            rdmaScope(options(Peer.listen(port, "192.0.2.1"))) { connect(peer) }
        }
        e.message shouldStartWith "cannot listen on 192.0.2.1 TCP port $port: "
    }

    test("a client whose connection the server drops before its proof (a flood of strangers) connects again and completes") {
        val port = freePort()
        ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress()).use { front ->
            // In front of the server: the first connection is closed after its intro without a
            // word, as a server under a flood closes its oldest one; the next is relayed.
            Thread.ofPlatform().daemon(true).start {
                runCatching {
                    front.accept().use { it.getInputStream().read(ByteArray(64)) }
                    val client = front.accept()
                    val server = java.net.Socket("127.0.0.1", port)
                    Thread.ofPlatform().daemon(true).start { runCatching { client.getInputStream().transferTo(server.getOutputStream()) } }
                    runCatching { server.getInputStream().transferTo(client.getOutputStream()) }
                }
            }
            val (server, client) = coroutineScope {
                val s = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.listen(port))) { timeout(20.seconds); connect(peer); barrier() } } }
                val c = async(Dispatchers.IO) {
                    runCatching { rdmaScope(options(Peer.connect("127.0.0.1", front.localPort))) { timeout(20.seconds); connect(peer); barrier() } }
                }
                s.await() to c.await()
            }
            // It used to end the client at once: "the peer closed the control connection while this side waited for ..."
            client.getOrThrow()
            server.getOrThrow()
        }
    }

    test("awaitCompletions(n) returns all n completions, oldest first, and fails at the call beyond what is outstanding") {
        var all: Any? = null // Any: the old awaitCompletions returned only the last completion
        var none: Any? = null
        var beyond: String? = null
        val (server, client) = pair {
            bufferSize(64)
            if (isServer) remoteAccess(RemoteAccess.WRITE, RemoteAccess.ATOMIC)
            connect(peer)
            qp(0) {
                client {
                    write(size = 16)
                    send(size = 8)
                    fetchAndAdd(5, remoteOffset = 8)
                    beyond = shouldThrow<ScenarioException> { awaitCompletions(4) }.message
                    all = awaitCompletions(3)
                    none = awaitCompletions(0)
                }
                server { receive() }
            }
        }
        server.getOrThrow()
        client.getOrThrow()
        all shouldBe listOf(
            Completion(0, OpKind.WRITE, 16, 0),
            Completion(0, OpKind.SEND, 8, 0),
            Completion(0, OpKind.FETCH_AND_ADD, 8, 0), // the word's old value: 0
        )
        none.shouldBeInstanceOf<List<*>>().shouldBeEmpty()
        beyond shouldBe "awaitCompletions(4) on QP 0: only 3 work requests are outstanding (posted and not awaited yet)"
    }

    test("a section name keeps its first kind on every QP, across measureFromHere, and a refused call runs nothing; misuse names the call") {
        var otherQp: String? = null
        var afterReset: String? = null
        var blank: String? = null
        var wrongBuffer: String? = null
        var ran = false
        val (server, client) = pair {
            timeout(wait * 3)
            qps(2)
            connect(peer)
            client {
                qp(0) { repeat(3) { measure("x") { } } }
                qp(1) {
                    otherQp = shouldThrow<ScenarioException> { measureRoundTrip("x") { ran = true } }.message
                    blank = shouldThrow<ScenarioException> { measure(" ") { ran = true } }.message
                    wrongBuffer = shouldThrow<ScenarioException> { send(byteArrayOf(1), buffer = 1) }.describe()
                }
                qp(0) {
                    measureFromHere()
                    afterReset = shouldThrow<ScenarioException> { measureRoundTrip("x") { ran = true } }.message
                    measure("x") { }
                }
            }
        }
        server.getOrThrow()
        val x = client.getOrThrow().sections.getValue("x")
        otherQp shouldBe "measureRoundTrip(\"x\"): section x was measured with measure already, and a name keeps one kind " +
            "for the whole scenario, on every QP: give this one another name"
        afterReset shouldBe otherQp
        blank shouldBe "measure(\" \"): a section needs a name the results can show"
        wrongBuffer shouldBe "send(payload) on QP 1: buffer 1 is outside 0..0 (bufferCount 1)\n  hint: bufferCount(n) before connect gives each QP n buffers"
        ran shouldBe false
        x.roundTrip shouldBe false
        x.count shouldBe 1L // the sample after measureFromHere; the refused calls recorded none
    }
})
