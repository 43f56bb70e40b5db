// pingpong-lat: send/receive ping-pong latency on one RC QP, like ib_send_lat. The client sends
// `size` bytes, the server answers with as many, `iterations` times; each side waits only for the
// peer's message (sends are inline when they fit and selectively signaled, as perftest does).
// `repeat { }` first runs warm-up rounds of the same exchange until the JIT is quiet (both sides
// agree on the rounds; the results' `warm-up` line says what was done), so the figures are the
// network's, not the JVM's warm-up. The client's perftest latency block gives rtt one way (half the
// round trip, measureRoundTrip, as ib_send_lat), its `rtt RTT` line after the block the round trip.
//
//   server: bin/rdma-run samples/pingpong-lat.main.kts --listen 18515 -d rxe0 -s 64 -n 20000
//   client: bin/rdma-run samples/pingpong-lat.main.kts --peer 10.77.0.1 -d rxe0 -s 64 -n 20000
//   both in one JVM: bin/rdma-run samples/pingpong-lat.main.kts --loopback
//   parameters: -s/--set size=BYTES (64) -n/--set iterations=N (1000)
//               --set warmup=auto|0|N (auto: until the JIT is quiet; 0: none, the cold figure)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

rdma {
    val size = sizeParam("size", 64) // bytes of each message, both ways
    bufferSize(maxOf(size, 1))
    inlineThreshold(minOf(size, 64))
    signalEvery(16)
    connect(peer)

    qp(0) {
        if (isClient) {
            repeat { // `iterations` exchanges, after the warm-up's
                measureRoundTrip("rtt") {
                    send(size)
                    receive(copyPayload = false) // perftest never reads the data either
                }
            }
        } else {
            repeat {
                receive(copyPayload = false)
                send(size)
            }
        }
    }
}
