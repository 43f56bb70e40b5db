package dev.rdmarun.dsl

import dev.rdmarun.dsl.Fixtures.checkPlan
import dev.rdmarun.dsl.Fixtures.peer
import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import java.net.ServerSocket
import kotlin.time.Duration
import kotlin.time.Duration.Companion.days
import kotlinx.coroutines.CancellationException

/**
 * Durations beyond [MAX_DURATION] are refused where a script gives them, and a long one that an
 * application API still takes (a connect wait) makes a deadline in the future instead of one that
 * `System.nanoTime() + duration` overflowed into the past, which ended the wait at once.
 */
class DeadlinesSpec : FunSpec({
    test("timeout(...) beyond 7 days, Duration.INFINITE among them, is refused with one sentence") {
        shouldThrow<ScenarioException> { checkPlan { timeout(1000000.days); connect(peer) } }.message shouldBe
            "timeout(1000000d) is longer than 7d, the longest timeout rdma-run accepts"
        shouldThrow<ScenarioException> { checkPlan { timeout(Duration.INFINITE); connect(peer) } }.message shouldBe
            "timeout(Infinity) is longer than 7d, the longest timeout rdma-run accepts"
        checkPlan { timeout(7.days); connect(peer) }.settings.timeout shouldBe 7.days
    }

    test("the seconds parameter beyond 7 days is refused by repeat { }") {
        val scope = SecondsOnly(mapOf(StandardParameters.SECONDS to "1e12"))
        // A loop that took 1e12 s would be ended by its third round, which then fails the test.
        shouldThrow<ScenarioException> { scope.repeat { if (++scope.rounds == 3) throw Enough() } }.message shouldBe
            "parameter seconds must be a number of seconds from 0 to 604800 (7d), not '1e12'"
        scope.rounds shouldBe 0
    }

    test("connecting with Duration.INFINITE keeps trying until told to stop") {
        val closed = ServerSocket(0).use { it.localPort } // nothing listens there now: each attempt is refused at once
        var attempts = 0
        shouldThrow<CancellationException> {
            ControlClient.connect(Peer.Connect("127.0.0.1", closed), Duration.INFINITE) { ++attempts <= 3 }
        }
        attempts shouldBe 4
    }

    test("a deadline from any length stays ahead of now, near Long.MAX_VALUE's wrap too") {
        for (now in listOf(0L, 123_456_789L, Long.MAX_VALUE - 5, -42L)) {
            (deadlineAfter(Duration.INFINITE, now) - now > 0) shouldBe true
            (deadlineAfter(1000000.days, now) - now > 0) shouldBe true
            deadlineAfter((-5).days, now) shouldBe now
        }
    }
})

private class Enough : RuntimeException()

/** The parts of a scope that repeat { } uses: [parameters], and a count of rounds the test keeps. */
private class SecondsOnly(private val parameters: Map<String, String>) : CommonScope {
    var rounds = 0
    override val isServer = false
    override val isClient = true
    override fun param(name: String, default: String) = parameters[name] ?: default
    override fun measureFromHere() {}
    override fun roundsPlanned(rounds: Long) {}
    override fun roundDone() {}
}
