// escape: the server fails with a message that would clear the other side's screen and forge a
// line of output; e2e/hostile.sh checks that the client shows it escaped.
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*

rdma {
    connect(peer)
    server { throw ScenarioException("\u001b[2J\u001b[Hwiped\nrdma-run: all good") }
    client { barrier() }
}
