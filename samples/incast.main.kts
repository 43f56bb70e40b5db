// incast: every other rank sends to rank 0 at once (many senders, one receiver). Each sender
// sends `iterations` messages of `size` bytes on each QP, each starting with its rank; rank 0
// receives them all and checks who sent each one. Measures: one table per pair (rank 0: one per
// sender), and rank 0's total received bytes.
//
//   under Open MPI:  mpirun -np 4 bin/rdma-run samples/incast.main.kts -d rxe0
//   under MPICH:     mpiexec -n 4 bin/rdma-run samples/incast.main.kts -d rxe0
//   by hand:         bin/rdma-run samples/incast.main.kts --rank K --ranks 4 --rendezvous HOST0:18515 (K = 0..3)
//   parameters: --set size=BYTES (4096) --set iterations=N per QP (1000) --set qps=N (1)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*
import java.lang.foreign.ValueLayout.JAVA_INT

rdmaRanks {
    val pairs = incast(to = 0) { // rank 0 with each sender, each sender with rank 0
        val size = sizeParam("size", 4096) // bytes of each message
        qps(intParam("qps", 1)) // QPs per pair, each sending `iterations` messages
        bufferSize(maxOf(size, 4))
        sendDepth(16)
        connect(peer)
        forEachQp {
            if (rank == 0) {
                repeat { // the sender's `iterations` messages
                    val m = receive()
                    if (m.intAt(0) != peerRank) throw ScenarioException("QP $index: a message from rank $peerRank says rank ${m.intAt(0)}")
                }
            } else {
                buffer().set(JAVA_INT, 0L, rank)
                repeat {
                    send()
                    if (outstanding >= 16) awaitCompletion()
                }
                awaitAll()
            }
        }
    }
    if (rank == 0) println("incast: rank 0 received ${pairs.sumOf { it.total.bytesReceived }} bytes from ${pairs.size} senders, every message checked")
    else println("incast: rank $rank sent ${pairs.sumOf { it.total.bytesSent }} bytes to rank 0")
}
