package dev.rdmarun.dsl

import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.runtime.engine.EngineException
import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.doubles.shouldBeGreaterThan
import io.kotest.matchers.longs.shouldBeGreaterThan
import io.kotest.matchers.longs.shouldBeLessThanOrEqual
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldEndWith
import io.kotest.matchers.string.shouldNotContain
import io.kotest.matchers.string.shouldStartWith
import io.kotest.matchers.types.shouldBeInstanceOf
import java.lang.foreign.ValueLayout
import java.net.ServerSocket
import kotlin.math.roundToLong
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull
import kotlinx.coroutines.yield
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.selects.onTimeout
import kotlinx.coroutines.selects.select

/**
 * Whole scenarios, both peers in this JVM, written as a new user would write them: any Kotlin
 * between the operations, branches on the role, the QP index and received data. One suite, two
 * providers: it runs on soft0 in every build and, where the kernel has an RDMA device, on that one
 * too (rxe0 in the Soft-RoCE VM, where RDMA_TEST_DEVICE picks it and RDMA_RUN_REQUIRE_DEVICE=1
 * turns a missing device into a failure).
 */
class DeviceScenarioSpec : FunSpec({
    val devices: List<String> = DeviceList.open().use { list ->
        System.getenv("RDMA_TEST_DEVICE")?.let { listOf(it) }
            ?: (listOf("soft0") + list.kernelDevices().take(1).map { it.name() })
    }
    if (System.getenv("RDMA_RUN_REQUIRE_DEVICE") == "1") {
        DeviceList.open().use { list ->
            check(devices.all { d -> list.devices().any { it.name() == d } }) { "RDMA_RUN_REQUIRE_DEVICE=1 but $devices are not all there" }
        }
    }

    fun freePort() = ServerSocket(0).use { it.localPort }

    // The timeout of the cases that wait it out: short here, longer in the Soft-RoCE VM, whose
    // setup under emulation must fit in it too.
    val wait = (System.getenv("RDMA_TEST_WAIT_SECONDS")?.toIntOrNull() ?: 3).seconds

    for (device in devices) {
        /** Runs the scenario as server and client at once, with [peer] set as a launcher sets it; returns both outcomes. */
        // warmup=0 and preflight=0 unless a case asks for them: they have cases of their own, and under
        // emulation each automatic one takes up to its bound.
        suspend fun pair(parameters: Map<String, String> = emptyMap(), block: suspend ScenarioScope.() -> Unit): Pair<Result<ScenarioResult>, Result<ScenarioResult>> {
            val port = freePort()
            // No warm-up and no pre-flight unless a case is about them: each costs seconds in the VM.
            val given = mapOf(StandardParameters.WARMUP to "0", StandardParameters.PREFLIGHT to "0") + parameters
            fun options(peer: Peer) = RdmaOptions(parameters = given, overrides = SettingsOverrides(device = device), peer = peer)
            return coroutineScope {
                val server = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.listen(port)), block) } }
                val client = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.connect("127.0.0.1", port)), block) } }
                server.await() to client.await()
            }
        }

        test("a monitor sees repeat { }'s rounds, planned and done, as the fraction a progress line shows ($device)") {
            val port = freePort()
            val monitor = ScenarioMonitor()
            val seen = java.util.Collections.synchronizedList(mutableListOf<Double?>())
            fun options(peer: Peer, monitor: ScenarioMonitor?) =
                RdmaOptions(parameters = mapOf("iterations" to "4", "warmup" to "0", "preflight" to "0"), overrides = SettingsOverrides(device = device), peer = peer, monitor = monitor)
            val block: suspend ScenarioScope.() -> Unit = {
                connect(peer)
                repeat {
                    if (isClient) seen += monitor.fractionDone()
                    barrier()
                }
            }
            coroutineScope {
                val server = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.listen(port), null), block) } }
                val client = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.connect("127.0.0.1", port), monitor), block) } }
                server.await().getOrThrow()
                client.await().getOrThrow()
            }
            seen.toList() shouldBe listOf(0.0, 0.25, 0.5, 0.75)
            monitor.fractionDone() shouldBe null // nothing runs any more
        }

        test("--set warmup=N: the peer's warm-up messages that arrive after this side's warm-up are the warm-up's, not measured ($device)") {
            // The design card's loop on 4 QPs: sends that no receive() takes, both ways.
            val (server, client) = pair(mapOf(StandardParameters.WARMUP to "100", "iterations" to "500")) {
                qps(4)
                connect(peer)
                forEachQp {
                    repeat {
                        send()
                        awaitCompletion()
                    }
                }
            }
            // The peer's warm-up messages still on their way were counted as measured: 2106 and 2140 in a stranger's run.
            client.getOrThrow().total.messagesReceived shouldBe 2000L
            server.getOrThrow().total.messagesReceived shouldBe 2000L
        }

        test("a client its launcher cancels (Ctrl-C) is said so to the server in the launcher's words, not as kotlinx's cancellation ($device)") {
            val port = freePort()
            val monitor = ScenarioMonitor()
            fun options(peer: Peer, monitor: ScenarioMonitor?) =
                RdmaOptions(parameters = mapOf("warmup" to "0", "preflight" to "0"), overrides = SettingsOverrides(device = device), peer = peer, monitor = monitor)
            val block: suspend ScenarioScope.() -> Unit = {
                timeout(30.seconds)
                connect(peer)
                if (isClient) monitor.cancel("interrupted") // as the launcher's Ctrl-C does, from its own thread
                barrier()
            }
            coroutineScope {
                val server = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.listen(port), null), block) } }
                val client = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.connect("127.0.0.1", port), monitor), block) } }
                client.await().exceptionOrNull().shouldBeInstanceOf<CancellationException>()
                // It used to read "the client was cancelled", whatever the launcher's reason.
                server.await().exceptionOrNull()!!.message shouldBe "the client failed: the client was interrupted"
            }
        }

        test("a client cancelled while its script is busy in its own code is said so to the server at once, not as a crash ($device)") {
            val port = freePort()
            val monitor = ScenarioMonitor()
            val release = java.util.concurrent.CountDownLatch(1)
            fun options(peer: Peer, monitor: ScenarioMonitor?) =
                RdmaOptions(parameters = mapOf("warmup" to "0", "preflight" to "0"), overrides = SettingsOverrides(device = device), peer = peer, monitor = monitor)
            coroutineScope {
                val server = async(Dispatchers.IO) { runCatching { rdmaScope(options(Peer.listen(port), null)) { timeout(30.seconds); connect(peer); barrier() } } }
                val client = async(Dispatchers.IO) {
                    runCatching {
                        rdmaScope(options(Peer.connect("127.0.0.1", port), monitor)) {
                            timeout(30.seconds)
                            connect(peer)
                            monitor.cancel("interrupted")
                            release.await() // a loop that never suspends: the cancellation cannot reach it
                        }
                    }
                }
                try {
                    // It read "closed the control connection in the middle of the scenario (it crashed or was killed)"
                    // once the launcher gave up on the busy side and exited.
                    server.await().exceptionOrNull()!!.message shouldBe "the client failed: the client was interrupted"
                } finally {
                    release.countDown()
                }
                client.await().exceptionOrNull().shouldBeInstanceOf<CancellationException>()
            }
        }

        test("every operation kind moves the right bytes, with signalEvery, inline data and per-QP CQs ($device)") {
            val seen = mutableListOf<String>() // both peers' dispatcher threads add: guarded below
            fun note(s: String) = synchronized(seen) { seen.add(s) }
            val (server, client) = pair {
                qps(2)
                perQpCq()
                bufferSize(256)
                bufferCount(2)
                signalEvery(4)
                inlineThreshold(64)
                if (isServer) remoteAccess(RemoteAccess.WRITE, RemoteAccess.READ, RemoteAccess.ATOMIC)
                connect(peer)
                forEachQp {
                    if (isServer) {
                        buffer(0).fill(0)
                        for (i in 8 until 256) buffer(0).set(ValueLayout.JAVA_BYTE, i.toLong(), (i + index).toByte())
                    }
                }
                barrier()
                forEachQp {
                    client {
                        for (i in 0 until 256) buffer(1).set(ValueLayout.JAVA_BYTE, i.toLong(), (255 - i).toByte())
                        write(size = 256, buffer = 1, remoteBuffer = 1)
                        read(size = 248, buffer = 0, remoteBuffer = 0) // bytes 0..247 of the server's buffer 0
                        fetchAndAdd(5, remoteOffset = 0, buffer = 0)
                        awaitCompletion().opcode shouldBe OpKind.WRITE
                        awaitCompletion().bytes shouldBe 248
                        val first = awaitCompletion()
                        // Its result lands in buffer 0 too: post it once the first one's result was read.
                        compareAndSwap(5, 42, remoteOffset = 0, buffer = 0)
                        val second = awaitCompletion()
                        note("client QP $index atomics ${first.opcode.label()} ${first.value} ${second.opcode.label()} ${second.value}")
                        sendWithImm(7 + index, size = 16)
                        writeWithImm(100 + index, size = 32, buffer = 1, remoteBuffer = 1)
                        repeat(10) { write(size = 8, buffer = 1, remoteBuffer = 1) }
                        awaitAll()
                    }
                    server {
                        val a = receive()
                        val b = receive()
                        note("server QP $index got ${a.length}/${a.immediate} ${b.length}/${b.immediate} bytes=${b.bytes.size}")
                    }
                }
                barrier()
                forEachQp {
                    server {
                        val word = buffer(0).get(ValueLayout.JAVA_LONG, 0)
                        val written = (0 until 256).all { buffer(1).get(ValueLayout.JAVA_BYTE, it.toLong()) == (255 - it).toByte() }
                        note("server QP $index word $word written $written")
                    }
                    client {
                        val ok = (8 until 248).all { buffer(0).get(ValueLayout.JAVA_BYTE, it.toLong()) == (it + index).toByte() }
                        note("client QP $index read $ok")
                    }
                }
            }
            server.getOrThrow()
            val c = client.getOrThrow()
            seen.sorted() shouldContainExactly listOf(
                "client QP 0 atomics fetchAndAdd 0 compareAndSwap 5", "client QP 0 read true",
                "client QP 1 atomics fetchAndAdd 0 compareAndSwap 5", "client QP 1 read true",
                "server QP 0 got 16/7 32/100 bytes=0", "server QP 0 word 42 written true",
                "server QP 1 got 16/8 32/101 bytes=0", "server QP 1 word 42 written true",
            )
            // per QP: write, read, 2 atomics, sendWithImm, writeWithImm, 10 writes
            c.qps.map { it.operations } shouldBe listOf(16L, 16L)
            c.total.bytesSent shouldBe 2L * (256 + 16 + 32 + 10 * 8)
        }

        for (mode in CompletionMode.entries) {
            test("a one-way stream of 600 messages over 8 receive slots never meets an empty queue ($mode, rnr_retry 0, $device)") {
                val immediates = mutableListOf<Int>()
                val (server, client) = pair {
                    recvDepth(8)
                    inboxDepth(0) // only the receive slots: credits alone keep the sender from an RNR
                    rnrRetry(0) // any RNR NAK would fail the scenario at once
                    completionMode(mode)
                    connect(peer)
                    qp(0) {
                        if (isClient) {
                            repeat(600) { sendWithImm(it, size = 64) }
                            awaitAll()
                        } else {
                            repeat(600) { immediates.add(receive().immediate!!) }
                        }
                    }
                }
                server.getOrThrow().total.messagesReceived shouldBe 600
                client.getOrThrow().total.operations shouldBe 600
                immediates shouldBe (0 until 600).toList()
            }
        }

        test("receive(copyPayload = false) takes a message without its payload; the same one again is the same object ($device)") {
            val seen = mutableListOf<String>()
            val (server, client) = pair {
                connect(peer)
                qp(0) {
                    if (isClient) {
                        for (text in listOf("first", "again", "third!")) {
                            send(text.toByteArray())
                            awaitCompletion()
                        }
                        sendWithImm(9, size = 5)
                        awaitAll()
                    } else {
                        val a = receive(copyPayload = false)
                        val b = receive(copyPayload = false)
                        val c = receive()
                        val d = receive(copyPayload = false)
                        seen += "${a.length} ${a.bytes.size} ${a === b} ${c.text()} ${d.length} ${d.immediate} ${d.bytes.size} ${d === a}"
                    }
                }
            }
            server.getOrThrow().total.messagesReceived shouldBe 4
            client.getOrThrow()
            seen shouldBe listOf("5 0 true third! 5 9 0 false")
        }

        test("forEachQp branches on the index: send, write, read and fetchAndAdd on different QPs ($device)") {
            val got = sortedMapOf<String, String>()
            fun note(k: String, v: String) = synchronized(got) { got[k] = v }
            val (server, client) = pair {
                qps(4)
                bufferSize(64)
                remoteAccess(RemoteAccess.WRITE, RemoteAccess.READ, RemoteAccess.ATOMIC)
                connect(peer)
                forEachQp { if (isServer) buffer().set(ValueLayout.JAVA_LONG, 8, 1000L + index) }
                barrier()
                client {
                    forEachQp {
                        when (index) {
                            0 -> send("to QP 0".toByteArray())
                            1 -> {
                                buffer().set(ValueLayout.JAVA_LONG, 0, 77L)
                                write(size = 8)
                            }
                            2 -> {
                                read(size = 8, remoteOffset = 8)
                                awaitCompletion()
                                note("read on 2", buffer().get(ValueLayout.JAVA_LONG, 0).toString())
                            }
                            3 -> {
                                fetchAndAdd(5, remoteOffset = 8)
                                note("fetchAndAdd on 3", awaitCompletion().value.toString())
                            }
                        }
                        awaitAll()
                    }
                }
                server { qp(0) { note("server QP 0", receive().text()) } }
                barrier()
                server {
                    qp(1) { note("server QP 1 word", buffer().get(ValueLayout.JAVA_LONG, 0).toString()) }
                    qp(3) { note("server QP 3 word", buffer().get(ValueLayout.JAVA_LONG, 8).toString()) }
                }
            }
            server.getOrThrow()
            client.getOrThrow()
            got shouldBe sortedMapOf(
                "fetchAndAdd on 3" to "1003", "read on 2" to "1002", "server QP 0" to "to QP 0",
                "server QP 1 word" to "77", "server QP 3 word" to "1008",
            )
        }

        test("plain if on the role, and a loop that ends on a \"stop\" message ($device)") {
            val (server, client) = pair {
                connect(peer)
                qp(0) {
                    if (isClient) {
                        for (i in 1..5) send("work $i".toByteArray())
                        send("stop".toByteArray())
                        awaitAll()
                    } else {
                        var jobs = 0
                        while (receive().text() != "stop") jobs++
                        send(jobs.toString().toByteArray())
                    }
                    if (isClient) receive().text() shouldBe "5"
                }
            }
            server.getOrThrow().total.messagesReceived shouldBe 6
            client.getOrThrow().total.messagesReceived shouldBe 1
        }

        /**
         * The client sends 10,000 messages on QP 0, message i by [sendOne](i), after [setup]; the
         * server takes each and records the first i that [arrived] does not accept. Returns both
         * outcomes and that i (-1: none).
         */
        suspend fun indexedSends(setup: ScenarioScope.() -> Unit, sendOne: suspend QpScope.(Int) -> Unit,
                                 arrived: (Message, Int) -> Boolean): Triple<Result<ScenarioResult>, Result<ScenarioResult>, Int> {
            var wrong = -1
            val (server, client) = pair {
                signalEvery(16)
                recvDepth(128)
                setup()
                connect(peer)
                qp(0) {
                    if (isClient) {
                        for (i in 0 until 10_000) sendOne(i)
                        awaitAll()
                    } else {
                        for (i in 0 until 10_000) if (!arrived(receive(), i) && wrong < 0) wrong = i
                    }
                }
            }
            server.getOrThrow().total.messagesReceived shouldBe 10_000L
            return Triple(server, client, wrong)
        }

        test("10,000 inline 1-byte sends under signalEvery(16): each byte as written at its call, 1 in 16 signaled ($device)") {
            val (_, client, wrong) = indexedSends({ bufferSize(64); inlineThreshold(64); sendDepth(64) }, { i ->
                buffer().set(ValueLayout.JAVA_BYTE, 0, i.toByte()) // the next call overwrites it: inline copies it now
                send(size = 1)
            }) { m, i -> m.bytes[0] == i.toByte() }
            wrong shouldBe -1
            val c = client.getOrThrow().total
            c.operations shouldBe 10_000L
            c.latency!!.count shouldBeLessThanOrEqual (10_000L / 16) // one completion per signaled work request
        }

        test("8 QPs add to one word of the server; the final value is their sum ($device)") {
            var word = 0L
            val (server, client) = pair {
                qps(8)
                bufferSize(64)
                if (isServer) remoteAccess(RemoteAccess.ATOMIC)
                connect(peer)
                client {
                    forEachQp {
                        repeat(100) { fetchAndAdd(index + 1L, remoteQp = 0, remoteOffset = 16) }
                        awaitAll()
                    }
                }
                barrier()
                server { qp(0) { word = buffer().get(ValueLayout.JAVA_LONG, 16) } }
            }
            server.getOrThrow()
            client.getOrThrow()
            word shouldBe 100L * (1..8).sum()
        }

        test("an operation the peer did not grant fails at the call, naming the declaration ($device)") {
            val (server, client) = pair {
                qps(2)
                timeout(wait)
                connect(peer)
                client { qp(1) { write(size = 8) } }
            }
            val e = client.exceptionOrNull()
            e.shouldBeInstanceOf<EngineException>()
            e.message shouldBe "write() on QP 1 needs the server to declare remoteAccess(WRITE)"
            e.isCallError shouldBe true // the launcher names the script's line
            server.exceptionOrNull()!!.message shouldContain "the client failed: write() on QP 1 needs the server to declare remoteAccess(WRITE)"
        }

        test("arguments that do not fit fail at the call, naming it, and the QP stays usable ($device)") {
            val seen = mutableListOf<String>()
            val (server, client) = pair {
                bufferSize(64)
                remoteAccess(RemoteAccess.WRITE, RemoteAccess.ATOMIC)
                connect(peer)
                qp(0) {
                    if (isClient) {
                        val calls = listOf<suspend () -> Unit>(
                            { send(size = 65) }, { send(size = -5) }, { send(buffer = 1) },
                            { write(remoteBuffer = 1) }, { write(remoteQp = 1) }, { write(size = 8, remoteOffset = 60) },
                            { fetchAndAdd(1, remoteOffset = 4) },
                        )
                        for (call in calls) {
                            try {
                                call()
                            } catch (e: EngineException) {
                                seen.add(e.message!! + (e.hint()?.let { " | hint: $it" } ?: "") + if (e.isCallError) "" else " (not a call error)")
                            }
                        }
                        send(size = 8) // still fine
                        awaitCompletion().bytes shouldBe 8
                    } else {
                        receive().length shouldBe 8
                    }
                }
            }
            server.getOrThrow()
            client.getOrThrow()
            seen shouldContainExactly listOf(
                "send() of 65 bytes on QP 0 is larger than bufferSize 64 | hint: raise bufferSize(...) before connect",
                "send() on QP 0: size -5 cannot be negative (-1: the whole buffer)",
                "send() on QP 0: buffer 1 is outside 0..0 (bufferCount 1) | hint: bufferCount(n) before connect gives each QP n buffers",
                "write() on QP 0: remoteBuffer 1 is outside 0..0 | hint: bufferCount(n) before connect, on the server's side too, gives each QP n buffers",
                "write() on QP 0: remoteQp 1 is outside 0..0 | hint: qps(n) before connect gives each side n QPs",
                "write() of 8 bytes on QP 0 at remoteOffset 60 does not fit the peer's 64-byte buffer",
                "fetchAndAdd() on QP 0: remoteOffset 4 is not 8-byte aligned (atomics work on aligned 64-bit words) | hint: use a multiple of 8, such as 0",
            )
        }

        test("one QP's measureFromHere leaves the other QPs' time whole; each QP's rates are over its own ($device)") {
            var qp1Done = 0L
            var qp0Reset = 0L
            val (server, client) = pair {
                qps(2)
                bufferSize(256)
                connect(peer)
                qp(1) { if (isClient) repeat(1000) { send(256); awaitCompletion() } else repeat(1000) { receive(copyPayload = false) } }
                if (isClient) qp1Done = System.nanoTime()
                qp(0) {
                    if (isClient) {
                        repeat(50) { send(64); awaitCompletion() }
                        qp0Reset = System.nanoTime()
                        measureFromHere()
                        repeat(10) { send(64); awaitCompletion() }
                    } else {
                        repeat(60) { receive(copyPayload = false) }
                    }
                }
            }
            server.getOrThrow()
            val c = client.getOrThrow()
            val (q0, q1) = c.qps
            q1.bytesSent shouldBe 1000L * 256
            q0.bytesSent shouldBe 10L * 64
            c.total.bytesSent shouldBe q0.bytesSent + q1.bytesSent
            // The side's time holds every byte it counts, QP 1's 1000 sends before QP 0's reset
            // included (before, it began at that reset: QP 1's rate came out many times too high):
            // from QP 1's first post, over QP 1's own time, then until QP 0's reset at least.
            val q1Nanos = q1.bytesSent * 8 / q1.sentGbps
            c.durationNanos.toDouble() shouldBeGreaterThan q1Nanos + (qp0Reset - qp1Done) - 1
            // Each QP over its own time: QP 0's 640 bytes over its last 10 sends only, QP 1's up to
            // its own last completion, before QP 0's 60 sends.
            (q0.sentGbps * c.durationNanos / 1e9 > q0.bytesSent * 8 / 1e9) shouldBe true
            (q1.sentGbps * c.durationNanos / 1e9 > q1.bytesSent * 8 / 1e9) shouldBe true
        }

        test("a side's time ends at its last completion, not at what either script does after its traffic ($device)") {
            var measuredFrom = 0L
            var lastCompleted = 0L
            val (server, client) = pair {
                bufferSize(4096)
                if (isServer) remoteAccess(RemoteAccess.WRITE)
                connect(peer)
                if (isClient) {
                    qp(0) {
                        measuredFrom = System.nanoTime()
                        measureFromHere()
                        repeat(200) {
                            write(4096)
                            if (outstanding >= 8) awaitCompletion()
                        }
                        awaitAll()
                        lastCompleted = System.nanoTime()
                    }
                }
                barrier()
                // The peer's own work after the traffic: it used to be in the client's time, and
                // divided its bandwidth by up to 15 in a short run.
                if (isServer) Thread.sleep(300)
            }
            server.getOrThrow()
            val c = client.getOrThrow()
            c.total.bytesSent shouldBe 200L * 4096
            c.durationNanos shouldBeLessThanOrEqual lastCompleted - measuredFrom
            (c.total.sentGbps * c.durationNanos / 1e9 * 1e9 / 8).roundToLong() shouldBe c.total.bytesSent
        }

        test("a side's time starts at its first post or arrival, not at what either script does before its traffic ($device)") {
            var clientFrom = 0L
            var clientTo = 0L
            var serverFrom = 0L
            var serverTo = 0L
            val (server, client) = pair {
                bufferSize(4096)
                connect(peer)
                // The server's own work before the traffic: it was in both sides' time (no
                // warm-up, so the measured phase began at connect's end), as perftest's is not.
                if (isServer) {
                    Thread.sleep(300)
                    serverFrom = System.nanoTime()
                }
                barrier()
                qp(0) {
                    if (isClient) {
                        clientFrom = System.nanoTime()
                        kotlin.repeat(200) {
                            send(4096)
                            if (outstanding >= 8) awaitCompletion()
                        }
                        awaitAll()
                        clientTo = System.nanoTime()
                    } else {
                        kotlin.repeat(200) { receive(copyPayload = false) }
                        serverTo = System.nanoTime()
                    }
                }
            }
            val s = server.getOrThrow()
            val c = client.getOrThrow()
            c.total.bytesSent shouldBe 200L * 4096
            s.total.bytesReceived shouldBe 200L * 4096
            c.durationNanos shouldBeLessThanOrEqual clientTo - clientFrom
            s.durationNanos shouldBeLessThanOrEqual serverTo - serverFrom
        }

        test("the work requests' latency row has the size of this side's work requests, not the peer's messages ($device)") {
            val (server, client) = pair {
                bufferSize(1024)
                connect(peer)
                qp(0) {
                    if (isClient) repeat(100) { send(64); awaitCompletion(); receive(copyPayload = false) }
                    else repeat(100) { receive(copyPayload = false); send(1024); awaitCompletion() }
                }
            }
            server.getOrThrow().total.latency!!.bytesPerSample shouldBe 1024L
            client.getOrThrow().total.latency!!.bytesPerSample shouldBe 64L
        }

        test("a receive the peer never answers ends with a sentence once the peer finished ($device)") {
            val (server, client) = pair {
                timeout(wait)
                connect(peer)
                server { qp(0) { receive() } }
            }
            server.exceptionOrNull()!!.message shouldBe
                "the client finished without sending the message that the server waits for in receive() on QP 0"
            client.exceptionOrNull()!!.message shouldContain "the server failed: the client finished without sending"
        }

        test("a receive() beyond what the finished peer sent fails only after every message it sent was taken ($device)") {
            var taken = 0
            val (server, client) = pair {
                timeout(60.seconds) // the counts end this wait, not the deadline
                connect(peer)
                client { qp(0) { repeat(3) { send("m$it".toByteArray()) } } }
                server { qp(0) { while (true) { receive(); taken++ } } }
            }
            taken shouldBe 3
            server.exceptionOrNull()!!.message shouldBe
                "the client finished without sending the message that the server waits for in receive() on QP 0"
            client.isFailure shouldBe true
        }

        test("both sides receiving first end in a few heartbeats, long before the timeout, each saying so ($device)") {
            val (server, client) = pair {
                timeout(60.seconds) // without the heartbeats' verdict this would pass first, and the sentence say "waited 1m"
                connect(peer)
                qp(0) { receive() } // the line each side's sentence names
            }
            val line = "DeviceScenarioSpec.kt:${Throwable().stackTrace[0].lineNumber - 2}"
            val messages = listOfNotNull(server.exceptionOrNull()?.message, client.exceptionOrNull()?.message)
            messages.size shouldBe 2
            // The first side to see it names the deadlock; the other sees it too, or hears it from the
            // peer ("the client found both sides stalled: ...", not that the client failed).
            messages.forEach {
                it shouldNotContain " failed: "
                it shouldContain "waits for a message in receive() on QP 0 (at $line); the "
                it shouldContain "waits too, for a message in receive() on QP 0 (at $line): both sides wait to receive, one of them has to send first"
                it shouldNotContain "waited 1m"
            }
        }

        test("both sides sending into each other's full inbox, nobody receiving, end in a few heartbeats, each saying so ($device)") {
            val (server, client) = pair {
                recvDepth(4)
                inboxDepth(4)
                timeout(60.seconds) // without the heartbeats' verdict the sentence would say "waited 1m"
                connect(peer)
                qp(0) { repeat(100) { send(size = 8); awaitCompletion() } } // the card's loop, beyond the inboxes
            }
            val messages = listOfNotNull(server.exceptionOrNull()?.message, client.exceptionOrNull()?.message)
            messages.size shouldBe 2
            messages.forEach {
                it shouldContain "waits for a credit to send on QP 0 (at DeviceScenarioSpec.kt:"
                it shouldContain "waits too, for a credit to send on QP 0 (at DeviceScenarioSpec.kt:"
                it shouldContain "): a credit to send comes only when the peer's receive() " +
                    "takes a message from its full inbox, and neither side can call receive() now"
                // Whole on the side that hears it from the peer too: it was cut before its hint.
                it shouldEndWith "or send fewer messages (neither side made progress for 3 heartbeats)"
                it shouldNotContain "waited 1m"
            }
        }

        test("both sides blocked on credits with unsignaled sends still uncompleted end in a few heartbeats too ($device)") {
            val (server, client) = pair {
                recvDepth(4)
                inboxDepth(4)
                signalEvery(3) // of the sends before the credits run out, the last ones report no completion
                timeout(60.seconds) // without the heartbeats' verdict the sentence would say "waited 1m"
                connect(peer)
                qp(0) { repeat(100) { send(size = 8) } }
            }
            val messages = listOfNotNull(server.exceptionOrNull()?.message, client.exceptionOrNull()?.message)
            messages.size shouldBe 2
            messages.forEach {
                it shouldContain "waits for a credit to send on QP 0 (at DeviceScenarioSpec.kt:"
                it shouldNotContain "waited 1m"
            }
        }

        test("a deadlock of credit waits on one QP and receive() on another is named by the credits, whichever QP is first ($device)") {
            val (server, client) = pair {
                qps(2)
                recvDepth(4)
                inboxDepth(4)
                timeout(60.seconds)
                connect(peer)
                forEachQp {
                    if (index == 0) receive() else repeat(100) { send(size = 8); awaitCompletion() }
                }
            }
            val messages = listOfNotNull(server.exceptionOrNull()?.message, client.exceptionOrNull()?.message)
            messages.size shouldBe 2
            messages.forEach {
                it shouldContain "waits for a credit to send on QP 1 (at DeviceScenarioSpec.kt:"
                it shouldContain "waits too, for a credit to send on QP 1 (at DeviceScenarioSpec.kt:"
                it shouldNotContain "waited 1m"
            }
        }

        test("a side that waits in receive() while its other coroutine computes is not taken for a deadlock ($device)") {
            val (server, client) = pair {
                qps(2)
                timeout(60.seconds)
                connect(peer)
                server {
                    qp(1) { receive() }
                    qp(0) { send(size = 8) }
                }
                client {
                    forEachQp {
                        if (index == 0) {
                            receive()
                        } else {
                            // Longer than the heartbeats a deadlock takes (one a second here): the
                            // server and QP 0 wait in receive() all along, this coroutine does not.
                            withContext(Dispatchers.Default) { Thread.sleep(5_000) }
                            send(size = 8)
                        }
                    }
                }
            }
            server.getOrThrow()
            client.getOrThrow()
        }

        test("a side whose coroutine is in delay(), blocks its thread, selects with onTimeout, then yields, while its child waits in receive() is not taken for a deadlock ($device)") {
            val (server, client) = pair {
                timeout(60.seconds)
                connect(peer)
                qp(0) {
                    if (isServer) {
                        receive()
                        send(size = 8)
                    } else {
                        coroutineScope {
                            launch { receive() } // waits all along, as the server does
                            // Each longer than the heartbeats a deadlock takes (one a second here):
                            // the parent has an active child, so the job tree shows it waiting for that child.
                            delay(4.seconds)
                            Thread.sleep(4_000) // on the dispatcher thread, which then runs nothing else
                            select<Unit> {
                                Channel<Int>().onReceive { } // never: the timeout ends the select
                                onTimeout(4.seconds) { }
                            }
                            val end = System.nanoTime() + 4.seconds.inWholeNanoseconds
                            while (System.nanoTime() - end < 0) yield() // runs, though nothing else does
                            send(size = 8)
                        }
                    }
                }
            }
            server.getOrThrow()
            client.getOrThrow()
        }

        test("the script's own withTimeout that runs out fails its side as the script's failure, and the peer hears it so ($device)") {
            val (server, client) = pair {
                timeout(60.seconds)
                connect(peer)
                qp(0) { if (isServer) withTimeout(2.seconds) { receive() } else receive() }
            }
            server.exceptionOrNull().shouldBeInstanceOf<TimeoutCancellationException>()
            describeFailure(server.exceptionOrNull()!!) shouldStartWith "the script's own withTimeout { } ran out: TimeoutCancellationException: "
            describeFailure(server.exceptionOrNull()!!) shouldContain "timed out waiting for 2000 ms"
            client.exceptionOrNull()!!.message shouldContain "the server failed: the script's own withTimeout { } ran out"
        }

        test("both sides in receive() inside their own withTimeoutOrNull are not taken for a deadlock: the timeout ends it ($device)") {
            val (server, client) = pair {
                timeout(60.seconds)
                connect(peer)
                qp(0) {
                    // Longer than the heartbeats a deadlock takes (one a second here): both wait in
                    // receive() all along, but each wait ends by the script's own timeout. The side
                    // whose timeout ends first sends; the other may get that message in its wait.
                    val early = withTimeoutOrNull(5.seconds) { receive() }
                    send(size = 8)
                    if (early == null) receive()
                }
            }
            server.getOrThrow()
            client.getOrThrow()
        }

        test("a side blocked on credits while the peer computes, then receives, is not taken for a deadlock ($device)") {
            val (server, client) = pair {
                recvDepth(4)
                inboxDepth(4)
                timeout(60.seconds)
                connect(peer)
                qp(0) {
                    if (isServer) {
                        repeat(20) { send(size = 8); awaitCompletion() } // waits for credits after 8
                    } else {
                        // Longer than the heartbeats a deadlock takes: the server waits for a credit all along, this side computes.
                        withContext(Dispatchers.Default) { Thread.sleep(5_000) }
                        repeat(20) { receive() }
                    }
                }
            }
            server.getOrThrow()
            client.getOrThrow()
        }

        test("a full inbox ends the sender's wait with a sentence naming the messages nobody received ($device)") {
            val (server, client) = pair {
                recvDepth(4)
                inboxDepth(4)
                timeout(if (isServer) wait * 3 else wait) // a local setting: the client's wait is the one that ends
                connect(peer)
                client { qp(0) { repeat(20) { send(size = 8) } } }
                server { qp(0) { receive() } }
                barrier()
            }
            client.exceptionOrNull()!!.message shouldContain
                "the client waited $wait for a free receive at the peer to send() on QP 0; the server holds"
            client.exceptionOrNull()!!.message shouldContain "that no receive() took (its inbox is full)"
            server.isFailure shouldBe true
        }

        test("the design card runs as written, per QP and at the scenario level: messages nobody receives are counted ($device)") {
            val perQp = pair(mapOf("iterations" to "50")) {
                qps(4)
                connect(peer)
                forEachQp { repeat { send(); awaitCompletion() } }
            }
            val everyQp = pair(mapOf("iterations" to "50")) { qps(4); connect(peer); repeat { send(); awaitCompletion() } }
            for ((server, client) in listOf(perQp, everyQp)) {
                for (side in listOf(server.getOrThrow(), client.getOrThrow())) {
                    side.total.operations shouldBe 200
                    side.total.messagesReceived shouldBe 200
                    side.total.messagesNotReceived shouldBe 200
                }
            }
        }

        test("a side that measures in a hand-written loop, without repeat { }, says that its figures are cold ($device)") {
            // A user's own `for` loop gets no warm-up: without this line its figures read as steady ones.
            val (server, client) = pair(mapOf("warmup" to "auto")) {
                connect(peer)
                qp(0) {
                    client { for (i in 0 until 20) { send(); awaitCompletion() } }
                    server { for (i in 0 until 20) receive() }
                }
            }
            for (side in listOf(server.getOrThrow(), client.getOrThrow())) {
                val w = side.warmup.single()
                w.mode shouldBe WarmupSummary.MODE_NO_LOOP
                w.qp shouldBe null
                (w.jvmUptimeMillis > 0) shouldBe true
                side.table() shouldContain "warm-up: none: this side measured without a repeat { } or runFor loop, so the figures include the JIT's warm-up"
            }
        }

        // The automatic warm-up on soft0: under emulation each one runs to its 30 s bound. On rxe0 the
        // VM's script cases (pingpong-lat's agreed rounds, the card's exact counts) show it.
        if (device == "soft0") {
            test("the design card with the automatic warm-up: each round's leftovers dropped, the counts exact ($device)") {
                // Rounds of 1000 sends that nobody receives: without dropping each warm-up round's leftovers the
                // peer's inbox (1024) would be full in the second round, and both sides would wait for credit.
                val perQp = pair(mapOf("iterations" to "1000", "warmup" to "auto")) {
                    qps(4)
                    connect(peer)
                    forEachQp { repeat { send(); awaitCompletion() } }
                }
                val everyQp = pair(mapOf("iterations" to "1000", "warmup" to "auto")) { qps(4); connect(peer); repeat { send(); awaitCompletion() } }
                for ((server, client) in listOf(perQp, everyQp)) {
                    for (side in listOf(server.getOrThrow(), client.getOrThrow())) {
                        side.total.operations shouldBe 4000
                        side.total.messagesReceived shouldBe 4000
                        side.total.messagesNotReceived shouldBe 4000
                        side.warmup.map { it.mode }.toSet() shouldBe setOf(WarmupSummary.MODE_AUTO)
                    }
                    server.getOrThrow().warmup.map { it.rounds } shouldBe client.getOrThrow().warmup.map { it.rounds }
                }
            }

            test("repeat { } warms up until the JIT is quiet, both sides the same rounds, then measures exactly `iterations` ($device)") {
                val (server, client) = pair(mapOf("iterations" to "300", "warmup" to "auto")) {
                    bufferSize(64)
                    connect(peer)
                    qp(0) {
                        if (isClient) repeat { measureRoundTrip("rtt") { send(); receive(copyPayload = false) } }
                        else repeat { receive(copyPayload = false); send() }
                    }
                }
                val s = server.getOrThrow()
                val c = client.getOrThrow()
                for (side in listOf(s, c)) {
                    side.warmup.size shouldBe 1
                    side.warmup[0].mode shouldBe WarmupSummary.MODE_AUTO
                    side.warmup[0].qp shouldBe 0
                    side.warmup[0].iterationsPerRound shouldBe 300
                    side.total.operations shouldBe 300
                    side.total.messagesReceived shouldBe 300
                    side.total.messagesNotReceived shouldBe 0
                    side.table() shouldContain "warm-up on QP 0: ${side.warmup[0].rounds} rounds of 300 in "
                }
                c.warmup[0].rounds shouldBe s.warmup[0].rounds
                (c.warmup[0].rounds >= 2) shouldBe true // quiet takes two quiet rounds; the bound takes more
                c.sections.getValue("rtt").count shouldBe 300
            }

            test("a stream on several QPs warms up in step: the peer's next round may arrive before this side's starts ($device)") {
                val (server, client) = pair(mapOf("iterations" to "7", "warmup" to "auto")) {
                    qps(3)
                    connect(peer)
                    forEachQp {
                        client { repeat { send(); awaitCompletion() } }
                        server { repeat { receive() } }
                    }
                }
                client.getOrThrow().total.operations shouldBe 21
                server.getOrThrow().total.messagesReceived shouldBe 21
                server.getOrThrow().total.messagesNotReceived shouldBe 0
                server.getOrThrow().warmup.map { it.rounds } shouldBe client.getOrThrow().warmup.map { it.rounds }
            }

            test("--set warmup=0 runs no warm-up and says so; warmup=N runs exactly N, not watched for the JIT ($device)") {
                val block: suspend ScenarioScope.() -> Unit = {
                    connect(peer)
                    qp(0) {
                        if (isClient) repeat { send(); receive(copyPayload = false) }
                        else repeat { receive(copyPayload = false); send() }
                    }
                }
                val (s0, c0) = pair(mapOf("iterations" to "100", "warmup" to "0"), block)
                for (side in listOf(s0.getOrThrow(), c0.getOrThrow())) {
                    side.warmup.single().mode shouldBe WarmupSummary.MODE_NONE
                    side.total.operations shouldBe 100
                    side.table() shouldContain "warm-up on QP 0: none (--set warmup=0): the figures include this loop's JIT warm-up"
                }
                val (s1, c1) = pair(mapOf("iterations" to "100", "warmup" to "250"), block)
                for (side in listOf(s1.getOrThrow(), c1.getOrThrow())) {
                    side.warmup.single().mode shouldBe WarmupSummary.MODE_FIXED
                    side.warmup.single().iterationsPerRound shouldBe 250
                    side.total.operations shouldBe 100
                    side.total.messagesReceived shouldBe 100
                }
            }

            test("a repeat { } that exchanges messages with a peer looping on its own ends with a sentence, not a hang ($device)") {
                val (server, client) = pair(mapOf("iterations" to "5", "warmup" to "auto")) {
                    connect(peer)
                    qp(0) {
                        if (isClient) repeat { send(); awaitCompletion() }
                        else kotlin.repeat(5) { receive() }
                    }
                }
                client.exceptionOrNull()!!.message shouldContain "went on without a repeat { } to pair with it"
                server.isFailure shouldBe true
            }

            test("a repeat { } whose peer answers in a loop of its own until a stop message warms up alone ($device)") {
                val (server, client) = pair(mapOf("iterations" to "50", "warmup" to "auto")) {
                    connect(peer)
                    qp(0) {
                        client {
                            repeat { send(); receive(copyPayload = false) }
                            sendWithImm(1)
                            awaitAll()
                        }
                        server { while (receive(copyPayload = false).immediate == null) send() }
                    }
                }
                val c = client.getOrThrow()
                server.getOrThrow()
                c.warmup.single().alone shouldBe true
                c.table() shouldContain "(the peer answered without a repeat { } of its own: rounds not agreed)"
                c.total.messagesReceived shouldBe 50
            }
        }

        test("a bad warmup or preflight parameter is one sentence that names it ($device)") {
            val (server, client) = pair(mapOf("warmup" to "soon")) { connect(peer); qp(0) { repeat { } } }
            // Each side says it at connect, before it meets the other.
            for (side in listOf(server, client)) {
                side.exceptionOrNull()!!.message shouldBe "parameter warmup must be auto, 0 (none) or a number of iterations, not 'soon'"
            }
            val (s2, c2) = pair(mapOf("preflight" to "yes")) { connect(peer) }
            for (side in listOf(s2, c2)) side.exceptionOrNull()!!.message shouldBe "parameter preflight must be auto or 0 (none), not 'yes'"
        }

        test("a QP the device refuses names the settings that shaped it, with their flags ($device)") {
            // It was only the verbs' errno sentence ("ibv_create_qp(RC) failed: Invalid argument"), which names no setting.
            val (server, client) = pair { inlineThreshold(100_000); connect(peer) }
            for (side in listOf(server, client)) {
                side.exceptionOrNull()!!.message shouldStartWith "QP 0 cannot be created on $device with inlineThreshold 100000 (-I), sendDepth "
            }
        }

        test("a failure on one QP ends the others' waits at once, and both sides hear the cause ($device)") {
            val (server, client) = pair {
                qps(2)
                timeout(60.seconds) // nothing may wait for this
                connect(peer)
                forEachQp {
                    if (isClient && index == 0) error("QP 0's check failed")
                    receive() // QP 1 of the client, and the server's QPs, park here
                }
            }
            client.exceptionOrNull()!!.message shouldBe "QP 0's check failed"
            server.exceptionOrNull()!!.message shouldContain "the client failed: QP 0's check failed"
        }

        test("300 barriers in a row: no control frame is lost while a side polls its deadline ($device)") {
            var passed = 0
            val (server, client) = pair {
                connect(peer)
                repeat(300) {
                    barrier()
                    if (isServer) passed++
                }
            }
            server.getOrThrow()
            client.getOrThrow()
            passed shouldBe 300
        }

        test("a failure in one peer's block ends both, each with the cause ($device)") {
            val (server, client) = pair {
                connect(peer)
                client { error("the client's check failed") }
                barrier()
            }
            client.exceptionOrNull()!!.message shouldBe "the client's check failed"
            val e = shouldThrow<PeerException> { server.getOrThrow() }
            e.message shouldContain "the client failed: the client's check failed"
        }

        test("100 fetchAndAdd(1) and 100 compareAndSwap with 4 in flight on one buffer: each completion has its own old value ($device)") {
            val (server, client) = pair {
                bufferSize(64)
                if (isServer) remoteAccess(RemoteAccess.ATOMIC)
                connect(peer)
                client {
                    qp(0) {
                        val added = mutableListOf<Long>()
                        for (i in 0 until 100) {
                            if (outstanding == 4) added += awaitCompletion().value
                            fetchAndAdd(1)
                        }
                        while (outstanding > 0) added += awaitCompletion().value
                        val swapped = mutableListOf<Long>()
                        for (i in 0 until 100) {
                            if (outstanding == 4) swapped += awaitCompletion().value
                            compareAndSwap(100L + i, 101L + i) // RC runs them in order: each one's compare matches
                        }
                        while (outstanding > 0) swapped += awaitCompletion().value
                        added shouldBe (0L until 100L).toList()
                        swapped shouldBe (100L until 200L).toList()
                        buffer().get(ValueLayout.JAVA_LONG, 0) shouldBe 199L // the last one's old value, at its completion
                    }
                }
            }
            server.getOrThrow()
            client.getOrThrow()
        }

        test("10,000 send(bytes) in a loop, each holding its index: every message arrives as it was given ($device)") {
            val message = ByteArray(4096)
            val (_, client, wrong) = indexedSends({ bufferSize(4096) }, { i ->
                java.nio.ByteBuffer.wrap(message).order(java.nio.ByteOrder.nativeOrder()).putInt(0, i).putInt(4092, i)
                send(message) // the same array, changed before the next call: the message is the value at this call
            }) { m, i -> m.intAt(0) == i && m.intAt(4092) == i }
            client.getOrThrow()
            wrong shouldBe -1
        }

        test("300 writes and no await: outstanding counts them all, a forgotten one is named, awaitAll takes them ($device)") {
            var counted = -1
            var forgotten: String? = null
            var afterAll = -1
            val (server, client) = pair {
                bufferSize(64)
                if (isServer) remoteAccess(RemoteAccess.WRITE)
                connect(peer)
                client {
                    qp(0) {
                        repeat(300) { write(size = 8) } // more than the QP remembers (256), more than its send queue holds
                        counted = outstanding
                        forgotten = shouldThrow<ScenarioException> { awaitCompletion() }.message
                        awaitAll()
                        afterAll = outstanding
                    }
                }
                barrier()
            }
            server.getOrThrow()
            client.getOrThrow()
            counted shouldBe 300
            forgotten shouldBe "awaitCompletion() on QP 0: the oldest 44 of the 300 work requests posted and not awaited are " +
                "forgotten, as a QP keeps the last 256 posted: await within that many posts, or wait for them all with awaitAll()"
            afterAll shouldBe 0
        }

        test("bufferReuse(FAIL): a read into a buffer a posted send still reads fails at the call with a sentence ($device)") {
            val (server, client) = pair {
                bufferSize(64)
                bufferReuse(BufferReuse.FAIL)
                timeout(wait)
                if (isServer) remoteAccess(RemoteAccess.READ)
                connect(peer)
                client {
                    qp(0) {
                        send(size = 8)
                        read(size = 8, buffer = 0) // the send still reads buffer 0: nothing completes before this coroutine suspends
                    }
                }
            }
            client.exceptionOrNull()?.message shouldBe "read() on QP 0 would overwrite buffer 0 while the send() posted before it still uses it " +
                "(bufferReuse(FAIL)): await its completion first, use another buffer, or bufferReuse(WAIT)"
            server.exceptionOrNull()?.message shouldContain "the client failed: read() on QP 0 would overwrite buffer 0"
        }
    }
})
