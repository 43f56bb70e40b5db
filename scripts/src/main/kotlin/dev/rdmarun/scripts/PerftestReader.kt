package dev.rdmarun.scripts

import dev.rdmarun.dsl.printable
import kotlin.math.abs
import kotlin.math.ln
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.doubleOrNull
import kotlinx.serialization.json.longOrNull

/** perftest's bandwidth figures, converted to MB/s (2^20 bytes) whatever unit the file was in. */
class PerftestBandwidth(val peakMBps: Double, val averageMBps: Double, val mpps: Double, val gbits: Boolean)

/**
 * perftest's latency figures, microseconds. perftest halves the round trip of SEND and WRITE
 * latency tests (one way) and reports READ and ATOMIC as they complete ([oneWay] false). A
 * `-D` (duration) latency test writes only the average: the others are null then.
 */
class PerftestLatency(
    val oneWay: Boolean,
    val minUs: Double?,
    val maxUs: Double?,
    val typicalUs: Double?,
    val averageUs: Double,
    val stdevUs: Double?,
    val p99Us: Double?,
    val p999Us: Double?,
)

/**
 * A perftest `--out_json` document that [PerftestReader] checked, shown under [name] (its file
 * name): one test at one message size. perftest truncates the file at each size of `-a`, so a
 * sweep is several files of the same [test] and [device].
 */
class PerftestInput(
    override val name: String,
    val test: String,
    val device: String,
    /** test_info's other `key: value` pairs, in the file's order (the page shows them as parameters). */
    val info: List<Pair<String, String>>,
    val size: Long,
    val iterations: Long,
    val bandwidth: PerftestBandwidth?,
    val latency: PerftestLatency?,
) : ReportSource

/**
 * Reads perftest's `--out_json` files (linux-rdma/perftest: `write_test_info_to_file` and the
 * `write_*_report_to_file` functions of src/perftest_parameters.c). perftest writes
 * `{"test_info": {...}, "results": {...}}`: test_info has "test" (`Send_BW_Test`,
 * `RDMA_Write_Latency_Test`...), "Device" and the banner's other lines; results has, for a
 * bandwidth test, MsgSize, n_iterations, BW_peak, BW_average (MB/sec, or Gb/sec under
 * `--report_gbits`; the file does not say which) and MsgRate (Mpps); for a latency test, MsgSize,
 * n_iterations, t_min, t_max, t_typical (the median), t_avg, t_stdev, percentile_99 and
 * percentile_99.9 (usec); for a `-D` latency test MsgSize, n_iterations, t_avg and tps_average;
 * CPU_util with `--cpu_util`. This reader is written from that description; every value is
 * checked before use and a bad one refused with one sentence.
 */
object PerftestReader {
    // MB/sec is 2^20 bytes/s and Gb/sec 10^9 bits/s: BW_average / (MsgRate x MsgSize) is 10^6 / 2^20 or 10^6 / 1.25e8.
    private const val MB_RATIO = 1e6 / (1 shl 20)
    private const val GB_RATIO = 1e6 / 125_000_000

    /** Larger than any of perftest's figures (usec, MB/sec, Gb/sec, Mpps); it keeps the page's log axes finite. */
    private const val MAX_FIGURE = 1e12

    /** Larger than any message perftest sends (its -s stops well below). */
    private const val MAX_SIZE = 1L shl 40

    /** Whether [root] has perftest's shape rather than rdma-run's (no "schema"; "test_info" and "results"). */
    fun looksLike(root: JsonElement): Boolean =
        root is JsonObject && "schema" !in root && "test_info" in root && "results" in root

    fun read(path: String, root: JsonObject, name: String): PerftestInput {
        fun refuse(what: String): Nothing = throw ResultsFormatException("$path: $what")
        fun obj(key: String): JsonObject = root[key] as? JsonObject
            ?: refuse("$key should be an object, not ${printable(root[key].toString(), 40)} (perftest's --out_json writes one)")
        val info = obj("test_info")
        val results = obj("results")

        fun string(key: String): String {
            val v = info[key]
            if (v !is JsonPrimitive || !v.isString) refuse("test_info.$key should be a string, not ${printable(v.toString(), 40)}")
            return v.content
        }
        fun number(key: String): Double {
            val v = results[key] ?: refuse("results.$key is missing")
            val d = (v as? JsonPrimitive)?.takeIf { !it.isString }?.doubleOrNull
            if (d == null || !d.isFinite()) refuse("results.$key should be a finite number, not ${printable(v.toString(), 40)}")
            if (d < 0) refuse("results.$key is negative ($d)")
            if (d > MAX_FIGURE) refuse("results.$key is $d, beyond any figure perftest measures")
            return d
        }
        fun whole(key: String, range: LongRange): Long {
            val v = results[key] ?: refuse("results.$key is missing")
            val l = (v as? JsonPrimitive)?.takeIf { !it.isString }?.longOrNull
                ?: refuse("results.$key should be a whole number, not ${printable(v.toString(), 40)}")
            if (l !in range) refuse("results.$key is $l; perftest writes ${range.first} to ${range.last}")
            return l
        }

        val test = string("test")
        // The page names runs by test and device; perftest's test names are letters and underscores.
        if (!Regex("[A-Za-z_]{1,80}").matches(test)) refuse("test_info.test should be perftest's test name such as Send_BW_Test, not \"${printable(test, 40)}\"")
        val device = string("Device")
        val others = info.filterKeys { it != "test" && it != "Device" }.map { (k, v) ->
            k to ((v as? JsonPrimitive)?.content ?: refuse("test_info.${printable(k, 40)} should be a string or a number, not ${printable(v.toString(), 40)}"))
        }
        val only = listOf("bw_avg", "msgRate_avg", "avg_lat").firstOrNull { it in results }
        if (only != null && "MsgSize" !in results) {
            refuse("results holds only $only (perftest's --output); run perftest without --output for a report")
        }
        val size = whole("MsgSize", 1..MAX_SIZE)
        val iterations = whole("n_iterations", 0..Long.MAX_VALUE)
        // READ and ATOMIC latencies are what the request took; perftest halves the others' round trip.
        val oneWay = !(test.startsWith("RDMA_Read") || test.startsWith("Atomic"))
        return when {
            "BW_average" in results -> {
                val peak = number("BW_peak")
                val average = number("BW_average")
                val mpps = number("MsgRate")
                val gbits = if (average > 0 && mpps > 0) {
                    val ratio = average / (mpps * size)
                    val toMB = abs(ln(ratio / MB_RATIO))
                    val toGb = abs(ln(ratio / GB_RATIO))
                    // Rounding (two decimals) moves the ratio by far less than the factor of 119 between the units.
                    if (minOf(toMB, toGb) > ln(3.0)) {
                        refuse("results.BW_average ($average) does not agree with MsgRate ($mpps Mpps) x MsgSize ($size) in MB/sec or in Gb/sec")
                    }
                    toGb < toMB
                } else false
                val toMBps = if (gbits) 1e9 / 8 / (1 shl 20) else 1.0
                PerftestInput(name, test, device, others, size, iterations, PerftestBandwidth(peak * toMBps, average * toMBps, mpps, gbits), null)
            }
            "t_typical" in results -> {
                val l = PerftestLatency(oneWay, number("t_min"), number("t_max"), number("t_typical"), number("t_avg"), number("t_stdev"),
                    number("percentile_99"), number("percentile_99.9"))
                val ordered = listOf("t_min" to l.minUs!!, "t_typical" to l.typicalUs!!, "percentile_99" to l.p99Us!!,
                    "percentile_99.9" to l.p999Us!!, "t_max" to l.maxUs!!)
                for ((low, high) in ordered.zipWithNext()) {
                    if (high.second < low.second) refuse("results.${high.first} (${high.second}) is below ${low.first} (${low.second})")
                }
                PerftestInput(name, test, device, others, size, iterations, null, l)
            }
            "tps_average" in results -> {
                number("tps_average")
                PerftestInput(name, test, device, others, size, iterations, null,
                    PerftestLatency(oneWay, null, null, null, number("t_avg"), null, null, null))
            }
            else -> refuse("results has neither BW_average nor t_typical nor tps_average, so no perftest figures rdma-run knows")
        }
    }
}
