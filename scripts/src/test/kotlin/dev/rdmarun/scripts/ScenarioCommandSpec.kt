package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.CliktCommandTestResult
import com.github.ajalt.clikt.testing.test
import dev.rdmarun.runtime.DeviceList
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.collections.shouldNotBeEmpty
import io.kotest.matchers.shouldBe
import io.kotest.matchers.shouldNotBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldMatch
import io.kotest.matchers.string.shouldNotContain
import io.kotest.matchers.string.shouldStartWith
import java.io.File
import java.net.ServerSocket
import java.nio.file.Files
import kotlin.time.Duration.Companion.seconds

/**
 * `rdma-run FILE.main.kts`: the command line, --check (which compiles, plans and validates without
 * a device), compile errors, invalid scenarios and parameters. Everything here runs without RDMA;
 * the Soft-RoCE suite (e2e/) runs the samples on a real device.
 */
/** The software provider, by the name users type (the provider's classes are the runtime's own business). */
private const val SOFT0 = "soft0"

class ScenarioCommandSpec : FunSpec({
    val dir = Files.createTempDirectory("scenario-command").toFile()
    // Compiled scripts go to a temp cache: a script used by several tests compiles once.
    val cache = File(dir, "cache")
    afterSpec { dir.deleteRecursively() }

    fun script(name: String, text: String) = File(dir, name).apply { writeText(text) }
    fun run(vararg args: String): CliktCommandTestResult = rdmaRun(cache).test(withImplicitRun(arrayOf(*args)).toList())
    fun runWith(env: Map<String, String>, vararg args: String): CliktCommandTestResult =
        rdmaRun(cache).test(withImplicitRun(arrayOf(*args)).toList(), envvars = env)

    /** stderr without the note a first compile of a script prints. */
    fun errors(result: CliktCommandTestResult) = result.stderr.lines().filterNot { it.startsWith("rdma-run: compiling ") }.joinToString("\n").trim()

    val samples = File("../samples").listFiles { f -> f.name.endsWith(".main.kts") }.orEmpty().sortedBy { it.name }

    // A scenario whose settings come from parameters, so the plan shows them.
    val parameterized = script("params.main.kts", """
        @file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT")

        import dev.rdmarun.dsl.*

        rdma {
            qps(intParam("qps", 1))
            bufferSize(intParam("size", 16))
            param("note", "") // read, so that --set note=... is not refused
            connect(peer)
            send()
        }
    """.trimIndent())

    test("`rdma-run FILE.main.kts ...` means `rdma-run run FILE.main.kts ...`; other commands are left alone") {
        withImplicitRun(arrayOf("x.main.kts", "--listen", "1")).toList() shouldContainExactly listOf("run", "x.main.kts", "--listen", "1")
        withImplicitRun(arrayOf("--debug", "x.main.kts")).toList() shouldContainExactly listOf("--debug", "run", "x.main.kts")
        withImplicitRun(arrayOf("pingpong", "host.kts")).toList() shouldContainExactly listOf("pingpong", "host.kts")
        withImplicitRun(arrayOf("devices")).toList() shouldContainExactly listOf("devices")
    }

    test("the root help shows the script form and the run command") {
        val result = run("--help")
        result.output shouldContain "rdma-run FILE.main.kts"
        result.output shouldContain "run"
    }

    test("--check on every sample compiles, plans and validates it, prints the plan and exits 0") {
        samples.map { it.name } shouldContainExactly listOf("alltoall.main.kts", "atomics.main.kts", "card.main.kts", "incast.main.kts",
            "multi-qp.main.kts", "pingpong-lat.main.kts", "read-lat.main.kts", "ring.main.kts", "write-bw.main.kts")
        for (sample in samples) {
            val result = run(sample.path, "--check")
            withClue(sample.name, result) {
                result.statusCode shouldBe 0
                result.stdout shouldContain "scenario plan (fingerprint "
                result.stdout shouldContain "data region"
                result.stdout shouldContain "peer: (none given: checked as the server"
            }
        }
    }

    test("the role follows from --listen and --peer (the plan shows the peer the script connects to)") {
        run(parameterized.path, "--check", "--listen", "18600").stdout shouldContain "peer: listen on *:18600"
        run(parameterized.path, "--check", "--listen", "127.0.0.1:18601").stdout shouldContain "peer: listen on 127.0.0.1:18601"
        run(parameterized.path, "--check", "--peer", "10.77.0.1").stdout shouldContain "peer: connect to 10.77.0.1:18515"
        run(parameterized.path, "--check", "--peer", "host.example:1234").stdout shouldContain "peer: connect to host.example:1234"
    }

    test("-d, -g, --ib-port and --timeout are local overrides of the scenario's settings") {
        val result = run(parameterized.path, "--check", "-d", "mlx5_1", "-g", "3", "--ib-port", "2", "--timeout", "2m")
        result.statusCode shouldBe 0
        result.stdout shouldContain "device: mlx5_1 port 2 GID index 3"
        result.stdout shouldContain "timeout 2m"
        run(parameterized.path, "--check", "--timeout", "500ms").stdout shouldContain "timeout 500ms"
    }

    test("-i is perftest's --ib-port: the device's port, not the interval") {
        for (flag in listOf("-i", "--ib-port")) {
            val result = run(parameterized.path, "--check", "-d", "mlx5_1", flag, "2")
            withClue(flag, result) {
                result.statusCode shouldBe 0
                result.stdout shouldContain "device: mlx5_1 port 2 GID index"
            }
        }
        // What once asked for a line every 0.5 s is no port.
        run(parameterized.path, "--check", "-i", "0.5").stderr shouldContain "Error: invalid value for -i: 0.5 is not a valid integer"
    }

    test("--interval keeps its long name only (perftest uses every letter)") {
        run(parameterized.path, "--check", "--interval", "1").statusCode shouldBe 0
        run(parameterized.path, "--check", "--interval", "0.05").stderr shouldContain
            "Error: invalid value for --interval: '0.05' is not a number of seconds from 0.1"
    }

    test("perftest's long spellings are the same options: --inline_size, --ib-dev, --gid-index") {
        fun plan(vararg args: String) = run(parameterized.path, "--check", *args).also { result ->
            withClue(args.joinToString(" "), result) { result.statusCode shouldBe 0 }
        }.stdout
        val inline = plan("--inline_size", "64")
        inline shouldContain "inline up to 64 B"
        inline shouldContain "parameters: inline=64"
        plan("--inline-size", "64") shouldBe inline
        plan("-I", "64") shouldBe inline
        plan("--ib-dev", "mlx5_1", "--gid-index", "3") shouldBe plan("-d", "mlx5_1", "-x", "3")
        plan("-d", "mlx5_1", "-x", "3") shouldContain "device: mlx5_1 port 1 GID index 3"
    }

    test("-F/--CPU-freq is accepted and changes nothing: rdma-run reads no CPU frequency") {
        val plain = run(parameterized.path, "--check").stdout
        for (flag in listOf("-F", "--CPU-freq")) {
            val result = run(parameterized.path, "--check", flag)
            withClue(flag, result) {
                result.statusCode shouldBe 0
                result.stdout shouldBe plain
            }
        }
    }

    test("-e/--events waits on completion events: completion mode EVENT in the plan, over the script's choice") {
        val plain = run(parameterized.path, "--check").stdout
        plain shouldContain "completion busy"
        for (flag in listOf("-e", "--events")) {
            val result = run(parameterized.path, "--check", flag)
            withClue(flag, result) {
                result.statusCode shouldBe 0
                result.stdout shouldBe plain.replace("completion busy", "completion event")
            }
        }
    }

    test("-m/--mtu and -Q/--cq-mod set the parameters mtu and signal: the path MTU cap and signalEvery") {
        val result = run(parameterized.path, "--check", "-m", "1024", "-Q", "4", "-t", "16")
        withClue("-m -Q", result) {
            result.statusCode shouldBe 0
            result.stdout shouldContain "MTU 1024"
            result.stdout shouldContain "signal every 4,"
            result.stdout shouldContain "parameters: depth=16, mtu=1024, signal=4"
        }
        run(parameterized.path, "--check", "--mtu", "2048", "--cq-mod", "8").stdout shouldContain "parameters: mtu=2048, signal=8"
        run(parameterized.path, "--check", "--set", "mtu=512", "--set", "signal=2").stdout shouldContain "MTU 512"
        run(parameterized.path, "--check", "-m", "1000").stderr shouldContain
            "Error: invalid value for -m: 1000 is not a path MTU: 256, 512, 1024, 2048 or 4096"
        run(parameterized.path, "--check", "-Q", "0").stderr shouldContain "Error: invalid value for -Q: 0 is smaller than the minimum valid value of 1."
        run(parameterized.path, "--check", "-m", "1024", "--set", "mtu=1024").stderr shouldContain
            "-m/--mtu and --set mtu both give the parameter mtu: give it once"
        run(parameterized.path, "--params").stdout.lines().single { it.startsWith("signal ") } shouldContain "-Q"
    }

    test("perftest's -p/--port is the TCP port of --peer, --listen or --loopback; given twice, the two must agree") {
        run(parameterized.path, "--check", "--peer", "10.77.0.1", "-p", "18600").stdout shouldContain "peer: connect to 10.77.0.1:18600"
        run(parameterized.path, "--check", "--peer", "[fe80::1]", "--port", "18600").stdout shouldContain "peer: connect to fe80::1:18600"
        run(parameterized.path, "--check", "--peer", "10.77.0.1:18600", "-p", "18600").stdout shouldContain "peer: connect to 10.77.0.1:18600"
        run(parameterized.path, "--check", "--listen", "18600", "-p", "18600").stdout shouldContain "peer: listen on *:18600"
        val refusals = mapOf(
            listOf("--peer", "10.77.0.1:1234", "-p", "18600") to "--peer 10.77.0.1:1234 and -p/--port 18600 give different TCP ports: give the port once",
            listOf("--listen", "127.0.0.1:18601", "--port", "18600") to
                "--listen 127.0.0.1:18601 and -p/--port 18600 give different TCP ports: give the port once",
            listOf("-p", "18600") to "-p/--port 18600 is the TCP port of --listen, --peer, --loopback or --rendezvous: give one of them",
            listOf("-p", "0") to "invalid value for -p: 0 is not in the valid range of 1 to 65535.",
        )
        for ((args, sentence) in refusals) {
            val result = run(parameterized.path, "--check", *args.toTypedArray())
            withClue(args.joinToString(" "), result) {
                result.statusCode shouldBe 1
                result.stderr shouldContain "Error: $sentence"
                result.stdout shouldNotContain "scenario plan"
            }
        }
        val port = ServerSocket(0).use { it.localPort }
        run(parameterized.path, "--loopback", "-d", "nosuch0", "-p", port.toString()).stderr shouldContain
            "control connection over 127.0.0.1:$port"
    }

    test("perftest's -l/--post_list is refused with a sentence saying why") {
        for (args in listOf(listOf("-l", "4"), listOf("--post_list", "4"))) {
            val result = run(parameterized.path, "--check", *args.toTypedArray())
            withClue(args.joinToString(" "), result) {
                result.statusCode shouldBe 1
                result.stderr shouldContain "Error: -l/--post_list: rdma-run posts every work request with its own ibv_post_send " +
                    "(the DSL has no lists of them), so there is no list length to set: leave -l out"
                result.stdout shouldNotContain "scenario plan"
            }
        }
    }

    test("--set values reach param() and intParam(), and are part of the plan") {
        val result = run(parameterized.path, "--check", "--set", "qps=3", "--set", "size=64", "--set", "note=a=b")
        result.statusCode shouldBe 0
        result.stdout shouldContain "QPs: 3 RC"
        result.stdout shouldContain "data region 1 x 64 B = 64 B"
        result.stdout shouldContain "parameters: note=a=b, qps=3, size=64"
    }

    test("a parameter that is not a number fails the scenario with one sentence, exit 1") {
        val result = run(parameterized.path, "--check", "--set", "qps=four")
        result.statusCode shouldBe 1
        errors(result) shouldBe "rdma-run params.main.kts: parameter qps must be a whole number, not 'four'"
    }

    test("usage errors: conflicting roles, bad --set, bad durations, bad addresses") {
        val usage = mapOf(
            listOf("--listen", "18600", "--peer", "h") to "cannot be used with",
            listOf("--loopback", "--peer", "h") to "cannot be used with",
            listOf("--set", "novalue") to "'novalue' is not NAME=VALUE",
            listOf("--set", "1x=2") to "'1x' is not a parameter name",
            listOf("--set", "a=1", "--set", "a=2") to "--set a is given more than once",
            listOf("--timeout", "3x") to "'3x' is not a whole number of seconds or a duration like 30s, 2m or 500ms",
            listOf("--timeout", "0") to "must be positive",
            listOf("--timeout", "0s") to "must be positive",
            listOf("--listen", "0") to "TCP port 1..65535",
            listOf("--listen", "http") to "is not [ADDR:]PORT",
            listOf("--peer", "h:99999") to "TCP port must be 1..65535",
            listOf("--peer", ":5") to "has no host",
            listOf("-g", "256") to "-g",
            listOf("--json", File(dir, "missing/out.json").path) to "does not exist",
            // Checked before the run, as the folder is, not when the results are written after it.
            listOf("--json", dir.path) to "invalid value for --json: ${dir.path} is a folder",
            listOf("--json", "") to "invalid value for --json: the file name is empty",
            // A writable folder that cannot make this name (as /proc makes none): found by trying, before the run.
            listOf("--json", File(dir, "x".repeat(300) + ".json").path) to "cannot be written (",
            listOf("--histogram", File(dir, "missing/h.hgrm").path) to "invalid value for --histogram: the folder of",
            listOf("--histogram", "-") to "invalid value for --histogram: - (standard output) is --json's",
        )
        for ((args, message) in usage) {
            val result = run(parameterized.path, *args.toTypedArray())
            withClue(args.joinToString(" "), result) {
                result.statusCode shouldNotBe 0
                result.statusCode shouldNotBe 2 // 2 is for scripts that do not compile
                result.stderr shouldContain "Error: "
                result.stderr shouldContain message
                result.stderr shouldNotContain "scenario plan"
            }
        }
        run(File(dir, "absent.main.kts").path).stderr shouldContain "does not exist"
    }

    test("a usage error found after parsing shows the run command's usage line, not the top-level one") {
        val result = run(parameterized.path, "-p", "18601")
        result.statusCode shouldBe 1
        result.stderr shouldContain "-p/--port 18601 is the TCP port of --listen, --peer, --loopback or --rendezvous"
        // It showed "Usage: rdma-run [<options>] <command> [<args>]...", whose <command> the user had given.
        result.stderr shouldContain "Usage: rdma-run run "
        result.stderr shouldNotContain "<command>"
    }

    test("a script that does not compile gives file:line:col errors and exit 2") {
        val broken = script("broken.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n    qps(\"four\")\n    connect(peer)\n}\n")
        val result = run(broken.path, "--check")
        result.statusCode shouldBe 2
        val lines = errors(result).lines()
        lines.shouldNotBeEmpty()
        lines.first() shouldMatch Regex("^" + Regex.escape(broken.path) + ":4:\\d+: error: .*")
        result.stderr shouldNotContain "\tat "
        result.stdout shouldBe ""
    }

    test("a script that uses the DSL without importing it: the errors, then a hint to import it, exit 2") {
        val unimported = script("unimported.main.kts", "@file:DependsOn(\"dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT\")\n\nrdma { qps(2); connect(peer) }\n")
        val result = run(unimported.path, "--check")
        result.statusCode shouldBe 2
        val lines = errors(result).lines()
        lines.first() shouldMatch Regex("^" + Regex.escape(unimported.path) + ":3:1: error: Unresolved reference 'rdma'.*")
        lines.last() shouldBe "hint: add `import dev.rdmarun.dsl.*` at the top of the script (after any @file: annotations)"
        result.stdout shouldBe ""
    }

    test("measure in rdma { }, outside any QP, is a compile error that says where it belongs") {
        val outside = script("measure-outside.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n    connect(peer)\n    measure(\"x\") { send() }\n}\n")
        val result = run(outside.path, "--check")
        result.statusCode shouldBe 2
        errors(result) shouldContain "${outside.path}:5:5: error: "
        errors(result) shouldContain "a section times one QP's work: call measure and measureRoundTrip in qp(i) { } or forEachQp { }"
        // Inside a QP's block the QP's own measure is the one called.
        val inside = script("measure-inside.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n    connect(peer)\n" +
            "    forEachQp { measure(\"x\") { send() } }\n}\n")
        run(inside.path, "--check").statusCode shouldBe 0
    }

    test("an invalid setting exits 1 with its sentence at its line, before any device or socket is touched") {
        val invalid = script("invalid.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n    qps(0)\n    connect(peer)\n}\n")
        for (role in listOf(listOf("--check"), listOf("--peer", "127.0.0.1:1"), listOf("--listen", "18602"))) {
            val result = run(invalid.path, *role.toTypedArray())
            withClue(role.joinToString(" "), result) {
                result.statusCode shouldBe 1
                // Said at the call that gave the value, with its line (it was said at connect, with none).
                errors(result) shouldBe "rdma-run: script failed at ${invalid.path}:4: qps(0): a scenario needs at least 1 QP"
            }
        }
    }

    test("without --listen, --peer or --loopback, reading `peer` says what to give") {
        val result = run(parameterized.path)
        result.statusCode shouldBe 1
        result.stderr shouldContain "the scenario reads `peer` but none was given: run it with rdma-run --listen, --peer or --loopback"
    }

    test("what a script throws is its failure, exit 1, one line; --debug adds the stack trace") {
        val throws = script("throws.main.kts", "throw IllegalStateException(\"the data did not match\")\n")
        val plain = run(throws.path, "--check")
        plain.statusCode shouldBe 1
        errors(plain) shouldBe "rdma-run: script failed at ${throws.path}:1: IllegalStateException: the data did not match"
        val debug = run(throws.path, "--check", "--debug")
        debug.statusCode shouldBe 1
        debug.stderr shouldContain "\tat "
    }

    test("an empty script, or one that never calls rdma { }, has nothing to run: one sentence, exit 2") {
        val empty = script("empty.main.kts", "")
        val topLevel = script("toplevel.main.kts", "val x = 1 + 1\n")
        for (file in listOf(empty, topLevel)) {
            for (role in listOf(listOf("--check"), listOf("--peer", "127.0.0.1:1"))) {
                val result = run(file.path, *role.toTypedArray())
                withClue(file.name + " " + role.joinToString(" "), result) {
                    result.statusCode shouldBe 2
                    errors(result) shouldBe "rdma-run: ${file.path} has no rdma { } block: nothing to run"
                    result.stdout shouldBe ""
                }
            }
        }
    }

    test("a binary file is not a Kotlin script: one sentence, exit 2") {
        val binary = File(dir, "binary.main.kts").apply { writeBytes(ByteArray(4096) { (it * 7).toByte() }) }
        val result = run(binary.path, "--check")
        result.statusCode shouldBe 2
        errors(result) shouldBe "rdma-run: ${binary.path} is not a Kotlin script: it contains a NUL byte at offset 0 (a binary file?)"
    }

    test("compiler errors: at most ${ScenarioCommand.MAX_DIAGNOSTICS}, then how many more") {
        val garbage = script("garbage.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n" + "}\n".repeat(40))
        val result = run(garbage.path, "--check")
        result.statusCode shouldBe 2
        val lines = errors(result).lines()
        lines shouldHaveSize ScenarioCommand.MAX_DIAGNOSTICS + 1
        lines.dropLast(1).forEach { it shouldMatch Regex("^" + Regex.escape(garbage.path) + ":\\d+:\\d+: error: .*") }
        lines.last() shouldMatch Regex("\\.\\.\\. and \\d+ more errors")
    }

    test("what the script's code throws inside rdma { } names its type and line, exit 1; --debug adds the stack trace") {
        val boom = script("boom.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n    qps(1)\n    check(qpCount > 1) { \"boom\" }\n    connect(peer)\n}\n")
        val plain = run(boom.path, "--peer", "127.0.0.1:1")
        plain.statusCode shouldBe 1
        errors(plain) shouldBe "rdma-run: script failed at ${boom.path}:5: IllegalStateException: boom"
        val debug = run(boom.path, "--peer", "127.0.0.1:1", "--debug")
        debug.statusCode shouldBe 1
        debug.stderr shouldContain "\tat "
        debug.stderr shouldContain "(boom.main.kts:5)"
    }

    test("on both sides of --loopback, what the script throws after connect is reported at its line") {
        val boom = script("boom-loopback.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n    connect(peer)\n    server { \"x\".toInt() }\n}\n")
        val result = run(boom.path, "--loopback", "-d", SOFT0, "--timeout", "20s")
        result.statusCode shouldBe 1
        result.stderr shouldContain "rdma-run (server): script failed at ${boom.path}:5: NumberFormatException: For input string: \"x\""
    }

    test("--loopback says a side's failure when it happens, not once the other side, blocked in its own code, ends") {
        // The server blocks its thread until the client's side has ended: the client's sentence
        // must be out by then (it used to wait for both sides, and came after the server's).
        val blocked = script("blocked-loopback.main.kts", """
            import dev.rdmarun.dsl.*

            rdma {
                connect(peer)
                qp(0) {
                    if (isClient) receive()
                    else {
                        while (Thread.getAllStackTraces().keys.any { it.name.startsWith("rdma-run-client-script") }) Thread.sleep(10) // (with a coroutine's name under debug)
                        send()
                    }
                }
            }
        """.trimIndent())
        val result = run(blocked.path, "--loopback", "-d", SOFT0, "--timeout", "1s", "--set", "preflight=0")
        withClue("blocked", result) { result.statusCode shouldBe 1 }
        val sentences = result.stderr.lines().filter { it.contains("): ") }
        sentences.first() shouldContain "(client): the client waited 1s for a message in receive() on QP 0; the server is alive but made no progress"
        sentences.drop(1).single() shouldContain "(server): the client failed: the client waited 1s"
    }

    // Without the fix the run never returns: the timeout fails the test.
    test("a side busy in its own code after its scenario failed is given up on: one sentence, exit 1, not a hang").config(timeout = 60.seconds) {
        // The server never suspends, so the peer's failure cannot cancel it: the launcher used to
        // wait for it forever. The flag file ends the loop once the run has returned (the test's JVM).
        val flag = File(dir, "busy-done")
        val busy = script("busy-loopback.main.kts", """
            import dev.rdmarun.dsl.*

            rdma {
                connect(peer)
                qp(0) {
                    if (isClient) receive()
                    else while (!java.io.File("${flag.path}").exists()) { }
                }
            }
        """.trimIndent())
        val result = try {
            run(busy.path, "--loopback", "-d", SOFT0, "--timeout", "1s", "--set", "preflight=0")
        } finally {
            flag.createNewFile()
        }
        withClue("busy", result) { result.statusCode shouldBe 1 }
        result.stderr shouldContain "(client): the client waited 1s for a message in receive() on QP 0"
        result.stderr shouldContain "(server): the client failed: the client waited 1s"
        result.stderr shouldContain "this side's script kept running in its own code after that (a loop that never suspends, " +
            "which cancelling does not stop): it was left behind"
    }

    /**
     * A script (rdma { [body] }) whose server fails at [line]: the server says [said] there (and
     * [hint] on the next line), the client that the server failed with the same words.
     */
    fun failsAtLine(name: String, body: String, line: Int, said: String, hint: String? = null) {
        val s = script(name, "import dev.rdmarun.dsl.*\n\nrdma {\n$body}\n")
        val result = run(s.path, "--loopback", "-d", SOFT0, "--timeout", "20s")
        result.statusCode shouldBe 1
        val text = "script failed at ${s.path}:$line: $said\n"
        result.stderr shouldContain "rdma-run (server): $text" + (hint?.let { "  hint: $it\n" } ?: "")
        result.stderr shouldContain "(client): the server failed: $text"
    }

    test("a ScenarioException the script throws is reported at its line on both sides of --loopback") {
        failsAtLine("scenario-exception.main.kts", "    connect(peer)\n    server { throw ScenarioException(\"x\") }\n    barrier()\n",
            5, "ScenarioException: x")
    }

    test("the script's own withTimeout { } that runs out is reported at the line that called it, on both sides of --loopback") {
        // kotlinx throws it from its timer thread, whose stack names no line of the script.
        failsAtLine("with-timeout.main.kts", "    connect(peer)\n    server {\n        qp(0) { kotlinx.coroutines.withTimeout(300) { receive() } }\n    }\n" +
            "    barrier()\n", 6, "the script's own withTimeout { } ran out: TimeoutCancellationException: Timed out waiting for 300 ms")
    }

    test("a call the DSL refuses (a section's second kind) is reported at the script's line, on both sides of --loopback") {
        failsAtLine("section-kinds.main.kts", "    connect(peer)\n    qp(0) {\n        server { measure(\"x\") { } }\n" +
            "        server { measureRoundTrip(\"x\") { } }\n    }\n    barrier()\n", 7,
            "measureRoundTrip(\"x\"): section x was measured with measure already, " +
                "and a name keeps one kind for the whole scenario, on every QP: give this one another name")
    }

    test("a DSL call out of order or out of range is reported at the script's line, on both sides of --loopback") {
        failsAtLine("qp-outside.main.kts", "    connect(peer)\n    server { qp(5) { } }\n    barrier()\n", 5, "qp(5) is outside 0..0 (qps(1))")
        failsAtLine("late-setting.main.kts", "    connect(peer)\n    server { qps(3) }\n    barrier()\n", 5,
            "qps(3) after connect(peer): settings come before connect(peer)")
    }

    test("an operation whose arguments the engine refuses is reported at the script's line, with its hint, on both sides") {
        failsAtLine("too-big.main.kts", "    bufferSize(64)\n    connect(peer)\n    qp(0) {\n        server { send(300) }\n    }\n    barrier()\n",
            7, "send() of 300 bytes on QP 0 is larger than bufferSize 64", hint = "raise bufferSize(...) before connect")
        failsAtLine("misaligned.main.kts", "    remoteAccess(RemoteAccess.ATOMIC)\n    connect(peer)\n" +
            "    server { qp(0) { fetchAndAdd(1, remoteOffset = 12) } }\n    barrier()\n", 6,
            "fetchAndAdd() on QP 0: remoteOffset 12 is not 8-byte aligned (atomics work on aligned 64-bit words)",
            hint = "use a multiple of 8, such as 8")
    }

    test("a null dereference in the script is reported at its line on both sides of --loopback, escaped") {
        val npe = script("null-deref.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n    connect(peer)\n" +
            "    val text: String? = if (isServer) null else \"y\"\n    server { println(text!!.length) }\n    barrier()\n}\n")
        val result = run(npe.path, "--loopback", "-d", SOFT0, "--timeout", "20s")
        result.statusCode shouldBe 1
        result.stderr shouldContain "rdma-run (server): script failed at ${npe.path}:6: NullPointerException\n"
        result.stderr shouldContain "(client): the server failed: script failed at ${npe.path}:6: NullPointerException\n"
        // A message with a control character reaches neither terminal raw.
        val escaped = script("escaped.main.kts", "import dev.rdmarun.dsl.*\n\nrdma {\n    connect(peer)\n" +
            "    server { throw IllegalStateException(\"bad\\u001b[2Jdata\") }\n    barrier()\n}\n")
        val both = run(escaped.path, "--loopback", "-d", SOFT0, "--timeout", "20s")
        both.stderr shouldContain "(server): script failed at ${escaped.path}:5: IllegalStateException: bad\\u001b[2Jdata\n"
        both.stderr shouldContain "(client): the server failed: script failed at ${escaped.path}:5: IllegalStateException: bad\\u001b[2Jdata\n"
    }

    test("the compiled script is cached: a second run says 'cache hit' under --debug and still gets the launcher's defaults") {
        val fresh = File(dir, "own-cache")
        val text = script("cached.main.kts", "import dev.rdmarun.dsl.*\n\nrdma { bufferSize(intParam(\"size\", 8)); connect(peer); send() }\n")
        val first = rdmaRun(fresh).test(listOf("run", text.path, "--check", "--debug"))
        first.stderr shouldContain "rdma-run: compiling cached.main.kts"
        val second = rdmaRun(fresh).test(listOf("run", text.path, "--check", "--debug", "--set", "size=24"))
        second.statusCode shouldBe 0
        second.stderr shouldContain "compiled script cache hit: "
        second.stderr shouldNotContain "rdma-run: compiling"
        second.stdout shouldContain "data region 1 x 24 B"
        fresh.listFiles { f -> f.name.endsWith(".jar") }!!.toList() shouldHaveSize 1 // one jar: the second run compiled nothing
    }

    test("a run that fails prints the cause and the hint, no stack trace, exit 1") {
        val port = ServerSocket(0).use { it.localPort }
        val result = run(parameterized.path, "--listen", port.toString(), "-d", "nosuch0")
        result.statusCode shouldBe 1
        result.stderr.lines().first() shouldStartWith "rdma-run params.main.kts: no RDMA device named 'nosuch0'"
        result.stderr shouldContain SOFT0 // the devices there are
        result.stderr shouldNotContain "\tat "
    }

    test("--loopback runs both sides and reports each side's failure") {
        val json = File(dir, "loopback.json")
        val result = run(parameterized.path, "--loopback", "-d", "nosuch0", "--json", json.path)
        result.statusCode shouldBe 1
        result.stderr shouldContain "loopback: server and client in this JVM on nosuch0"
        result.stderr shouldContain "rdma-run params.main.kts (server): no RDMA device named 'nosuch0'"
        result.stderr shouldContain "rdma-run params.main.kts (client): no RDMA device named 'nosuch0'"
        // No results, and the document says why.
        ResultsDocument.parse(json.readText()).let { it.runs shouldHaveSize 0; it.error!!.exitStatus shouldBe 1 }
    }

    test("a script naming a device this machine lacks: both sides name the way out here, and the first line does not promise soft0")
        .config(enabled = DeviceList.open().use { it.kernelDevices().isEmpty() }) {
        val named = script("named.main.kts", "import dev.rdmarun.dsl.*\n\nrdma { device(\"rxe0\"); connect(peer); barrier() }\n")
        val result = run(named.path, "--loopback")
        result.statusCode shouldBe 1
        result.stderr shouldContain "loopback: server and client in this JVM on the script's device, else soft0"
        for (side in listOf("server", "client")) {
            result.stderr shouldContain "rdma-run named.main.kts ($side): no RDMA device named 'rxe0' (devices: soft0)\n" +
                "  hint: this machine has no RDMA device, only rdma-run's software provider soft0: run there with -d soft0"
        }
        run(named.path, "--loopback", "-d", "soft0").statusCode shouldBe 0
    }

    test("--check runs the script up to connect(peer) only: what follows it never runs") {
        val text = script("stops.main.kts", "import dev.rdmarun.dsl.*\n\nrdma { qps(2); connect(peer); error(\"the operations ran\") }\n")
        val result = run(text.path, "--check")
        result.statusCode shouldBe 0
        result.stdout shouldContain "QPs: 2 RC"
        result.stderr shouldNotContain "the operations ran"
    }

    test("two sides running different script texts are told so before anything runs, both at once, each naming the difference") {
        val port = java.net.ServerSocket(0).use { it.localPort }
        val a = script("a.main.kts", "import dev.rdmarun.dsl.*\n\nrdma { connect(peer); barrier() }\n")
        val b = script("b.main.kts", "import dev.rdmarun.dsl.*\n\nrdma { connect(peer); barrier() } // another script\n")
        // Compiled first (into the cache), so that the server's short wait is not spent compiling the client's script.
        run(a.path, "--check").statusCode shouldBe 0
        run(b.path, "--check").statusCode shouldBe 0
        var atServer: CliktCommandTestResult? = null
        // A wait of two minutes: the server's sentence comes from the refusal, not from its deadline.
        val server = Thread.ofPlatform().start { atServer = run(a.path, "--listen", port.toString(), "-d", SOFT0, "--timeout", "2m") }
        val client = run(b.path, "--peer", "127.0.0.1:$port", "-d", SOFT0, "--timeout", "20s")
        server.join()
        client.statusCode shouldBe 1
        client.stderr shouldContain "the server at 127.0.0.1:$port runs a different scenario: the scripts differ (SHA-256 "
        client.stderr shouldContain " on the server)"
        atServer!!.statusCode shouldBe 1
        atServer!!.stderr shouldContain "the client at 127.0.0.1:"
        atServer!!.stderr shouldContain "runs a different scenario: the scripts differ (SHA-256 "
        atServer!!.stderr shouldNotContain "no client completed the hello"
    }

    test("a --set mismatch names the parameter on both sides at once") {
        val port = ServerSocket(0).use { it.localPort }
        run(parameterized.path, "--check").statusCode shouldBe 0
        var atServer: CliktCommandTestResult? = null
        val server = Thread.ofPlatform().start {
            atServer = run(parameterized.path, "--listen", port.toString(), "-d", SOFT0, "--timeout", "2m", "--set", "note=a")
        }
        val client = run(parameterized.path, "--peer", "127.0.0.1:$port", "-d", SOFT0, "--timeout", "20s", "--set", "note=b")
        server.join()
        client.statusCode shouldBe 1
        errors(client) shouldBe "rdma-run params.main.kts: the server at 127.0.0.1:$port runs a different scenario: --set note is b here and a on the server"
        atServer!!.statusCode shouldBe 1
        atServer!!.stderr shouldContain "runs a different scenario: --set note is a here and b on the client"
    }

    test("--no-token on one side only is refused with one sentence; with --token it is a usage error") {
        val port = ServerSocket(0).use { it.localPort }
        run(parameterized.path, "--check").statusCode shouldBe 0
        var atServer: CliktCommandTestResult? = null
        val server = Thread.ofPlatform().start { atServer = run(parameterized.path, "--listen", port.toString(), "-d", SOFT0, "--timeout", "5s") }
        val client = run(parameterized.path, "--peer", "127.0.0.1:$port", "-d", SOFT0, "--timeout", "20s", "--no-token")
        server.join()
        client.statusCode shouldBe 1
        errors(client) shouldBe "rdma-run params.main.kts: the server at 127.0.0.1:$port uses its per-user secret and this side runs without one " +
            "(--no-token): give both sides the same secret, or --no-token to both"
        atServer!!.statusCode shouldBe 1
        val both = run(parameterized.path, "--check", "--no-token", "--token", "x")
        both.statusCode shouldBe 1
        both.stderr shouldContain "--no-token and --token (or \$RDMA_RUN_TOKEN) contradict each other: give one of them"
    }

    test("a bad -g on the server is reported at once, before any client connects") {
        val port = ServerSocket(0).use { it.localPort }
        val result = run(parameterized.path, "--listen", port.toString(), "-d", SOFT0, "-g", "200", "--timeout", "60s")
        result.statusCode shouldBe 1
        errors(result).lines().first() shouldStartWith "rdma-run params.main.kts: GID index 200 of $SOFT0 port 1 is empty"
        result.stderr shouldNotContain "no client"
    }

    test("--token and RDMA_RUN_TOKEN: the same token on both sides runs; a different one is refused; it is never printed") {
        val port = ServerSocket(0).use { it.localPort }
        run(parameterized.path, "--check").statusCode shouldBe 0
        var atServer: CliktCommandTestResult? = null
        val server = Thread.ofPlatform().start {
            atServer = runWith(mapOf(ScenarioCommand.TOKEN_ENV to "t0ken-one"), parameterized.path, "--listen", port.toString(), "-d", SOFT0, "--timeout", "20s")
        }
        val client = run(parameterized.path, "--peer", "127.0.0.1:$port", "-d", SOFT0, "--timeout", "20s", "--token", "t0ken-one")
        server.join()
        withClue("token", client) { client.statusCode shouldBe 0 }
        atServer!!.statusCode shouldBe 0

        val other = ServerSocket(0).use { it.localPort }
        var refusing: CliktCommandTestResult? = null
        val server2 = Thread.ofPlatform().start {
            refusing = run(parameterized.path, "--listen", other.toString(), "-d", SOFT0, "--timeout", "5s", "--token", "t0ken-one")
        }
        val wrong = runWith(mapOf(ScenarioCommand.TOKEN_ENV to "t0ken-two"), parameterized.path, "--peer", "127.0.0.1:$other", "-d", SOFT0, "--timeout", "20s")
        server2.join()
        wrong.statusCode shouldBe 1
        errors(wrong) shouldBe "rdma-run params.main.kts: the server at 127.0.0.1:$other refused the connection: " +
            "the tokens differ: give both sides the same --token or RDMA_RUN_TOKEN"
        refusing!!.statusCode shouldBe 1
        refusing!!.stderr shouldContain "closed 1 stray connection that did not complete the hello (the last: the tokens differ"
        for (r in listOf(client, atServer!!, wrong, refusing!!)) {
            (r.stdout + r.stderr) shouldNotContain "t0ken"
        }
    }

    // The launcher on the software provider: every sample, both peers in this JVM, data checked by the
    // samples; a run of ranks (rdmaRanks) is 2 ranks here, rank 0 the server.
    for (sample in samples) {
        val ranks = "rdmaRanks" in sample.readText()
        test("${sample.name} --loopback on soft0: both sides succeed and report their traffic") {
            val json = File(dir, sample.name + ".json")
            val result = run(sample.path, "--loopback", "-d", SOFT0, "--json", json.path)
            withClue(sample.name, result) {
                result.statusCode shouldBe 0
                result.stdout shouldContain "loopback on soft0: server and client succeeded"
                result.stdout shouldContain if (ranks) "rank 0 with rank 1 on soft0" else "server on soft0"
                result.stdout shouldContain if (ranks) "rank 1 with rank 0 on soft0" else "client on soft0"
                json.readText() shouldContain "\"device\": \"soft0\""
            }
        }
    }
})

private inline fun withClue(what: String, result: CliktCommandTestResult, body: () -> Unit) =
    io.kotest.assertions.withClue("$what\nstdout: ${result.stdout}\nstderr: ${result.stderr}") { body() }
