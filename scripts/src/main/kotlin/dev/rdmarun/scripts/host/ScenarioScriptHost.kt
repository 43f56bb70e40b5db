package dev.rdmarun.scripts.host

import java.io.File
import java.nio.file.Files
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
import kotlin.script.experimental.jvmhost.CompiledScriptJarsCache
import kotlin.script.experimental.jvmhost.createJvmCompilationConfigurationFromTemplate
import kotlin.script.experimental.jvmhost.createJvmEvaluationConfigurationFromTemplate
import kotlinx.coroutines.runBlocking

/** A script that does not compile: the compiler's errors as `file:line:col: error: message` lines. */
class ScriptCompilationException(val diagnostics: List<String>) :
    RuntimeException(diagnostics.joinToString("\n"))

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
 * @param cacheDir where compiled scripts go; null disables the cache (tests).
 */
class ScenarioScriptHost(private val cacheDir: File?) {
    /** What the cache saw during the current [compile] (one compile at a time per host). */
    private class CacheOutcome(val onCompiling: () -> Unit) {
        var hit = false
        var jar: File? = null
        var storeError: Throwable? = null
    }

    @Volatile
    private var outcome: CacheOutcome? = null

    /** The jar cache, observed: a miss means the compiler runs next, and a failed store only loses the cache entry. */
    private inner class ObservedCache(private val dir: File) : CompiledJvmScriptsCache {
        private val jars = CompiledScriptJarsCache { source, _ -> File(dir, cacheKey(source) + ".jar") }

        override fun get(script: SourceCode, scriptCompilationConfiguration: ScriptCompilationConfiguration): CompiledScript? {
            val found = jars.get(script, scriptCompilationConfiguration)
            outcome?.let {
                it.jar = jars.scriptToFile(script, scriptCompilationConfiguration)
                it.hit = found != null
                if (found == null) it.onCompiling()
            }
            return found
        }

        override fun store(compiledScript: CompiledScript, script: SourceCode, scriptCompilationConfiguration: ScriptCompilationConfiguration) {
            try {
                dir.mkdirs()
                jars.store(compiledScript, script, scriptCompilationConfiguration)
            } catch (e: Exception) {
                outcome?.storeError = e
            }
        }
    }

    private val hostConfiguration = ScriptingHostConfiguration(defaultJvmScriptingHostConfiguration) {
        if (cacheDir != null) {
            jvm {
                compilationCache(ObservedCache(cacheDir))
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
            is ResultWithDiagnostics.Failure -> throw ScriptCompilationException(errors(file, result.reports))
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
        /** Digest of the jars (or class folders) that compiled scripts link against. */
        private val classpathDigest: String by lazy {
            val digest = MessageDigest.getInstance("SHA-256")
            listOf(ScenarioScript::class.java, dslAnchor(), runtimeAnchor()).mapNotNull { it }
                .map { Path.of(it.protectionDomain.codeSource.location.toURI()) }
                .distinct()
                .forEach { digestPath(digest, it) }
            digest.update(KotlinVersion.CURRENT.toString().toByteArray())
            hex(digest.digest())
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

        /** ~/.cache/rdma-run/scripts, or $RDMA_RUN_CACHE/scripts (the VM suite points it at a shared folder). */
        fun defaultCacheDir(): File {
            val base = System.getenv("RDMA_RUN_CACHE")?.let(::File)
                ?: File(System.getenv("XDG_CACHE_HOME") ?: (System.getProperty("user.home") + "/.cache"), "rdma-run")
            return File(base, "scripts")
        }
    }
}
