package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.Context
import com.github.ajalt.clikt.parameters.arguments.argument
import com.github.ajalt.clikt.parameters.arguments.multiple
import com.github.ajalt.clikt.parameters.options.default
import com.github.ajalt.clikt.parameters.options.option
import com.github.ajalt.clikt.parameters.types.file
import java.io.File
import java.io.IOException

/**
 * `rdma-run report RESULTS.json... [-o report.html]`: one self-contained HTML page ([ReportPage])
 * from the documents that `--json` wrote and perftest's `--out_json` files, several overlaid for comparison.
 */
class ReportCommand : RdmaCommand(NAME) {
    private val files by argument("RESULTS.json", help = "Results written by --json (schema 1 or 2), or by perftest's --out_json")
        .file(mustExist = true, canBeDir = false, mustBeReadable = true).multiple(required = true)
    private val output by option("-o", "--output", metavar = "FILE", help = "Where to write the page (default report.html)")
        .file(canBeDir = false).default(File("report.html"))

    override fun help(context: Context) =
        "Plot results written by --json (and perftest's --out_json): latency percentiles, bandwidth over time, a size sweep and a summary, in one HTML file " +
            "that loads nothing from the network."

    override fun execute() {
        val inputs = files.map { f ->
            try {
                ResultsReader.readAny(f)
            } catch (e: ResultsFormatException) {
                throw CommandFailure(e.message!!, cause = e)
            }
        }
        try {
            output.writeText(ReportPage.render(inputs))
        } catch (e: IOException) {
            throw CommandFailure("cannot write the report to $output: ${e.message}", cause = e)
        }
        emit("rdma-run report: wrote $output (${inputs.sumOf { if (it is ReportInput) it.document.runs.size else 1 }} runs from ${inputs.size} file${if (inputs.size == 1) "" else "s"})")
    }

    companion object {
        const val NAME = "report"
    }
}
