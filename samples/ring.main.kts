// ring: each rank passes a token to the next rank (rank + 1, around) and takes one from the
// previous, at once; with 2 ranks, the next and the previous are the same rank. Each token names
// its sender; every rank checks the one it took. Measures: correctness; one table per pair.
//
//   under Open MPI:  mpirun -np 4 bin/rdma-run samples/ring.main.kts -d rxe0
//   by hand:         bin/rdma-run samples/ring.main.kts --rank K --ranks 4 --rendezvous HOST0:18515 (K = 0..3)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

rdmaRanks {
    val next = (rank + 1) % ranks
    val previous = (rank + ranks - 1) % ranks
    ring { // a pair with the next rank and one with the previous
        connect(peer)
        qp(0) {
            if (peerRank == next) send("token from rank $rank".toByteArray())
            if (peerRank == previous) {
                val token = receive().text()
                if (token != "token from rank $previous") throw ScenarioException("rank $rank took '$token' from rank $previous")
            }
            awaitAll()
        }
    }
    println("ring: rank $rank passed its token to rank $next and took rank $previous's")
}
