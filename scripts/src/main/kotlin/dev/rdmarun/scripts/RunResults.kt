package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.ProgramResult
import dev.rdmarun.dsl.LatencySummary
import dev.rdmarun.dsl.RanksResult
import dev.rdmarun.dsl.Role
import dev.rdmarun.dsl.ScenarioResult
import dev.rdmarun.runtime.VerbsException
import java.io.File
import java.io.IOException
import java.io.PrintStream

/**
 * What a scenario command keeps of its runs and writes when it ends: each side's results as they
 * end (both sides of `--loopback`, each size of `-a`), shown as a table or a row of `-a`'s sweep,
 * and at the end `--json` and `--histogram`, failed or not. Apart from [ScenarioCommand], which
 * parses the options and runs the script, because this is the one place that knows the output
 * formats and files.
 */
/** `--json`'s target: a file, or standard output when [file] is null (`--json -`). */
internal data class JsonTarget(val file: File?)

internal class RunResults(
    private val scriptName: String,
    private val gbits: Boolean,
    private val json: JsonTarget?,
    private val histogram: File?,
    /** `-a`'s one table, or null without -a. */
    val sweep: SweepOutput?,
    private val say: (String) -> Unit,
    private val emit: (String) -> Unit,
) {
    /** The `-a` size of the scenario running now (labels its results). */
    @Volatile
    var runLabel: String? = null

    /** Every scenario's results so far, in the order they ended (both sides of --loopback). */
    private val runs = ArrayList<ResultsRun>()

    /** Why the command failed, for the JSON. */
    private var error: ResultsError? = null

    /** The last failure sentence printed for one side of --loopback (its exit is a bare status). */
    @Volatile
    var lastFailure: String? = null

    /** The command failed with [e]: the JSON says so. */
    fun failed(e: Throwable) {
        error = when (e) {
            is CommandFailure -> ResultsError(e.message ?: "failed", e.exitCode)
            is ProgramResult -> ResultsError(lastFailure ?: "exit status ${e.statusCode}", e.statusCode)
            is VerbsException -> ResultsError(RdmaCommand.oneLine(e), ExitStatus.FAILURE.code)
            else -> ResultsError(e.message ?: e.toString(), ExitStatus.FAILURE.code)
        }
    }

    /** A scenario ended on one side: keep it, with its intervals and peak, for the JSON; returns it. */
    fun ended(result: ScenarioResult, sampler: IntervalSampler): ResultsRun {
        val (intervals, sampled) = sampler.take(result)
        // The whole measured time is one of the spans a peak is the best of: never below the
        // average (a sample may span a pause in the traffic), in the JSON as in the table.
        val peak = sampled?.let { maxOf(it, result.bytesPerSecond) }
        val run = ResultsRun(result.role.label, runLabel, intervals, peak, result)
        synchronized(runs) { runs += run }
        return run
    }

    /** Every `rdmaRanks` that ended, summed ([RanksResult.summary]), for the JSON's `ranks`. */
    private val summaries = ArrayList<ResultsRanks>()

    /**
     * An `rdmaRanks` ended on this rank, which writes its summary in the JSON. On rank 0 the other
     * ranks' pair results join the document too (this rank's own came through [ended]), and the
     * summary of every pair follows this rank's tables.
     */
    fun gathered(ranks: RanksResult) {
        summed(ranks)
        if (ranks.gathered.isEmpty()) return
        synchronized(runs) {
            ranks.gathered.filter { it.pair?.rank != ranks.rank }.forEach { runs += ResultsRun(it.role.label, runLabel, end = it) }
        }
        say((if (sweep != null) runLabel?.let { "$it: " } ?: "" else "") + ranks.table(gbits))
    }

    /** [ranks]' summary joins the JSON's `ranks` (the pair results are in the document already: `--loopback --ranks`). */
    fun summed(ranks: RanksResult) {
        synchronized(runs) { summaries += ResultsRanks(runLabel, ranks.summary) }
    }

    /** Prints a side's results: its table, or under -a its row of the sweep's table ([deferServer]: --loopback's server line waits for the table). */
    fun show(run: ResultsRun, deferServer: Boolean) {
        val s = sweep
        // -a's one table is perftest's two-peer sweep: a pair of a run of ranks prints its own table, its size in the title.
        if (s != null && run.end.pair == null) s.ended(run, runLabel ?: "", deferServer)
        else say(run.end.table(gbits = gbits, peakBytesPerSecond = run.bwPeakBytesPerSecond,
            title = scriptName + (if (s != null) run.label?.let { " ($it)" } ?: "" else "")))
    }

    companion object {
        /**
         * Where rank [rank] writes [file] (`--json`, `--histogram`): rank 0 (and a two-peer side) the
         * file itself, rank K `NAME.rankK.EXT` beside it, so that the ranks a launcher starts with one
         * command line on one host (or a shared folder) do not overwrite each other.
         */
        fun ofRank(file: File, rank: Int): File = if (rank == 0) file
        else File(file.parentFile, file.nameWithoutExtension + ".rank$rank" + (if (file.extension.isEmpty()) "" else ".${file.extension}"))
    }

    /** `--json` and `--histogram`, when the command ends (failed or not). */
    fun write(start: ResultsStart) {
        val (runs, ranks) = synchronized(runs) { runs.toList() to summaries.toList() }
        json?.let { target ->
            val text = ResultsDocument(start = start, runs = runs, ranks = ranks, error = error).toJson()
            val file = target.file
            if (file == null) emit(text)
            else try {
                file.writeText(text + "\n")
            } catch (e: IOException) {
                throw CommandFailure("cannot write the results to $file: ${e.message}", cause = e)
            }
        }
        histogram?.let { file -> writeHistograms(file, runs) }
    }

    /**
     * One .hgrm per run that has a latency: FILE for the first, FILE-2, FILE-3... (before the
     * extension) for the next ones, in an order that does not depend on which side ended first:
     * a sweep's sizes in the order they ran, within each the pairs by rank and peer rank, then the client before
     * the server (`--loopback`'s FILE is the client's). A measureRoundTrip section is written one
     * way (each round trip halved), the figure the table leads with, so that the file and the
     * table agree.
     */
    private fun writeHistograms(file: File, runs: List<ResultsRun>) {
        val labels = runs.map { it.label }.distinct()
        val ordered = runs.sortedWith(compareBy({ labels.indexOf(it.label) }, { it.end.pair?.rank ?: 0 }, { it.end.pair?.peerRank ?: 0 }, { if (it.role == Role.CLIENT.label) 0 else 1 }))
        var written = 0
        for (run in ordered) {
            val (name, latency) = run.end.sections.toSortedMap().entries.firstOrNull()?.toPair()
                ?: run.end.total.latency?.let { "work requests" to it } ?: continue
            val encoded = latency.histogram ?: continue
            val i = written++
            val target = if (i == 0) file else File(file.parentFile, file.nameWithoutExtension + "-${i + 1}" +
                (if (file.extension.isEmpty()) "" else ".${file.extension}"))
            try {
                PrintStream(target.outputStream(), false, Charsets.UTF_8).use { out ->
                    // A pair of a run of ranks is named by its ranks: its role alone would not tell it from the others.
                    val who = run.end.pair?.let { PairSamplers.label(it) } ?: run.role
                    out.println("# rdma-run $scriptName: $who${run.label?.let { " ($it)" } ?: ""}, latency $name" +
                        (if (latency.roundTrip) " one way (half of each round trip)" else "") + ", microseconds")
                    // Values are nanoseconds: /1000 gives microseconds, /2000 one way of a round trip.
                    LatencySummary.decode(encoded).outputPercentileDistribution(out, if (latency.roundTrip) 2000.0 else 1000.0)
                    if (out.checkError()) throw IOException("write failed")
                }
            } catch (e: IOException) {
                throw CommandFailure("cannot write the histogram to $target: ${e.message}", cause = e)
            }
        }
    }
}
