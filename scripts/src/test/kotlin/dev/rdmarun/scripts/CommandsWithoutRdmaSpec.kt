package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.test
import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.runtime.VerbsException
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.shouldBe
import io.kotest.matchers.shouldNotBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import io.kotest.matchers.string.shouldStartWith

/**
 * What the commands say on a host without RDMA (like the build hosts: the kernel has no RDMA
 * support, ibv_get_device_list fails with errno 38). On a host with RDMA devices these are skipped:
 * the Soft-RoCE e2e suite covers that case.
 */
class CommandsWithoutRdmaSpec : FunSpec({
    // What this host lacks, and the words the one-line error must contain.
    val expected: String? = try {
        DeviceList.open().use { if (it.devices().isEmpty()) "No RDMA devices found" else null }
    } catch (e: VerbsException) {
        if (e.errno() == 38) "this kernel has no RDMA support" else e.message
    } catch (e: UnsatisfiedLinkError) {
        "libibverbs"
    }
    val noRdma = expected != null

    fun run(args: String) = rdmaRun().test(args)

    for (command in listOf("devices", "gids", "gids -d rxe0", "pingpong", "pingpong -d rxe0 -g 1 -n 5 127.0.0.1")) {
        test("'$command' says in one line on stderr that there is no RDMA, and exits 1").config(enabled = noRdma) {
            val result = run(command)
            result.statusCode shouldBe 1
            result.stdout shouldBe ""
            val lines = result.stderr.trimEnd().lines()
            lines shouldHaveSize 1
            lines[0] shouldStartWith "rdma-run ${command.substringBefore(' ')}: "
            lines[0] shouldContain expected!!
            result.stderr shouldNotContain "\tat "
        }
    }

    test("--debug adds the stack trace").config(enabled = noRdma) {
        val result = run("--debug devices")
        result.statusCode shouldBe 1
        result.stderr.lines()[0] shouldContain expected!!
        result.stderr shouldContain "\tat dev.rdmarun."
    }

    test("bad pingpong options are usage errors, before any device is touched") {
        for (args in listOf("pingpong -s 0", "pingpong -n 0", "pingpong -m 1000", "pingpong -g 256", "pingpong -p 70000",
                            "pingpong -i 0", "pingpong --peer-timeout 0", "pingpong a b")) {
            val result = run(args)
            result.statusCode shouldNotBe 0
            result.stderr shouldContain "Error"
            result.stderr shouldNotContain "RDMA"
        }
    }

    test("bare rdma-run lists the commands") {
        val result = run("")
        result.output shouldContain "devices"
        result.output shouldContain "gids"
        result.output shouldContain "pingpong"
        result.output shouldContain "--debug"
    }

    test("pingpong prints ibv_rc_pingpong's result lines") {
        PingpongCommand.results(4096, 1000, 2_500_000_000L) shouldBe listOf(
            "8192000 bytes in 2.50 seconds = 26.21 Mbit/sec",
            "1000 iters in 2.50 seconds = 2500.00 usec/iter",
        )
    }
})
