// card: the design card, verbatim. Four QPs; both sides send a message on every QP and wait for
// their completions, `iterations` times (1000 unless --set iterations=N; --set seconds=N runs for N
// seconds). `forEachQp { repeat { send(); awaitCompletion() } }` is the same with one coroutine per QP.
// Nobody calls receive(): each side's messages wait in the peer's inbox, and the results count
// them as not received. Run it on a machine without rxe0 with -d soft0.
//
//   server: bin/rdma-run samples/card.main.kts --listen 18515
//   client: bin/rdma-run samples/card.main.kts --peer 10.77.0.1
//   both in one JVM: bin/rdma-run samples/card.main.kts --loopback -d soft0
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

rdma { device("rxe0"); qps(4); connect(peer); repeat { send(); awaitCompletion() } }
