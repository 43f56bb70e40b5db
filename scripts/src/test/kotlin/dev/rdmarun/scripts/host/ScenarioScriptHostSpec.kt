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
import java.nio.file.Path
import java.nio.file.attribute.PosixFilePermissions
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import kotlin.script.experimental.host.toScriptSource

private fun jars(cache: File) = cache.listFiles { f -> f.name.endsWith(".jar") }!!.sortedBy { it.name }

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
        val cached = jars(cache)
        cached shouldHaveSize 1
        // A new host (a new process, in effect) finds the jar instead of compiling again.
        val stamp = cached[0].lastModified()
        val again = ScenarioScriptHost(cache).compile(file) { compiling++ }
        again.fromCache shouldBe true
        again.cacheJar shouldBe cached[0]
        compiling shouldBe 1
        jars(cache) shouldBe cached
        cached[0].lastModified() shouldBe stamp
        // Changed text is a different entry.
        file.appendText("\n// changed\n")
        ScenarioScriptHost(cache).compile(file)
        jars(cache) shouldHaveSize 2
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

    test("a script that uses the DSL without importing it gets the compiler's errors and a hint to import it") {
        // No default import of the DSL (an IDE has none): the first unresolved name is the scenario itself.
        val file = script("unimported.main.kts", "@file:DependsOn(\"dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT\")\n\nrdma { connect(peer) }\n")
        val e = shouldThrow<ScriptCompilationException> { ScenarioScriptHost(null).compile(file) }
        e.diagnostics.first() shouldMatch Regex("^" + Regex.escape(file.path) + ":3:1: error: Unresolved reference 'rdma'.*")
        e.hint shouldBe "add `import dev.rdmarun.dsl.*` at the top of the script (after any @file: annotations)"
        e.message!!.lines().last() shouldBe "hint: ${e.hint}"
    }

    test("no import hint when the script imports from the DSL, or when nothing is unresolved") {
        val imported = script("imported.main.kts", "import dev.rdmarun.dsl.rdma\n\nrdma { connect(peer); nosuchCall() }\n")
        val unresolved = shouldThrow<ScriptCompilationException> { ScenarioScriptHost(null).compile(imported) }
        unresolved.diagnostics.single() shouldContain "Unresolved reference 'nosuchCall'"
        unresolved.hint shouldBe null
        val mismatch = script("mismatch.main.kts", "val x: String = 1\n")
        shouldThrow<ScriptCompilationException> { ScenarioScriptHost(null).compile(mismatch) }.hint shouldBe null
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

    // ---- the compiled-script cache: private, and only jars it stored itself are run ----

    /** A script that appends [tag] to the file given as its first argument: what ran is visible. */
    fun marker(name: String, tag: String) = script(name, "java.io.File(args[0]).appendText(\"$tag\")\n")

    test("a jar planted under a script's key is not run: the script is compiled again and the jar replaced") {
        val own = File(dir, "planted-cache")
        val good = marker("good.main.kts", "good ")
        val evil = marker("evil.main.kts", "planted ")
        val goodJar = ScenarioScriptHost(own).compile(good).cacheJar!!
        // The planted jar: a real compiled script, stored under the good script's key.
        val evilJar = ScenarioScriptHost(File(dir, "elsewhere")).compile(evil).cacheJar!!
        evilJar.copyTo(goodJar, overwrite = true)
        val notes = mutableListOf<String>()
        val again = ScenarioScriptHost(own) { notes += it }.apply { debug = true }.compile(good)
        again.fromCache shouldBe false
        notes.single() shouldContain "does not match its digest in the cache index"
        val out = File(dir, "planted.txt")
        ScenarioScriptHost(null).run(again.script, arrayOf(out.path))
        out.readText() shouldBe "good " // the planted code's side effect did not happen
        goodJar.readBytes() shouldNotBe evilJar.readBytes()
        // Replaced: the next run takes it from the cache, and it is the good script.
        val third = ScenarioScriptHost(own).compile(good)
        third.fromCache shouldBe true
        ScenarioScriptHost(null).run(third.script, arrayOf(out.path))
        out.readText() shouldBe "good good "
    }

    test("a jar with no index entry, or an index that cannot be read, is compiled again") {
        val own = File(dir, "no-index-cache")
        val good = marker("unindexed.main.kts", "unindexed ")
        ScenarioScriptHost(own).compile(good)
        File(own, "index").writeText("not an index\n")
        ScenarioScriptHost(own).compile(good).fromCache shouldBe false
        File(own, "index").delete()
        ScenarioScriptHost(own).compile(good).fromCache shouldBe false
        ScenarioScriptHost(own).compile(good).fromCache shouldBe true // the entry is back
        File(own, "index").readLines().first() shouldBe CacheIndex.HEADER
    }

    test("a tampered jar is compiled again; quietly unless debug") {
        val own = File(dir, "tampered-cache")
        val good = marker("tampered.main.kts", "x")
        val jar = ScenarioScriptHost(own).compile(good).cacheJar!!
        jar.appendBytes(byteArrayOf(0))
        val notes = mutableListOf<String>()
        ScenarioScriptHost(own) { notes += it }.compile(good).fromCache shouldBe false
        notes shouldBe emptyList()
        ScenarioScriptHost(own).compile(good).fromCache shouldBe true
    }

    test("the cache folder and the parents it makes are private (0700); an existing one is made private") {
        val base = File(dir, "mode/a/b")
        val own = File(base, "scripts")
        ScenarioScriptHost(own).compile(marker("mode.main.kts", "m"))
        for (d in listOf(File(dir, "mode"), File(dir, "mode/a"), base, own)) {
            PosixFilePermissions.toString(Files.getPosixFilePermissions(d.toPath())) shouldBe "rwx------"
        }
        val open = File(dir, "open-cache").apply { mkdirs() }
        Files.setPosixFilePermissions(open.toPath(), PosixFilePermissions.fromString("rwxrwxrwx"))
        ScenarioScriptHost(open).compile(marker("mode.main.kts", "m")).cacheJar shouldNotBe null
        PosixFilePermissions.toString(Files.getPosixFilePermissions(open.toPath())) shouldBe "rwx------"
    }

    test("a cache folder of another user is not used, with a sentence").config(enabled = isRoot()) {
        val theirs = File(dir, "their-cache").apply { mkdirs() }
        Files.setAttribute(theirs.toPath(), "unix:uid", 65534)
        val notes = mutableListOf<String>()
        val compiled = ScenarioScriptHost(theirs) { notes += it }.compile(marker("theirs.main.kts", "t"))
        compiled.fromCache shouldBe false
        compiled.cacheJar shouldBe null
        notes.single() shouldBe "not using the compiled-script cache ${theirs.absolutePath}: it belongs to another user (uid 65534); " +
            "the script is compiled every time"
        theirs.list()!!.toList() shouldBe emptyList()
    }

    test("concurrent writers leave a consistent index with every entry") {
        val own = File(dir, "concurrent-cache")
        val files = (1..4).map { marker("concurrent$it.main.kts", "c$it") }
        val pool = Executors.newFixedThreadPool(files.size)
        try {
            files.map { f -> pool.submit<CompiledScenario> { ScenarioScriptHost(own).compile(f) } }.forEach { it.get(5, TimeUnit.MINUTES) }
        } finally {
            pool.shutdown()
        }
        val entries = CacheIndex(own).read()
        entries.keys shouldBe files.map { ScenarioScriptHost.cacheKey(it.toScriptSource()) }.toSet()
        for ((key, entry) in entries) {
            ScenarioScriptHost.sha256(File(own, "$key.jar").readBytes()) shouldBe entry.jarSha256
        }
        own.list()!!.filter { it.endsWith(".tmp") } shouldBe emptyList()
        files.forEach { ScenarioScriptHost(own).compile(it).fromCache shouldBe true }
    }

    test("temp files that a killed rdma-run left in the cache are removed by the next store; a live store's are not") {
        val own = File(dir, "stale-cache")
        ScenarioScriptHost(own).compile(marker("stale1.main.kts", "1"))
        val stale = File(own, "0123.jar.tmp").apply { writeText("x"); setLastModified(System.currentTimeMillis() - 2 * 3_600_000L) }
        val fresh = File(own, "4567.jar.tmp").apply { writeText("x") }
        ScenarioScriptHost(own).compile(marker("stale2.main.kts", "2"))
        stale.exists() shouldBe false
        fresh.exists() shouldBe true
    }

    test("a binary or non-UTF-8 file is not a Kotlin script: one sentence") {
        val binary = File(dir, "binary.main.kts").apply { writeBytes(byteArrayOf(0x7f, 'E'.code.toByte(), 'L'.code.toByte(), 'F'.code.toByte(), 2, 1, 1, 0, 0)) }
        shouldThrow<NotAScriptException> { ScenarioScriptHost(null).compile(binary) }.diagnostics shouldBe
            listOf("${binary.path} is not a Kotlin script: it contains a NUL byte at offset 7 (a binary file?)")
        val latin1 = File(dir, "latin1.main.kts").apply { writeBytes("println(\"caf\u00e9\")\n".toByteArray(Charsets.ISO_8859_1)) }
        shouldThrow<NotAScriptException> { ScenarioScriptHost(null).compile(latin1) }.diagnostics shouldBe
            listOf("${latin1.path} is not a Kotlin script: it is not UTF-8 text (byte 0xe9 at offset 12)")
    }
})

private fun isRoot() = runCatching { Files.getAttribute(Path.of("/proc/self"), "unix:uid") == 0 }.getOrDefault(false)
