// card: the design card, verbatim. Four QPs; on each, both sides send a message and wait for its
// completion, `iterations` times (1000 unless --set iterations=N; --set seconds=N runs for N seconds).
// Nobody calls receive(): each side's messages wait in the peer's inbox, and the results count
// them as not received. Run it on a machine without rxe0 with -d soft0.
//
//   server: bin/rdma-run samples/card.main.kts --listen 18515
//   client: bin/rdma-run samples/card.main.kts --peer 10.77.0.1
//   both in one JVM: bin/rdma-run samples/card.main.kts --loopback -d soft0
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

rdma { device("rxe0"); qps(4); connect(peer); forEachQp { repeat { send(); awaitCompletion() } } }
