package dev.rdmarun.scripts

import dev.rdmarun.dsl.CONTROL_PROTOCOL_VERSION
import dev.rdmarun.dsl.RanksResult
import dev.rdmarun.dsl.RanksSummary
import dev.rdmarun.dsl.ScenarioResult
import java.net.InetAddress
import java.security.MessageDigest
import java.time.Instant
import java.time.temporal.ChronoUnit
import java.util.HexFormat
import kotlinx.serialization.Serializable
import kotlinx.serialization.json.Json

/**
 * What `--json FILE` (or `--json -`, standard output) writes: one document per command, schema
 * [SCHEMA], documented field by field in docs/results-json.md. It is written when the command
 * ends, whether the run succeeded or failed ([error]); a size sweep (`-a`) and a script that runs
 * several `rdma { }` blocks give one [runs] entry each, both sides of `--loopback` too.
 */
@Serializable
data class ResultsDocument(
    val schema: Int = SCHEMA,
    val start: ResultsStart,
    val runs: List<ResultsRun>,
    /** A run of ranks: one summary per `rdmaRanks` that ended (schema 2; empty otherwise and in schema 1). */
    val ranks: List<ResultsRanks> = emptyList(),
    val error: ResultsError? = null,
) {
    fun toJson(): String = JSON.encodeToString(serializer(), this)

    companion object {
        /** The schema version written: 2 added [ranks]. */
        const val SCHEMA = 2

        /** The schemas a reader takes: 1 is 2 without [ranks]. */
        val READABLE = 1..SCHEMA

        // Every field, defaults included: readers see the same keys in every document.
        private val JSON = Json { prettyPrint = true; encodeDefaults = true }

        fun parse(text: String): ResultsDocument = Json { ignoreUnknownKeys = true }.decodeFromString(serializer(), text)
    }
}

/** Where and what ran: versions, machine, time, the script and the parameters given. */
@Serializable
data class ResultsStart(
    val rdmaRun: String,
    val controlProtocol: Int,
    val java: String,
    /** `os.name` and the kernel release (`os.version`). */
    val os: String,
    val host: String,
    /** ISO-8601, UTC, when the command started. */
    val timestamp: String,
    /** "server", "client", "loopback", or "rank" (a rank of a run of more than 2: each pair run says its role). */
    val role: String,
    val script: ScriptReference,
    /** The parameters given (`--set` and perftest's flags); a sweep's size is in each run's. */
    val parameters: Map<String, String>,
) {
    companion object {
        fun of(role: String, path: String, source: String, parameters: Map<String, String>) = ResultsStart(
            rdmaRun = VERSION,
            controlProtocol = CONTROL_PROTOCOL_VERSION,
            java = Runtime.version().toString(),
            os = "${System.getProperty("os.name")} ${System.getProperty("os.version")}",
            host = runCatching { InetAddress.getLocalHost().hostName }.getOrDefault(""),
            timestamp = Instant.now().truncatedTo(ChronoUnit.SECONDS).toString(),
            role = role,
            script = ScriptReference(path, HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(source.toByteArray()))),
            parameters = parameters.toSortedMap(),
        )
    }
}

@Serializable
data class ScriptReference(val path: String, val sha256: String)

/** One `rdma { }` that ran on one side. */
@Serializable
data class ResultsRun(
    /** "server" or "client". */
    val role: String,
    /** What tells this run from the others of the command (a sweep's "size=4096"), if anything. */
    val label: String? = null,
    /** One record per `--interval` (empty without it). */
    val intervals: List<IntervalRecord> = emptyList(),
    /** The best rate over the launcher's samples (every 100 ms, or each interval), bytes per second in the busier direction; null: too short to sample. */
    val bwPeakBytesPerSecond: Double? = null,
    /** What the scenario measured: traffic per QP and in total, latencies, the connection, parameters and fingerprint. */
    val end: ScenarioResult,
)

/**
 * One `rdmaRanks` summed up on this rank ([RanksResult.summary]): on rank 0 every rank's traffic
 * and latency, on another rank its own; [label] is its runs' (a sweep's size).
 */
@Serializable
data class ResultsRanks(val label: String? = null, val summary: RanksSummary)

/** This side's traffic during one interval (`--interval`). */
@Serializable
data class IntervalRecord(
    val startSeconds: Double,
    val endSeconds: Double,
    val bytesSent: Long,
    val bytesReceived: Long,
    val operations: Long,
    val messagesReceived: Long,
    /** MB/s (2^20 bytes) in the busier direction. */
    val bwMBps: Double,
    /** Gb/s (10^9 bits) in the busier direction. */
    val bwGbps: Double,
    val msgRateMpps: Double,
)

/** Why the command failed: the sentence it printed and its exit status. */
@Serializable
data class ResultsError(val message: String, val exitStatus: Int)
