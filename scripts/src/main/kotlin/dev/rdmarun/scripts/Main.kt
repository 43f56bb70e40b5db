package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.CliktCommand
import com.github.ajalt.clikt.core.Context
import com.github.ajalt.clikt.core.main
import com.github.ajalt.clikt.core.subcommands

/** Root of the `rdma-run` command line; it does nothing itself but dispatch. */
class RdmaRun : CliktCommand(name = "rdma-run") {
    // Bare `rdma-run` shows the command list rather than silently succeeding.
    override val printHelpOnEmptyArgs = true

    override fun help(context: Context) = "Run RDMA experiments from the JVM."

    override fun run() = Unit
}

// Subcommands are registered here: add each one to the subcommands(...) list.
fun main(args: Array<String>) = RdmaRun().subcommands().main(args)
