package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.test
import dev.rdmarun.runtime.DeviceList
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.shouldBe
import io.kotest.matchers.shouldNotBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import io.kotest.matchers.string.shouldStartWith

/**
 * What the commands say on a host without RDMA (like the build hosts: the kernel has no RDMA
 * support, ibv_get_device_list fails with errno 38): only the software device soft0 is there. On a
 * host with RDMA devices these are skipped: the Soft-RoCE e2e suite covers that case.
 */
class CommandsWithoutRdmaSpec : FunSpec({
    // What this host lacks, and the words the one-line explanation must contain.
    val expected: String? = DeviceList.open().use { list ->
        if (list.kernelDevices().isNotEmpty()) null
        else list.unavailable().firstOrNull()?.let { if (it.errno() == 38) "this kernel has no RDMA support" else it.message }
            ?: "No RDMA devices found"
    }
    val noRdma = expected != null

    fun run(args: String) = rdmaRun().test(args)

    test("--version names the build, the control protocol both peers must share, and the JDK") {
        val result = run("--version")
        result.statusCode shouldBe 0
        result.stdout.trim() shouldBe "rdma-run $VERSION (control protocol ${dev.rdmarun.dsl.CONTROL_PROTOCOL_VERSION}; Java ${Runtime.version()})"
    }

    test("'devices' lists soft0 as software emulation, says in one line why there is no RDMA device, and exits 1").config(enabled = noRdma) {
        val result = run("devices")
        result.statusCode shouldBe 1
        result.stdout.lines().filter { it.contains("soft0") }.single() shouldContain "software emulation"
        val lines = result.stderr.trimEnd().lines()
        lines shouldHaveSize 1
        lines[0] shouldStartWith "rdma-run devices: No RDMA devices found: "
        lines[0] shouldContain expected!!
        result.stderr shouldNotContain "\tat "
    }

    test("'gids' shows the software device's GIDs and says why that is all").config(enabled = noRdma) {
        val result = run("gids")
        result.statusCode shouldBe 0
        result.stdout shouldContain "soft0\t1\t0\t"
        result.stdout shouldContain "RoCE v2"
        result.stderr.trimEnd().lines().single() shouldContain expected!!
    }

    for (command in listOf("gids -d rxe0", "pingpong -d rxe0 -g 1 -n 5 127.0.0.1")) {
        test("'$command' names the missing device and why in one line on stderr, and exits 1").config(enabled = noRdma) {
            val result = run(command)
            result.statusCode shouldBe 1
            result.stdout shouldBe ""
            val lines = result.stderr.trimEnd().lines()
            lines shouldHaveSize 1
            lines[0] shouldStartWith "rdma-run ${command.substringBefore(' ')}: no RDMA device named 'rxe0'"
            lines[0] shouldContain "soft0, rdma-run's software provider (-d soft0 runs there)"
            lines[0] shouldContain expected!!
            result.stderr shouldNotContain "\tat "
        }
    }

    test("--debug adds the stack trace").config(enabled = noRdma) {
        val result = run("--debug gids -d rxe0")
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
