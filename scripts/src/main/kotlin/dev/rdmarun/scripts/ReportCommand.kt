package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.Context
import com.github.ajalt.clikt.parameters.arguments.argument
import com.github.ajalt.clikt.parameters.arguments.multiple
import com.github.ajalt.clikt.parameters.options.default
import com.github.ajalt.clikt.parameters.options.option
import com.github.ajalt.clikt.parameters.types.file
import dev.rdmarun.dsl.printable
import java.io.File
import java.io.IOException
import kotlinx.serialization.SerializationException
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.intOrNull
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive

/**
 * `rdma-run report RESULTS.json... [-o report.html]`: one self-contained HTML page ([ReportPage])
 * from the documents that `--json` wrote, several overlaid for comparison.
 */
class ReportCommand : RdmaCommand(NAME) {
    private val files by argument("RESULTS.json", help = "Results written by --json (schema 1)")
        .file(mustExist = true, canBeDir = false, mustBeReadable = true).multiple(required = true)
    private val output by option("-o", "--output", metavar = "FILE", help = "Where to write the page (default report.html)")
        .file(canBeDir = false).default(File("report.html"))

    override fun help(context: Context) =
        "Plot results written by --json: latency percentiles, bandwidth over time, a size sweep and a summary, in one HTML file " +
            "that loads nothing from the network."

    override fun execute() {
        val inputs = files.map { f -> ReportInput(f.name, read(f)) }
        try {
            output.writeText(ReportPage.render(inputs))
        } catch (e: IOException) {
            throw CommandFailure("cannot write the report to $output: ${e.message}", 1, e)
        }
        emit("rdma-run report: wrote $output (${inputs.sumOf { it.document.runs.size }} runs from ${inputs.size} file${if (inputs.size == 1) "" else "s"})")
    }

    /** A results document, or one sentence that says why [file] is not one this rdma-run reads. */
    private fun read(file: File): ResultsDocument {
        val text = try {
            file.readText()
        } catch (e: IOException) {
            throw CommandFailure("cannot read $file: ${e.message}", 1, e)
        }
        val schema = try {
            Json.parseToJsonElement(text).jsonObject["schema"]?.jsonPrimitive?.intOrNull
        } catch (e: SerializationException) {
            throw CommandFailure("$file is not JSON: ${printable(e.message.orEmpty().lineSequence().first())}", 1, e)
        } catch (e: IllegalArgumentException) {
            throw CommandFailure("$file is not a results document of rdma-run (--json writes them)", 1, e)
        }
        when (schema) {
            null -> throw CommandFailure("$file is not a results document of rdma-run: it has no \"schema\" (--json writes them)", 1)
            ResultsDocument.SCHEMA -> {}
            else -> throw CommandFailure("$file is results schema $schema; this rdma-run reads schema ${ResultsDocument.SCHEMA}", 1)
        }
        return try {
            ResultsDocument.parse(text)
        } catch (e: SerializationException) {
            throw CommandFailure("$file is not a valid results document: ${printable(e.message.orEmpty().lineSequence().first())}", 1, e)
        } catch (e: IllegalArgumentException) {
            throw CommandFailure("$file is not a valid results document: ${printable(e.message.orEmpty().lineSequence().first())}", 1, e)
        }
    }

    companion object {
        const val NAME = "report"
    }
}
