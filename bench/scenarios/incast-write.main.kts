// incast-write: every other rank WRITEs to rank 0 at once, for bench/incast.sh against as many
// concurrent ib_write_bw pairs. Each sender keeps `depth` WRITEs of `size` bytes in flight on its
// QP and writes `iterations` of them (perftest's -t, -s, -n), after the warm-up rdma-run's
// `repeat` runs by default (not counted, said in its table); rank 0 only grants the access, and
// its summary has each sender's BW out (bytes over its measured time) and their sum.
//   parameters: --set size=BYTES (65536) --set depth=N (16) -n N (the iterations, 1000)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

rdmaRanks {
    incast(to = 0) {
        val size = sizeParam("size", 65536)
        val depth = maxOf(intParam("depth", 16), 1)
        bufferSize(size)
        sendDepth(depth)
        if (rank == 0) remoteAccess(RemoteAccess.WRITE)
        connect(peer)
        if (rank != 0) forEachQp {
            repeat {
                write()
                if (outstanding >= depth) awaitCompletion()
            }
            awaitAll()
        }
    }
}
