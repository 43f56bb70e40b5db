package dev.rdmarun.samples

import dev.rdmarun.dsl.CompletionMode
import dev.rdmarun.dsl.Peer
import dev.rdmarun.dsl.RdmaOptions
import dev.rdmarun.dsl.RemoteAccess
import dev.rdmarun.dsl.ScenarioScope
import dev.rdmarun.dsl.SettingsOverrides
import dev.rdmarun.dsl.describeFailure
import dev.rdmarun.dsl.rdma
import kotlin.system.exitProcess
import kotlin.time.Duration.Companion.seconds

/**
 * A multi-QP workload from a plain JVM application, no script: the DSL's `rdma { }` on both peers.
 *
 * ```
 * server: MultiQpAppKt --listen 18600 -d rxe0
 * client: MultiQpAppKt --connect 10.77.0.1:18600 -d rxe0
 * ```
 *
 * 1. the seeds' scenario: N QPs on one shared CQ, receives posted on every QP first (the DSL does
 *    that before the handshake), one message per QP each way, each checked on arrival;
 * 2. write bandwidth: the client RDMA-writes `-n` buffers per QP, 16 in flight per QP;
 * 3. ping-pong latency on QP 0 (the client measures the round trip).
 *
 * Exit status: 0 when the run and every check passed, 1 on a failure, 2 on a usage error.
 */
private class Options(
    val peer: Peer,
    val device: String?,
    val gidIndex: Int?,
    val qps: Int,
    val iterations: Int,
    val size: Int,
    val pingpongs: Int,
    val mode: CompletionMode,
    val timeoutSeconds: Int,
)

private const val USAGE = """usage: MultiQpApp (--listen PORT | --connect HOST:PORT) [-d DEV] [-g GIDX] [-q NQP] [-n ITERS] [-s SIZE] [-p PINGPONGS] [--mode busy|backoff|event] [-t SECONDS]"""

private fun parse(args: Array<String>): Options {
    var peer: Peer? = null
    var device: String? = null
    var gid: Int? = null
    var qps = 4
    var iterations = 1000
    var size = 4096
    var pingpongs = 200
    var mode = CompletionMode.BUSY
    var timeout = 30
    var i = 0
    fun value(): String = args.getOrNull(++i) ?: throw IllegalArgumentException("${args[i - 1]} needs a value")
    fun number(): Int = value().let { it.toIntOrNull() ?: throw IllegalArgumentException("${args[i - 1]} needs a number, not '$it'") }
    while (i < args.size) {
        when (val a = args[i]) {
            "--listen", "-l" -> peer = Peer.listen(number())
            "--connect", "-c" -> peer = Peer.parse(value())
            "-d", "--device" -> device = value()
            "-g", "--gid-index" -> gid = number()
            "-q", "--qps" -> qps = number()
            "-n", "--iterations" -> iterations = number()
            "-s", "--size" -> size = number()
            "-p", "--pingpongs" -> pingpongs = number()
            "-t", "--timeout" -> timeout = number()
            "--mode" -> mode = CompletionMode.valueOf(value().uppercase())
            else -> throw IllegalArgumentException("unknown option $a")
        }
        i++
    }
    return Options(peer ?: throw IllegalArgumentException("give --listen PORT or --connect HOST:PORT"),
        device, gid, qps, iterations, size, pingpongs, mode, timeout)
}

/** The scenario; both peers run this same block, branches pick the role. */
private fun scenario(o: Options, problems: MutableList<String>, verified: IntArray): suspend ScenarioScope.() -> Unit = {
    qps(o.qps)
    sharedCq()
    bufferSize(o.size)
    completionMode(o.mode)
    timeout(o.timeoutSeconds.seconds)
    remoteAccess(RemoteAccess.WRITE) // the client writes into the server's buffers (step 2)
    connect(o.peer)
    println("multi-qp-app: connected to the peer, ${o.qps} QPs in RTS")

    // 1. one message per QP each way
    forEachQp {
        var from = ""
        server {
            send("hello from server on QP $index".toByteArray())
            from = "client"
        }
        client {
            send("hello from client on QP $index".toByteArray())
            from = "server"
        }
        val message = receive()
        val expected = "hello from $from on QP $index"
        if (message.text() == expected) verified[0]++ else problems.add("QP $index received '${message.text()}', expected '$expected'")
    }
    barrier()

    // 2. write bandwidth, pipelined: at most 16 writes in flight per QP
    client {
        forEachQp {
            repeat(o.iterations) {
                write()
                if (outstanding >= 16) awaitCompletion()
            }
            awaitAll()
        }
    }
    barrier()

    // 3. ping-pong on QP 0
    qp(0) {
        repeat(o.pingpongs) {
            client { measure("pingpong rtt") { send(size = 64); receive() } }
            server { receive(); send(size = 64) }
        }
    }
}

fun main(args: Array<String>) {
    val o = try {
        parse(args)
    } catch (e: IllegalArgumentException) {
        System.err.println("multi-qp-app: ${e.message}\n$USAGE")
        exitProcess(2)
    }
    val side = o.peer.role.label
    val options = RdmaOptions(
        overrides = SettingsOverrides(device = o.device, gidIndex = o.gidIndex),
        onPlan = { println(it.describe()) }, // validated, before any device is opened
    )
    val problems = mutableListOf<String>()
    val verified = IntArray(1)
    val block = scenario(o, problems, verified)
    val status = try {
        val result = rdma(options, block)
        println(result.table())
        if (verified[0] == o.qps && problems.isEmpty()) {
            println("multi-qp-app $side: PASS: ${o.qps} QPs, one message each way verified on every QP, " +
                "${result.total.operations} work requests, ${result.total.messagesReceived} messages received")
            0
        } else {
            problems.forEach { println("multi-qp-app $side: error: $it") }
            println("multi-qp-app $side: FAIL: ${verified[0]} of ${o.qps} QPs verified")
            1
        }
    } catch (e: Exception) {
        System.err.println("multi-qp-app $side: FAIL: ${describeFailure(e)}")
        if (System.getenv("RDMA_RUN_DEBUG") != null) e.printStackTrace()
        1
    }
    exitProcess(status)
}
