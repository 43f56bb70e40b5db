package dev.rdmarun.scripts.host

import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.shouldBe
import io.kotest.matchers.shouldNotBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldEndWith
import io.kotest.matchers.string.shouldMatch
import io.kotest.matchers.string.shouldStartWith
import java.io.File
import java.nio.file.Files
import java.nio.file.LinkOption
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

    test("the cache key covers the jar or class folder each linked class is loaded from") {
        // A class folder (this module's classes) and a jar (Kotlin's standard library); the e2e
        // case script_cache_copy shows why the loader, not the code source, is asked.
        val folder = ScenarioScriptHost.classRoot(ScenarioScript::class.java)!!
        folder.resolve("dev/rdmarun/scripts/host/ScenarioScript.class").toFile().isFile shouldBe true
        ScenarioScriptHost.classRoot(KotlinVersion::class.java)!!.fileName.toString() shouldMatch Regex("kotlin-stdlib.*\\.jar")
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

    test("the cache folder and the parents it makes are private (0700), its key 0600") {
        val base = File(dir, "mode/a/b")
        val own = File(base, "scripts")
        ScenarioScriptHost(own).compile(marker("mode.main.kts", "m"))
        for (d in listOf(File(dir, "mode"), File(dir, "mode/a"), base, own)) mode(d) shouldBe "rwx------"
        mode(File(own, "key")) shouldBe "rw-------"
        File(own, "key").length() shouldBe 32L
    }

    // The attacks of issue 18: someone else's jar, with an index line for it, where the user's cache looks.

    /**
     * Plants [evil]'s compiled jar under [good]'s cache key in [target], with the index line an
     * attacker can write: the right digests, signed (if at all) with the attacker's own key, not
     * the user's. Owned by [uid] when given (another user, simulated as root).
     */
    fun plant(target: File, good: File, evil: File, uid: Int? = null) {
        val attacker = File(dir, "attacker-${target.name}")
        val evilJar = ScenarioScriptHost(attacker).compile(evil).cacheJar!!
        val key = ScenarioScriptHost.cacheKey(good.toScriptSource())
        CacheIndex(attacker).store(key, good.readText(), ScenarioScriptHost.classpathDigest) { evilJar.copyTo(it, overwrite = true) }
        for (name in listOf("$key.jar", "index")) {
            val planted = File(attacker, name).copyTo(File(target, name), overwrite = true)
            uid?.let { Files.setAttribute(planted.toPath(), "unix:uid", it) }
        }
    }

    /** Runs [compiled] with a fresh output file and returns what it wrote: "good " when the real script ran, and only it. */
    fun ranAs(compiled: CompiledScenario, name: String): String {
        val out = File(dir, "$name.out").apply { delete() }
        ScenarioScriptHost(null).run(compiled.script, arrayOf(out.path))
        return out.readText()
    }

    test("a jar and index line planted while the folder was 0777 never run: the folder is emptied and made again") {
        val own = File(dir, "open-cache")
        val good = marker("open-good.main.kts", "good ")
        ScenarioScriptHost(own).compile(good)
        setMode(own, "rwxrwxrwx")
        plant(own, good, marker("open-evil.main.kts", "planted "), uid = if (isRoot()) 65534 else null)
        val notes = mutableListOf<String>()
        val again = ScenarioScriptHost(own) { notes += it }.compile(good)
        again.fromCache shouldBe false
        notes.single() shouldBe "emptied the compiled-script cache ${own.absolutePath}, which cannot be trusted: it is writable by others (mode 0777)"
        ranAs(again, "open") shouldBe "good "
        mode(own) shouldBe "rwx------"
        own.list()!!.filter { !it.endsWith(".jar") }.sorted() shouldBe listOf("index", "index.lock", "key")
        dir.list()!!.filter { it.startsWith("open-cache.untrusted-") } shouldBe emptyList() // what was moved aside is deleted
        ScenarioScriptHost(own).compile(good).fromCache shouldBe true
    }

    test("planted files of another user in a folder that is 0700 again (an older rdma-run re-moded it) never run").config(enabled = isRoot()) {
        val own = File(dir, "remoded-cache")
        val good = marker("remoded-good.main.kts", "good ")
        ScenarioScriptHost(own).compile(good)
        plant(own, good, marker("remoded-evil.main.kts", "planted "), uid = 65534)
        val notes = mutableListOf<String>()
        val again = ScenarioScriptHost(own) { notes += it }.compile(good)
        again.fromCache shouldBe false
        notes.single() shouldStartWith "emptied the compiled-script cache ${own.absolutePath}, which cannot be trusted: "
        notes.single() shouldEndWith "belongs to another user (uid 65534)"
        ranAs(again, "remoded") shouldBe "good "
    }

    test("an index line without the user's MAC is ignored: the script is compiled again") {
        val own = File(dir, "mac-cache")
        val good = marker("mac-good.main.kts", "good ")
        ScenarioScriptHost(own).compile(good)
        plant(own, good, marker("mac-evil.main.kts", "planted ")) // the user's own files: only the MAC tells
        val notes = mutableListOf<String>()
        val again = ScenarioScriptHost(own) { notes += it }.apply { debug = true }.compile(good)
        again.fromCache shouldBe false
        notes.single() shouldContain "has an entry in the cache index without a valid MAC"
        ranAs(again, "mac") shouldBe "good "
        val third = ScenarioScriptHost(own).compile(good)
        third.fromCache shouldBe true
        ranAs(third, "mac") shouldBe "good "
    }

    test("a scripts link to a world-writable folder is not followed: the folder is not chmod-ed and its jar never runs") {
        val open = File(dir, "world-writable").apply { mkdirs() }
        val good = marker("link-good.main.kts", "good ")
        plant(open, good, marker("link-evil.main.kts", "planted "))
        setMode(open, "rwxrwxrwx")
        val before = open.list()!!.sorted()
        // The root the link is in: the user's own, or (as root) another user's, as in the attack.
        for (owner in listOfNotNull(null, 65534.takeIf { isRoot() })) {
            val root = File(dir, "link-root-${owner ?: "mine"}").apply { mkdirs() }
            val link = File(root, "scripts").toPath()
            Files.createSymbolicLink(link, open.toPath())
            owner?.let { uid -> for (p in listOf(link, root.toPath())) Files.setAttribute(p, "unix:uid", uid, LinkOption.NOFOLLOW_LINKS) }
            val notes = mutableListOf<String>()
            val compiled = ScenarioScriptHost(link.toFile()) { notes += it }.compile(good)
            compiled.fromCache shouldBe false
            compiled.cacheJar shouldBe null
            val why = if (owner == null) "it is a symbolic link" else "${root.absolutePath} belongs to another user (uid 65534)"
            notes.single() shouldBe "not using the compiled-script cache ${link.toAbsolutePath()}: $why; the script is compiled every time"
            ranAs(compiled, "link") shouldBe "good "
            mode(open) shouldBe "rwxrwxrwx"
            open.list()!!.sorted() shouldBe before
        }
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

private fun mode(f: File) = PosixFilePermissions.toString(Files.getPosixFilePermissions(f.toPath(), LinkOption.NOFOLLOW_LINKS))

private fun setMode(f: File, mode: String) = Files.setPosixFilePermissions(f.toPath(), PosixFilePermissions.fromString(mode))

private fun isRoot() = runCatching { Files.getAttribute(Path.of("/proc/self"), "unix:uid") == 0 }.getOrDefault(false)
