package dev.rdmarun.scripts

import io.kotest.assertions.fail
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import java.io.File
import java.io.InputStream
import java.nio.file.Files
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit

/**
 * The launcher in its own JVM, for what ends a JVM: a script's System.exit, and Ctrl-C (SIGINT)
 * while the script never yields (a busy loop). The deadlines only keep a broken launcher from
 * hanging the build; what is asserted is the exit status and the sentence.
 */
class LauncherProcessSpec : FunSpec({
    val dir = Files.createTempDirectory("launcher-process").toFile()
    afterSpec { dir.deleteRecursively() }

    fun script(name: String, text: String) = File(dir, name).apply { writeText(text) }

    test("System.exit(n) in the scenario ends the run at once with status n, and says so") {
        val exits = script("exits.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n    connect(peer)\n    server { System.exit(3) }\n    barrier()\n}\n")
        val run = Launched(dir, exits.path, "--loopback", "-d", "soft0", "--timeout", "60s")
        run.awaitExit() shouldBe 3
        withClue(run.stderr()) {
            run.stderrLines().filter { "System.exit" in it } shouldContainExactly listOf("rdma-run exits.main.kts: the script called System.exit(3)")
        }
    }

    test("System.exit(n) in the script's top-level code: status n, and says so") {
        val exits = script("exits-top.main.kts", "System.exit(4)\n")
        val run = Launched(dir, exits.path, "--check")
        run.awaitExit() shouldBe 4
        withClue(run.stderr()) {
            run.stderrLines().filter { "System.exit" in it } shouldContainExactly listOf("rdma-run exits-top.main.kts: the script called System.exit(4)")
        }
    }

    test("--json -: the script's own println goes to standard error, and standard output is the document alone") {
        val talks = script("talks.main.kts", """
            import dev.rdmarun.dsl.*

            println("top-level line of the script")
            rdma {
                connect(peer)
                qp(0) { if (isClient) send() else receive() }
                println("a line of the scenario")
            }
        """.trimIndent())
        val run = Launched(dir, talks.path, "--loopback", "-d", "soft0", "--set", "preflight=0", "--json", "-")
        run.awaitExit() shouldBe 0
        val document = Json.parseToJsonElement(run.stdout()).jsonObject
        document["runs"]!!.jsonArray.size shouldBe 2
        run.stderr() shouldContain "top-level line of the script"
        run.stderr() shouldContain "a line of the scenario"
    }

    test("Ctrl-C on a scenario busy in a loop that never suspends: 'interrupted' once, exit 130") {
        val busy = script("busy.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n    connect(peer)\n    println(\"started\"); System.out.flush()\n    while (true) {}\n}\n")
        val run = Launched(dir, busy.path, "--loopback", "-d", "soft0", "--timeout", "60s")
        run.interruptWhenStarted()
        run.awaitExit() shouldBe 130
        withClue(run.stderr()) {
            run.stderrLines().filter { "interrupted" in it } shouldContainExactly listOf("rdma-run busy.main.kts: interrupted")
        }
    }

    test("Ctrl-C on a busy loop in top-level code: 'interrupted' once, exit 130") {
        val busy = script("busy-top.main.kts", "println(\"started\"); System.out.flush()\nwhile (true) {}\n")
        val run = Launched(dir, busy.path, "--check")
        run.interruptWhenStarted()
        run.awaitExit() shouldBe 130
        withClue(run.stderr()) {
            run.stderrLines().filter { "interrupted" in it } shouldContainExactly listOf("rdma-run busy-top.main.kts: interrupted")
        }
    }
})

/** `rdma-run ARGS...` as its own JVM on the test's classpath, with a compiled-script cache in [dir]. */
private class Launched(dir: File, vararg args: String) {
    private val process: Process
    private val started = CountDownLatch(1)
    private val out = mutableListOf<String>()
    private val err = mutableListOf<String>()
    private val readers: List<Thread>

    init {
        val java = File(System.getProperty("java.home"), "bin/java").path
        // A shell without job control starts background commands with SIGINT ignored, and children
        // inherit that: env resets it, so that the test's SIGINT reaches the launcher wherever it runs.
        val command = listOf("env", "--default-signal=INT", java, "--enable-native-access=ALL-UNNAMED",
            "--sun-misc-unsafe-memory-access=allow", "-cp", System.getProperty("java.class.path"), "dev.rdmarun.scripts.MainKt") + args
        process = ProcessBuilder(command).apply { environment()["RDMA_RUN_CACHE"] = File(dir, "cache").path }.start()
        readers = listOf(reader(process.inputStream, out), reader(process.errorStream, err))
    }

    private fun reader(stream: InputStream, into: MutableList<String>) = Thread.ofPlatform().daemon().start {
        stream.bufferedReader().forEachLine { line ->
            synchronized(into) { into += line }
            if (line == "started") started.countDown()
        }
    }

    /** Sends SIGINT once the script said it started (Ctrl-C in a terminal sends it to the whole group; the JVM is all of it here). */
    fun interruptWhenStarted() {
        if (!started.await(DEADLINE_S, TimeUnit.SECONDS)) {
            process.destroyForcibly()
            fail("the script did not start: ${stderr()}")
        }
        ProcessBuilder("kill", "-INT", process.pid().toString()).start().waitFor() shouldBe 0
    }

    fun awaitExit(): Int {
        if (!process.waitFor(DEADLINE_S, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor()
            fail("rdma-run did not end: ${stderr()}")
        }
        readers.forEach { it.join() }
        return process.exitValue()
    }

    fun stdout(): String = synchronized(out) { out.joinToString("\n") }
    fun stderrLines(): List<String> = synchronized(err) { err.toList() }
    fun stderr(): String = stderrLines().joinToString("\n")

    companion object {
        /** A safety net against a hanging launcher, not a measurement. */
        const val DEADLINE_S = 120L
    }
}
