// bw: bandwidth by perftest's method, for bench/perftest-compare.sh (against ib_send_bw,
// ib_write_bw, ib_read_bw, ib_atomic_bw with the same size, QPs, depth and iterations). On
// every QP the client keeps `depth` work requests in flight (a post waits only for room in the
// send queue), signals one in `signal` (perftest's cq_mod) and posts `iterations` of them; the
// server only re-posts its receives (its block is empty, so every arrival is counted and its
// receive posted again at once). Timed from the first post to the last completion, all QPs
// together, after a warm-up that is not counted: rounds of the measured round, `warmup` work
// requests per QP at least, then until the JIT has been quiet for a while (see below). One line:
//   rdma-run-bench bw op=write size=65536 qps=1 iterations=5000 warmup_rounds=<rounds run before>
//                  steady_MBps=<MB/s, 10^6 bytes> cold_MBps=<the first round's>
//   parameters: --set op=send|write|read|atomic --set size=BYTES (65536; atomic: 8) --set qps=N (1)
//               --set depth=N (128) --set signal=N (100) --set iterations=N per QP (5000) --set warmup=N (iterations)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

rdma {
    val op = param("op", "write")
    if (op !in setOf("send", "write", "read", "atomic")) throw ScenarioException("op must be send, write, read or atomic, not '$op'")
    val size = if (op == "atomic") 8 else sizeParam("size", 65536)
    val depth = maxOf(intParam("depth", 128), 1)
    val iterations = intParam("iterations", 5000)
    val warmup = intParam("warmup", iterations)
    qps(intParam("qps", 1))
    bufferSize(size)
    sendDepth(depth)
    recvDepth(maxOf(depth, 512)) // perftest's rx_depth
    signalEvery(intParam("signal", 100).coerceIn(1, depth))
    if (op == "send") inlineThreshold(0)
    if (isServer) when (op) {
        "write" -> remoteAccess(RemoteAccess.WRITE)
        "read" -> remoteAccess(RemoteAccess.READ)
        "atomic" -> remoteAccess(RemoteAccess.ATOMIC)
    }
    connect(peer)

    suspend fun QpScope.post() {
        when (op) {
            "send" -> send(size)
            "write" -> write(size)
            "read" -> read(size)
            else -> fetchAndAdd(1)
        }
    }
    /** Runs [n] work requests on every QP, all in flight together; returns the nanoseconds. */
    suspend fun ScenarioScope.timed(n: Int): Long {
        val t0 = System.nanoTime()
        forEachQp { repeat(n) { post() }; awaitAll() }
        return System.nanoTime() - t0
    }
    // The warm-up runs the measured round itself, round after round, so that the measured round
    // runs only code the JIT has compiled, its start and end included (a path first taken there is
    // an uncommon trap, and a recompilation, inside the window). It lasts at least `warmup` work
    // requests per QP, then until no compilation has ended for two rounds and 0.5 s (30 s from the
    // start at most): the compiler threads share the core with the poller, and under emulation one
    // C2 compilation takes up to seconds of it.
    client {
        val jit = java.lang.management.ManagementFactory.getCompilationMXBean()
        fun compiledSoFar() = if (jit.isCompilationTimeMonitoringSupported) jit.totalCompilationTime else 0L
        val cold = timed(iterations)
        var done = iterations.toLong()
        var rounds = 1
        var quietRounds = 0
        val giveUpAt = System.nanoTime() + 30_000_000_000L
        var compiled = compiledSoFar()
        var compiledAt = System.nanoTime()
        while (true) {
            timed(iterations)
            done += iterations
            rounds++
            // Quiet: no compilation ended in the last two rounds, nor in the last 0.5 s (a round can be
            // shorter than one compilation, and the total grows only when one ends).
            val now = System.nanoTime()
            if (compiledSoFar() != compiled) {
                compiled = compiledSoFar()
                compiledAt = now
                quietRounds = 0
            } else {
                quietRounds++
            }
            val quiet = quietRounds >= 2 && now - compiledAt >= 500_000_000L
            if (done >= warmup && (quiet || now - giveUpAt > 0)) break
        }
        val steady = timed(iterations)
        fun mbps(nanos: Long) = iterations.toDouble() * qpCount * size * 1000.0 / nanos
        println("rdma-run-bench bw op=$op size=$size qps=$qpCount iterations=$iterations warmup_rounds=$rounds " +
            "steady_MBps=%.2f cold_MBps=%.2f".format(mbps(steady), mbps(cold)))
    }
}
