// write-bw: RDMA WRITE bandwidth, like ib_write_bw. On every QP the client keeps `depth` writes
// of `size` bytes in flight (postWrite, then awaitCompletion once `depth` are outstanding) until
// it has written `iterations` (or for `seconds`, when given); its table has the bandwidth (a WRITE
// leaves no completion on the server, whose table stays empty). The server then checks that the
// written bytes arrived.
//
//   server: bin/rdma-run samples/write-bw.main.kts --listen 18515 -d rxe0
//   client: bin/rdma-run samples/write-bw.main.kts --peer 10.77.0.1 -d rxe0
//   both in one JVM: bin/rdma-run samples/write-bw.main.kts --loopback
//   parameters: --set size=BYTES (65536) --set iterations=N per QP (500) --set qps=N (1) --set depth=N (16)
//               --set seconds=N (write for N seconds instead of `iterations` times)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*
import java.lang.foreign.ValueLayout.JAVA_BYTE
import kotlin.time.Duration.Companion.seconds

rdma {
    val size = intParam("size", 65536)
    val iterations = intParam("iterations", 500)
    val depth = intParam("depth", 16)
    val seconds = intParam("seconds", 0)
    qps(intParam("qps", 1))
    bufferSize(size)
    sendDepth(maxOf(depth, 1))
    connect(peer)

    fun pattern(qp: Int, i: Int) = (i * 31 + qp).toByte()
    client {
        forEachQp {
            if (!planning) for (i in 0 until size) buffer().set(JAVA_BYTE, i.toLong(), pattern(index, i))
            suspend fun writeOne() {
                postWrite()
                if (outstanding >= depth) awaitCompletion()
            }
            if (seconds > 0) runFor(seconds.seconds) { writeOne() } else repeat(iterations) { writeOne() }
            awaitAll()
        }
    }
    barrier() // the client's writes are complete: the data is in the server's buffers
    server {
        forEachQp {
            if (!planning) {
                val wrong = (0 until size).firstOrNull { buffer().get(JAVA_BYTE, it.toLong()) != pattern(index, it) }
                if (wrong != null) throw ScenarioException("QP $index: byte $wrong of the server's buffer is not what the client wrote")
            }
        }
    }
}
