package dev.rdmarun.scripts.host

import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.shouldBe
import io.kotest.matchers.shouldNotBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldMatch
import java.io.File
import java.nio.file.Files

class ScenarioScriptHostSpec : FunSpec({
    val dir = Files.createTempDirectory("scripts").toFile()
    val cache = File(dir, "cache")
    afterSpec { dir.deleteRecursively() }

    fun script(name: String, text: String) = File(dir, name).apply { writeText(text) }

    test("a script runs with its arguments, and a second compile comes from the cache") {
        val out = File(dir, "out.txt")
        val file = script("ok.main.kts", """
            @file:DependsOn("dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT")
            java.io.File(args[0]).writeText("ran " + args.size)
        """.trimIndent())
        val host = ScenarioScriptHost(cache)
        var compiling = 0
        val first = host.compile(file) { compiling++ }
        first.fromCache shouldBe false
        compiling shouldBe 1
        host.run(first.script, arrayOf(out.path))
        out.readText() shouldBe "ran 1"
        val cached = cache.listFiles()!!.toList()
        cached shouldHaveSize 1
        // A new host (a new process, in effect) finds the jar instead of compiling again.
        val stamp = cached[0].lastModified()
        val again = ScenarioScriptHost(cache).compile(file) { compiling++ }
        again.fromCache shouldBe true
        again.cacheJar shouldBe cached[0]
        compiling shouldBe 1
        cache.listFiles()!!.toList() shouldBe cached
        cached[0].lastModified() shouldBe stamp
        // Changed text is a different entry.
        file.appendText("\n// changed\n")
        ScenarioScriptHost(cache).compile(file)
        cache.listFiles()!! shouldHaveSize 2
    }

    test("a cache that cannot be written only costs the cache entry") {
        // Under a plain file, no folder can be made, even by root (the VM's cache is read-only).
        val blocked = File(File(dir, "a-file").apply { writeText("x") }, "scripts")
        val file = script("uncached.main.kts", "println(1)\n")
        val compiled = ScenarioScriptHost(blocked).compile(file)
        compiled.fromCache shouldBe false
        compiled.storeError shouldNotBe null
        ScenarioScriptHost(null).run(compiled.script) // the script itself is fine
    }

    test("a compile error is reported as file:line:col") {
        val file = script("broken.main.kts", "val x = 1\nval y: String = x\n")
        val e = shouldThrow<ScriptCompilationException> { ScenarioScriptHost(null).compile(file) }
        e.diagnostics.first() shouldMatch Regex("^" + Regex.escape(file.path) + ":2:\\d+: error: .*mismatch.*")
    }

    test("a dependency other than the DSL is refused, not downloaded") {
        val file = script("foreign.main.kts", "@file:DependsOn(\"org.example:thing:1.0\")\nprintln(1)\n")
        val e = shouldThrow<ScriptCompilationException> { ScenarioScriptHost(null).compile(file) }
        e.diagnostics.joinToString() shouldContain "does not download org.example:thing:1.0"
    }

    test("what the script throws comes back as the failure") {
        val file = script("throws.main.kts", "throw IllegalStateException(\"peer went away\")\n")
        val host = ScenarioScriptHost(null)
        val e = shouldThrow<ScriptFailedException> { host.run(host.compile(file).script) }
        e.cause!!.message shouldBe "peer went away"
    }
})
