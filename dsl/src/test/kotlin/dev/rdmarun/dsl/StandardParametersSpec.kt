package dev.rdmarun.dsl

import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.StringSpec
import io.kotest.matchers.collections.shouldContainAll
import io.kotest.matchers.nulls.shouldBeNull
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain

/** perftest's parameters as the DSL reads them: sizes with suffixes, and the settings they replace at connect. */
class StandardParametersSpec : StringSpec({
    "sizes: bytes, and K, M, G as powers of 1024 in the forms people type" {
        StandardParameters.parseSize("4096") shouldBe 4096
        StandardParameters.parseSize("4K") shouldBe 4096
        StandardParameters.parseSize("4k") shouldBe 4096
        StandardParameters.parseSize("64KiB") shouldBe 65536
        StandardParameters.parseSize("1M") shouldBe (1 shl 20)
        StandardParameters.parseSize("8MB") shouldBe (8 shl 20)
        StandardParameters.parseSize("1G") shouldBe (1 shl 30)
        StandardParameters.parseSize(" 2 ") shouldBe 2
    }

    "what is not a size, or does not fit, is refused" {
        for (bad in listOf("", "K", "4Q", "-1", "1.5K", "2G", "99999999999", "4 K B")) {
            StandardParameters.parseSize(bad).shouldBeNull()
        }
    }

    "qps, depth and inline replace the script's settings; size is the buffer size unless the script set one" {
        val script = ScenarioSettings(qps = 4, sendDepth = 128, inlineThreshold = 64, bufferSize = 4096)
        val given = mapOf("qps" to "2", "depth" to "16", "inline" to "0", "size" to "1K")
        val applied = StandardParameters.applyTo(script, given, bufferSizeSet = false)
        applied.qps shouldBe 2
        applied.sendDepth shouldBe 16
        applied.inlineThreshold shouldBe 0
        applied.bufferSize shouldBe 1024
        StandardParameters.applyTo(script, given, bufferSizeSet = true).bufferSize shouldBe 4096
        StandardParameters.applyTo(script, emptyMap(), bufferSizeSet = false) shouldBe script
    }

    "mtu and signal (perftest's -m and -Q) replace mtu(n) and signalEvery(n)" {
        val script = ScenarioSettings(mtu = 4096, signalEvery = 16)
        val applied = StandardParameters.applyTo(script, mapOf("mtu" to "1024", "signal" to "4"), bufferSizeSet = false)
        applied.mtu shouldBe 1024
        applied.signalEvery shouldBe 4
        StandardParameters.READ_AT_CONNECT shouldContainAll listOf("mtu", "signal")
    }

    "a standard parameter that is not a number says which and what" {
        shouldThrow<ScenarioException> { StandardParameters.applyTo(ScenarioSettings(), mapOf("qps" to "two"), false) }
            .message shouldContain "parameter qps must be a whole number, not 'two'"
        shouldThrow<ScenarioException> { StandardParameters.applyTo(ScenarioSettings(), mapOf("size" to "4Q"), false) }
            .message shouldContain "parameter size must be a size in bytes like 4096, 4K or 1M, not '4Q'"
    }
})
