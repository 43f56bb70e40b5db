package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.CliktCommandTestResult
import com.github.ajalt.clikt.testing.test
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldBeEmpty
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import io.kotest.matchers.string.shouldMatch
import java.net.ServerSocket
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit

/**
 * `rdma-run pingpong` server and client on soft0, both in this JVM (each command opens its own
 * context, so their QPs are as separate as in two processes), for what the pre-flight warm-up
 * changes: one line on stderr and nothing on stdout or in the exchange.
 */
class PingpongCommandSpec : FunSpec({
    fun freePort() = ServerSocket(0).use { it.localPort }

    /** Server and client with the same options; the results once both ended. */
    fun pair(vararg options: String): Pair<CliktCommandTestResult, CliktCommandTestResult> {
        val port = freePort().toString()
        val common = listOf("pingpong", "-d", "soft0", "-p", port, "-s", "64", "-n", "200", "--peer-timeout", "60") + options
        val server = CompletableFuture<CliktCommandTestResult>()
        Thread.ofPlatform().name("pingpong-server").start { server.complete(rdmaRun().test(common)) }
        val client = rdmaRun().test(common + "127.0.0.1") // retries until the server listens
        return server.get(120, TimeUnit.SECONDS) to client
    }

    /** Server and client with their own options (after the port), no pre-flight; the results once both ended. */
    fun mismatched(server: List<String>, client: List<String>): Pair<CliktCommandTestResult, CliktCommandTestResult> {
        val port = freePort().toString()
        fun args(own: List<String>) = listOf("pingpong", "-d", "soft0", "-p", port, "--no-preflight", "--peer-timeout", "3") + own
        val done = CompletableFuture<CliktCommandTestResult>()
        Thread.ofPlatform().name("pingpong-server").start { done.complete(rdmaRun().test(args(server))) }
        val c = rdmaRun().test(args(client) + "127.0.0.1")
        return done.get(120, TimeUnit.SECONDS) to c
    }

    test("--peer-timeout takes a duration as --timeout does (500ms), or whole seconds: a client without a server gives up after it, before any pre-flight") {
        val port = freePort().toString()
        val r = rdmaRun().test(listOf("pingpong", "-d", "soft0", "-p", port, "--peer-timeout", "500ms", "127.0.0.1"))
        withClue(r.stderr) {
            r.statusCode shouldBe 1
            r.stderr shouldContain "cannot connect to 127.0.0.1 port $port: Connection refused for 500ms (--peer-timeout)"
            r.stderr shouldNotContain "pre-flight"
        }
    }

    test("a peer with another -s names the flags (the exchange cannot carry them); a peer that ends first is named as stopped") {
        val (server, client) = mismatched(listOf("-s", "64", "-n", "200"), listOf("-s", "128", "-n", "200"))
        withClue("server: ${server.stderr}\nclient: ${client.stderr}") {
            for (side in listOf(server, client)) {
                side.statusCode shouldBe 1
                side.stderr shouldContain PingpongSetup.FLAGS_HINT
            }
            server.stderr shouldContain "this side sends and receives 64 bytes"
            client.stderr shouldContain "this side sends and receives 128 bytes"
        }
        val (fewer, more) = mismatched(listOf("-s", "64", "-n", "100"), listOf("-s", "64", "-n", "200"))
        withClue("server: ${fewer.stderr}\nclient: ${more.stderr}") {
            fewer.statusCode shouldBe 0
            more.statusCode shouldBe 1
            // The server ended after its 100, as an interrupted one would: the client says the peer
            // stopped, whether its last send found no ACK (soft0 saw the peer's context close) or
            // nothing completed for --peer-timeout.
            more.stderr shouldContain PingpongSetup.STOPPED_HINT
        }
    }

    test("--timeout bounds the whole run while completions keep coming, and says the exchange was still running") {
        // 10^8 exchanges take hours: only the server's 2 s can end this run.
        val (server, client) = mismatched(listOf("-n", "100000000", "--timeout", "2s"), listOf("-n", "100000000"))
        withClue("server: ${server.stderr}\nclient: ${client.stderr}") {
            server.statusCode shouldBe 1
            server.stderr shouldContain "--timeout (2s) reached while ping-ponging ("
            server.stderr shouldContain PingpongSetup.RUN_TOO_LONG_HINT
            client.statusCode shouldBe 1 // its peer stopped
        }
    }

    test("a --timeout too short for a pre-flight skips it in one sentence, and the run ends at the timeout") {
        val r = rdmaRun().test(listOf("pingpong", "-d", "soft0", "-p", freePort().toString(), "--timeout", "1ms"))
        withClue(r.stderr) {
            r.statusCode shouldBe 1
            r.stderr shouldContain "pre-flight warm-up skipped: --timeout (1ms) leaves no time for it; the measured exchanges start cold"
            r.stderr shouldContain "--timeout (1ms) reached while waiting for a client"
        }
    }

    test("-s takes a size as a scenario's -s does (1K is 1024 bytes), and refuses a word that is none in one sentence") {
        val (server, client) = mismatched(listOf("-s", "1K", "-n", "100"), listOf("-s", "1024", "-n", "100"))
        withClue("server: ${server.stderr}\nclient: ${client.stderr}") {
            server.statusCode shouldBe 0
            client.statusCode shouldBe 0
            server.stdout shouldContain "204800 bytes in " // 100 exchanges of 1024 bytes each way
        }
        val bad = rdmaRun().test(listOf("pingpong", "-d", "soft0", "-s", "4X", "127.0.0.1"))
        bad.statusCode shouldBe 1
        bad.stderr shouldContain "'4X' is not a size like 4096, 4K or 1M"
        // A size out of range is one, and the sentence gives the range.
        for (size in listOf("5G", "0")) {
            val out = rdmaRun().test(listOf("pingpong", "-d", "soft0", "-s", size, "127.0.0.1"))
            out.statusCode shouldBe 1
            out.stderr shouldContain "'$size' is outside 1 byte to 2147483647 bytes (2G - 1)"
        }
    }

    test("-r and -s beyond the device's limits are one sentence naming the flag, before anything is made or waited for") {
        // They were the verbs' errno sentence of ibv_create_qp or ibv_post_recv, which named no flag.
        val deep = rdmaRun().test(listOf("pingpong", "-d", "soft0", "-p", freePort().toString(), "-r", "100000"))
        deep.statusCode shouldBe 1
        deep.stderr shouldContain "-r 100000 (--rx-depth) is more than soft0's max_qp_wr 16384"
        val big = rdmaRun().test(listOf("pingpong", "-d", "soft0", "-p", freePort().toString(), "-s", "16777217"))
        big.statusCode shouldBe 1
        big.stderr shouldContain "-s 16777217 (--size) is more than max_msg_sz 16777216 of soft0 port 1"
    }

    /** ibv_rc_pingpong's four stdout lines; returns (local, remote) addresses. */
    fun checkStdout(result: CliktCommandTestResult): Pair<String, String> {
        val lines = result.stdout.trimEnd('\n').lines()
        lines shouldHaveSize 4
        lines[0] shouldMatch Regex("  local address:  LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID .+")
        lines[1] shouldMatch Regex("  remote address: LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID .+")
        lines[2] shouldMatch Regex("25600 bytes in \\d+\\.\\d\\d seconds = \\d+\\.\\d\\d Mbit/sec")
        lines[3] shouldMatch Regex("200 iters in \\d+\\.\\d\\d seconds = \\d+\\.\\d\\d usec/iter")
        return lines[0].substringAfter(":").trim() to lines[1].substringAfter(":").trim()
    }

    fun preflightLines(result: CliktCommandTestResult) = result.stderr.lines().filter { "pre-flight" in it }

    test("the pre-flight warm-up runs by default, says so in one stderr line, and leaves stdout and the exchange as they were") {
        val (server, client) = pair()
        withClue("server: ${server.stderr}\nclient: ${client.stderr}") {
            server.statusCode shouldBe 0
            client.statusCode shouldBe 0
            for (side in listOf(server, client)) {
                val lines = preflightLines(side)
                lines shouldHaveSize 1
                lines[0] shouldMatch Regex("rdma-run pingpong: pre-flight warm-up: \\d+ rounds? of 1000 local exchanges in \\d+\\.\\d s, .+ \\(not counted\\)")
            }
            // Each side's remote address is the other's local one: the exchange carried the real QPs.
            val (serverLocal, serverRemote) = checkStdout(server)
            val (clientLocal, clientRemote) = checkStdout(client)
            serverRemote shouldBe clientLocal
            clientRemote shouldBe serverLocal
        }
    }

    test("--no-preflight runs no warm-up and says nothing about it") {
        val (server, client) = pair("--no-preflight")
        withClue("server: ${server.stderr}\nclient: ${client.stderr}") {
            server.statusCode shouldBe 0
            client.statusCode shouldBe 0
            preflightLines(server).shouldBeEmpty()
            preflightLines(client).shouldBeEmpty()
            checkStdout(server)
            checkStdout(client)
        }
    }

    /** The soft0 setup the command makes without options (-s 64), and the objects each [create] made. */
    fun <T> withSetup(block: (PingpongSetup, MutableList<PingpongQp>) -> T): T = dev.rdmarun.runtime.Context.open("soft0").use { ctx ->
        val gidx = ctx.defaultGid(1).index()
        val port = ctx.queryPort(1)
        block(PingpongSetup(ctx, 1, gidx, ctx.gid(1, gidx).gid(), port.lid(), port.activeMtu(), 0, 64, 500), mutableListOf())
    }

    fun PingpongQp.allClosed() = listOf(qp, cq, mr, pd).all { it.isClosed }

    test("the warm-up releases its QPs, CQs, MRs and PDs, and never touches the real QP") {
        withSetup { setup, made ->
            Resources().use { real ->
                val q = setup.create(real)
                val said = mutableListOf<String>()
                Interruption().use { interruption ->
                    PingpongPreflight(setup, interruption, Limits(60_000, null), { said += it }) { r -> setup.create(r).also { made += it } }.run()
                }
                said shouldHaveSize 1
                said[0] shouldMatch Regex("pre-flight warm-up: \\d+ rounds? of 1000 local exchanges .+")
                made shouldHaveSize 2
                made.all { it.allClosed() } shouldBe true
                q.allClosed() shouldBe false
                q.qp.queryState() shouldBe dev.rdmarun.runtime.QpState.INIT // not connected, nothing posted but its receives
            }
        }
    }

    test("a warm-up that cannot connect is skipped in one sentence, and what it made is released") {
        withSetup { setup, made ->
            val said = mutableListOf<String>()
            var calls = 0
            Interruption().use { interruption ->
                PingpongPreflight(setup, interruption, Limits(60_000, null), { said += it }) { r ->
                    if (++calls == 2) throw dev.rdmarun.runtime.VerbsException("no second QP here", "a hint")
                    setup.create(r).also { made += it }
                }.run()
            }
            said shouldHaveSize 1
            said[0] shouldMatch Regex("pre-flight warm-up skipped: soft0 port 1 cannot connect two of its own QPs \\(no second QP here.*\\); .+")
            made shouldHaveSize 1
            made.single().allClosed() shouldBe true
        }
    }

    test("Ctrl-C during the warm-up: 'interrupted', and what it made is released") {
        withSetup { setup, made ->
            Interruption().use { interruption ->
                val failure = runCatching {
                    PingpongPreflight(setup, interruption, Limits(60_000, null), {}) { r ->
                        setup.create(r).also { made += it; if (made.size == 2) interruption.requestStop() }
                    }.run()
                }.exceptionOrNull()
                (failure as CommandFailure).exitCode shouldBe 130
            }
            made shouldHaveSize 2
            made.all { it.allClosed() } shouldBe true
        }
    }
})
