package dev.rdmarun.dsl

import dev.rdmarun.dsl.Fixtures.checkPlan
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContain
import io.kotest.matchers.collections.shouldNotContain
import io.kotest.matchers.shouldBe
import io.kotest.matchers.shouldNotBe
import io.kotest.matchers.string.shouldMatch
import io.kotest.matchers.string.shouldStartWith
import java.security.MessageDigest
import java.util.HexFormat
import kotlin.time.Duration.Companion.milliseconds

/**
 * Same shared settings, parameters and script give the same fingerprint on both peers; local
 * choices and each side's own grant do not count; any shared difference changes it.
 */
class FingerprintSpec : FunSpec({
    val script = """
        rdma {
            qps(intParam("qps", 2))
            connect(peer)
            forEachQp { repeat { client { send(); receive() }; server { receive(); send() } } }
        }
    """.trimIndent()

    fun plan(
        parameters: Map<String, String> = emptyMap(),
        source: String? = script,
        overrides: SettingsOverrides = SettingsOverrides(),
        peer: Peer = Fixtures.peer,
        settings: suspend ScenarioScope.() -> Unit = {},
    ): ScenarioPlan = checkPlan(RdmaOptions(parameters = parameters, overrides = overrides, peer = peer, scenarioSource = source)) {
        qps(2)
        settings()
        connect(peer)
    }

    fun fingerprint(
        parameters: Map<String, String> = emptyMap(),
        source: String? = script,
        overrides: SettingsOverrides = SettingsOverrides(),
        peer: Peer = Fixtures.peer,
        settings: suspend ScenarioScope.() -> Unit = {},
    ) = plan(parameters, source, overrides, peer, settings).fingerprint

    fun sha256(text: String) = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(text.toByteArray()))

    test("the same settings, parameters and script give the same fingerprint, a SHA-256 in hex") {
        fingerprint() shouldBe fingerprint()
        fingerprint(mapOf("n" to "4")) shouldBe fingerprint(mapOf("n" to "4"))
        fingerprint() shouldMatch Regex("[0-9a-f]{64}")
        // It is the digest of the canonical lines, one per line.
        val p = plan(mapOf("n" to "4"))
        p.fingerprint shouldBe sha256(p.canonicalLines().joinToString("") { it + "\n" })
    }

    test("the order the parameters were given in does not count") {
        fingerprint(linkedMapOf("a" to "1", "b" to "2")) shouldBe fingerprint(linkedMapOf("b" to "2", "a" to "1"))
    }

    test("local choices do not count: role, device, port, GID index, completion mode, timeout, overrides") {
        val base = fingerprint()
        fingerprint(peer = Peer.listen(18515)) shouldBe base
        fingerprint(peer = Peer.connect("elsewhere", 4791)) shouldBe base
        fingerprint { device("mlx5_0") } shouldBe base
        fingerprint { port(2) } shouldBe base
        fingerprint { gidIndex(3) } shouldBe base
        fingerprint { completionMode(CompletionMode.EVENT) } shouldBe base
        fingerprint { timeout(500.milliseconds) } shouldBe base
        fingerprint(overrides = SettingsOverrides(device = "mlx5_0", gidIndex = 3, port = 2, completionMode = CompletionMode.BACKOFF,
            timeout = 500.milliseconds)) shouldBe base
    }

    test("each side's own remoteAccess does not count") {
        val base = fingerprint()
        fingerprint { remoteAccess(RemoteAccess.WRITE) } shouldBe base
        fingerprint { remoteAccess(RemoteAccess.READ, RemoteAccess.ATOMIC) } shouldBe base
    }

    test("each shared setting changes it") {
        fun variant(name: String, change: suspend ScenarioScope.() -> Unit) = name to change
        val variants = listOf(
            variant("qps") { qps(3) },
            variant("bufferSize") { bufferSize(8192) },
            variant("bufferCount") { bufferCount(2) },
            variant("sendDepth") { sendDepth(32) },
            variant("recvDepth") { recvDepth(32) },
            variant("inboxDepth") { inboxDepth(16) },
            variant("mtu") { mtu(1024) },
            variant("inlineThreshold") { inlineThreshold(64) },
            variant("signalEvery") { signalEvery(8) },
            variant("cqMode") { perQpCq() },
            variant("rnrRetry") { rnrRetry(3) },
            variant("retryCount") { retry(3) },
            variant("retryTimeout") { retry(7, 18) },
        )
        val base = fingerprint()
        val seen = mutableMapOf(base to "base")
        for ((name, change) in variants) {
            val f = fingerprint(settings = change)
            withClue(name) { (seen[f] ?: "new") shouldBe "new" }
            seen[f] = name
            // The canonical lines name the setting that differs.
            plan(settings = change).canonicalLines().single { it.startsWith("setting $name=") } shouldNotBe
                plan().canonicalLines().single { it.startsWith("setting $name=") }
        }
    }

    test("a parameter, even one the script does not read, changes it") {
        val base = fingerprint()
        fingerprint(mapOf("qps" to "2")) shouldNotBe base
        fingerprint(mapOf("qps" to "3")) shouldNotBe fingerprint(mapOf("qps" to "2"))
        fingerprint(mapOf("unused" to "")) shouldNotBe base
    }

    test("the script text changes it: the operations after connect are compared through it") {
        val base = fingerprint()
        fingerprint(source = script.replace("send()", "send(size = 64)")) shouldNotBe base
        fingerprint(source = "$script\n") shouldNotBe base
        fingerprint(source = null) shouldNotBe base
        // Without a source only settings and parameters are compared: different code after connect
        // (which a check-only run does not even reach) goes unnoticed.
        val a = checkPlan(RdmaOptions(peer = Fixtures.peer)) { connect(peer); send() }
        val b = checkPlan(RdmaOptions(peer = Fixtures.peer)) { connect(peer); read() }
        a.fingerprint shouldBe b.fingerprint
    }

    test("canonicalLines: format, shared settings, sorted parameters, and the script digest when a source is given") {
        val lines = plan(linkedMapOf("z" to "1", "a" to "2")).canonicalLines()
        lines.first() shouldStartWith "rdma-run-plan-"
        lines shouldContain "setting qps=2"
        lines shouldContain "setting mtu=auto"
        lines.filter { it.startsWith("parameter ") } shouldBe listOf("parameter a=2", "parameter z=1")
        lines.last() shouldBe "script sha256=${sha256(script)}"
        plan(linkedMapOf("z" to "1", "a" to "2")).sourceDigest shouldBe sha256(script)
        val without = plan(source = null)
        without.sourceDigest shouldBe null
        without.canonicalLines().none { it.startsWith("script ") } shouldBe true
        // Local choices are not among the lines.
        val local = plan { device("rxe0"); gidIndex(1); remoteAccess(RemoteAccess.WRITE) }.canonicalLines()
        local.none { it.contains("device") || it.contains("gidIndex") || it.contains("remoteAccess") || it.contains("timeout") } shouldBe true
        local shouldNotContain "setting device=rxe0"
    }
})
