package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.test
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContain
import io.kotest.matchers.collections.shouldContainAll
import io.kotest.matchers.collections.shouldContainExactlyInAnyOrder
import io.kotest.matchers.collections.shouldNotContain
import io.kotest.matchers.collections.shouldNotContainAnyOf
import io.kotest.matchers.shouldBe
import java.io.File
import java.nio.file.Files
import java.util.concurrent.TimeUnit

/**
 * `rdma-run --generate-completion SHELL`, run in the shell: what it offers for a command line, in a
 * folder with a script, a subfolder with one, and other files. `rdma-run FILE.main.kts ...` is
 * `rdma-run run FILE.main.kts ...`, so after a script name come the run options and their files.
 * bash is on every build host; zsh and fish are tried where they are installed.
 */
class ShellCompletionSpec : FunSpec({
    val dir = Files.createTempDirectory("shell-completion").toFile()
    afterSpec { dir.deleteRecursively() }
    File(dir, "a.main.kts").writeText("")
    File(dir, "notes.txt").writeText("")
    File(dir, "out.json").writeText("")
    File(dir, "samples").mkdir()
    File(dir, "samples/w.main.kts").writeText("")

    fun script(shell: String): File {
        val result = rdmaRun(null).test(listOf(ShellCompletion.OPTION, shell))
        result.statusCode shouldBe 0
        return File(dir, ".completion.$shell").apply { writeText(result.stdout) }
    }

    fun onPath(program: String) = System.getenv("PATH").orEmpty().split(':').any { File(it, program).canExecute() }

    /** Runs [command] in [dir]; the lines of its standard output. */
    fun shell(vararg command: String): List<String> {
        val process = ProcessBuilder(*command).directory(dir).redirectErrorStream(false).start()
        val out = process.inputStream.bufferedReader().readText()
        val err = process.errorStream.bufferedReader().readText()
        // Only a guard against a hung shell: nothing here is timed.
        process.waitFor(60, TimeUnit.SECONDS) shouldBe true
        withClue(err) { process.exitValue() shouldBe 0 }
        return out.lines().filter { it.isNotEmpty() }
    }

    val bashScript by lazy { script("bash") }

    /** What bash offers for the line [words] (the last one is the word being completed), as bash calls the completion. */
    fun bash(vararg words: String): List<String> = shell("bash", "-c", $$"""
        source "$0"
        fn=$(complete -p rdma-run | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
        COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=()
        "$fn" rdma-run "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
        printf '%s\n' "${COMPREPLY[@]}"
        """.trimIndent(), bashScript.path, *words)

    val runOptions = ScenarioCommand(null).registeredOptions().filterNot { it.hidden }.flatMap { it.names + it.secondaryNames }

    test("after a script name, bash offers every option the run command declares, and not the root's") {
        val offered = bash("rdma-run", "x.main.kts", "-")
        offered shouldContainAll runOptions
        offered shouldNotContainAnyOf listOf("--version", ShellCompletion.OPTION)
    }

    test("after a script name, an option's beginning completes to the run option, root options before it or not") {
        bash("rdma-run", "x.main.kts", "--li") shouldBe listOf("--listen")
        bash("rdma-run", "--debug", "samples/w.main.kts", "--lo") shouldBe listOf("--loopback")
        bash("rdma-run", "x.main.kts", "-q", "2", "--pa") shouldBe listOf("--params")
    }

    test("after a script name, --json and --histogram complete file names") {
        bash("rdma-run", "x.main.kts", "--json", "") shouldContainAll listOf("out.json", "notes.txt", "a.main.kts")
        bash("rdma-run", "x.main.kts", "--loopback", "--histogram", "o") shouldBe listOf("out.json")
    }

    test("where a command name may go, and after run, bash offers the commands, *.main.kts scripts and folders") {
        val first = bash("rdma-run", "")
        first shouldContainAll listOf("devices", "pingpong", "run", "a.main.kts", "samples/")
        first shouldNotContain "notes.txt"
        bash("rdma-run", "run", "").shouldContainExactlyInAnyOrder("a.main.kts", "samples/")
        bash("rdma-run", "sa") shouldBe listOf("samples/")
        bash("rdma-run", "samples/") shouldBe listOf("samples/w.main.kts")
        // Not where a command's arguments or an option's value go.
        bash("rdma-run", "devices", "-").shouldContainExactlyInAnyOrder("-h", "--help")
        bash("rdma-run", "run", "x.main.kts", "--li") shouldBe listOf("--listen")
        bash("rdma-run", "--generate-completion", "") shouldBe emptyList()
    }

    test("zsh: through its bash completion layer, the run options after a script name").config(enabled = onPath("zsh")) {
        val file = script("zsh")
        // As bashcompinit's _bash_complete calls a bash completion function: through its compgen -F.
        val offered = shell("zsh", "-c", $$"""
            source "$1"; shift
            fn=${${_comps[rdma-run]#* -F }%% *}
            local -a words COMP_WORDS; local CURRENT COMP_CWORD
            words=("$@"); CURRENT=$#; COMP_WORDS=("${words[@]}"); (( COMP_CWORD = CURRENT - 1 ))
            compgen -F "$fn" -- "${words[CURRENT]}"
            """.trimIndent(), "zsh", file.path, "rdma-run", "x.main.kts", "--li")
        offered shouldContain "--listen"
        offered shouldNotContain "--version"
    }

    test("fish: the run options after a script name, and files after --json").config(enabled = onPath("fish")) {
        val file = script("fish")
        fun fish(line: String) = shell("fish", "-c", "source \$argv[1]; complete -C\$argv[2]", file.path, line).map { it.substringBefore('\t') }
        fish("rdma-run x.main.kts --li") shouldBe listOf("--listen")
        fish("rdma-run x.main.kts --json ") shouldContainAll listOf("out.json", "notes.txt")
    }
})
