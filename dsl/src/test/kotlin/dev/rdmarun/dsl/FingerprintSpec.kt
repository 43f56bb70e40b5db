package dev.rdmarun.dsl

import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import io.kotest.matchers.shouldNotBe
import io.kotest.matchers.string.shouldMatch

/** Same scenario and parameters give the same fingerprint on both peers; any difference changes it. */
class FingerprintSpec : FunSpec({
    fun scenario(iterations: Int = 100, size: Int = 64): suspend ScenarioScope.() -> Unit = {
        qps(intParam("qps", 2))
        connect(peer)
        forEachQp {
            repeat(iterations) {
                client { send(size = size); receive() }
                server { receive(); send(size = size) }
            }
        }
    }

    fun fingerprint(
        parameters: Map<String, String> = emptyMap(),
        overrides: SettingsOverrides = SettingsOverrides(),
        block: suspend ScenarioScope.() -> Unit = scenario(),
    ) = planScenario(RdmaOptions(parameters, overrides), block).fingerprint

    test("the same scenario and parameters give the same fingerprint, a SHA-256 in hex") {
        fingerprint() shouldBe fingerprint()
        fingerprint(mapOf("qps" to "4")) shouldBe fingerprint(mapOf("qps" to "4"))
        fingerprint() shouldMatch Regex("[0-9a-f]{64}")
    }

    test("the connect target and local choices (device, GID index, completion mode) do not count") {
        val listening: suspend ScenarioScope.() -> Unit = { qps(2); connect(Peer.listen(18515)); forEachQp { repeat(100) { client { send(size = 64); receive() }; server { receive(); send(size = 64) } } } }
        fingerprint(block = listening) shouldBe fingerprint()
        fingerprint(overrides = SettingsOverrides(device = "mlx5_0", gidIndex = 3, completionMode = CompletionMode.EVENT)) shouldBe fingerprint()
    }

    test("a different iteration count, size, parameter or shared setting changes it") {
        val base = fingerprint()
        fingerprint(block = scenario(iterations = 101)) shouldNotBe base
        fingerprint(block = scenario(size = 128)) shouldNotBe base
        fingerprint(mapOf("qps" to "2")) shouldNotBe base // same QP count, but a parameter more
        fingerprint(mapOf("qps" to "3")) shouldNotBe fingerprint(mapOf("qps" to "2"))
        fingerprint(block = { qps(2); recvDepth(32); connect(peer); forEachQp { repeat(100) { client { send(size = 64); receive() }; server { receive(); send(size = 64) } } } }) shouldNotBe base
    }

    test("swapping the roles' operations changes it") {
        val a = fingerprint(block = { connect(peer); client { write() } })
        val b = fingerprint(block = { connect(peer); server { write() } })
        a shouldNotBe b
    }
})
