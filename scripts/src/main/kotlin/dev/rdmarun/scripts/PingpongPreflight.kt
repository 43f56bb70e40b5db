package dev.rdmarun.scripts

import dev.rdmarun.dsl.JitQuiet
import dev.rdmarun.runtime.FabricKey
import java.util.Locale
import java.util.concurrent.ThreadLocalRandom

/**
 * The pre-flight warm-up of `rdma-run pingpong`: before the exchange with the peer (so the wire
 * bytes are ibv_rc_pingpong's), two local QPs made as the real one ([PingpongSetup.create]) on
 * the same device and port are connected to each other, and [PingpongSetup.pingPong], the measured
 * method itself, runs between them as client on one thread and server on the other, in rounds of
 * [ROUND] exchanges, until the JIT is quiet ([JitQuiet], the DSL's warm-ups' rule). Without it the measured loop of a run of a few seconds runs in the interpreter
 * and C1 while C2 compiles it (seconds of the same core under emulation).
 *
 * Bounded at [MAX_MS], half the peer timeout (the peer may be waiting for us meanwhile) and half
 * of what is left of --timeout. Never posts on the real QP, and releases its own objects on every
 * path. A device that cannot connect a QP to another of its own, or a warm-up that fails, is not a
 * failure of the run: [run] says so in one sentence and the run goes on cold. Ctrl-C is.
 *
 * [create]: how a side's objects are made (the tests count what is made and released).
 */
internal class PingpongPreflight(
    private val setup: PingpongSetup,
    private val interruption: Interruption,
    private val limits: Limits,
    private val say: (String) -> Unit,
    private val create: (Resources) -> PingpongQp = setup::create,
) {
    /** Runs the warm-up and says how it went, in one line; throws only on Ctrl-C (and when releasing its objects fails). */
    fun run() {
        val started = System.nanoTime()
        val bound = listOfNotNull(
            MAX_MS * 1_000_000L,
            limits.peerTimeoutMs * 1_000_000L / 2,
            limits.overallDeadline?.let { (it - started) / 2 },
        ).min()
        if (bound <= 0) {
            say("pre-flight warm-up skipped: ${limits.overallName} leaves no time for it; the measured exchanges start cold")
            return
        }
        val end = started + bound
        // The objects' own Ctrl-C flag, raised on Ctrl-C and when the other thread failed (so this one stops waiting).
        Interruption().use { stop ->
            Resources().use { r ->
                val pair = try {
                    val a = create(r)
                    val b = create(r)
                    val random = ThreadLocalRandom.current()
                    val destA = setup.dest(a, random.nextInt(0x1000000))
                    val destB = setup.dest(b, random.nextInt(0x1000000))
                    // soft0: both ends are in this process, so any key they share will do (a fresh one; hardware ignores it).
                    val key = if (setup.ctx.isSoftware()) FabricKey.random() else null
                    setup.connect(a, destA.psn, destB, key)
                    setup.connect(b, destB.psn, destA, key)
                    a to b
                } catch (e: RuntimeException) {
                    interruption.check()
                    say("pre-flight warm-up skipped: ${setup.ctx.deviceName()} port ${setup.ibPort} cannot connect two of its own QPs" +
                        " (${e.message?.lineSequence()?.first() ?: e}); the measured exchanges start cold")
                    return
                }
                rounds(pair.first, pair.second, stop, started, end)
            }
        }
    }

    private fun rounds(client: PingpongQp, server: PingpongQp, stop: Interruption, started: Long, end: Long) {
        // The real run's limits, so that the warm-up's own failures say the same; a short peer timeout for a loopback.
        val roundLimits = limits.withPeerTimeout(minOf(limits.peerTimeoutMs, LOOPBACK_TIMEOUT_MS))
        val deadline = limits.overallDeadline ?: PingpongSetup.noDeadline()
        var rounds = 0
        val jit = JitQuiet()
        var why: String
        while (true) {
            val failure = round(client, server, stop, roundLimits, deadline)
            if (interruption.requested || (failure as? CommandFailure)?.status == ExitStatus.INTERRUPTED) throw interruption.interrupted(failure)
            val now = System.nanoTime()
            if (failure != null) {
                say("pre-flight warm-up stopped after ${seconds(now - started)} s (${failure.message}); the measured exchanges may start cold")
                return
            }
            rounds++
            if (jit.roundEnded()) {
                why = "until ${jit.rule()}"
                break
            }
            if (now - end >= 0) {
                why = "stopped at its bound of ${seconds(end - started)} s with the JIT still compiling"
                break
            }
        }
        say("pre-flight warm-up: $rounds round${if (rounds == 1) "" else "s"} of $ROUND local exchanges in " +
            "${seconds(System.nanoTime() - started)} s, $why (not counted)")
    }

    /** One round: the client's and the server's side in two threads; the first failure, or null. */
    private fun round(client: PingpongQp, server: PingpongQp, stop: Interruption, roundLimits: Limits, deadline: Long): Throwable? {
        val failures = arrayOfNulls<Throwable>(2)
        val threads = listOf(client to true, server to false).mapIndexed { i, (q, isClient) ->
            Thread.ofPlatform().name("pingpong-preflight-${if (isClient) "client" else "server"}").start {
                val out = LongArray(2)
                try {
                    setup.pingPong(q, isClient, 0, ROUND, stop, roundLimits, deadline, YIELD_MASK, out)
                    // Receives back to rx-depth: the next round counts from there.
                    repeat(setup.rxDepth - out[1].toInt()) { q.qp.postReceive(PingpongCommand.RECV_WRID, q.mr, 0, setup.size) }
                } catch (t: Throwable) {
                    failures[i] = t
                    stop.requestStop()
                }
            }
        }
        // Ctrl-C: the real run's flag is raised by its hook; pass it on to the threads.
        for (t in threads) {
            while (!t.join(java.time.Duration.ofMillis(100))) {
                if (interruption.requested) stop.requestStop()
            }
        }
        return failures.firstOrNull { it != null && !(it is CommandFailure && it.status == ExitStatus.INTERRUPTED) } ?: failures.firstOrNull { it != null }
    }

    private fun seconds(nanos: Long) = String.format(Locale.ROOT, "%.1f", nanos / 1e9)

    companion object {
        /** Exchanges per round. */
        const val ROUND = 1000

        /** The longest warm-up. */
        const val MAX_MS = 20_000L

        /** How long a local QP may go without a completion before the warm-up gives up (it is not the peer). */
        const val LOOPBACK_TIMEOUT_MS = 5_000L

        /** The warm-up yields on 7 of 8 idle checks (see [PingpongSetup.pingPong]). */
        const val YIELD_MASK = 7
    }
}
