package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.test
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import java.io.File
import java.nio.file.Files

/**
 * Durations beyond 7 days are refused when they are given, with one sentence that names the
 * option and the bound: `--timeout 1000000d` used to be taken, and the run then gave up at once
 * claiming it had waited 1000000d (`System.nanoTime() + timeout` had overflowed).
 */
class DurationBoundsSpec : FunSpec({
    val dir = Files.createTempDirectory("duration-bounds").toFile()
    val cache = File(dir, "cache")
    afterSpec { dir.deleteRecursively() }

    fun script(name: String, text: String) = File(dir, name).apply { writeText(text) }
    fun run(vararg args: String) = rdmaRun(cache).test(withImplicitRun(arrayOf(*args)).toList())

    val plain = script("plain.main.kts", """
        import dev.rdmarun.dsl.*

        rdma {
            connect(peer)
            send()
        }
    """.trimIndent())

    test("the launcher's --timeout, -D and --interval, and pingpong's --timeout and --peer-timeout, beyond 7 days or below 1ms") {
        val refusals = mapOf(
            listOf(plain.path, "--check", "--timeout", "1000000d") to "invalid value for --timeout: the timeout must be at most 7d, not 1000000d",
            listOf(plain.path, "--check", "--timeout", "7d 1s") to "invalid value for --timeout: the timeout must be at most 7d, not 7d 1s",
            listOf(plain.path, "--check", "-D", "1e12") to "invalid value for -D: '1e12' is not a positive number of seconds up to 604800 (7d)",
            listOf(plain.path, "--check", "--interval", "604801") to "invalid value for --interval: '604801' is not a number of seconds from 0.1 to 604800 (7d)",
            listOf("pingpong", "-d", "nodev", "--timeout", "1000000") to "invalid value for --timeout: the timeout must be at most 7d, not 1000000",
            listOf("pingpong", "-d", "nodev", "--peer-timeout", "604801") to "invalid value for --peer-timeout: the timeout must be at most 7d, not 604801",
            listOf("pingpong", "-d", "nodev", "--peer-timeout", "7d 1s") to "invalid value for --peer-timeout: the timeout must be at most 7d, not 7d 1s",
            listOf("pingpong", "-d", "nodev", "--peer-timeout", "0") to "invalid value for --peer-timeout: the timeout must be positive, not 0",
            listOf("pingpong", "-d", "nodev", "--timeout", "soon") to
                "invalid value for --timeout: 'soon' is not a whole number of seconds or a duration like 30s, 2m or 500ms",
            listOf(plain.path, "--check", "--timeout", "soon") to
                "invalid value for --timeout: 'soon' is not a whole number of seconds or a duration like 30s, 2m or 500ms",
            // Every deadline counts whole milliseconds: less would be a limit of 0 named as if it were given.
            listOf(plain.path, "--check", "--timeout", "100ns") to "invalid value for --timeout: the timeout must be at least 1ms, not 100ns",
            listOf("pingpong", "-d", "nodev", "--timeout", "100us") to "invalid value for --timeout: the timeout must be at least 1ms, not 100us",
            listOf("pingpong", "-d", "nodev", "--peer-timeout", "0.5ms") to
                "invalid value for --peer-timeout: the timeout must be at least 1ms, not 0.5ms",
        )
        for ((args, sentence) in refusals) {
            val result = run(*args.toTypedArray())
            withClue(args.joinToString(" ")) {
                result.stderr.lines().filter { it.startsWith("Error: ") } shouldBe listOf("Error: $sentence")
                result.statusCode shouldBe 1
            }
        }
        run(plain.path, "--check", "--timeout", "7d").let {
            withClue(it.output) { it.statusCode shouldBe 0 }
            it.stdout shouldContain "timeout 7d"
        }
        // Whole seconds, as pingpong takes them: one way to write a timeout for every command.
        run(plain.path, "--check", "--timeout", "45").let {
            withClue(it.output) { it.statusCode shouldBe 0 }
            it.stdout shouldContain "timeout 45s"
        }
    }

    test("a script's timeout(...) beyond 7 days fails the scenario with one sentence at its line, exit 1") {
        val long = script("long.main.kts", """
            import dev.rdmarun.dsl.*
            import kotlin.time.Duration.Companion.days

            rdma {
                timeout(1000000.days)
                connect(peer)
                send()
            }
        """.trimIndent())
        val result = run(long.path, "--check")
        result.statusCode shouldBe 1
        result.stderr.lines().filterNot { it.startsWith("rdma-run: compiling ") }.joinToString("\n").trim() shouldBe
            "rdma-run: script failed at ${long.path}:5: timeout(1000000d) is longer than 7d, the longest timeout rdma-run accepts"
        result.output shouldNotContain "Exception"
    }
})
