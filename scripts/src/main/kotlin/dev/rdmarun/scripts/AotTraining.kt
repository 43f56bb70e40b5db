package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.parse
import java.net.ServerSocket
import kotlin.concurrent.thread

/**
 * The training run behind the build's AOT cache (scripts/pom.xml, dist/build.sh): what it runs is
 * what a real run finds pre-loaded, pre-linked and profiled. Not a command: the build starts it as
 * `java -cp rdma-run.jar dev.rdmarun.scripts.AotTraining TRAINING.main.kts` (the class path a
 * `-jar rdma-run.jar` run has), with `RDMA_RUN_TOKEN` set for the peers it pairs.
 *
 * 1. The training scenario in loopback on soft0 (every operation kind, the results, the data
 *    path until the JIT is quiet), as `rdma-run TRAINING.main.kts --loopback -d soft0`.
 * 2. The same scenario as two peers of this JVM, `--listen` and `--peer`: the control connection
 *    over TCP, its handshake and the fabric key, which a loopback run does not use.
 * 3. `rdma-run pingpong` on soft0, server and client.
 *
 * Why 2 and 3: code a real run meets for the first time after its pre-flight (classes loaded from
 * the jar, lambdas linked, between the exchange with the peer and the measured loop) set off C2
 * compilations of the JDK's class-file generator that, on a one-CPU peer, shared the CPU with the
 * whole measured loop: `rdma-run pingpong` took 2.4x ibv_rc_pingpong's time (BENCHMARKS.md).
 *
 * Any failure ends the JVM with a non-zero status, so the build fails rather than ship a cache
 * trained on less.
 */
internal object AotTraining {
    @JvmStatic
    fun main(args: Array<String>) {
        val script = args.singleOrNull() ?: error("usage: AotTraining TRAINING.main.kts")
        run(listOf(script, "--loopback", "-d", "soft0"))
        pair { port -> listOf(script, "--listen", "$port", "-d", "soft0") to listOf(script, "--peer", "127.0.0.1:$port", "-d", "soft0") }
        pair { port ->
            val common = listOf("pingpong", "-d", "soft0", "-s", "64", "-n", "20000", "-p", "$port")
            common to common + "127.0.0.1"
        }
    }

    /** One command line, as `rdma-run` takes it (a script first means `run`). */
    private fun run(args: List<String>) = rdmaRun().parse(withImplicitRun(args.toTypedArray()).toList())

    /** Runs a server (in a thread) and its client (here, which retries until the server listens) on a free port. */
    private fun pair(commands: (port: Int) -> Pair<List<String>, List<String>>) {
        val (server, client) = commands(ServerSocket(0).use { it.localPort })
        var serverFailure: Throwable? = null
        val serverThread = thread(name = "aot-training-server") {
            try {
                run(server)
            } catch (e: Throwable) {
                serverFailure = e
            }
        }
        run(client)
        serverThread.join()
        serverFailure?.let { throw it }
    }
}
