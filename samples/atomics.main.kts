// atomics: RDMA fetch-and-add and compare-and-swap, like ib_atomic_lat. Every QP of the client
// adds 1 to ONE 64-bit word of the server (QP 0's buffer) `iterations` times, each add awaited and
// its old value checked to be new; then `iterations` more adds per QP with `inflight` of them in
// flight at once (each completion must still bring its own old value); then the server checks that
// its word is 2 x qps x iterations. The `fetch-and-add` line gives the latency percentiles of one
// atomic round trip.
//
//   server: bin/rdma-run samples/atomics.main.kts --listen 18515 -d rxe0
//   client: bin/rdma-run samples/atomics.main.kts --peer 10.77.0.1 -d rxe0
//   both in one JVM: bin/rdma-run samples/atomics.main.kts --loopback
//   parameters: --set iterations=N (1000) --set qps=N (4) --set inflight=N (4)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*
import java.lang.foreign.ValueLayout.JAVA_LONG

/** Adds [old] to the values QP [qp] saw; seen before, it is a wrong result. */
fun HashSet<Long>.checkNew(qp: Int, old: Long, inflight: Int) {
    if (!add(old)) throw ScenarioException("QP $qp: fetch-and-add with $inflight in flight returned $old twice")
}

rdma {
    val iterations = intParam("iterations", 1000) // fetch-and-adds per QP in each of the two phases
    val qps = intParam("qps", 4) // QPs, all adding to the one word of the server
    val inflight = intParam("inflight", 4) // adds in flight at once per QP in the second phase
    qps(qps)
    bufferSize(64)
    if (isServer) remoteAccess(RemoteAccess.ATOMIC) // only the server's word is the target
    connect(peer)

    qp(0) { if (isServer) buffer().set(JAVA_LONG, 0, 0L) }
    barrier() // the server's word is 0
    client {
        forEachQp {
            val seen = HashSet<Long>()
            repeat(iterations) {
                val old = measure("fetch-and-add") {
                    fetchAndAdd(1, remoteQp = 0) // every QP targets QP 0's word
                    awaitCompletion().value
                }
                seen.checkNew(index, old, 1)
            }
            // The same with several in flight: each completion's value is that add's old value.
            for (i in 0 until iterations) {
                if (outstanding == inflight) seen.checkNew(index, awaitCompletion().value, inflight)
                fetchAndAdd(1, remoteQp = 0)
            }
            while (outstanding > 0) seen.checkNew(index, awaitCompletion().value, inflight)
        }
        // The word is now 2 x qps x iterations: swap it for 42 once, and a stale compare must fail.
        qp(0) {
            val total = 2L * qps * iterations
            compareAndSwap(compare = total, swap = 42, remoteQp = 0)
            val swapped = awaitCompletion().value
            compareAndSwap(compare = total, swap = 7, remoteQp = 0)
            val stale = awaitCompletion().value
            if (swapped != total || stale != 42L) {
                throw ScenarioException("compare-and-swap returned $swapped and $stale, expected $total and 42")
            }
        }
    }
    barrier() // the client's atomics are complete
    qp(0) {
        server {
            val word = buffer().get(JAVA_LONG, 0)
            if (word != 42L) throw ScenarioException("the server's word is $word after the atomics, expected 42")
        }
    }
}
