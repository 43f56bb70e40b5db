// alltoall: every rank writes to every other rank at once, and checks what each one wrote.
// Each pair of ranks is a two-peer scenario of its own (QPs, memory, control connection): on each
// QP a rank streams `iterations` RDMA WRITEs of `size` bytes into its peer's buffer 1 (16 in
// flight), then one writeWithImm that says "done" (RC keeps the order, so every write landed
// before it), and checks every byte its peer wrote into its own buffer 1. Measures: each pair's
// write bandwidth, one table per pair.
//
//   under Open MPI:  mpirun -np 4 bin/rdma-run samples/alltoall.main.kts -d rxe0
//   under MPICH:     mpiexec -n 4 bin/rdma-run samples/alltoall.main.kts -d rxe0
//   under Slurm:     srun -n 4 bin/rdma-run samples/alltoall.main.kts -d rxe0
//   by hand:         bin/rdma-run samples/alltoall.main.kts --rank K --ranks 4 --rendezvous HOST0:18515 (K = 0..3)
//   parameters: --set size=BYTES (65536) --set iterations=N per QP (1000) --set qps=N (1)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*
import java.lang.foreign.ValueLayout.JAVA_BYTE

rdmaRanks {
    allToAll { // once for each other rank, all at once
        val size = sizeParam("size", 65536) // bytes of each WRITE (the buffer size)
        qps(intParam("qps", 1)) // QPs per pair, each writing `iterations` times
        bufferSize(size)
        bufferCount(2) // buffer 0: what this rank writes; buffer 1: where its peer writes
        sendDepth(17)
        remoteAccess(RemoteAccess.WRITE)
        connect(peer) // this pair's peer: the lower rank listens

        fun pattern(from: Int, to: Int, qp: Int, i: Int) = (i * 31 + from * 7 + to * 3 + qp).toByte()
        forEachQp {
            for (i in 0 until size) buffer(0).set(JAVA_BYTE, i.toLong(), pattern(rank, peerRank, index, i))
            repeat { // `iterations` times
                write(remoteBuffer = 1)
                if (outstanding >= 16) awaitCompletion()
            }
            awaitAll()
            writeWithImm(imm = rank, remoteBuffer = 1)
            val done = receive()
            if (done.immediate != peerRank) throw ScenarioException("QP $index: rank $rank got immediate ${done.immediate}, expected $peerRank")
            for (i in 0 until size) {
                val b = buffer(1).get(JAVA_BYTE, i.toLong())
                if (b != pattern(peerRank, rank, index, i)) throw ScenarioException("QP $index: byte $i from rank $peerRank is $b, expected ${pattern(peerRank, rank, index, i)}")
            }
            awaitAll()
        }
    }
    barrier() // every rank checked every payload
    println("alltoall: rank $rank of $ranks wrote to ${peers.size} ranks and checked what each wrote")
}
