// atomics: RDMA fetch-and-add and compare-and-swap on the server's buffer, like ib_atomic_lat.
// On every QP the client adds 1 to a 64-bit word of the server `iterations` times (each old
// value must be the previous count), then swaps the count for 42 (the compare matches) and
// tries to swap 7 for a stale count (it must not); the server checks its word ends at 42.
// The `fetch-and-add` line gives the latency percentiles of one atomic round trip.
//
//   server: bin/rdma-run samples/atomics.main.kts --listen 18515 -d rxe0
//   client: bin/rdma-run samples/atomics.main.kts --peer 10.77.0.1 -d rxe0
//   both in one JVM: bin/rdma-run samples/atomics.main.kts --loopback
//   parameters: --set iterations=N (1000) --set qps=N (1)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*
import java.lang.foreign.ValueLayout.JAVA_LONG

rdma {
    val iterations = intParam("iterations", 1000)
    qps(intParam("qps", 1))
    bufferSize(64)
    connect(peer)

    forEachQp {
        server { if (!planning) buffer().set(JAVA_LONG, 0, 0L) }
    }
    barrier() // the server's words are 0
    client {
        forEachQp {
            repeat(iterations) { i ->
                val old = measure("fetch-and-add") { fetchAndAdd(1) }
                if (!planning && old != i.toLong()) throw ScenarioException("QP $index: fetch-and-add $i returned $old, expected $i")
            }
            val swapped = compareAndSwap(compare = iterations.toLong(), swap = 42)
            val stale = compareAndSwap(compare = iterations.toLong(), swap = 7)
            if (!planning && (swapped != iterations.toLong() || stale != 42L)) {
                throw ScenarioException("QP $index: compare-and-swap returned $swapped and $stale, expected $iterations and 42")
            }
        }
    }
    barrier() // the client's atomics are complete
    server {
        forEachQp {
            val word = buffer().get(JAVA_LONG, 0)
            if (!planning && word != 42L) throw ScenarioException("QP $index: the server's word is $word after the atomics, expected 42")
        }
    }
}
