// pingpong-lat: send/receive ping-pong latency on one RC QP, like ib_send_lat. The client sends
// `size` bytes, the server answers with as many, `iterations` times after `warmup` unmeasured
// rounds; each side waits only for the peer's message (sends are inline when they fit and
// selectively signaled, as perftest does). The client's `rtt one way` line gives perftest's
// figures (half the round trip, measureRoundTrip), the `rtt RTT` line the round trip.
//
//   server: bin/rdma-run samples/pingpong-lat.main.kts --listen 18515 -d rxe0
//   client: bin/rdma-run samples/pingpong-lat.main.kts --peer 10.77.0.1 -d rxe0
//   both in one JVM: bin/rdma-run samples/pingpong-lat.main.kts --loopback
//   parameters: --set size=BYTES (64) --set iterations=N (500) --set warmup=N (50)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

rdma {
    val size = intParam("size", 64)
    val iterations = intParam("iterations", 500)
    val warmup = intParam("warmup", 50)
    bufferSize(maxOf(size, 1))
    inlineThreshold(minOf(size, 64))
    signalEvery(16)
    connect(peer)

    qp(0) {
        repeat(warmup) {
            if (isClient) {
                send(size)
                receive(copyPayload = false)
            } else {
                receive(copyPayload = false)
                send(size)
            }
        }
        measureFromHere() // the warm-up's sends and messages are in no figure: #iterations is `iterations`
        repeat(iterations) {
            if (isClient) {
                measureRoundTrip("rtt") {
                    send(size)
                    receive(copyPayload = false)
                }
            } else {
                receive(copyPayload = false)
                send(size)
            }
        }
    }
}
