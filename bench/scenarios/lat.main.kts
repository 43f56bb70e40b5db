// lat: one-way latency by perftest's methods, for bench/perftest-compare.sh (against ib_send_lat,
// ib_write_lat, ib_read_lat with the same size and iterations).
//   op=send:  ping-pong of `size`-byte sends; each side waits only for the peer's message and
//             takes it without copying the payload (sends inline when they fit, one in 16
//             signaled); one way = round trip / 2.
//   op=write: ping-pong of `size`-byte RDMA WRITEs; each side polls the last byte of its own
//             buffer for the peer's write, as ib_write_lat does; one way = round trip / 2.
//   op=read:  one READ of `size` bytes at a time, waiting for its completion; the full READ time.
// The client runs rounds of `iterations` exchanges: at least `warmup` exchanges of warm-up, then
// until no compilation has ended for two rounds and 0.5 s (30 s from the start at most; the compiler
// threads share the core with the poller, and under emulation one C2 compilation takes up to
// seconds of it). The last of those rounds is the measured one: every round runs the same code,
// so the measured one runs only code the JIT has compiled. The client then tells the server to
// stop (a SEND with immediate data; a WRITE of a mark no exchange uses) and prints the line below.
// warmup=0: no warm-up at all; the first round is the measured one and the run ends after it
// (steady_us = cold_us, the first `iterations` exchanges of a fresh JVM: perftest-compare's cold_lat).
//   rdma-run-bench lat op=send size=64 iterations=1000 warmup_rounds=<rounds before the measured one>
//                  steady_us=<median of the measured round> cold_us=<median of the first round>
//   parameters: --set op=send|write|read --set size=BYTES (64) --set iterations=N (1000) --set warmup=N (iterations)
//               --set inline=BYTES (220: sends and writes up to this size are inline)
@file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT") // IntelliJ resolves the DSL; rdma-run supplies it itself

import dev.rdmarun.dsl.*
import java.lang.foreign.MemorySegment
import java.lang.foreign.ValueLayout.JAVA_BYTE
import java.lang.invoke.VarHandle

rdma {
    val op = param("op", "send")
    val size = sizeParam("size", 64)
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

    // A volatile read: the HCA writes the buffer behind the JIT's back, so a plain load could be hoisted.
    val byteVolatile: VarHandle = JAVA_BYTE.varHandle()
    val last = (size - 1).toLong()
    val stop: Byte = -128 // the client's last write: no exchange's mark (1..127)
    /** Waits until the last byte of [buffer] is [value] or [stop]; returns which. */
    fun awaitByte(buffer: MemorySegment, value: Byte): Byte {
        val deadline = System.nanoTime() + 30_000_000_000L
        var spins = 0
        while (true) {
            val b = byteVolatile.getVolatile(buffer, last) as Byte
            if (b == value || b == stop) return b
            Thread.onSpinWait()
            if (++spins and 0xFFFF == 0 && System.nanoTime() > deadline) {
                throw ScenarioException("the peer's write $value did not arrive within 30 s")
            }
        }
    }
    val jit = java.lang.management.ManagementFactory.getCompilationMXBean()
    fun compiledSoFar() = if (jit.isCompilationTimeMonitoringSupported) jit.totalCompilationTime else 0L

    qp(0) {
        val target = buffer(0)
        val source = buffer(1)
        fun mark(i: Long) = (i % 127 + 1).toByte() // never 0, the buffers' first value
        if (isClient) {
            val samples = LongArray(iterations)
            fun medianUs(): Double {
                val s = samples.copyOf().also { it.sort() }
                return s[s.size / 2] / 1000.0 / (if (op == "read") 1.0 else 2.0)
            }
            var i = 0L
            var rounds = 0
            var quietRounds = 0
            var cold = 0.0
            val giveUpAt = System.nanoTime() + 30_000_000_000L
            var compiled = compiledSoFar()
            var compiledAt = System.nanoTime()
            while (true) {
                for (k in 0 until iterations) {
                    val t0 = System.nanoTime()
                    // Written out here, not in a local suspend function: each call of one would allocate its state.
                    when (op) {
                        "send" -> {
                            send(size)
                            receive(copyPayload = false) // perftest never reads the data either
                        }
                        "write" -> {
                            source.set(JAVA_BYTE, last, mark(i))
                            write(size, buffer = 1)
                            awaitByte(target, mark(i))
                        }
                        else -> {
                            read(size)
                            awaitCompletion()
                        }
                    }
                    i++
                    samples[k] = System.nanoTime() - t0
                }
                rounds++
                if (rounds == 1) cold = medianUs()
                // Quiet: no compilation ended in the last two rounds, nor in the last 0.5 s (a round can be
                // shorter than one compilation, and the total grows only when one ends).
                val now = System.nanoTime()
                if (compiledSoFar() != compiled) {
                    compiled = compiledSoFar()
                    compiledAt = now
                    quietRounds = 0
                } else {
                    quietRounds++
                }
                val quiet = quietRounds >= 2 && now - compiledAt >= 500_000_000L
                if (warmup == 0 || i >= warmup + iterations && (quiet || now - giveUpAt > 0)) break
            }
            when (op) {
                "send" -> sendWithImm(1, size)
                "write" -> {
                    source.set(JAVA_BYTE, last, stop)
                    write(size, buffer = 1)
                }
            }
            println("rdma-run-bench lat op=$op size=$size iterations=$iterations warmup_rounds=${rounds - 1} " +
                "steady_us=%.2f cold_us=%.2f".format(medianUs(), cold))
        } else {
            var i = 0L
            when (op) {
                "send" -> while (receive(copyPayload = false).immediate == null) send(size)
                "write" -> while (awaitByte(target, mark(i)) != stop) {
                    source.set(JAVA_BYTE, last, mark(i++))
                    write(size, buffer = 1)
                }
            }
        }
    }
}
