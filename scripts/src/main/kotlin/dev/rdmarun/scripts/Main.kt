package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.CliktCommand
import com.github.ajalt.clikt.core.Context
import com.github.ajalt.clikt.core.findOrSetObject
import com.github.ajalt.clikt.core.main
import com.github.ajalt.clikt.core.subcommands
import com.github.ajalt.clikt.parameters.options.flag
import com.github.ajalt.clikt.parameters.options.option

/** Root of the `rdma-run` command line: global options, then dispatch to a subcommand. */
class RdmaRun : CliktCommand(name = "rdma-run") {
    // Bare `rdma-run` shows the command list rather than silently succeeding.
    override val printHelpOnEmptyArgs = true

    private val debug by option("--debug", help = "On errors, print the stack trace too").flag()
    private val global by findOrSetObject { GlobalOptions() }

    override fun help(context: Context) = "Run RDMA experiments from the JVM."

    override fun run() {
        global.debug = debug
    }
}

/** The command line with every subcommand registered (main and the specs use this). */
fun rdmaRun(): CliktCommand = RdmaRun().subcommands(
    DevicesCommand(),
    GidsCommand(),
    PingpongCommand(),
)

fun main(args: Array<String>) = rdmaRun().main(args)
