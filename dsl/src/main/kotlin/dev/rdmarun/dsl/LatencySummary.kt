package dev.rdmarun.dsl

import kotlinx.serialization.Serializable
import org.HdrHistogram.Histogram

/** Latency percentiles of one histogram, in nanoseconds. */
@Serializable
public data class LatencySummary(
    val count: Long,
    val minNanos: Long,
    val meanNanos: Double,
    val p50Nanos: Long,
    val p90Nanos: Long,
    val p99Nanos: Long,
    val p999Nanos: Long,
    val maxNanos: Long,
    /** Standard deviation. */
    val stdevNanos: Double = 0.0,
    /** Recorded with measureRoundTrip: the values are round trips, reported one way (halved) beside them. */
    val roundTrip: Boolean = false,
    /** HdrHistogram's compressed V2 encoding of the recorded values (nanoseconds), base64: `--histogram`, reports. */
    val histogram: String? = null,
    /**
     * A section's: the bytes of the work requests this side posted inside it, per sample (rounded
     * down; a ping-pong's message size), perftest's `#bytes` of its latency block; null for the
     * work requests' latency, and in documents written before it.
     */
    val bytesPerSample: Long? = null,
) {
    public companion object {
        public fun of(h: Histogram): LatencySummary? = if (h.totalCount == 0L) null else LatencySummary(
            count = h.totalCount,
            minNanos = h.minValue,
            meanNanos = h.mean,
            p50Nanos = h.getValueAtPercentile(50.0),
            p90Nanos = h.getValueAtPercentile(90.0),
            p99Nanos = h.getValueAtPercentile(99.0),
            p999Nanos = h.getValueAtPercentile(99.9),
            maxNanos = h.maxValue,
            stdevNanos = h.stdDeviation,
            histogram = encode(h),
        )

        private fun encode(h: Histogram): String {
            val buffer = java.nio.ByteBuffer.allocate(h.neededByteBufferCapacity)
            val n = h.encodeIntoCompressedByteBuffer(buffer)
            return java.util.Base64.getEncoder().encodeToString(buffer.array().copyOf(n))
        }

        /** The histogram of [histogram] back (nanoseconds). */
        public fun decode(histogram: String): Histogram =
            Histogram.decodeFromCompressedByteBuffer(java.nio.ByteBuffer.wrap(java.util.Base64.getDecoder().decode(histogram)), 0)
    }
}
