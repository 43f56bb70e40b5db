package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.CliktCommand
import com.github.ajalt.clikt.core.Context
import com.github.ajalt.clikt.core.findOrSetObject
import com.github.ajalt.clikt.core.PrintCompletionMessage
import com.github.ajalt.clikt.core.main
import com.github.ajalt.clikt.core.subcommands
import com.github.ajalt.clikt.parameters.options.flag
import com.github.ajalt.clikt.parameters.options.option
import com.github.ajalt.clikt.parameters.options.validate
import com.github.ajalt.clikt.parameters.types.choice
import com.github.ajalt.clikt.completion.completionOption
import com.github.ajalt.clikt.parameters.options.versionOption
import dev.rdmarun.dsl.CONTROL_PROTOCOL_VERSION
import dev.rdmarun.scripts.host.ScenarioScriptHost
import java.io.File

/**
 * Root of the `rdma-run` command line: global options, then dispatch to a subcommand.
 * [cliktCompletion]: clikt's own completion option instead of rdma-run's, which starts from its
 * script ([ShellCompletion]).
 */
class RdmaRun internal constructor(cliktCompletion: Boolean) : CliktCommand(name = "rdma-run") {
    constructor() : this(cliktCompletion = false)

    // Bare `rdma-run` shows the command list rather than silently succeeding.
    override val printHelpOnEmptyArgs = true

    private val debug by option("--debug", help = "On errors, print the stack trace too").flag()
    private val global by findOrSetObject { GlobalOptions() }

    init {
        versionOption(VERSION, message = { "rdma-run $it (control protocol ${CONTROL_PROTOCOL_VERSION}; Java ${Runtime.version()})" })
        // `rdma-run --generate-completion bash|zsh|fish`: a completion script for the shell. Clikt
        // writes its script only from its own option, so rdma-run's takes it from a copy of the
        // commands that has clikt's, and adds what the implicit `run` needs.
        val help = "Print a completion script for bash, zsh or fish and exit"
        if (cliktCompletion) {
            completionOption(ShellCompletion.OPTION, help = help)
        } else {
            val metavar = ShellCompletion.SHELLS.joinToString("|", "(", ")")
            registerOption(option(ShellCompletion.OPTION, help = help, metavar = metavar, eager = true)
                .choice(*ShellCompletion.SHELLS.toTypedArray())
                .validate { shell ->
                    val script = ShellCompletion.script(this@RdmaRun, shell) { commands(RdmaRun(cliktCompletion = true), null) }
                    throw PrintCompletionMessage(script)
                })
        }
    }

    override fun help(context: Context) = """
        Run RDMA experiments from the JVM.

        `rdma-run FILE.main.kts [--listen [ADDR:]PORT | --peer HOST[:PORT] | --loopback] ...` runs a scenario
        script (short for `rdma-run run FILE.main.kts ...`; see `rdma-run run --help`).
    """.trimIndent()

    override fun run() {
        global.debug = debug
    }
}

/** This build's version: the jar's Implementation-Version (Maven's project version), or "development build" from classes. */
val VERSION: String = RdmaRun::class.java.`package`?.implementationVersion ?: "development build"

/**
 * The command line with every subcommand registered (main and the specs use this).
 * [scriptCache]: where compiled scenario scripts are kept; null compiles every time (tests).
 */
fun rdmaRun(scriptCache: File? = ScenarioScriptHost.defaultCacheDir()): CliktCommand = commands(RdmaRun(), scriptCache)

private fun commands(root: RdmaRun, scriptCache: File?): CliktCommand = root.subcommands(
    DevicesCommand(),
    GidsCommand(),
    PingpongCommand(),
    ScenarioCommand(scriptCache),
    ReportCommand(),
)

/**
 * `rdma-run FILE.main.kts ...` is `rdma-run run FILE.main.kts ...`: the subcommand name goes in
 * front of the first argument that is not an option, when that argument names a script.
 */
fun withImplicitRun(args: Array<String>): Array<String> {
    val first = args.indexOfFirst { !it.startsWith("-") }
    if (first < 0 || !args[first].endsWith(".kts")) return args
    return (args.take(first) + ScenarioCommand.NAME + args.drop(first)).toTypedArray()
}

fun main(args: Array<String>) = rdmaRun().main(withImplicitRun(args))
