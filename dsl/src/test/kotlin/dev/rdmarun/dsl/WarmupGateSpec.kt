package dev.rdmarun.dsl

import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.shouldBe
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.yield

/**
 * The loops of one side (one per QP under forEachQp) start measuring together: a loop whose
 * warm-up ended first waits for the others. Without it a 2-QP write-bw measured QP 0 alone, then
 * QP 1, and divided both QPs' bytes by QP 1's span (twice the bandwidth the QPs moved).
 */
class WarmupGateSpec : FunSpec({
    class Host(val name: String, val gate: WarmupGate, val events: MutableList<String>) : LoopHost {
        override val canWarmUp = true
        override val loopQp: Int? = 0
        override fun loopParam(name: String): String? = null
        override fun messagesMoved() = 0L
        override fun messagesTaken() = 0L
        override fun nextLoop() = 1
        override suspend fun agreeOnRound(loop: Int, round: Int, more: Boolean, dropLeftovers: Boolean, measured: Boolean): Boolean? = more
        override fun startMeasuring(): Boolean {
            events += "$name measures"
            return false
        }
        override fun warmupStarted() = gate.started()
        override suspend fun warmupOver() = gate.over()
        override fun planned(iterations: Long, warmupIterations: Long) {}
        override fun warmedUp(summary: WarmupSummary) {}
    }

    test("a loop whose fixed warm-up ended waits until the side's other warming loop's has") {
        runBlocking {
            val gate = WarmupGate()
            val events = mutableListOf<String>()
            val a = RepeatLoop(Host("QP 0", gate, events), 5, null, Warmup.parse("3"))
            val b = RepeatLoop(Host("QP 1", gate, events), 5, null, Warmup.parse("3"))
            a.nextRound() shouldBe 3 // both warm up
            b.nextRound() shouldBe 3
            launch { a.nextRound() shouldBe 5 }
            repeat(3) { yield() }
            events shouldContainExactly emptyList() // QP 0's warm-up is over, QP 1's is not: nobody measures
            b.nextRound() shouldBe 5
            yield()
            events shouldContainExactly listOf("QP 1 measures", "QP 0 measures")
        }
    }

    test("a loop that warms up alone measures at once, and the gate opens again for the next loops") {
        runBlocking {
            val gate = WarmupGate()
            val events = mutableListOf<String>()
            val a = RepeatLoop(Host("first", gate, events), 5, null, Warmup.parse("2"))
            a.nextRound() shouldBe 2
            a.nextRound() shouldBe 5
            val b = RepeatLoop(Host("second", gate, events), 5, null, Warmup.parse("2"))
            b.nextRound() shouldBe 2
            b.nextRound() shouldBe 5
            events shouldContainExactly listOf("first measures", "second measures")
        }
    }
})
