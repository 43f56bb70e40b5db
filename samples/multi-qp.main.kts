// multi-qp: the seeds' scenario. 4 RC QPs on one shared CQ; every QP has its receives posted
// before the handshake (the DSL does that), then sends one message each way; each side checks
// that every message arrived on its own QP and names it, and fails the scenario otherwise.
// Measures: nothing but correctness; the table shows one send and one receive per QP.
//
//   server: bin/rdma-run samples/multi-qp.main.kts --listen 18515 -d rxe0
//   client: bin/rdma-run samples/multi-qp.main.kts --peer 10.77.0.1 -d rxe0
//   both in one JVM: bin/rdma-run samples/multi-qp.main.kts --loopback
//   parameters: --set qps=N (default 4)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

rdma {
    qps(intParam("qps", 4)) // QPs, each sending one message each way
    sharedCq()
    connect(peer)

    val me = if (isServer) "server" else "client"
    val them = if (isServer) "client" else "server"
    forEachQp {
        send("hello from the $me on QP $index".toByteArray())
        val message = receive()
        val expected = "hello from the $them on QP $index"
        if (message.qp != index || message.text() != expected) {
            throw ScenarioException("QP $index received '${message.text()}' on QP ${message.qp}, expected '$expected'")
        }
    }
    println("multi-qp: $qpCount QPs, one message each way, every payload verified")
}
