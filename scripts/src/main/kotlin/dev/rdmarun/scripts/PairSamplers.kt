package dev.rdmarun.scripts

import dev.rdmarun.dsl.RankPair
import dev.rdmarun.dsl.ScenarioMonitor
import java.util.Locale

/**
 * The monitors and samplers of the pairs of a run of ranks ([dev.rdmarun.dsl.RdmaOptions.pairMonitors]),
 * one per pair (rank, peer rank) for the life of the command, so that each pair has what a
 * two-peer side has: its peak bandwidth and, with `--interval`, its interval records and lines.
 * A pair's lines carry its number in iperf3's ID column (`[  1][TX-S]`), numbered in the order
 * the pairs first ran, which a line `[  1] rank 0 with rank 2` ties to the pair when it first
 * connects (as iperf3 ties a stream's ID to its sockets); its side letter is the pair's role (the
 * lower rank is the server). `--loopback --ranks` shares one of these among its ranks, so the
 * numbers are unique in the output.
 */
internal class PairSamplers(
    private val intervalSeconds: Double?,
    /** Where the rows and the ID lines go; null: records and peak only. */
    private val output: IntervalOutput?,
    /** A note about a pair's control connection (stray connections), labelled. */
    private val note: (label: String, line: String) -> Unit,
) : AutoCloseable {
    private class Entry(val monitor: ScenarioMonitor, val sampler: IntervalSampler)

    private val entries = LinkedHashMap<Pair<Int, Int>, Entry>()

    /** The monitor of [pair], created the first time the pair runs. */
    fun monitor(pair: RankPair): ScenarioMonitor = synchronized(entries) {
        entries.getOrPut(pair.rank to pair.peerRank) {
            val label = label(pair)
            val id = String.format(Locale.ROOT, "%3d", entries.size + 1)
            val monitor = ScenarioMonitor(
                onRunning = { output?.once("pair $label", "[$id] $label") },
                onNote = { note(label, it) },
            )
            Entry(monitor, IntervalSampler(monitor, label, intervalSeconds, output, id, server = pair.rank < pair.peerRank))
        }.monitor
    }

    /** The sampler of [pair], if it ran. */
    fun sampler(pair: RankPair): IntervalSampler? = synchronized(entries) { entries[pair.rank to pair.peerRank]?.sampler }

    override fun close() {
        synchronized(entries) { entries.values.toList() }.forEach { it.sampler.close() }
    }

    companion object {
        /** How results, notes and lines name a pair: `rank 0 with rank 2`. */
        fun label(pair: RankPair) = "rank ${pair.rank} with rank ${pair.peerRank}"
    }
}
