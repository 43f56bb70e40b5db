package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.test
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.file.shouldExist
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import java.io.File
import java.nio.file.Files
import java.util.concurrent.TimeUnit

/**
 * The man page the archive ships (dist/build.sh writes [ManPage.render]): its sections, exit
 * statuses that are those the launcher exits with, and examples the README shows.
 */
class ManPageSpec : FunSpec({
    val page = ManPage.render("1.2.3", "2026-01-02")

    /** The lines of section [name], up to the next. */
    fun section(name: String): List<String> =
        page.lines().dropWhile { it != ".SH $name" }.drop(1).takeWhile { !it.startsWith(".SH ") }

    test("the page has its sections, in the usual order, and every command's help") {
        page.lines().filter { it.startsWith(".SH ") }.map { it.removePrefix(".SH ") } shouldContainExactly
            listOf("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "EXAMPLES", "FILES", "EXIT STATUS", "ENVIRONMENT", "SEE ALSO")
        page.lines().first() shouldBe ".TH RDMA-RUN 1 \"2026-01-02\" \"rdma-run 1.2.3\" \"User Commands\""
        section("COMMANDS").filter { it.startsWith(".SS ") } shouldContainExactly
            rdmaRun(null).registeredSubcommands().map { ".SS rdma\\-run ${it.commandName}" }
        section("COMMANDS").joinToString("\n") shouldContain "\\-\\-histogram"
    }

    test("EXIT STATUS lists the statuses the launcher declares, then a script's own") {
        val tags = section("EXIT STATUS").zipWithNext().filter { (a, _) -> a == ".TP" }.map { it.second }
        tags shouldContainExactly ExitStatus.entries.map { ".B ${it.code}" } + ".I n"
        for (s in ExitStatus.entries) section("EXIT STATUS").joinToString("\n") shouldContain ManPage.roffLine(s.meaning)
    }

    test("the declared statuses are the ones the commands exit with, and run --help says them") {
        val dir = Files.createTempDirectory("man-page-spec").toFile()
        try {
            rdmaRun(null).test("--version").statusCode shouldBe ExitStatus.SUCCESS.code
            rdmaRun(null).test("nosuchcommand").statusCode shouldBe ExitStatus.FAILURE.code // a usage error
            val binary = File(dir, "binary.main.kts").apply { writeBytes(ByteArray(256) { (it * 7).toByte() }) }
            rdmaRun(null).test(withImplicitRun(arrayOf(binary.path, "--check")).toList()).statusCode shouldBe ExitStatus.SCRIPT_UNUSABLE.code
            Interruption().use { it.interrupted().exitCode shouldBe ExitStatus.INTERRUPTED.code }
        } finally {
            dir.deleteRecursively()
        }
        val help = rdmaRun(null).test("run --help").stdout.replace(Regex("\\s+"), " ")
        for (s in ExitStatus.entries) help shouldContain "${s.code} ${s.brief}"
        help shouldContain "n ${ExitStatus.SCRIPT_EXIT}"
    }

    test("every example is a command line the README shows, and its scripts are samples") {
        val readme = File("../README.md").readText()
        for (command in ManPage.EXAMPLES.flatMap { it.commands }) {
            withClue(command) { readme shouldContain command }
            command.split(' ').filter { it.endsWith(".main.kts") }.forEach { File("..", it).shouldExist() }
        }
        val examples = section("EXAMPLES").joinToString("\n")
        examples shouldContain "rdma\\-run samples/write\\-bw.main.kts \\-\\-loopback \\-d soft0"
    }

    test("FILES names the per-user secret, the compiled-script cache and the archive's samples and docs") {
        val files = section("FILES").filter { it.startsWith(".I ") }
        files shouldContainExactly listOf(".I \$XDG_CONFIG_HOME/rdma\\-run/secret", ".I \$RDMA_RUN_CACHE/scripts",
            ".I samples/", ".I docs/", ".I app/rdma\\-run.aot")
        section("FILES").joinToString("\n") shouldContain "~/.cache/rdma\\-run/scripts"
    }

    test("groff renders the page without warnings").config(enabled = File("/usr/bin/groff").canExecute()) {
        val file = File.createTempFile("rdma-run", ".1").apply { writeText(page) }
        try {
            val groff = ProcessBuilder("groff", "-man", "-Tutf8", "-ww", file.path).redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
            val warnings = groff.errorStream.bufferedReader().readText()
            groff.waitFor(60, TimeUnit.SECONDS) shouldBe true // a guard against a hung groff, not a timing
            warnings shouldBe ""
            groff.exitValue() shouldBe 0
        } finally {
            file.delete()
        }
    }
})
