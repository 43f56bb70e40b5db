package dev.rdmarun.dsl

import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.shouldBe
import io.kotest.matchers.shouldNotBe
import io.kotest.matchers.string.shouldContain

/** The one warm-up rule, on a clock and a compilation counter the test moves. */
class JitQuietSpec : FunSpec({
    class Fake(var compiled: Long?, var pending: Boolean? = null) {
        var now = 0L
        var asked = 0
        val jit = JitQuiet({ compiled }, { now }, { asked++; pending })

        /** Rounds of [step] nanoseconds; [compileAt] rounds end a compilation. The rounds that said quiet. */
        fun rounds(n: Int, step: Long, compileAt: Set<Int> = emptySet()) = (1..n).filter { r ->
            now += step
            if (r in compileAt) compiled = compiled!! + 1
            jit.roundEnded()
        }
    }

    test("quiet once no compilation ended for two rounds and for half a second") {
        // Rounds of 0.1 s: the second quiet round is too soon, the fifth is 0.5 s after the start.
        Fake(7).rounds(6, 100_000_000).first() shouldBe 5
        // Rounds of 1 s: two rounds are needed even when each lasts longer than the quiet time.
        Fake(7).rounds(3, 1_000_000_000).first() shouldBe 2
    }

    test("a compilation that ends starts the count again") {
        val f = Fake(7)
        f.rounds(4, 1_000_000_000, compileAt = setOf(1, 3)) shouldContainExactly emptyList()
        f.rounds(2, 1_000_000_000) shouldContainExactly listOf(1, 2) // the fourth round was the first quiet one
    }

    test("a compilation still running or queued when the rule holds starts the count again") {
        val f = Fake(7, pending = true)
        f.rounds(6, 100_000_000) shouldContainExactly emptyList()
        f.asked shouldBe 1 // asked only when the rule held, at the fifth round
        f.pending = false
        // The count started again at that fifth round (0.5 s): quiet from 1.0 s, asked each round.
        f.rounds(6, 100_000_000) shouldContainExactly listOf(4, 5, 6)
        f.asked shouldBe 4
    }

    test("a Compiler.queue listing: busy when it names a compilation") {
        val idle = "Current compiles: \n\nC1 compile queue:\nEmpty\n\nC2 compile queue:\nEmpty\n\n"
        JitQuiet.queueBusy(idle) shouldBe false
        JitQuiet.queueBusy(idle.replace("Current compiles: \n", "Current compiles: \nC2 CompilerThread0  1780       4       a.B::c (78 bytes)\n")) shouldBe true
        JitQuiet.queueBusy(idle.replace("C2 compile queue:\nEmpty", "C2 compile queue:\n1748       4       java.util.ArrayList::add (25 bytes)")) shouldBe true
        JitQuiet.compilationPending() shouldNotBe null // the build's JDK is HotSpot
    }

    test("a JVM that does not report compilation times: a fixed number of rounds") {
        val f = Fake(null)
        f.jit.monitored shouldBe false
        f.rounds(JitQuiet.UNMONITORED_ROUNDS, 1).first() shouldBe JitQuiet.UNMONITORED_ROUNDS
        f.jit.rule() shouldContain "does not report compilation times"
        Fake(0).jit.rule() shouldBe "no compilation for 0.5 s"
    }

    test("this JVM reports compilation times (the build's JDK has a JIT)") {
        JitQuiet().monitored shouldBe true
    }
})
