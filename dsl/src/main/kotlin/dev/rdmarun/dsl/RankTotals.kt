package dev.rdmarun.dsl

import kotlinx.serialization.Serializable
import org.HdrHistogram.Histogram

/**
 * One rank's traffic and latency over its pairs of a run of ranks, or every rank's ([rank] null:
 * the run's total), as this rank saw them (see [TrafficResult] for what counts on which side).
 * The counts are its pairs' sums; the rates are the sum of its pairs' rates, each pair's bytes
 * over its own measured time, since the pairs ran at once; the latencies are its pairs'
 * histograms merged, so a percentile is of every sample of every pair.
 */
@Serializable
public data class RankTotal(
    /** The rank; null: every rank of the run. */
    val rank: Int?,
    /** Pair results counted: one per pair each `forEachPeer` ran. */
    val pairs: Int,
    val bytesSent: Long,
    val bytesReceived: Long,
    /** Work requests completed. */
    val operations: Long,
    val messagesReceived: Long,
    val sentBytesPerSecond: Double,
    val receivedBytesPerSecond: Double,
    /** The work requests' latency (post to completion), merged over the pairs that measured one; null: none did. */
    val latency: LatencySummary? = null,
    /** Each `measure` section's latency, merged over the pairs that measured it. */
    val sections: Map<String, LatencySummary> = emptyMap(),
)

/** What one pair (the rank to its peer rank) moved per second, each way: its bytes over its measured time. */
public data class PairRate(val sentBytesPerSecond: Double, val receivedBytesPerSecond: Double)

/**
 * A run of ranks summed up: [perRank] in rank order, and the [total] of them all. Rank 0's
 * [RanksResult] has every rank's; another rank's has its own only. The table on rank 0, the
 * launcher's JSON (`ranks`) and `rdma-run report` all read these figures.
 */
@Serializable
public data class RanksSummary(val ranks: Int, val perRank: List<RankTotal>, val total: RankTotal) {
    public companion object {
        /**
         * The summary of [results] (pair results of one run of [ranks]), with a row for each rank
         * of [shown] (those with no pair show zeros). Results without a [ScenarioResult.pair] are
         * not of a run of ranks and are left out.
         */
        public fun of(ranks: Int, results: List<ScenarioResult>, shown: Iterable<Int> = 0 until ranks): RanksSummary {
            val paired = results.filter { it.pair != null }
            val rates = pairRates(paired)
            val perRank = shown.map { r -> total(r, paired.filter { it.pair!!.rank == r }, rates.filterKeys { it.first == r }.values) }
            return RanksSummary(ranks, perRank, total(null, paired, rates.values))
        }

        /**
         * Each pair's rate, keyed by (rank, peer rank): a pair measured more than once (two
         * `forEachPeer` naming it) is its runs' bytes over their measured time together.
         */
        public fun pairRates(results: List<ScenarioResult>): Map<Pair<Int, Int>, PairRate> =
            results.filter { it.pair != null }.groupBy { it.pair!!.rank to it.pair.peerRank }.mapValues { (_, rs) ->
                val nanos = rs.sumOf { it.durationNanos }
                PairRate(perSecond(rs.sumOf { it.total.bytesSent }, nanos), perSecond(rs.sumOf { it.total.bytesReceived }, nanos))
            }

        private fun perSecond(bytes: Long, nanos: Long) = if (nanos > 0) bytes * 1e9 / nanos else 0.0

        private fun total(rank: Int?, results: List<ScenarioResult>, rates: Collection<PairRate>) = RankTotal(
            rank = rank,
            pairs = results.size,
            bytesSent = results.sumOf { it.total.bytesSent },
            bytesReceived = results.sumOf { it.total.bytesReceived },
            operations = results.sumOf { it.total.operations },
            messagesReceived = results.sumOf { it.total.messagesReceived },
            sentBytesPerSecond = rates.sumOf { it.sentBytesPerSecond },
            receivedBytesPerSecond = rates.sumOf { it.receivedBytesPerSecond },
            latency = merge(results.mapNotNull { it.total.latency }),
            sections = results.flatMap { it.sections.entries }.groupBy({ it.key }, { it.value }).mapNotNull { (name, ls) ->
                merge(ls)?.let { name to it }
            }.toMap().toSortedMap(),
        )

        /**
         * [latencies] as one: their histograms added (null when one has none, since its samples
         * would be missing). Round trips stay so when all are; the bytes per sample when all agree.
         */
        private fun merge(latencies: List<LatencySummary>): LatencySummary? {
            if (latencies.isEmpty() || latencies.any { it.histogram == null }) return null
            val decoded = latencies.map { LatencySummary.decode(it.histogram!!) }
            // Auto-resizing: the pairs' ranges differ.
            val sum = Histogram(decoded.maxOf { it.numberOfSignificantValueDigits })
            decoded.forEach { sum.add(it) }
            return LatencySummary.of(sum)?.copy(
                roundTrip = latencies.all { it.roundTrip },
                bytesPerSample = latencies.map { it.bytesPerSample }.distinct().singleOrNull(),
            )
        }
    }
}
