// bw: bandwidth by perftest's method, for bench/perftest-compare.sh (against ib_send_bw,
// ib_write_bw, ib_read_bw, ib_atomic_bw with the same size, QPs, depth and iterations). On
// every QP the client keeps `depth` work requests in flight (a post waits only for room in the
// send queue), signals one in `signal` (perftest's cq_mod) and posts `iterations` of them; the
// server only re-posts its receives (its block is empty, so every arrival is counted and its
// receive posted again at once). Timed from the first post to the last completion, all QPs
// together, after a warm-up of `warmup` work requests per QP that is not counted. One line:
//   rdma-run-bench bw op=write size=65536 qps=1 iterations=5000 steady_MBps=<MB/s, 10^6 bytes> cold_MBps=<warm-up's>
//   parameters: --set op=send|write|read|atomic --set size=BYTES (65536; atomic: 8) --set qps=N (1)
//               --set depth=N (128) --set signal=N (100) --set iterations=N per QP (5000) --set warmup=N (iterations)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

rdma {
    val op = param("op", "write")
    if (op !in setOf("send", "write", "read", "atomic")) throw ScenarioException("op must be send, write, read or atomic, not '$op'")
    val size = if (op == "atomic") 8 else intParam("size", 65536)
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
    suspend fun timed(n: Int): Long {
        val t0 = System.nanoTime()
        client { forEachQp { repeat(n) { post() }; awaitAll() } }
        return System.nanoTime() - t0
    }
    val cold = timed(warmup)
    val steady = timed(iterations)
    if (isClient) {
        fun mbps(n: Int, nanos: Long) = n.toDouble() * qpCount * size * 1000.0 / nanos
        println("rdma-run-bench bw op=$op size=$size qps=$qpCount iterations=$iterations " +
            "steady_MBps=%.2f cold_MBps=%.2f".format(mbps(iterations, steady), mbps(warmup, cold)))
    }
}
