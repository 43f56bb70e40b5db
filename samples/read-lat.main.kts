// read-lat: RDMA READ latency, like ib_read_lat. The server fills its buffer and lets the client
// read it (remoteAccess(READ)); the client reads `size` bytes of it `iterations` times, one at a
// time, after `repeat { }`'s warm-up rounds (until the JIT is quiet; the results' `warm-up` line
// says what was done); its perftest latency block gives the `read` section's percentiles (a READ is
// a full round trip), and it checks what it read.
//
//   server: bin/rdma-run samples/read-lat.main.kts --listen 18515 -d rxe0
//   client: bin/rdma-run samples/read-lat.main.kts --peer 10.77.0.1 -d rxe0
//   both in one JVM: bin/rdma-run samples/read-lat.main.kts --loopback
//   parameters: -s/--set size=BYTES (64) -n/--set iterations=N (1000)
//               --set warmup=auto|0|N (auto: until the JIT is quiet; 0: none, the cold figure)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*
import java.lang.foreign.ValueLayout.JAVA_BYTE

rdma {
    val size = sizeParam("size", 64) // bytes of each READ
    bufferSize(maxOf(size, 1))
    if (isServer) remoteAccess(RemoteAccess.READ) // only the server's buffer is read
    connect(peer)

    fun pattern(i: Int) = (i * 7 + 3).toByte()
    qp(0) {
        if (isServer) for (i in 0 until size) buffer().set(JAVA_BYTE, i.toLong(), pattern(i))
    }
    barrier() // the server's buffer is filled
    qp(0) {
        client {
            repeat { measure("read") { read(size); awaitCompletion() } } // `iterations` reads after the warm-up's
            val wrong = (0 until size).firstOrNull { buffer().get(JAVA_BYTE, it.toLong()) != pattern(it) }
            if (wrong != null) throw ScenarioException("byte $wrong read from the server is not what the server wrote")
        }
    }
}
