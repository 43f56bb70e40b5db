// A run of ranks that keeps running (all to all, RDMA WRITEs for `seconds`, default 120), for the
// fault cases: each rank says when each of its pairs is connected.
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT")

import dev.rdmarun.dsl.*
import kotlin.time.Duration.Companion.seconds

rdmaRanks {
    allToAll {
        remoteAccess(RemoteAccess.WRITE)
        connect(peer)
        println("rank $rank connected to rank $peerRank")
        forEachQp { runFor(intParam("seconds", 120).seconds) { write(); awaitCompletion() } }
    }
}
