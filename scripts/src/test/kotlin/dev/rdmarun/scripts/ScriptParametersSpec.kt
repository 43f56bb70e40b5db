package dev.rdmarun.scripts

import io.kotest.core.spec.style.StringSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.nulls.shouldBeNull
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain

/** The parameters a script reads, found in its source (for the `--set` check and `--params`). */
class ScriptParametersSpec : StringSpec({
    "literal reads, with their defaults and the line's comment as the doc" {
        val p = ScriptParameters.of("""
            rdma {
                val op = param("op", "send") // send, write or read
                val n = intParam("rounds", 10)
                bufferSize(sizeParam("size", 4096))
            }
        """.trimIndent())
        p.incomplete shouldBe false
        p.read.getValue("op").default shouldBe "send"
        p.read.getValue("op").doc shouldBe "send, write or read"
        p.read.getValue("rounds").default shouldBe "10"
        p.read.getValue("size").default shouldBe "4096"
        p.read.keys.toList() shouldContainExactly listOf("op", "rounds", "size", "qps", "depth", "inline", "mtu", "signal", "warmup", "preflight")
    }

    "the DSL's own reads: warmup and preflight always, size without bufferSize(, iterations and seconds with repeat { }" {
        ScriptParameters.of("rdma { connect(peer); repeat { send() } }").read.keys.toList() shouldContainExactly
            listOf("qps", "depth", "inline", "mtu", "signal", "warmup", "preflight", "size", "iterations", "seconds")
        ScriptParameters.of("rdma { bufferSize(8); connect(peer); repeat(3) { send() } }").read.keys.toList() shouldContainExactly
            listOf("qps", "depth", "inline", "mtu", "signal", "warmup", "preflight")
    }

    "reads in comments or inside other strings do not count" {
        val p = ScriptParameters.of("""
            // param("commented", "1")
            /* intParam("blocked", 2) */
            val s = "call param(\"quoted\", 3) here"
            rdma { connect(peer) }
        """.trimIndent())
        p.incomplete shouldBe false
        p.read.keys shouldBe setOf("qps", "depth", "inline", "mtu", "signal", "warmup", "preflight", "size")
    }

    "every parameter each sample reads has a doc for --params: its line's comment, or the DSL's for the standard ones" {
        val samples = java.io.File("../samples").listFiles { f -> f.name.endsWith(".main.kts") }.orEmpty().sortedBy { it.name }
        samples.map { it.name } shouldContainExactly
            listOf("alltoall.main.kts", "atomics.main.kts", "card.main.kts", "incast.main.kts", "multi-qp.main.kts", "pingpong-lat.main.kts",
                "read-lat.main.kts", "ring.main.kts", "write-bw.main.kts")
        val undocumented = samples.flatMap { f -> ScriptParameters.of(f.readText()).read.values.filter { it.doc.isBlank() }.map { "${f.name}: ${it.name}" } }
        undocumented shouldBe emptyList()
        val writeBw = ScriptParameters.of(java.io.File("../samples/write-bw.main.kts").readText()).read
        writeBw.getValue("depth").doc shouldBe "WRITEs in flight per QP" // its own line's comment
        writeBw.getValue("signal").doc shouldBe "one work request in this many is signaled, replaces signalEvery(n) (-Q)" // the DSL's
    }

    "a computed name makes the list incomplete, and then nothing is refused" {
        val p = ScriptParameters.of("val name = \"x\"\nrdma { param(name, \"1\"); connect(peer) }")
        p.incomplete shouldBe true
        p.unknown(listOf("anything"), "s.main.kts") { "--set $it" }.shouldBeNull()
    }

    "an unknown name gets one sentence with what the script reads and the closest name" {
        val p = ScriptParameters.of("rdma { connect(peer); repeat { send() } }")
        p.unknown(listOf("iterations"), "card.main.kts") { "--set $it" }.shouldBeNull()
        val sentence = p.unknown(listOf("iteration"), "card.main.kts") { "--set $it" }!!
        sentence shouldContain "--set iteration: card.main.kts does not read a parameter named iteration"
        sentence shouldContain "(it reads: qps, depth, inline, mtu, signal, warmup, preflight, size, iterations, seconds); did you mean iterations?"
        p.unknown(listOf("zzzzzz"), "card.main.kts") { "--set $it" }!! shouldContain "seconds)" // nothing close: no "did you mean"
    }
})
