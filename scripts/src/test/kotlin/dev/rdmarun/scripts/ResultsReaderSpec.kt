package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.test
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldHaveSize
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldNotContain
import java.io.ByteArrayOutputStream
import java.io.File
import java.nio.ByteBuffer
import java.nio.file.Files
import java.util.Base64
import java.util.zip.Deflater
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.long

/**
 * `rdma-run report` on results files that are not what `--json` wrote: each is refused with one
 * sentence naming the file and the field, exit 1, no stack trace. The valid documents are the
 * fuzz test's seeds, written by real runs on soft0.
 */
class ResultsReaderSpec : FunSpec({
    val dir = Files.createTempDirectory("results-reader").toFile()
    afterSpec { dir.deleteRecursively() }

    fun seed(name: String): String =
        ResultsReaderSpec::class.java.getResource("ResultsReaderFuzzTestInputs/document/$name")!!.readText()

    val writeBw = Json.parseToJsonElement(seed("write-bw"))
    // write-bw's client (runs[1]) has the work requests' latency; the server (runs[0]) has none.
    val latency = listOf("runs", 1, "end", "total", "latency")
    val histogram = latency + "histogram"
    val real = Base64.getDecoder().decode(writeBw.at(histogram).jsonPrimitive.content)

    /** [report] on [text], expecting exactly the refusal "rdma-run report: FILE: [sentence]". */
    fun refused(name: String, text: String, sentence: String) {
        val file = File(dir, "$name.json").apply { writeText(text) }
        val result = rdmaRun().test(listOf("report", file.path, "-o", File(dir, "$name.html").path))
        withClue(name) {
            result.stderr shouldBe "rdma-run report: ${file.path}: $sentence\n"
            result.statusCode shouldBe 1
            result.output shouldNotContain "Exception"
            result.output shouldNotContain "at dev."
            File(dir, "$name.html").exists() shouldBe false
        }
    }

    fun histogramRefused(name: String, bytes: ByteArray, why: String) = refused(name,
        writeBw.with(histogram, JsonPrimitive(Base64.getEncoder().encodeToString(bytes))).toString(),
        "runs[1].end.total.latency.histogram is not a valid HdrHistogram ($why)")

    test("documents that real runs wrote are read, with a latency curve per histogram") {
        for (name in listOf("write-bw", "timed-intervals", "write-bw-sweep", "pingpong-sweep", "failed-run")) withClue(name) {
            val input = ResultsReader.read("$name.json", seed(name).toByteArray())
            input.curves shouldHaveSize input.document.runs.size
            for ((run, curves) in input.document.runs.zip(input.curves)) {
                curves.size shouldBe (if (run.end.total.latency != null) 1 else 0) + run.end.sections.size
            }
        }
    }

    test("a corrupt histogram: truncated, bad base64, base64 of garbage, a header that declares a huge size") {
        val compressed = ByteBuffer.wrap(real).getInt(4)
        histogramRefused("truncated", real.copyOf(20), "it declares $compressed compressed bytes and holds 12")
        val text = Base64.getEncoder().encodeToString(real)
        refused("bad-base64", writeBw.with(histogram, JsonPrimitive(text.substring(0, 16) + "-" + text.substring(17))).toString(),
            "runs[1].end.total.latency.histogram is not a valid HdrHistogram (bad base64 at character 17)")
        refused("bad-padding", writeBw.with(histogram, JsonPrimitive("A")).toString(),
            "runs[1].end.total.latency.histogram is not a valid HdrHistogram (bad base64: its length or padding is wrong)")
        histogramRefused("garbage", ByteBuffer.wrap(real.copyOf(8)).putInt(4, 40).array() + ByteArray(40) { (it * 37 + 11).toByte() },
            "its compressed data is corrupt")
        histogramRefused("not-hdr", ByteArray(48) { 7 }, "not HdrHistogram's compressed V2 encoding")
        histogramRefused("huge-payload", compressedV2(header(payload = 0x7ffffff0)), "its header declares 2147483632 bytes of counts and it holds 0")
        histogramRefused("bomb", compressedV2(header(payload = 4 shl 20) + ByteArray(4 shl 20)), "it decompresses to more than 1 MiB")
        histogramRefused("five-digits", compressedV2(header(digits = 5, highest = Long.MAX_VALUE)),
            "it keeps 5 significant digits; rdma-run writes 3 and reads at most 3")
        histogramRefused("lowest", compressedV2(header(lowest = 1L shl 62)), "its lowest discernible value is 4611686018427387904; rdma-run writes 1")
        // A run of a million empty counts (zigzag LEB128 of -1000000), then a count of 1: beyond the 3072 counts of the header's range.
        val pastTheEnd = byteArrayOf(0xff.toByte(), 0x88.toByte(), 0x7a, 0x02)
        histogramRefused("counts", compressedV2(header(payload = pastTheEnd.size) + pastTheEnd), "its header or counts do not decode")
    }

    test("a histogram that decodes but does not hold what the summary beside it says") {
        val count = writeBw.at(latency + "count").jsonPrimitive.long
        refused("count", writeBw.with(latency + "count", JsonPrimitive(count + 1)).toString(),
            "runs[1].end.total.latency.histogram does not match the summary beside it: its count is $count, the document's ${count + 1}")
        val max = writeBw.at(latency + "maxNanos").jsonPrimitive.long
        refused("max", writeBw.with(latency + "maxNanos", JsonPrimitive(max * 2)).toString(),
            "runs[1].end.total.latency.histogram does not match the summary beside it: its maxNanos is $max, the document's ${max * 2}")
    }

    test("fields of the wrong type, missing, negative, not finite or out of order") {
        val json = writeBw.toString()
        refused("type", writeBw.with(listOf("runs", 1, "end", "durationNanos"), JsonPrimitive("abc")).toString(),
            "runs[1].end.durationNanos should be a whole number (64-bit), not \"abc\"")
        refused("missing", writeBw.with(listOf("runs", 0, "end", "total"), null).toString(), "runs[0].end.total is missing")
        refused("negative", writeBw.with(listOf("runs", 1, "end", "total", "bytesSent"), JsonPrimitive(-1)).toString(),
            "runs[1].end.total.bytesSent is negative (-1)")
        refused("nan", json.replaceFirst(Regex("\"bwPeakBytesPerSecond\":[^,]*"), "\"bwPeakBytesPerSecond\":NaN"),
            "runs[0].bwPeakBytesPerSecond should be a finite number or null, not NaN")
        refused("infinite", json.replaceFirst(Regex("\"sentGbps\":[^,]*"), "\"sentGbps\":1e999"),
            "runs[0].end.qps[0].sentGbps should be a finite number, not 1e999")
        refused("role", writeBw.with(listOf("runs", 0, "role"), JsonPrimitive("<b>")).toString(),
            "runs[0].role should be one of \"server\", \"client\", not \"<b>\"")
        refused("enum", writeBw.with(listOf("runs", 0, "end", "role"), JsonPrimitive("ADMIN")).toString(),
            "runs[0].end.role should be one of \"SERVER\", \"CLIENT\", not \"ADMIN\"")
        refused("timestamp", writeBw.with(listOf("start", "timestamp"), JsonPrimitive("yesterday")).toString(),
            "start.timestamp should be an ISO-8601 time such as 2025-01-31T12:00:00Z, not \"yesterday\"")
        val p50 = writeBw.at(latency + "p50Nanos").jsonPrimitive.long
        refused("percentiles", writeBw.with(latency + "p90Nanos", JsonPrimitive(p50 - 1)).toString(),
            "runs[1].end.total.latency.p90Nanos (${p50 - 1}) is below p50Nanos ($p50)")
        refused("size", writeBw.with(listOf("runs", 0, "label"), JsonPrimitive("size=0")).toString(),
            "runs[0].label gives a message size of 0; sizes are at least 1 byte")
        val timed = Json.parseToJsonElement(seed("timed-intervals"))
        val intervals = timed.at(listOf("runs", 0, "intervals")).jsonArray
        val swapped = JsonArray(listOf(intervals[1], intervals[0]) + intervals.drop(2))
        refused("order", timed.with(listOf("runs", 0, "intervals"), swapped).toString(),
            "runs[0].intervals[1].startSeconds (${intervals[0].jsonObject["startSeconds"]}) is before the previous interval's start " +
                "(${intervals[1].jsonObject["startSeconds"]})")
        refused("section", writeBw.with(listOf("runs", 1, "end", "sections"), JsonObject(mapOf("rtt\u001b" to JsonPrimitive(3)))).toString(),
            "runs[1].end.sections[\"rtt\\u001b\"] should be an object, not 3")
    }

    test("a file larger than the bound is refused before it is read") {
        val big = File(dir, "big.json")
        big.writeBytes(seed("write-bw").toByteArray() + ByteArray(ResultsReader.MAX_FILE_BYTES) { ' '.code.toByte() })
        val result = rdmaRun().test(listOf("report", big.path, "-o", File(dir, "big.html").path))
        result.stderr shouldBe "rdma-run report: ${big.path} is larger than 16 MiB, more than any results document of rdma-run\n"
        result.statusCode shouldBe 1
    }
})

/** The element at [path] (keys and indexes). */
private fun JsonElement.at(path: List<Any>): JsonElement =
    path.fold(this) { e, k -> if (k is Int) e.jsonArray[k] else e.jsonObject.getValue(k as String) }

/** A copy with the element at [path] replaced by [value], or removed when [value] is null. */
private fun JsonElement.with(path: List<Any>, value: JsonElement?): JsonElement {
    val k = path.first()
    val rest = path.drop(1)
    fun inner(e: JsonElement) = if (rest.isEmpty()) value else e.with(rest, value)
    return if (k is Int) {
        JsonArray(jsonArray.mapIndexedNotNull { i, e -> if (i == k) inner(e) else e })
    } else {
        JsonObject(jsonObject.toMutableMap().apply { val v = inner(getValue(k as String)); if (v == null) remove(k) else put(k, v) })
    }
}

/** HdrHistogram's V2 header (40 bytes) with these fields. */
private fun header(payload: Int = 0, digits: Int = 3, lowest: Long = 1, highest: Long = 2048): ByteArray =
    ByteBuffer.allocate(40).putInt(0x1c849313).putInt(payload).putInt(0).putInt(digits).putLong(lowest).putLong(highest).putDouble(1.0).array()

/** [content] in HdrHistogram's compressed V2 envelope: cookie, compressed length, deflated bytes. */
private fun compressedV2(content: ByteArray): ByteArray {
    val deflater = Deflater().apply { setInput(content); finish() }
    val out = ByteArrayOutputStream()
    val chunk = ByteArray(8192)
    while (!deflater.finished()) out.write(chunk, 0, deflater.deflate(chunk))
    deflater.end()
    val deflated = out.toByteArray()
    return ByteBuffer.allocate(8).putInt(0x1c849314).putInt(deflated.size).array() + deflated
}
