package dev.rdmarun.dsl

import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import java.net.ServerSocket
import java.util.concurrent.Executors
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.asCoroutineDispatcher
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.withContext

/**
 * The DSL's Kotlin conventions (the README's "Kotlin conventions"), on soft0 with both peers in
 * this JVM, one case each.
 */
class KotlinConventionsSpec : FunSpec({
    fun freePort() = ServerSocket(0).use { it.localPort }

    // The deadline of the cases that wait it out.
    val wait = (System.getenv("RDMA_TEST_WAIT_SECONDS")?.toIntOrNull() ?: 3).seconds

    fun options(peer: Peer) = RdmaOptions(parameters = mapOf("warmup" to "0"), overrides = SettingsOverrides(device = "soft0"), peer = peer)

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
})
