// write-bw: RDMA WRITE bandwidth, like ib_write_bw. On every QP the client keeps `depth` writes
// of `size` bytes in flight (write, then awaitCompletion once `depth` are outstanding) until it
// has written `iterations` (or for `seconds`, when given); one write in `signal` (-Q) is signaled,
// as perftest's cq_mod (the DSL reads `signal` itself). Its table has the bandwidth (a WRITE
// leaves no completion on the server, whose table stays empty). The server then checks that the
// written bytes arrived.
//
//   server: bin/rdma-run samples/write-bw.main.kts --listen 18515 -d rxe0
//   client: bin/rdma-run samples/write-bw.main.kts --peer 10.77.0.1 -d rxe0
//   both in one JVM: bin/rdma-run samples/write-bw.main.kts --loopback
//   parameters: --set size=BYTES (65536) --set iterations=N per QP (1000) --set qps=N (1) --set depth=N (16)
//               --set signal=N (1) --set seconds=N (write for N seconds instead of `iterations` times)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*
import java.lang.foreign.ValueLayout.JAVA_BYTE

rdma {
    val size = sizeParam("size", 65536) // bytes of each WRITE (the buffer size)
    val depth = maxOf(intParam("depth", 16), 1) // WRITEs in flight per QP
    qps(intParam("qps", 1)) // QPs, each writing `iterations` times
    bufferSize(size)
    sendDepth(depth)
    if (isServer) remoteAccess(RemoteAccess.WRITE) // only the server's buffers are written
    connect(peer)

    fun pattern(qp: Int, i: Int) = (i * 31 + qp).toByte()
    client {
        forEachQp {
            for (i in 0 until size) buffer().set(JAVA_BYTE, i.toLong(), pattern(index, i))
            repeat { // `iterations` times, or for `seconds`
                write()
                if (outstanding >= depth) awaitCompletion()
            }
            awaitAll()
        }
    }
    barrier() // the client's writes are complete: the data is in the server's buffers
    server {
        forEachQp {
            val wrong = (0 until size).firstOrNull { buffer().get(JAVA_BYTE, it.toLong()) != pattern(index, it) }
            if (wrong != null) throw ScenarioException("QP $index: byte $wrong of the server's buffer is not what the client wrote")
        }
    }
}
