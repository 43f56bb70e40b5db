package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.PrintHelpMessage
import com.github.ajalt.clikt.core.context
import com.github.ajalt.clikt.core.parse
import com.github.ajalt.clikt.core.terminal
import com.github.ajalt.mordant.rendering.AnsiLevel
import com.github.ajalt.mordant.terminal.Terminal

/**
 * The man page rdma-run(1) (`man/man1/rdma-run.1` in the archive, written by dist/build.sh): the
 * commands' `--help` as this build prints them at 80 columns (so every option is in it), then
 * examples, files, the exit statuses of [ExitStatus] and the environment.
 */
object ManPage {
    /** An example: a command line the README shows (there with `bin/` in front), and what it does. */
    data class Example(val commands: List<String>, val what: String)

    val EXAMPLES = listOf(
        Example(listOf("rdma-run samples/write-bw.main.kts --loopback -d soft0"),
            "RDMA WRITE bandwidth, server and client in one JVM on soft0, rdma-run's software provider: no RDMA needed. " +
                "Run from the directory rdma-run was unpacked in, which holds samples/."),
        Example(listOf("rdma-run samples/write-bw.main.kts --listen 18515 -d rxe0 -q 2",
            "rdma-run samples/write-bw.main.kts --peer 10.77.0.1 -d rxe0 -q 2"),
            "The same between two hosts: the server on one, then the client on the other, naming the server's address. " +
                "Both give the same parameters (the handshake compares them)."),
        Example(listOf("rdma-run samples/write-bw.main.kts --check"),
            "Compile the script and run it up to connect(peer): print what it would create, touching no device."),
        Example(listOf("rdma-run samples/pingpong-lat.main.kts --loopback -d soft0 --json lat.json",
            "rdma-run report lat.json -o report.html"),
            "Send/receive latency on soft0 with the results also as JSON (schema: docs/results-json.md), then an HTML page of them."),
        Example(listOf("rdma-run pingpong -d soft0", "rdma-run pingpong -d soft0 127.0.0.1"),
            "RC ping-pong, wire-compatible with ibv_rc_pingpong: a server, then from another terminal its client " +
                "(from another host: the server's address)."),
        Example(listOf("rdma-run devices"), "The RDMA devices, then soft0; exits 1 when the kernel has none, and says why."),
        Example(listOf("source <(rdma-run --generate-completion bash)"),
            "Tab completion in bash, also of a script's options after its name (zsh and fish too)."),
    )

    private const val WIDTH = 80

    /** The page: [version] and [date] (YYYY-MM-DD) for its header. */
    fun render(version: String, date: String): String = buildString {
        fun line(text: String) = append(text).append('\n')
        fun noFill(text: String) {
            line(".nf")
            text.trimEnd().lines().forEach { line(roffLine(it)) }
            line(".fi")
        }
        fun tagged(tag: String, text: String) {
            line(".TP")
            line(tag)
            line(roffLine(text))
        }
        val commands = rdmaRun(null).registeredSubcommands().map { it.commandName }

        line(".TH RDMA-RUN 1 \"$date\" \"rdma-run $version\" \"User Commands\"")
        line(".SH NAME")
        line("rdma\\-run \\- RDMA experiments from scenario scripts: run them, ping\\-pong, list devices and GIDs")
        line(".SH SYNOPSIS")
        line(".B rdma\\-run")
        line("[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...")
        line(".br")
        line(".B rdma\\-run")
        line("\\fIFILE.main.kts\\fR [\\fIOPTIONS\\fR] (short for \\fBrdma\\-run ${ScenarioCommand.NAME}\\fR \\fIFILE.main.kts\\fR)")
        line(".SH DESCRIPTION")
        noFill(help(emptyList()))
        line(".SH COMMANDS")
        for (c in commands) {
            line(".SS rdma\\-run $c")
            noFill(help(listOf(c)))
        }

        line(".SH EXAMPLES")
        for (e in EXAMPLES) {
            line(".PP")
            line(roffLine(e.what))
            line(".PP")
            line(".RS 4")
            noFill(e.commands.joinToString("\n"))
            line(".RE")
        }

        line(".SH FILES")
        tagged(".I \$XDG_CONFIG_HOME/rdma\\-run/secret",
            "(by default ~/.config/rdma-run/secret) The per-user secret of the control connection, used when neither --token " +
                "nor \$${ScenarioCommand.TOKEN_ENV} gives one; made on first use, mode 0600. Copy it to the same place on the " +
                "other host, unless the two share the home directory.")
        tagged(".I \$RDMA_RUN_CACHE/scripts",
            "(else \$XDG_CACHE_HOME/rdma-run/scripts, by default ~/.cache/rdma-run/scripts) The compiled-script cache, " +
                "private to the user (0700): the compiled scripts, their signed index and the key (0600) that signs it.")
        tagged(".I samples/", "In the directory rdma-run was unpacked in (the parent of its bin/): the sample scenarios.")
        tagged(".I docs/", "Beside samples/: docs/results-json.md, the --json document's schema; README.md, SECURITY.md " +
            "(the threat model, every failure tried and its sentence) and BENCHMARKS.md are in the directory itself.")
        tagged(".I app/rdma\\-run.aot", "Beside samples/: the AOT cache of the launcher's classes, which halves startup; " +
            "the launcher does without it when the jars are newer or it cannot be used.")

        line(".SH EXIT STATUS")
        for (s in ExitStatus.entries) tagged(".B ${s.code}", s.meaning)
        tagged(".I n", ExitStatus.SCRIPT_EXIT)

        line(".SH ENVIRONMENT")
        tagged(".B ${ScenarioCommand.TOKEN_ENV}", "the control connection's shared secret (--token)")
        tagged(".B RDMA_RUN_CACHE", "where compiled scripts are cached (see FILES)")
        tagged(".B XDG_CONFIG_HOME, XDG_CACHE_HOME", "where the per-user secret and the compiled-script cache are (see FILES)")
        tagged(".B RDMA_RUN_JAVA_OPTS", "extra options for the Java runtime")
        line(".SH SEE ALSO")
        line("ibv_rc_pingpong(1), ib_send_lat(1), ib_write_bw(1), ibv_devices(1), show_gids(8)")
    }

    /** `rdma-run [path...] --help` as printed on an 80-column terminal without colours. */
    private fun help(path: List<String>): String {
        val root = rdmaRun(null).context {
            terminal = Terminal(ansiLevel = AnsiLevel.NONE, width = WIDTH, nonInteractiveWidth = WIDTH, interactive = false)
        }
        try {
            root.parse(path + "--help")
        } catch (e: PrintHelpMessage) {
            return root.getFormattedHelp(e).orEmpty()
        }
        error("rdma-run ${path.joinToString(" ")} --help printed no help")
    }

    /** `java -cp app/rdma-run.jar dev.rdmarun.scripts.ManPage VERSION DATE` (dist/build.sh): the page on standard output. */
    @JvmStatic
    fun main(args: Array<String>) {
        require(args.size == 2) { "usage: ManPage VERSION YYYY-MM-DD" }
        print(render(args[0], args[1]))
    }

    /** [text] as one line of roff: backslashes and minus signs escaped, no request or control character first. */
    internal fun roffLine(text: String): String {
        val escaped = text.replace("\\", "\\e").replace("-", "\\-")
        return if (escaped.startsWith(".") || escaped.startsWith("'")) "\\&$escaped" else escaped
    }
}
