package dev.rdmarun.scripts

import dev.rdmarun.runtime.Gid
import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import java.net.ServerSocket
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit

class InterruptionSpec : FunSpec({
    val dest = PingpongDest(0, 0x11, 0x123456, Gid.parseHex("00000000000000000000ffff0a4d0001"))
    val port = { ServerSocket(0).use { it.localPort } }

    test("Ctrl-C while the server waits for a client: the accept returns and the failure is 'interrupted', exit 130") {
        val interruption = Interruption()
        try {
            val server = CompletableFuture.supplyAsync {
                runCatching { PingpongExchange(Limits(60_000, null), interruption).asServer(port(), dest) {} }
            }
            Thread.sleep(300)
            interruption.requestStop()
            val failure = server.get(5, TimeUnit.SECONDS).exceptionOrNull()
            (failure as CommandFailure).exitCode shouldBe 130
            failure.message shouldBe "interrupted"
        } finally {
            interruption.close()
        }
    }

    test("Ctrl-C while the client retries a refused connection") {
        val interruption = Interruption()
        try {
            val client = CompletableFuture.supplyAsync {
                runCatching { PingpongExchange(Limits(60_000, null), interruption).asClient("127.0.0.1", port(), dest) }
            }
            Thread.sleep(500)
            interruption.requestStop()
            (client.get(5, TimeUnit.SECONDS).exceptionOrNull() as CommandFailure).exitCode shouldBe 130
        } finally {
            interruption.close()
        }
    }

    test("after Ctrl-C nothing new blocks, and check() throws") {
        Interruption().use { interruption ->
            interruption.requestStop()
            interruption.requested shouldBe true
            shouldThrow<CommandFailure> { interruption.check() }.exitCode shouldBe 130
            ServerSocket(0).use { s ->
                shouldThrow<CommandFailure> { interruption.blockingOn(s) { it.accept() } }
            }
        }
    }

    test("Resources closes in reverse order, all of them, and reports the first failure") {
        val closed = mutableListOf<String>()
        val e = shouldThrow<IllegalStateException> {
            Resources().use { r ->
                r.add(AutoCloseable { closed += "pd" })
                r.add(AutoCloseable { closed += "cq"; throw IllegalStateException("cq busy") })
                r.add(AutoCloseable { closed += "qp"; throw IllegalStateException("qp busy") })
            }
        }
        closed shouldBe listOf("qp", "cq", "pd")
        e.message shouldContain "qp busy"
        e.suppressed.map { it.message } shouldBe listOf("cq busy")
    }
})
