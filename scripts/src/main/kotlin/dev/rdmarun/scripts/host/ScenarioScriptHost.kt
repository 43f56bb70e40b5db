package dev.rdmarun.scripts.host

import java.io.File
import java.net.URI
import java.nio.ByteBuffer
import java.nio.CharBuffer
import java.nio.charset.CodingErrorAction
import java.nio.file.Files
import java.nio.file.LinkOption.NOFOLLOW_LINKS
import java.nio.file.Path
import java.security.MessageDigest
import kotlin.io.path.isDirectory
import kotlin.io.path.isRegularFile
import kotlin.io.path.walk
import kotlin.script.experimental.api.CompiledScript
import kotlin.script.experimental.api.ResultValue
import kotlin.script.experimental.api.ResultWithDiagnostics
import kotlin.script.experimental.api.ScriptCompilationConfiguration
import kotlin.script.experimental.api.ScriptDiagnostic
import kotlin.script.experimental.api.SourceCode
import kotlin.script.experimental.api.constructorArgs
import kotlin.script.experimental.api.with
import kotlin.script.experimental.host.ScriptingHostConfiguration
import kotlin.script.experimental.host.toScriptSource
import kotlin.script.experimental.jvm.CompiledJvmScriptsCache
import kotlin.script.experimental.jvm.compilationCache
import kotlin.script.experimental.jvm.defaultJvmScriptingHostConfiguration
import kotlin.script.experimental.jvm.jvm
import kotlin.script.experimental.jvmhost.BasicJvmScriptingHost
import kotlin.script.experimental.jvm.impl.KJvmCompiledScript
import kotlin.script.experimental.jvmhost.loadScriptFromJar
import kotlin.script.experimental.jvmhost.saveToJar
import kotlin.script.experimental.jvmhost.createJvmCompilationConfigurationFromTemplate
import kotlin.script.experimental.jvmhost.createJvmEvaluationConfigurationFromTemplate
import kotlinx.coroutines.runBlocking

/**
 * A script that does not compile: the compiler's errors as `file:line:col: error: message` lines,
 * and a [hint] (one sentence, without the `hint: ` prefix) when the likely cause is known.
 */
open class ScriptCompilationException(val diagnostics: List<String>, val hint: String? = null) :
    RuntimeException((diagnostics + listOfNotNull(hint?.let { "hint: $it" })).joinToString("\n"))

/** The file is no Kotlin script at all (binary, not UTF-8): [message] is the one sentence that says so. */
class NotAScriptException(message: String) : ScriptCompilationException(listOf(message))

/** The scenario script threw: [cause] is what it threw. */
class ScriptFailedException(cause: Throwable) : RuntimeException(cause.message, cause)

/**
 * A compiled script and how it was obtained: [fromCache] (no compiler ran) or compiled, then
 * stored as [cacheJar] unless [storeError] says why not (a read-only cache is not an error).
 */
class CompiledScenario(val script: CompiledScript, val fromCache: Boolean, val cacheJar: File?, val storeError: Throwable?)

/**
 * Compiles and runs scenario scripts. Compiled scripts are cached as jars keyed on the script
 * text and the *contents* of the DSL and runtime jars (not their paths, as main-kts does), so a
 * rebuilt DSL never meets a stale script, and a repeated run skips the compiler entirely.
 *
 * A cached jar is code that runs as the user, so it is loaded only when it is the one this host
 * stored for that script: the cache folder and its files are the user's own and writable by no
 * one else, and no link in it is followed ([PrivateCache]: a folder that was open to others is
 * emptied and made again, one of another user or a link is not used), and [CacheIndex] records
 * the SHA-256 of each jar with the script text and classpath it was compiled from, under a MAC
 * keyed by the user's secret key. A jar whose digest does not match its entry, or that has no
 * entry with a valid MAC, is compiled again and replaced.
 *
 * @param cacheDir where compiled scripts go; null disables the cache (tests).
 * @param note how the host tells the user something (a cache folder it will not use or had to empty; with [debug], more).
 */
class ScenarioScriptHost(private val cacheDir: File?, private val note: (String) -> Unit = {}) {
    /** Say why a cache entry was not used (a jar that does not match its index entry, say). */
    @Volatile
    var debug = false

    /** The cache folder once it is known to be private, or null (none, or refused); checked at the first compile. */
    private val usableCache: PrivateCache? by lazy {
        try {
            cacheDir?.let { PrivateCache.open(it.toPath(), note) }
        } catch (e: Exception) {
            prepareError = e // a read-only place: no cache, which only costs the compile
            null
        }
    }

    /** Why the cache folder could not be made (a store that could not happen): reported as [CompiledScenario.storeError]. */
    @Volatile
    private var prepareError: Throwable? = null

    /** What the cache saw during the current [compile] (one compile at a time per host). */
    private class CacheOutcome(val onCompiling: () -> Unit) {
        var hit = false
        var jar: File? = null
        var storeError: Throwable? = null
    }

    @Volatile
    private var outcome: CacheOutcome? = null

    /**
     * The jar cache, verified and observed: a jar is loaded only if its digest matches the index;
     * a miss means the compiler runs next, and a failed store only loses the cache entry.
     */
    private inner class VerifiedCache : CompiledJvmScriptsCache {
        override fun get(script: SourceCode, scriptCompilationConfiguration: ScriptCompilationConfiguration): CompiledScript? {
            val cache = usableCache
            val key = cacheKey(script)
            val jar = cache?.let { File(it.dir.toFile(), "$key.jar") }
            val found = if (cache == null) null else verifiedJar(cache, key, script.text)?.loadScriptFromJar()
            outcome?.let {
                it.jar = jar
                it.hit = found != null
                if (found == null) it.onCompiling()
            }
            return found
        }

        override fun store(compiledScript: CompiledScript, script: SourceCode, scriptCompilationConfiguration: ScriptCompilationConfiguration) {
            val cache = usableCache
            if (cache == null) {
                outcome?.storeError = prepareError
                return
            }
            try {
                CacheIndex(cache.dir.toFile(), cache.secret).store(cacheKey(script), script.text, classpathDigest) { temp ->
                    (compiledScript as KJvmCompiledScript).saveToJar(temp)
                }
            } catch (e: Exception) {
                outcome?.storeError = e
            }
        }
    }

    /** The cached jar of [key] if the index says it is the one compiled from [text] on this classpath; else null (and why, under debug). */
    private fun verifiedJar(cache: PrivateCache, key: String, text: String): File? {
        val jar = cache.dir.resolve("$key.jar")
        if (!Files.isRegularFile(jar, NOFOLLOW_LINKS)) return null
        val index = CacheIndex(cache.dir.toFile(), cache.secret)
        val entry = index.read()[key]
        val problem = when {
            entry == null && index.forged(key) -> "has an entry in the cache index without a valid MAC (not written by this user's rdma-run)"
            entry == null -> "has no entry in the cache index"
            entry.scriptSha256 != sha256(text.toByteArray()) || entry.classpathSha256 != classpathDigest -> "was compiled from another script or classpath"
            entry.jarSha256 != runCatching { sha256(Files.newInputStream(jar, NOFOLLOW_LINKS).use { it.readAllBytes() }) }.getOrNull() ->
                "does not match its digest in the cache index"
            else -> return jar.toFile()
        }
        if (debug) note("the cached $jar $problem: compiling the script again and replacing it")
        return null
    }

    private val hostConfiguration = ScriptingHostConfiguration(defaultJvmScriptingHostConfiguration) {
        if (cacheDir != null) {
            jvm {
                compilationCache(VerifiedCache())
            }
        }
    }
    private val host = BasicJvmScriptingHost(hostConfiguration)
    private val compilation = createJvmCompilationConfigurationFromTemplate<ScenarioScript>(hostConfiguration)
    private val evaluation = createJvmEvaluationConfigurationFromTemplate<ScenarioScript>(hostConfiguration)

    /**
     * Compiles (or takes from the cache); throws [ScriptCompilationException] with file:line:col
     * errors. [onCompiling] is called when the compiler is about to run (no cache entry).
     */
    fun compile(file: File, onCompiling: () -> Unit = {}): CompiledScenario {
        if (!file.isFile) throw ScriptCompilationException(listOf("${file.path}: no such script file"))
        checkText(file)
        val seen = CacheOutcome(onCompiling)
        if (cacheDir == null) onCompiling()
        outcome = seen
        val result = try {
            runBlocking { host.compiler(file.toScriptSource(), compilation) }
        } finally {
            outcome = null
        }
        return when (result) {
            is ResultWithDiagnostics.Success -> CompiledScenario(result.value, seen.hit, seen.jar, seen.storeError)
            is ResultWithDiagnostics.Failure -> throw ScriptCompilationException(errors(file, result.reports), hint(file, result.reports))
        }
    }

    /** Runs a compiled script; throws [ScriptFailedException] with what the script threw. */
    fun run(compiled: CompiledScript, args: Array<String> = emptyArray()) {
        val config = evaluation.with { constructorArgs(args) } // one argument: the array
        when (val result = runBlocking { host.evaluator(compiled, config) }) {
            is ResultWithDiagnostics.Failure -> throw ScriptFailedException(
                result.reports.firstNotNullOfOrNull { it.exception } ?: IllegalStateException(
                    result.reports.joinToString("; ") { it.message }))
            is ResultWithDiagnostics.Success -> when (val value = result.value.returnValue) {
                is ResultValue.Error -> throw ScriptFailedException(value.error)
                else -> Unit
            }
        }
    }

    companion object {
        /**
         * Throws [NotAScriptException] for a file the compiler would answer with an error per byte:
         * one with NUL bytes (a binary) or that is not UTF-8.
         */
        private fun checkText(file: File) {
            val bytes = Files.readAllBytes(file.toPath())
            val nul = bytes.indexOf(0)
            if (nul >= 0) throw NotAScriptException("${file.path} is not a Kotlin script: it contains a NUL byte at offset $nul (a binary file?)")
            val input = ByteBuffer.wrap(bytes)
            val result = Charsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(input, CharBuffer.allocate(bytes.size), true)
            if (result.isError) {
                throw NotAScriptException("${file.path} is not a Kotlin script: it is not UTF-8 text (byte 0x%02x at offset %d)"
                    .format(bytes[input.position()].toInt() and 0xff, input.position()))
            }
        }

        /** Digest of the jars (or class folders) that compiled scripts link against. */
        internal val classpathDigest: String by lazy {
            val digest = MessageDigest.getInstance("SHA-256")
            listOf(ScenarioScript::class.java, dslAnchor(), runtimeAnchor()).mapNotNull { it }
                .mapNotNull { classRoot(it) }
                .distinct()
                .forEach { digestPath(digest, it) }
            digest.update(KotlinVersion.CURRENT.toString().toByteArray())
            hex(digest.digest())
        }

        /**
         * The jar or class folder that [c]'s loader finds it in now. Not its code source: a class
         * from an AOT cache (JEP 483) keeps the location of the training run, so a launcher copied
         * elsewhere would key its cache on jars it does not run, or on none.
         */
        internal fun classRoot(c: Class<*>): Path? {
            val name = c.name.replace('.', '/') + ".class"
            val url = (c.classLoader ?: ClassLoader.getSystemClassLoader()).getResource(name) ?: return null
            return when (url.protocol) {
                "jar" -> Path.of(URI(url.path.substringBefore("!/")))
                "file" -> generateSequence(Path.of(url.toURI())) { it.parent }.elementAtOrNull(name.count { it == '/' } + 1)
                else -> null
            }
        }

        private fun dslAnchor(): Class<*>? = runCatching { Class.forName("dev.rdmarun.dsl.RdmaKt") }.getOrNull()
        private fun runtimeAnchor(): Class<*>? =
            runCatching { Class.forName("dev.rdmarun.runtime.QueuePair") }.getOrNull()

        @OptIn(kotlin.io.path.ExperimentalPathApi::class)
        private fun digestPath(digest: MessageDigest, path: Path) {
            digest.update(path.fileName.toString().toByteArray())
            when {
                path.isRegularFile() -> digest.update(Files.readAllBytes(path))
                path.isDirectory() -> path.walk().filter { it.isRegularFile() }.sorted().forEach {
                    digest.update(path.relativize(it).toString().toByteArray())
                    digest.update(Files.readAllBytes(it))
                }
            }
        }

        internal fun sha256(bytes: ByteArray): String = hex(MessageDigest.getInstance("SHA-256").digest(bytes))

        fun cacheKey(source: SourceCode): String {
            val digest = MessageDigest.getInstance("SHA-256")
            digest.update(classpathDigest.toByteArray())
            digest.update(source.text.toByteArray())
            return hex(digest.digest()).take(40)
        }

        private fun hex(bytes: ByteArray) = bytes.joinToString("") { "%02x".format(it) }

        private fun errors(file: File, reports: List<ScriptDiagnostic>): List<String> {
            val errors = reports.filter { it.severity >= ScriptDiagnostic.Severity.ERROR }
            return (errors.ifEmpty { reports }).map { d ->
                val where = d.location?.start?.let { "${d.sourcePath ?: file.path}:${it.line}:${it.col}" }
                    ?: (d.sourcePath ?: file.path)
                "$where: error: ${d.message}"
            }
        }

        /** What a script that uses the DSL without importing it needs: there are no default imports of it (see [ScenarioScript]). */
        internal const val IMPORT_HINT = "add `import dev.rdmarun.dsl.*` at the top of the script (after any @file: annotations)"

        private val dslImport = Regex("""^\s*import\s+dev\.rdmarun\.dsl\b""", RegexOption.MULTILINE)

        /** [IMPORT_HINT] when names are unresolved and the script imports nothing from the DSL; else null. */
        private fun hint(file: File, reports: List<ScriptDiagnostic>): String? {
            val unresolved = reports.any { it.severity >= ScriptDiagnostic.Severity.ERROR && it.message.startsWith("Unresolved reference") }
            return if (unresolved && !dslImport.containsMatchIn(file.readText())) IMPORT_HINT else null
        }

        /** ~/.cache/rdma-run/scripts, or $RDMA_RUN_CACHE/scripts (the VM suite points it at a shared folder). */
        fun defaultCacheDir(): File {
            val base = System.getenv("RDMA_RUN_CACHE")?.let(::File)
                ?: File(System.getenv("XDG_CACHE_HOME") ?: (System.getProperty("user.home") + "/.cache"), "rdma-run")
            return File(base, "scripts")
        }
    }
}
