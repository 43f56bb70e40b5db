package dev.rdmarun.scripts.host

import io.kotest.assertions.fail
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldNotBeEmpty
import io.kotest.matchers.shouldBe
import java.io.File
import java.io.IOException
import java.nio.file.FileSystems
import java.nio.file.FileVisitResult
import java.nio.file.Files
import java.nio.file.LinkOption
import java.nio.file.Path
import java.nio.file.SimpleFileVisitor
import java.nio.file.attribute.BasicFileAttributes
import java.util.zip.ZipEntry
import java.util.zip.ZipOutputStream
import javax.xml.parsers.DocumentBuilderFactory
import kotlin.io.path.createDirectories
import kotlin.io.path.createSymbolicLinkPointingTo
import kotlin.io.path.listDirectoryEntries
import kotlin.script.experimental.api.ResultWithDiagnostics
import kotlin.script.experimental.api.ScriptDiagnostic
import kotlin.script.experimental.host.toScriptSource
import kotlin.script.experimental.jvmhost.BasicJvmScriptingHost
import kotlin.script.experimental.jvmhost.createJvmCompilationConfigurationFromTemplate
import kotlinx.coroutines.runBlocking
import org.jetbrains.kotlin.mainKts.MainKtsScript

/**
 * Every `.main.kts` in the repository compiles under the STOCK kotlin-main-kts definition, which is
 * what IntelliJ and `kotlin FILE.main.kts` do with it: the DSL comes from the script's own
 * `@file:DependsOn`, resolved by main-kts's Maven resolver, and nothing comes from rdma-run's
 * definition (no default imports, no supplied classpath). Compiled only, never run.
 *
 * main-kts reads no `maven.repo.local`: its local repository and mirrors come from the Maven
 * settings file, `~/.m2/settings.xml` unless a system property names another (under its shaded
 * name, see [SETTINGS_PROPERTIES]). The test points it at its own settings: a fresh local
 * repository, and one mirror for every remote (Maven Central included) that serves this build's
 * DSL and runtime jars and poms over the Maven local repository the build downloaded into. So it
 * works offline, after `verify` (no `install`), and an rdma-dsl installed in ~/.m2 by an older
 * build can neither be used nor hide a missing one.
 */
class StockMainKtsSpec : FunSpec({
    val root = File("..").canonicalFile
    val glob = FileSystems.getDefault().getPathMatcher("glob:**.main.kts")
    // Found at test time, so a new sample or scenario is covered without touching this spec.
    val scripts = root.walkTopDown()
        .onEnter { it == root || !(it.name == "target" || it.name.startsWith(".")) }
        .filter { it.isFile && glob.matches(it.toPath()) }
        .sortedBy { it.relativeTo(root).path }
        .toList()

    val dir = Files.createTempDirectory("stock-main-kts")
    val localRepository = dir.resolve("local")
    val settings = dir.resolve("settings.xml")
    val reactor = ReactorRepository(root, dir.resolve("remote"))
    val previous = SETTINGS_PROPERTIES.associateWith { System.getProperty(it) }

    beforeSpec {
        reactor.layOut()
        Files.writeString(settings, """
            <settings>
              <localRepository>$localRepository</localRepository>
              <mirrors>
                <mirror>
                  <id>reactor-over-local</id>
                  <mirrorOf>*</mirrorOf>
                  <url>${reactor.dir.toUri()}</url>
                </mirror>
              </mirrors>
            </settings>
        """.trimIndent())
        SETTINGS_PROPERTIES.forEach { System.setProperty(it, settings.toString()) }
    }
    afterSpec {
        previous.forEach { (name, value) -> if (value == null) System.clearProperty(name) else System.setProperty(name, value) }
        deleteWithoutFollowingLinks(dir)
    }

    val host = BasicJvmScriptingHost()
    val compilation = createJvmCompilationConfigurationFromTemplate<MainKtsScript>()

    fun compile(file: File) {
        val result = runBlocking { host.compiler(file.toScriptSource(), compilation) }
        if (result is ResultWithDiagnostics.Failure) {
            fail("${file.relativeTo(root)} does not compile under the stock main-kts definition:\n" + describe(file, result.reports))
        }
    }

    test("the repository has scenario scripts to check") {
        scripts.shouldNotBeEmpty()
    }

    test("@file:DependsOn(rdma-dsl) resolves to this build's jar, through the test's repository") {
        val probe = dir.resolve("probe.main.kts").toFile().apply {
            writeText("@file:DependsOn(\"dev.rdmarun:rdma-dsl:${reactor.version}\")\n\nimport dev.rdmarun.dsl.*\n\nval e: ScenarioException? = null\n")
        }
        compile(probe)
        val resolved = localRepository.resolve("dev/rdmarun/rdma-dsl/${reactor.version}/rdma-dsl-${reactor.version}.jar")
        Files.mismatch(resolved, reactor.dslJar) shouldBe -1L
    }

    for (script in scripts) {
        test(script.relativeTo(root).path) { compile(script) }
    }
})

/**
 * Deletes [dir] and what is under it, removing links but never what they point to: the remote
 * repository links to the shared Maven local repository. (File.deleteRecursively follows links.)
 */
private fun deleteWithoutFollowingLinks(dir: Path) {
    if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) return
    Files.walkFileTree(dir, object : SimpleFileVisitor<Path>() { // no FOLLOW_LINKS: a link is a file here
        override fun visitFile(file: Path, attrs: BasicFileAttributes): FileVisitResult {
            Files.delete(file)
            return FileVisitResult.CONTINUE
        }

        override fun postVisitDirectory(d: Path, e: IOException?): FileVisitResult {
            if (e != null) throw e
            Files.delete(d)
            return FileVisitResult.CONTINUE
        }
    })
}

/** Both names of main-kts's user-settings property: the shaded jar reads the relocated one. */
private val SETTINGS_PROPERTIES = listOf("org.jetbrains.kotlin.org.apache.maven.user-settings", "org.apache.maven.user-settings")

/** The compiler's diagnostics as `file:line:col: severity: message` lines (what an IDE would underline). */
private fun describe(file: File, reports: List<ScriptDiagnostic>): String =
    reports.filter { it.severity >= ScriptDiagnostic.Severity.WARNING }.joinToString("\n") { d ->
        val where = d.location?.start?.let { "${d.sourcePath ?: file.path}:${it.line}:${it.col}" } ?: (d.sourcePath ?: file.path)
        "$where: ${d.severity.name.lowercase()}: ${d.message}" + (d.exception?.let { " ($it)" } ?: "")
    }

/**
 * A Maven repository in [dir]: the Maven local repository the build resolved into (each top folder
 * a link), with dev/rdmarun replaced by this build's parent pom, runtime and DSL (jar and pom).
 */
private class ReactorRepository(private val root: File, val dir: Path) {
    val version: String = projectVersion(File(root, "pom.xml"))
    lateinit var dslJar: Path

    fun layOut() {
        val m2 = mavenLocalRepository()
        dir.createDirectories()
        for (entry in m2.listDirectoryEntries()) {
            if (entry.fileName.toString() != "dev") dir.resolve(entry.fileName).createSymbolicLinkPointingTo(entry)
        }
        val dev = dir.resolve("dev").createDirectories()
        m2.resolve("dev").takeIf { Files.isDirectory(it) }?.listDirectoryEntries()?.forEach {
            if (it.fileName.toString() != "rdmarun") dev.resolve(it.fileName).createSymbolicLinkPointingTo(it)
        }
        artifact("rdma-run-parent", pom = File(root, "pom.xml"), classes = null)
        artifact("rdma-runtime", pom = File(root, "runtime/pom.xml"), classes = codeSource("dev.rdmarun.runtime.QueuePair"))
        dslJar = artifact("rdma-dsl", pom = File(root, "dsl/pom.xml"), classes = codeSource("dev.rdmarun.dsl.RdmaKt"))!!
    }

    /** Lays out one artifact; [classes] is its jar, or its classes folder (a build that stopped before package), jarred here. */
    private fun artifact(artifactId: String, pom: File, classes: Path?): Path? {
        val folder = dir.resolve("dev/rdmarun/$artifactId/$version").createDirectories()
        Files.copy(pom.toPath(), folder.resolve("$artifactId-$version.pom"))
        if (classes == null) return null
        val jar = folder.resolve("$artifactId-$version.jar")
        if (Files.isDirectory(classes)) jarFolder(classes, jar) else Files.copy(classes, jar)
        return jar
    }

    /** The Maven local repository, found from a third-party jar on the test classpath (wherever -Dmaven.repo.local put it). */
    private fun mavenLocalRepository(): Path {
        // .../org/jetbrains/kotlinx/kotlinx-coroutines-core-jvm/VERSION/kotlinx-coroutines-core-jvm-VERSION.jar
        val jar = codeSource("kotlinx.coroutines.CoroutineScope")
        val repository = jar.parent.parent.parent.parent.parent.parent
        check(Files.isDirectory(repository.resolve("org/jetbrains/kotlinx"))) { "$jar is not in a Maven repository" }
        return repository
    }

    private fun codeSource(className: String): Path =
        Path.of(Class.forName(className).protectionDomain.codeSource.location.toURI())

    private fun jarFolder(classes: Path, jar: Path) {
        ZipOutputStream(Files.newOutputStream(jar)).use { zip ->
            Files.walk(classes).use { paths ->
                paths.filter { Files.isRegularFile(it) }.sorted().forEach {
                    zip.putNextEntry(ZipEntry(classes.relativize(it).joinToString("/")))
                    Files.copy(it, zip)
                    zip.closeEntry()
                }
            }
        }
    }

    private companion object {
        fun projectVersion(pom: File): String {
            val project = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(pom).documentElement
            val children = project.childNodes
            return (0 until children.length).map { children.item(it) }.first { it.nodeName == "version" }.textContent.trim()
        }
    }
}
