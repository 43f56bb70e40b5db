// The AOT-cache training scenario of the build (scripts/pom.xml; AotTraining.kt runs it on soft0
// in --loopback and as two peers over TCP): it goes through every kind of operation, so that the
// classes a real run loads are the ones the JVM finds pre-parsed and pre-linked in
// target/rdma-run.aot, then runs the data path until the JIT is quiet, for its method profiles.
// Not a sample: it measures nothing worth reading.
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT")

import dev.rdmarun.dsl.*

rdma {
    qps(2)
    bufferSize(4096)
    remoteAccess(RemoteAccess.WRITE, RemoteAccess.READ, RemoteAccess.ATOMIC)
    connect(peer)

    forEachQp {
        repeat(20) {
            if (isClient) {
                measure("send") { send(64); awaitCompletion() }
                receive()
            } else {
                receive()
                sendWithImm(it, 64)
            }
        }
    }
    barrier()
    client {
        forEachQp {
            repeat(20) { write(4096); if (outstanding >= 4) awaitCompletion() }
            awaitAll()
            writeWithImm(1, 64)
            repeat(20) { measure("read") { read(64); awaitCompletion() } }
            repeat(20) { fetchAndAdd(1) }
            compareAndSwap(compare = 20, swap = 0)
            awaitAll()
        }
    }
    server { forEachQp { receive() } }
    barrier()

    // The data path until the JIT is quiet (the DSL's warm-up), then a plain loop as a user's own
    // script writes it: the cache keeps this run's method profiles (JEP 515), so a real run's JIT
    // compiles the hot path from them sooner instead of profiling it first.
    qp(0) {
        if (isClient) repeat { measureRoundTrip("rtt") { send(64); receive(copyPayload = false) } }
        else repeat { receive(copyPayload = false); send(64) }
        repeat(20_000) {
            if (isClient) { send(64); receive() } else { receive(); send(64) }
        }
    }
}
