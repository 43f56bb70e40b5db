// lat: one-way latency by perftest's methods, for bench/perftest-compare.sh (against ib_send_lat,
// ib_write_lat, ib_read_lat with the same size and iterations).
//   op=send:  ping-pong of `size`-byte sends; each side waits only for the peer's message (sends
//             inline when they fit, one in 16 signaled); one way = round trip / 2.
//   op=write: ping-pong of `size`-byte RDMA WRITEs; each side polls the last byte of its own
//             buffer for the peer's write, as ib_write_lat does; one way = round trip / 2.
//   op=read:  one READ of `size` bytes at a time, waiting for its completion; the full READ time.
// The client runs `warmup` exchanges, then `iterations` more, and prints one line:
//   rdma-run-bench lat op=send size=64 iterations=1000 steady_us=<median of the last `iterations`>
//                  cold_us=<median of the first `iterations`, warm-up included>
//   parameters: --set op=send|write|read --set size=BYTES (64) --set iterations=N (1000) --set warmup=N (iterations)
//               --set inline=BYTES (220: sends and writes up to this size are inline)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*
import java.lang.foreign.MemorySegment
import java.lang.foreign.ValueLayout.JAVA_BYTE
import java.lang.invoke.VarHandle

rdma {
    val op = param("op", "send")
    val size = intParam("size", 64)
    val iterations = intParam("iterations", 1000)
    val warmup = intParam("warmup", iterations)
    if (op !in setOf("send", "write", "read")) throw ScenarioException("op must be send, write or read, not '$op'")
    if (size < 1) throw ScenarioException("size must be at least 1, not $size")
    bufferSize(size)
    bufferCount(2) // write: the peer writes into buffer 0, this side writes from buffer 1
    inlineThreshold(if (op == "read") 0 else minOf(size, intParam("inline", 220)))
    signalEvery(if (op == "read") 1 else 16)
    when (op) {
        "write" -> remoteAccess(RemoteAccess.WRITE) // each side writes into the other's buffer
        "read" -> if (isServer) remoteAccess(RemoteAccess.READ)
    }
    connect(peer)

    val total = warmup + iterations
    val samples = LongArray(total)
    // A volatile read: the HCA writes the buffer behind the JIT's back, so a plain load could be hoisted.
    val byteVolatile: VarHandle = JAVA_BYTE.varHandle()
    val last = (size - 1).toLong()
    fun awaitByte(buffer: MemorySegment, value: Byte) {
        val deadline = System.nanoTime() + 30_000_000_000L
        var spins = 0
        while ((byteVolatile.getVolatile(buffer, last) as Byte) != value) {
            Thread.onSpinWait()
            if (++spins and 0xFFFF == 0 && System.nanoTime() > deadline) {
                throw ScenarioException("the peer's write $value did not arrive within 30 s")
            }
        }
    }

    qp(0) {
        val target = buffer(0)
        val source = buffer(1)
        for (i in 0 until total) {
            val t0 = System.nanoTime()
            when (op) {
                "send" -> if (isClient) {
                    send(size)
                    receive()
                } else {
                    receive()
                    send(size)
                }
                "write" -> {
                    val mark = (i % 127 + 1).toByte() // never 0, the buffers' first value
                    if (isClient) {
                        source.set(JAVA_BYTE, last, mark)
                        write(size, buffer = 1)
                        awaitByte(target, mark)
                    } else {
                        awaitByte(target, mark)
                        source.set(JAVA_BYTE, last, mark)
                        write(size, buffer = 1)
                    }
                }
                "read" -> if (isClient) {
                    read(size)
                    awaitCompletion()
                }
            }
            samples[i] = System.nanoTime() - t0
        }
    }

    if (isClient) {
        val oneWay = if (op == "read") 1.0 else 2.0
        fun medianUs(from: Int, to: Int): Double {
            val s = samples.copyOfRange(from, to).also { it.sort() }
            return s[s.size / 2] / 1000.0 / oneWay
        }
        println("rdma-run-bench lat op=$op size=$size iterations=$iterations " +
            "steady_us=%.2f cold_us=%.2f".format(medianUs(warmup, total), medianUs(0, minOf(iterations, total))))
    }
}
