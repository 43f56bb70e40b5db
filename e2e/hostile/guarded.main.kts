// guarded: what e2e/hostile.sh attacks while it runs. The server's buffer holds a pattern and
// grants READ and WRITE; for `seconds` the client reads it and checks every byte, and the peers
// exchange checked messages; at the end the server checks that its buffer still holds the pattern
// (a forged WRITE would have changed it). Prints "guarded: ... intact" on both sides.
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*
import java.lang.foreign.ValueLayout.JAVA_BYTE
import kotlin.time.Duration.Companion.seconds

rdma {
    val size = 4096
    val seconds = intParam("seconds", 6)
    bufferSize(size)
    bufferCount(2) // buffer 0: the guarded pattern (server), buffer 1: messages and reads
    if (isServer) remoteAccess(RemoteAccess.READ, RemoteAccess.WRITE)
    connect(peer)

    fun pattern(i: Int) = (i * 13 + 5).toByte()
    if (isServer) qp(0) { for (i in 0 until size) buffer(0).set(JAVA_BYTE, i.toLong(), pattern(i)) }
    barrier() // the pattern is in place
    var rounds = 0
    qp(0) {
        client {
            runFor(seconds.seconds) {
                read(size, buffer = 1, remoteBuffer = 0)
                awaitCompletion()
                val wrong = (0 until size).firstOrNull { buffer(1).get(JAVA_BYTE, it.toLong()) != pattern(it) }
                if (wrong != null) throw ScenarioException("byte $wrong of the server's buffer changed")
                send("round $rounds".toByteArray(), buffer = 1)
                awaitCompletion()
                if (receive().text() != "ack $rounds") throw ScenarioException("the server's answer $rounds is wrong")
                rounds++
            }
            send("stop".toByteArray(), buffer = 1)
            awaitCompletion()
        }
        server {
            while (true) {
                val m = receive().text()
                if (m == "stop") break
                if (m != "round $rounds") throw ScenarioException("message $rounds is '$m'")
                send("ack $rounds".toByteArray(), buffer = 1)
                awaitCompletion()
                rounds++
            }
            val wrong = (0 until size).firstOrNull { buffer(0).get(JAVA_BYTE, it.toLong()) != pattern(it) }
            if (wrong != null) throw ScenarioException("byte $wrong of the guarded buffer was overwritten")
        }
    }
    println("guarded: $rounds rounds, every read checked, the server's buffer intact")
}
