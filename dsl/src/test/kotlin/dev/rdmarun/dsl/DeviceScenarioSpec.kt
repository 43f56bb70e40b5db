package dev.rdmarun.dsl

import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.runtime.soft.SoftDevice
import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import java.lang.foreign.ValueLayout
import java.net.ServerSocket
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.coroutineScope

/**
 * Whole scenarios, both peers in this JVM: every operation kind, credits under rnr_retry 0, a
 * failure on one side. One suite, two providers: it runs on soft0 in every build and, where the
 * kernel has an RDMA device, on that one too (rxe0 in the Soft-RoCE VM, where RDMA_TEST_DEVICE
 * picks it and RDMA_RUN_REQUIRE_DEVICE=1 turns a missing device into a failure).
 */
class DeviceScenarioSpec : FunSpec({
    val devices: List<String> = DeviceList.open().use { list ->
        System.getenv("RDMA_TEST_DEVICE")?.let { listOf(it) }
            ?: (listOf(SoftDevice.NAME) + list.kernelDevices().take(1).map { it.name() })
    }
    if (System.getenv("RDMA_RUN_REQUIRE_DEVICE") == "1") {
        DeviceList.open().use { list ->
            check(devices.all { d -> list.devices().any { it.name() == d } }) { "RDMA_RUN_REQUIRE_DEVICE=1 but $devices are not all there" }
        }
    }

    fun freePort() = ServerSocket(0).use { it.localPort }

    for (device in devices) {
        /** Runs the scenario as server and client at once; returns both outcomes. */
        suspend fun pair(block: (Peer) -> suspend ScenarioScope.() -> Unit): Pair<Result<ScenarioResult>, Result<ScenarioResult>> {
            val port = freePort()
            val options = RdmaOptions(overrides = SettingsOverrides(device = device))
            return coroutineScope {
                val server = async(Dispatchers.IO) { runCatching { runRdma(options, block(Peer.listen(port))) } }
                val client = async(Dispatchers.IO) { runCatching { runRdma(options, block(Peer.connect("127.0.0.1", port))) } }
                server.await() to client.await()
            }
        }

        test("every operation kind moves the right bytes, with signalEvery, inline data and per-QP CQs ($device)") {
            val seen = mutableListOf<String>() // both peers' dispatcher threads add: guarded below
            fun note(s: String) = synchronized(seen) { seen.add(s) }
            val (server, client) = pair { peer ->
                {
                    qps(2)
                    perQpCq()
                    bufferSize(256)
                    bufferCount(2)
                    signalEvery(4)
                    inlineThreshold(64)
                    connect(peer)
                    forEachQp {
                        server {
                            if (!planning) {
                                buffer(0).fill(0)
                                for (i in 8 until 256) buffer(0).set(ValueLayout.JAVA_BYTE, i.toLong(), (i + index).toByte())
                            }
                        }
                    }
                    barrier()
                    forEachQp {
                        client {
                            if (!planning) for (i in 0 until 256) buffer(1).set(ValueLayout.JAVA_BYTE, i.toLong(), (255 - i).toByte())
                            write(size = 256, buffer = 1, remoteBuffer = 1)
                            read(size = 248, buffer = 0, remoteBuffer = 0) // bytes 0..247 of the server's buffer 0
                            val first = fetchAndAdd(5, remoteOffset = 0, buffer = 0)
                            val second = compareAndSwap(5, 42, remoteOffset = 0, buffer = 0)
                            if (!planning) note("client QP $index atomics $first $second")
                            sendWithImm(7 + index, size = 16)
                            writeWithImm(100 + index, size = 32, buffer = 1, remoteBuffer = 1)
                            repeat(10) { postWrite(size = 8, buffer = 1, remoteBuffer = 1) }
                            awaitAll()
                        }
                        server {
                            val a = receive()
                            val b = receive()
                            if (!planning) note("server QP $index got ${a.length}/${a.immediate} ${b.length}/${b.immediate} bytes=${b.bytes.size}")
                        }
                    }
                    barrier()
                    forEachQp {
                        server {
                            if (!planning) {
                                val word = buffer(0).get(ValueLayout.JAVA_LONG, 0)
                                val written = (0 until 256).all { buffer(1).get(ValueLayout.JAVA_BYTE, it.toLong()) == (255 - it).toByte() }
                                note("server QP $index word $word written $written")
                            }
                        }
                        client {
                            if (!planning) {
                                val ok = (8 until 248).all { buffer(0).get(ValueLayout.JAVA_BYTE, it.toLong()) == (it + index).toByte() }
                                note("client QP $index read $ok")
                            }
                        }
                    }
                }
            }
            server.getOrThrow()
            val c = client.getOrThrow()
            seen.sorted() shouldContainExactly listOf(
                "client QP 0 atomics 0 5", "client QP 0 read true", "client QP 1 atomics 0 5", "client QP 1 read true",
                "server QP 0 got 16/7 32/100 bytes=0", "server QP 0 word 42 written true",
                "server QP 1 got 16/8 32/101 bytes=0", "server QP 1 word 42 written true",
            )
            // per QP: write, read, 2 atomics, sendWithImm, writeWithImm, 10 post-form writes
            c.qps.map { it.operations } shouldBe listOf(16L, 16L)
            c.total.bytesSent shouldBe 2L * (256 + 16 + 32 + 10 * 8)
        }

        for (mode in CompletionMode.entries) {
            test("a one-way stream of 600 messages over 8 receive slots never meets an empty queue ($mode, rnr_retry 0, $device)") {
                val immediates = mutableListOf<Int>()
                val (server, client) = pair { peer ->
                    {
                        recvDepth(8)
                        rnrRetry(0) // any RNR NAK would fail the scenario at once
                        completionMode(mode)
                        connect(peer)
                        qp(0) {
                            client {
                                repeat(600) { postSendWithImm(it, size = 64) }
                                awaitAll()
                            }
                            server {
                                repeat(600) {
                                    val m = receive()
                                    if (!planning) immediates.add(m.immediate!!)
                                }
                            }
                        }
                    }
                }
                server.getOrThrow().total.messagesReceived shouldBe 600
                client.getOrThrow().total.operations shouldBe 600
                immediates shouldBe (0 until 600).toList()
            }
        }

        test("a failure in one peer's block ends both, each with the cause ($device)") {
            val (server, client) = pair { peer ->
                {
                    connect(peer)
                    client { if (!planning) error("the client's check failed") }
                    barrier()
                }
            }
            client.exceptionOrNull()!!.message shouldBe "the client's check failed"
            val e = shouldThrow<PeerException> { server.getOrThrow() }
            e.message shouldContain "the client failed: the client's check failed"
        }
    }
})
