// self-bw: RDMA WRITE bandwidth as a new user writes it from the README, timing it with
// System.nanoTime() instead of the DSL's figures (bench/perftest-compare.sh's user_self_bw,
// against ib_write_bw -s 65536 -n 5000 -t 16). Nothing tuned: default settings (every write
// signaled), Kotlin's repeat(n) loops. The client keeps 16 writes of 64 KiB in flight (write,
// then awaitCompletion once 16 are outstanding), 1,000 as a warm-up, then 5,000 timed from the
// first post to the last completion; it prints its rate in perftest's unit, MB/sec = 2^20 bytes
// per second (ib_write_bw's BW average; its --help: "MiB=2^20 byte"), in one line:
//   rdma-run-bench self-bw size=65536 depth=16 warmup=1000 iterations=5000 MiBps=<2^20 bytes/s>
//
//   server: bin/rdma-run bench/scenarios/self-bw.main.kts --listen 18515 -d rxe0
//   client: bin/rdma-run bench/scenarios/self-bw.main.kts --peer 10.77.0.1 -d rxe0
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

val size = 65_536
val depth = 16
val warmup = 1_000
val iterations = 5_000

rdma {
    bufferSize(size)
    if (isServer) remoteAccess(RemoteAccess.WRITE) // the client writes into the server's buffer
    connect(peer)

    qp(0) {
        if (isClient) {
            repeat(warmup) {
                write()
                if (outstanding >= depth) awaitCompletion()
            }
            awaitAll()
            val t0 = System.nanoTime()
            repeat(iterations) {
                write()
                if (outstanding >= depth) awaitCompletion()
            }
            awaitAll()
            val seconds = (System.nanoTime() - t0) / 1e9
            val mibPerSecond = iterations.toDouble() * size / seconds / (1 shl 20)
            println("rdma-run-bench self-bw size=$size depth=$depth warmup=$warmup iterations=$iterations MiBps=%.2f"
                .format(java.util.Locale.ROOT, mibPerSecond))
        }
    }
}
