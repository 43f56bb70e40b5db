package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.CliktCommandTestResult
import com.github.ajalt.clikt.testing.test
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import java.io.File
import java.nio.file.Files

/**
 * What the launcher makes of the DSL's Kotlin conventions: a wait's deadline (an
 * RdmaTimeoutException, no longer a ScenarioException) is still printed as its one sentence with
 * exit status 1, and `--params` shows the doc of every parameter a sample reads. On soft0.
 */
class ConventionsLauncherSpec : FunSpec({
    val dir = Files.createTempDirectory("conventions-launcher").toFile()
    val cache = File(dir, "cache")
    afterSpec { dir.deleteRecursively() }

    fun script(name: String, text: String) = File(dir, name).apply { writeText(text) }
    fun run(vararg args: String): CliktCommandTestResult = rdmaRun(cache).test(withImplicitRun(arrayOf(*args)).toList())

    test("a wait's deadline is printed as its one sentence, exit status 1, on both sides of --loopback") {
        val waits = script("waits.main.kts", """
            import dev.rdmarun.dsl.*
            import kotlin.time.Duration.Companion.seconds

            rdma {
                timeout(if (isServer) 2.seconds else 60.seconds) // a local setting: the server's wait is the one that ends
                connect(peer)
                server { qp(0) { receive() } }
                barrier()
            }
        """.trimIndent())
        val result = run(waits.path, "--loopback", "-d", "soft0", "--set", "warmup=0", "--set", "preflight=0")
        result.statusCode shouldBe 1
        result.stderr shouldContain "rdma-run waits.main.kts (server): the server waited 2s for a message in receive() on QP 0; the client "
        result.stderr shouldContain "rdma-run waits.main.kts (client): the server failed: the server waited 2s for a message in receive() on QP 0"
        result.stderr shouldNotContain "internal error"
        result.stderr shouldNotContain "script failed at"
        result.stderr shouldNotContain "\tat " // no stack trace without --debug
    }

    test("--params shows each parameter of a sample with its doc") {
        val result = run(File("../samples/write-bw.main.kts").path, "--params")
        result.statusCode shouldBe 0
        val rows = result.stdout.lines().drop(1).filter { it.isNotBlank() }
        val docs = rows.associate { row -> row.substringBefore(' ') to row }
        docs.getValue("size") shouldContain "bytes of each WRITE (the buffer size)"
        docs.getValue("depth") shouldContain "WRITEs in flight per QP"
        docs.getValue("qps") shouldContain "QPs, each writing `iterations` times"
        docs.getValue("signal") shouldContain "one work request in this many is signaled, replaces signalEvery(n) (-Q)"
        docs.getValue("iterations") shouldContain "rounds of repeat { }"
    }
})
