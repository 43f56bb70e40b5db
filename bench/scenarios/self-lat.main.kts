// self-lat: send/receive ping-pong latency as a new user writes it from the README, timing it
// with System.nanoTime() instead of the DSL's figures (bench/perftest-compare.sh's user_self_lat,
// against ib_send_lat -s 64 -n 20000). Nothing tuned: default settings (no inline sends, every
// send signaled), receive() copies each message, Kotlin's repeat(n) loops. The client sends 64 B
// and waits for the server's 64 B, 5,000 times as a warm-up, then 20,000 times, each round trip
// timed; it prints its median one way (round trip / 2, perftest's t_typical) in one line:
//   rdma-run-bench self-lat size=64 warmup=5000 iterations=20000 one_way_us=<median, µs>
//
//   server: bin/rdma-run bench/scenarios/self-lat.main.kts --listen 18515 -d rxe0
//   client: bin/rdma-run bench/scenarios/self-lat.main.kts --peer 10.77.0.1 -d rxe0
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

val size = 64
val warmup = 5_000
val iterations = 20_000

rdma {
    bufferSize(size)
    connect(peer)

    qp(0) {
        if (isClient) {
            repeat(warmup) {
                send()
                receive()
            }
            val nanos = LongArray(iterations)
            repeat(iterations) { i ->
                val t0 = System.nanoTime()
                send()
                receive()
                nanos[i] = System.nanoTime() - t0
            }
            nanos.sort()
            val oneWayUs = nanos[iterations / 2] / 2000.0 // half the median round trip, in µs
            println("rdma-run-bench self-lat size=$size warmup=$warmup iterations=$iterations one_way_us=%.2f"
                .format(java.util.Locale.ROOT, oneWayUs))
        } else {
            repeat(warmup + iterations) {
                receive()
                send()
            }
        }
    }
}
