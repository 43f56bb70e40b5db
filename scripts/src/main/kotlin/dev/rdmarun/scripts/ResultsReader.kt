package dev.rdmarun.scripts

import dev.rdmarun.dsl.LatencySummary
import dev.rdmarun.dsl.RankPair
import dev.rdmarun.dsl.RankTotal
import dev.rdmarun.dsl.Ranks
import dev.rdmarun.dsl.TrafficResult
import dev.rdmarun.dsl.printable
import java.io.File
import java.io.IOException
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.nio.charset.CharacterCodingException
import java.nio.charset.CodingErrorAction
import java.time.Instant
import java.time.format.DateTimeParseException
import java.util.Base64
import java.util.zip.DataFormatException
import java.util.zip.Inflater
import kotlin.math.log10
import kotlinx.serialization.ExperimentalSerializationApi
import kotlinx.serialization.SerializationException
import kotlinx.serialization.descriptors.PolymorphicKind
import kotlinx.serialization.descriptors.PrimitiveKind
import kotlinx.serialization.descriptors.SerialDescriptor
import kotlinx.serialization.descriptors.SerialKind
import kotlinx.serialization.descriptors.StructureKind
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.booleanOrNull
import kotlinx.serialization.json.doubleOrNull
import kotlinx.serialization.json.intOrNull
import kotlinx.serialization.json.longOrNull
import org.HdrHistogram.Histogram

/**
 * Why a file is not a results document `rdma-run report` can show: one sentence that names the
 * file and, where one is at fault, the field (`runs[0].end.total.latency.histogram`).
 */
class ResultsFormatException(message: String) : Exception(message)

/**
 * One latency of a run as the report plots it: [name] ("work requests" or a section's), whether its
 * values are round trips, and its percentile distribution as (log10 of 1/(1 - percentile),
 * nanoseconds) points in percentile order, the maximum last at [ResultsReader.MAX_PERCENTILE].
 */
class LatencyCurve(val name: String, val roundTrip: Boolean, val points: List<Pair<Double, Double>>)

/**
 * A results document that [ResultsReader] checked, shown under [name] (its file name), with the
 * latency curves it decoded from the histograms: [curves] has one list per run of
 * [ResultsDocument.runs], in the same order.
 */
class ReportInput(override val name: String, val document: ResultsDocument, val curves: List<List<LatencyCurve>>,
                  /** One map per [ResultsDocument.ranks] entry: each rank's merged latency curves, by rank. */
                  val rankCurves: List<Map<Int, List<LatencyCurve>>> = emptyList()) : ReportSource

/** A file `rdma-run report` shows: rdma-run's results document ([ReportInput]) or perftest's `--out_json` ([PerftestInput]). */
sealed interface ReportSource {
    /** The file's name, which the page names its runs by. */
    val name: String
}

/**
 * Reads a results document for `rdma-run report` and checks everything the report uses before it
 * is used: the JSON's shape against the document's classes (types, missing fields), the numbers
 * (finite, not negative, percentiles in order, intervals in time order), and each latency's
 * histogram (base64, HdrHistogram's compressed V2 encoding, decoded within fixed bounds, and the
 * same count, minimum, percentiles and maximum as the summary beside it). A document is read
 * whole or refused with a [ResultsFormatException]; nothing else escapes, whatever the bytes.
 */
object ResultsReader {
    /** Largest results file read (rdma-run's own are far smaller: a 23-size sweep of both sides is about 0.3 MiB). */
    const val MAX_FILE_BYTES = 16 shl 20

    /** Largest decompressed histogram (header and counts); rdma-run's are a few KiB. */
    const val MAX_HISTOGRAM_BYTES = 1 shl 20

    /**
     * Most significant digits a histogram may keep. rdma-run records 3; each digit more multiplies the
     * counts array the decoder allocates by about 8 (5 digits: up to 68 MB for one histogram).
     */
    const val MAX_SIGNIFICANT_DIGITS = 3

    /** What all of a document's histograms may take to decode, decompressed bytes and counts arrays together. */
    const val MAX_HISTOGRAM_WORK_BYTES = 256L shl 20

    /** The last percentile the curves show before the maximum. */
    const val MAX_PERCENTILE = 0.99999

    // A distribution has about 5 points per halving of what is left up to MAX_PERCENTILE (some 85); more is not a histogram rdma-run wrote.
    private const val MAX_CURVE_POINTS = 10_000

    // The cookies HdrHistogram 2 writes for its compressed V2 encoding and the V2 encoding inside (older encodings lay out their
    // headers otherwise), and the length of that header.
    private const val COMPRESSED_V2_COOKIE = 0x1c849314
    private const val V2_COOKIE = 0x1c849313
    private const val HEADER_BYTES = 40
    private const val MAX_LOWEST_VALUE = 1L shl 40

    private val JSON = Json { ignoreUnknownKeys = true }

    /** The document in [file], read within [MAX_FILE_BYTES]. */
    fun read(file: File): ReportInput = read(file.path, readBytes(file), file.name)

    /** rdma-run's document or perftest's `--out_json` in [file], told apart by their shape. */
    fun readAny(file: File): ReportSource = readAny(file.path, readBytes(file), file.name)

    /** rdma-run's document or perftest's `--out_json` in [bytes], which came from [path], shown as [name]. */
    fun readAny(path: String, bytes: ByteArray, name: String = File(path).name): ReportSource {
        val root = parse(path, bytes)
        return if (PerftestReader.looksLike(root)) PerftestReader.read(path, root as JsonObject, name) else read(path, root, name)
    }

    private fun readBytes(file: File): ByteArray {
        if (file.length() > MAX_FILE_BYTES) throw tooLarge(file.path)
        val bytes = try {
            file.inputStream().use { it.readNBytes(MAX_FILE_BYTES + 1) } // a file that grew since length() is cut here
        } catch (e: IOException) {
            throw ResultsFormatException("cannot read $file: ${e.message}")
        }
        if (bytes.size > MAX_FILE_BYTES) throw tooLarge(file.path)
        return bytes
    }

    private fun tooLarge(path: String) =
        ResultsFormatException("$path is larger than ${MAX_FILE_BYTES shr 20} MiB, more than any results document of rdma-run")

    /** The document in [bytes], which came from [path] (named in sentences) and is shown as [name]. */
    fun read(path: String, bytes: ByteArray, name: String = File(path).name): ReportInput = read(path, parse(path, bytes), name)

    /** [bytes] as UTF-8 JSON, or a sentence saying they are not. */
    private fun parse(path: String, bytes: ByteArray): JsonElement {
        if (bytes.size > MAX_FILE_BYTES) throw tooLarge(path)
        val text = try {
            Charsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(bytes)).toString()
        } catch (_: CharacterCodingException) {
            throw ResultsFormatException("$path is not UTF-8 text, so not a results document of rdma-run (--json writes them)")
        }
        val root = try {
            Json.parseToJsonElement(text)
        } catch (e: SerializationException) {
            throw ResultsFormatException("$path is not JSON: ${printable(e.message.orEmpty().lineSequence().first())}")
        }
        return root
    }

    private fun read(path: String, root: JsonElement, name: String): ReportInput {
        if (root !is JsonObject) throw ResultsFormatException("$path is not a results document of rdma-run (--json writes them)")
        val schema = root["schema"]
            ?: throw ResultsFormatException("$path is not a results document of rdma-run: it has no \"schema\" (--json writes them)")
        if ((schema as? JsonPrimitive)?.takeIf { !it.isString }?.intOrNull !in ResultsDocument.READABLE) {
            throw ResultsFormatException("$path is results schema ${printable(schema.toString(), 40)}; this rdma-run reads schemas " +
                "${ResultsDocument.READABLE.first} to ${ResultsDocument.READABLE.last}")
        }
        checkShape(path, root, ResultsDocument.serializer().descriptor, Field.ROOT)
        val document = try {
            JSON.decodeFromJsonElement(ResultsDocument.serializer(), root)
        } catch (e: SerializationException) { // checkShape let through what the classes read: not expected
            throw ResultsFormatException("$path is not a valid results document: ${printable(e.message.orEmpty().lineSequence().first())}")
        } catch (e: IllegalArgumentException) {
            throw ResultsFormatException("$path is not a valid results document: ${printable(e.message.orEmpty().lineSequence().first())}")
        }
        val checker = Checker(path)
        return ReportInput(name, document, checker.check(document), checker.checkRanks(document))
    }

    /** Where a value is in the document, rendered only for a sentence: `runs[2].end.sections["rtt"]`. */
    private class Field(val parent: Field?, val key: String?, val index: Int = -1, val mapKey: Boolean = false) {
        fun child(name: String) = Field(this, name)
        fun element(i: Int) = Field(this, null, i)
        fun entry(key: String) = Field(this, key, mapKey = true)

        override fun toString(): String = when {
            parent == null -> "the document"
            index >= 0 -> "${parent.prefix()}[$index]"
            mapKey -> "${parent.prefix()}[\"${printable(key!!, 60)}\"]"
            else -> (if (parent.parent == null) "" else "${parent.prefix()}.") + key
        }

        private fun prefix() = if (parent == null) "" else toString()

        companion object {
            val ROOT = Field(null, null)
        }
    }

    /**
     * Checks that [e] has the JSON type [d] describes (recursively, over the fields the classes
     * read; unknown keys are left alone, as the decoder leaves them): a sentence for the first
     * field that has the wrong type or is missing.
     */
    @OptIn(ExperimentalSerializationApi::class)
    private fun checkShape(path: String, e: JsonElement, d: SerialDescriptor, at: Field) {
        fun wrong(expected: String): Nothing =
            throw ResultsFormatException("$path: $at should be $expected, not ${printable(e.toString(), 40)}")
        if (e is JsonNull) {
            if (d.isNullable) return
            wrong(expectation(d))
        }
        when (val kind = d.kind) {
            StructureKind.CLASS, StructureKind.OBJECT -> {
                if (e !is JsonObject) wrong("an object")
                for (i in 0 until d.elementsCount) {
                    val name = d.getElementName(i)
                    val value = e[name]
                    if (value == null) {
                        if (d.isElementOptional(i)) continue
                        throw ResultsFormatException("$path: ${at.child(name)} is missing")
                    }
                    checkShape(path, value, d.getElementDescriptor(i), at.child(name))
                }
            }
            StructureKind.LIST -> {
                if (e !is JsonArray) wrong("a list")
                e.forEachIndexed { i, item -> checkShape(path, item, d.getElementDescriptor(0), at.element(i)) }
            }
            StructureKind.MAP -> {
                if (e !is JsonObject) wrong("an object")
                for ((key, value) in e) checkShape(path, value, d.getElementDescriptor(1), at.entry(key))
            }
            SerialKind.ENUM -> {
                val names = (0 until d.elementsCount).map { d.getElementName(it) }
                if (e !is JsonPrimitive || !e.isString || e.content !in names) wrong(expectation(d))
            }
            is PrimitiveKind -> {
                val ok = e is JsonPrimitive && when (kind) {
                    PrimitiveKind.STRING -> e.isString
                    PrimitiveKind.BOOLEAN -> !e.isString && e.booleanOrNull != null
                    PrimitiveKind.INT -> !e.isString && e.intOrNull != null
                    PrimitiveKind.LONG -> !e.isString && e.longOrNull != null
                    PrimitiveKind.DOUBLE -> !e.isString && e.doubleOrNull?.isFinite() == true
                    else -> false
                }
                if (!ok) wrong(expectation(d))
            }
            is PolymorphicKind, SerialKind.CONTEXTUAL -> error("results documents have no ${d.serialName}") // none in these classes
        }
    }

    @OptIn(ExperimentalSerializationApi::class)
    private fun expectation(d: SerialDescriptor): String = when (d.kind) {
        StructureKind.CLASS, StructureKind.OBJECT, StructureKind.MAP -> "an object"
        StructureKind.LIST -> "a list"
        SerialKind.ENUM -> "one of " + (0 until d.elementsCount).joinToString { "\"${d.getElementName(it)}\"" }
        PrimitiveKind.STRING -> "a string"
        PrimitiveKind.BOOLEAN -> "true or false"
        PrimitiveKind.INT -> "a whole number (32-bit)"
        PrimitiveKind.LONG -> "a whole number (64-bit)"
        PrimitiveKind.DOUBLE -> "a finite number"
        else -> d.serialName
    } + if (d.isNullable) " or null" else ""

    /** The checks of values: ranges, order, and the histograms against their summaries. */
    private class Checker(val path: String) {
        /** Decompressed bytes and counts arrays of the histograms decoded so far. */
        private var work = 0L

        fun refuse(at: Field, what: String): Nothing = throw ResultsFormatException("$path: $at $what")

        fun check(doc: ResultsDocument): List<List<LatencyCurve>> {
            val start = Field.ROOT.child("start")
            try {
                Instant.parse(doc.start.timestamp)
            } catch (_: DateTimeParseException) {
                refuse(start.child("timestamp"), "should be an ISO-8601 time such as 2025-01-31T12:00:00Z, not \"${printable(doc.start.timestamp, 40)}\"")
            }
            oneOf(start.child("role"), doc.start.role, "server", "client", "loopback", "rank")
            return doc.runs.mapIndexed { i, run -> checkRun(Field.ROOT.child("runs").element(i), run) }
        }

        fun oneOf(at: Field, value: String, vararg allowed: String) {
            if (value !in allowed) refuse(at, "should be one of ${allowed.joinToString { "\"$it\"" }}, not \"${printable(value, 40)}\"")
        }

        /** Each (field of [at], value) is 0 or more. */
        fun notNegative(at: Field, vararg values: Pair<String, Number>) {
            for ((name, value) in values) if (value.toDouble() < 0) refuse(at.child(name), "is negative ($value)")
        }

        fun checkRun(at: Field, run: ResultsRun): List<LatencyCurve> {
            oneOf(at.child("role"), run.role, "server", "client")
            // The page puts a sweep's size on a log2 axis.
            val size = run.label?.removePrefix("size=")?.takeIf { it != run.label }?.toIntOrNull()
            if (size != null && size < 1) refuse(at.child("label"), "gives a message size of $size; sizes are at least 1 byte")
            var previousStart = 0.0
            run.intervals.forEachIndexed { i, interval ->
                val a = at.child("intervals").element(i)
                notNegative(a, "startSeconds" to interval.startSeconds, "bytesSent" to interval.bytesSent, "bytesReceived" to interval.bytesReceived,
                    "operations" to interval.operations, "messagesReceived" to interval.messagesReceived, "bwMBps" to interval.bwMBps,
                    "bwGbps" to interval.bwGbps, "msgRateMpps" to interval.msgRateMpps)
                if (interval.endSeconds < interval.startSeconds) {
                    refuse(a.child("endSeconds"), "(${interval.endSeconds}) is before startSeconds (${interval.startSeconds})")
                }
                // The page draws the intervals as one line in document order.
                if (interval.startSeconds < previousStart) {
                    refuse(a.child("startSeconds"), "(${interval.startSeconds}) is before the previous interval's start ($previousStart)")
                }
                previousStart = interval.startSeconds
            }
            run.bwPeakBytesPerSecond?.let { notNegative(at, "bwPeakBytesPerSecond" to it) }
            val end = at.child("end")
            notNegative(end, "durationNanos" to run.end.durationNanos)
            run.end.pair?.let { checkPair(end.child("pair"), it) }
            run.end.qps.forEachIndexed { i, t -> checkTraffic(end.child("qps").element(i), t) }
            checkTraffic(end.child("total"), run.end.total)
            // What the page plots: the work requests' latency and each section's, sections in name order.
            return curves(end.child("total").child("latency"), run.end.total.latency, end.child("sections"), run.end.sections)
        }

        /**
         * The work requests' latency [workRequests] (at [latencyAt]) and each of [sections] (at
         * [sectionsAt]), checked, as the page's curves: work requests first, then sections by name.
         */
        fun curves(latencyAt: Field, workRequests: LatencySummary?, sectionsAt: Field, sections: Map<String, LatencySummary>): List<LatencyCurve> {
            val latencies = listOfNotNull(workRequests?.let { Triple("work requests", latencyAt, it) }) +
                sections.toSortedMap().map { (name, l) -> Triple(name, sectionsAt.entry(name), l) }
            return latencies.mapNotNull { (name, a, l) ->
                checkLatency(a, l)
                curve(a.child("histogram"), l)?.let { LatencyCurve(name, l.roundTrip, it) }
            }
        }

        /**
         * The ranks' summaries: ranks within their run, numbers not negative, the total the sum of
         * the ranks (a document's own sums), and each latency against its histogram; returns each
         * rank's curves, for the page to overlay the ranks.
         */
        fun checkRanks(doc: ResultsDocument): List<Map<Int, List<LatencyCurve>>> = doc.ranks.mapIndexed { i, entry ->
            val at = Field.ROOT.child("ranks").element(i).child("summary")
            val s = entry.summary
            if (s.ranks !in 2..Ranks.MAX_RANKS) refuse(at.child("ranks"), "is ${s.ranks}; a run of ranks has 2 to ${Ranks.MAX_RANKS}")
            val seen = HashSet<Int>()
            val curves = s.perRank.mapIndexed { k, t ->
                val a = at.child("perRank").element(k)
                val r = t.rank ?: refuse(a.child("rank"), "is null; only the total is of every rank")
                if (r !in 0 until s.ranks) refuse(a.child("rank"), "is $r, not a rank of ${s.ranks} (0 to ${s.ranks - 1})")
                if (!seen.add(r)) refuse(a.child("rank"), "is $r again; each rank has one entry")
                r to checkRankTotal(a, t)
            }.toMap()
            val total = at.child("total")
            if (s.total.rank != null) refuse(total.child("rank"), "is ${s.total.rank}; the total is of every rank (null)")
            checkRankTotal(total, s.total)
            val sums = listOf("pairs" to (s.total.pairs.toLong() to s.perRank.sumOf { it.pairs.toLong() }),
                "bytesSent" to (s.total.bytesSent to s.perRank.sumOf { it.bytesSent }),
                "bytesReceived" to (s.total.bytesReceived to s.perRank.sumOf { it.bytesReceived }),
                "operations" to (s.total.operations to s.perRank.sumOf { it.operations }),
                "messagesReceived" to (s.total.messagesReceived to s.perRank.sumOf { it.messagesReceived }))
            for ((name, v) in sums) if (v.first != v.second) refuse(total.child(name), "(${v.first}) is not the sum of the ranks' (${v.second})")
            curves
        }

        /** One rank's (or the total's) figures; its latency curves, work requests first, then sections by name. */
        fun checkRankTotal(at: Field, t: RankTotal): List<LatencyCurve> {
            notNegative(at, "pairs" to t.pairs, "bytesSent" to t.bytesSent, "bytesReceived" to t.bytesReceived, "operations" to t.operations,
                "messagesReceived" to t.messagesReceived, "sentBytesPerSecond" to t.sentBytesPerSecond,
                "receivedBytesPerSecond" to t.receivedBytesPerSecond)
            return curves(at.child("latency"), t.latency, at.child("sections"), t.sections)
        }

        /** A pair of a run of ranks: the page draws a row and a column per rank. */
        fun checkPair(at: Field, p: RankPair) {
            if (p.ranks !in 2..Ranks.MAX_RANKS) refuse(at.child("ranks"), "is ${p.ranks}; a run of ranks has 2 to ${Ranks.MAX_RANKS}")
            if (p.rank !in 0 until p.ranks) refuse(at.child("rank"), "is ${p.rank}, not a rank of ${p.ranks} (0 to ${p.ranks - 1})")
            if (p.peerRank !in 0 until p.ranks) refuse(at.child("peerRank"), "is ${p.peerRank}, not a rank of ${p.ranks} (0 to ${p.ranks - 1})")
            if (p.peerRank == p.rank) refuse(at.child("peerRank"), "is the run's own rank (${p.rank}); a pair is two ranks")
        }

        fun checkTraffic(at: Field, t: TrafficResult) {
            notNegative(at, "bytesSent" to t.bytesSent, "bytesReceived" to t.bytesReceived, "operations" to t.operations,
                "messagesReceived" to t.messagesReceived, "messagesNotReceived" to t.messagesNotReceived, "sentGbps" to t.sentGbps,
                "receivedGbps" to t.receivedGbps, "mpps" to t.mpps)
            t.latency?.let { checkLatency(at.child("latency"), it) }
        }

        /** A latency summary's numbers: a count, nothing negative, percentiles in order. */
        fun checkLatency(at: Field, l: LatencySummary) {
            if (l.count < 1) refuse(at.child("count"), "is ${l.count}; a latency holds at least one value")
            notNegative(at, "minNanos" to l.minNanos, "meanNanos" to l.meanNanos, "stdevNanos" to l.stdevNanos)
            l.bytesPerSample?.let { notNegative(at, "bytesPerSample" to it) }
            val ordered = listOf("minNanos" to l.minNanos, "p50Nanos" to l.p50Nanos, "p90Nanos" to l.p90Nanos, "p99Nanos" to l.p99Nanos,
                "p999Nanos" to l.p999Nanos, "maxNanos" to l.maxNanos)
            for ((low, high) in ordered.zipWithNext()) {
                if (high.second < low.second) refuse(at.child(high.first), "(${high.second}) is below ${low.first} (${low.second})")
            }
        }

        /** The page's curve from [l]'s histogram ([field]), which must hold what [l] says it does; null without one. */
        fun curve(field: Field, l: LatencySummary): List<Pair<Double, Double>>? {
            val h = decode(field, l.histogram ?: return null)
            val actual = try {
                listOf("count" to h.totalCount, "minNanos" to h.minValue, "p50Nanos" to h.getValueAtPercentile(50.0),
                    "p90Nanos" to h.getValueAtPercentile(90.0), "p99Nanos" to h.getValueAtPercentile(99.0),
                    "p999Nanos" to h.getValueAtPercentile(99.9), "maxNanos" to h.maxValue)
            } catch (_: RuntimeException) { // counts that decoded but do not add up (their sum overflowed)
                refuse(field, "is not a valid HdrHistogram (its percentiles do not add up)")
            }
            val stated = listOf(l.count, l.minNanos, l.p50Nanos, l.p90Nanos, l.p99Nanos, l.p999Nanos, l.maxNanos)
            for ((a, s) in actual.zip(stated)) {
                if (a.second != s) refuse(field, "does not match the summary beside it: its ${a.first} is ${a.second}, the document's $s")
            }
            return percentiles(field, h)
        }

        /** [encoded] decoded within the bounds above, or a sentence saying what is wrong with it. */
        fun decode(at: Field, encoded: String): Histogram {
            fun bad(why: String): Nothing = refuse(at, "is not a valid HdrHistogram ($why)")
            val bad64 = encoded.indexOfFirst { !(it in 'A'..'Z' || it in 'a'..'z' || it in '0'..'9' || it == '+' || it == '/' || it == '=') }
            if (bad64 >= 0) bad("bad base64 at character ${bad64 + 1}")
            val bytes = try {
                Base64.getDecoder().decode(encoded)
            } catch (_: IllegalArgumentException) {
                bad("bad base64: its length or padding is wrong")
            }
            if (bytes.size < 8) bad("${bytes.size} bytes, too short for its header")
            val buffer = ByteBuffer.wrap(bytes).order(ByteOrder.BIG_ENDIAN)
            if (buffer.getInt(0) != COMPRESSED_V2_COOKIE) bad("not HdrHistogram's compressed V2 encoding")
            val compressed = buffer.getInt(4)
            if (compressed < 0 || compressed > bytes.size - 8) bad("it declares $compressed compressed bytes and holds ${bytes.size - 8}")
            val inflated = inflate(at, bytes, compressed)
            val header = ByteBuffer.wrap(inflated).order(ByteOrder.BIG_ENDIAN)
            if (inflated.size < HEADER_BYTES) bad("it decompresses to ${inflated.size} bytes, too short for its header")
            if (header.getInt(0) != V2_COOKIE) bad("not HdrHistogram's V2 encoding inside")
            val payload = header.getInt(4)
            if (payload != inflated.size - HEADER_BYTES) bad("its header declares $payload bytes of counts and it holds ${inflated.size - HEADER_BYTES}")
            val normalizingOffset = header.getInt(8)
            if (normalizingOffset != 0) bad("its counts are shifted by $normalizingOffset; rdma-run writes them unshifted")
            val digits = header.getInt(12)
            if (digits !in 0..MAX_SIGNIFICANT_DIGITS) bad("it keeps $digits significant digits; rdma-run writes 3 and reads at most $MAX_SIGNIFICANT_DIGITS")
            val lowest = header.getLong(16)
            // HdrHistogram computes with 2 * lowest and shifts by its magnitude: keep both far from overflowing.
            if (lowest !in 1..MAX_LOWEST_VALUE) bad("its lowest discernible value is $lowest; rdma-run writes 1")
            val h = try {
                Histogram.decodeFromByteBuffer(ByteBuffer.wrap(inflated), 0)
            } catch (_: RuntimeException) { // its own checks of the header and counts (IllegalArgumentException, IndexOutOfBounds...)
                bad("its header or counts do not decode")
            }
            work += h.estimatedFootprintInBytes
            if (work > MAX_HISTOGRAM_WORK_BYTES) {
                refuse(at, "takes the document's histograms beyond ${MAX_HISTOGRAM_WORK_BYTES shr 20} MiB decoded; rdma-run's documents need a few MiB")
            }
            return h
        }

        /** The compressed part of [bytes], decompressed within [MAX_HISTOGRAM_BYTES] and counted in [work]. */
        fun inflate(at: Field, bytes: ByteArray, compressed: Int): ByteArray {
            fun bad(why: String): Nothing = refuse(at, "is not a valid HdrHistogram ($why)")
            val inflater = Inflater()
            try {
                inflater.setInput(bytes, 8, compressed)
                val out = java.io.ByteArrayOutputStream()
                val chunk = ByteArray(8192)
                while (!inflater.finished()) {
                    val n = try {
                        inflater.inflate(chunk)
                    } catch (_: DataFormatException) {
                        bad("its compressed data is corrupt")
                    }
                    if (n == 0 && (inflater.needsInput() || inflater.needsDictionary())) bad("its compressed data ends early")
                    out.write(chunk, 0, n)
                    if (out.size() > MAX_HISTOGRAM_BYTES) bad("it decompresses to more than ${MAX_HISTOGRAM_BYTES shr 20} MiB")
                }
                work += out.size()
                return out.toByteArray()
            } finally {
                inflater.end()
            }
        }

        /** The page's curve of [h]: about 5 points per halving of what is left up to [MAX_PERCENTILE], then the maximum. */
        fun percentiles(at: Field, h: Histogram): List<Pair<Double, Double>> {
            val points = ArrayList<Pair<Double, Double>>()
            try {
                for (v in h.percentiles(5)) {
                    val p = v.percentileLevelIteratedTo / 100.0
                    if (p >= MAX_PERCENTILE) break
                    if (points.size >= MAX_CURVE_POINTS || !p.isFinite()) refuse(at, "is not a valid HdrHistogram (its percentiles do not add up)")
                    points += log10(1 / (1 - p)) to v.valueIteratedTo.toDouble()
                }
            } catch (_: RuntimeException) { // the iterator's own checks (ConcurrentModification, IndexOutOfBounds) on counts that do not add up
                refuse(at, "is not a valid HdrHistogram (its percentiles do not add up)")
            }
            points += log10(1 / (1 - MAX_PERCENTILE)) to h.maxValue.toDouble()
            return points
        }
    }
}
