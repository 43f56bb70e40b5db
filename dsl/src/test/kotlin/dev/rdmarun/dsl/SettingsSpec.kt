package dev.rdmarun.dsl

import dev.rdmarun.dsl.Fixtures.checkPlan
import dev.rdmarun.dsl.Fixtures.peer
import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.Access.LOCAL_WRITE
import dev.rdmarun.runtime.Access.REMOTE_ATOMIC
import dev.rdmarun.runtime.Access.REMOTE_READ
import dev.rdmarun.runtime.Access.REMOTE_WRITE
import dev.rdmarun.runtime.engine.EngineConfig
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import kotlin.time.Duration.Companion.seconds
import kotlinx.serialization.json.Json

/**
 * Settings and what they register: the data region gets exactly LOCAL_WRITE plus what this side's
 * remoteAccess grants, the QPs the same grant plus REMOTE_WRITE for the credit words.
 */
class SettingsSpec : FunSpec({
    fun plan(vararg access: RemoteAccess) = checkPlan { remoteAccess(*access); connect(peer) }

    context("access flags") {
        test("by default the data region is LOCAL_WRITE only, and the QP admits only the credit words' REMOTE_WRITE") {
            val p = checkPlan { connect(peer) }
            p.dataAccess shouldBe setOf(LOCAL_WRITE)
            p.qpAccess shouldBe setOf(REMOTE_WRITE)
        }

        test("each declared flag is added to the data region and to the QP, and nothing else") {
            plan(RemoteAccess.WRITE).dataAccess shouldBe setOf(LOCAL_WRITE, REMOTE_WRITE)
            plan(RemoteAccess.WRITE).qpAccess shouldBe setOf(REMOTE_WRITE)
            plan(RemoteAccess.READ).dataAccess shouldBe setOf(LOCAL_WRITE, REMOTE_READ)
            plan(RemoteAccess.READ).qpAccess shouldBe setOf(REMOTE_WRITE, REMOTE_READ)
            plan(RemoteAccess.ATOMIC).dataAccess shouldBe setOf(LOCAL_WRITE, REMOTE_ATOMIC)
            plan(RemoteAccess.ATOMIC).qpAccess shouldBe setOf(REMOTE_WRITE, REMOTE_ATOMIC)
            val all = plan(RemoteAccess.READ, RemoteAccess.ATOMIC, RemoteAccess.WRITE)
            all.dataAccess shouldBe Access.entries.toSet()
            all.qpAccess shouldBe setOf(REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC)
        }

        test("remoteAccess calls add up; repeating a flag or calling it with none changes nothing") {
            val p = checkPlan {
                remoteAccess(RemoteAccess.READ)
                remoteAccess()
                remoteAccess(RemoteAccess.WRITE, RemoteAccess.READ)
                connect(peer)
            }
            p.settings.remoteAccess shouldBe setOf(RemoteAccess.READ, RemoteAccess.WRITE)
            p.dataAccess shouldBe setOf(LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ)
            checkPlan { remoteAccess(); connect(peer) }.settings.remoteAccess shouldBe emptySet()
        }

        test("each side grants its own: a grant made under `if (isServer)` is the server's only") {
            val scenario: suspend ScenarioScope.() -> Unit = {
                if (isServer) remoteAccess(RemoteAccess.WRITE)
                connect(peer)
            }
            val server = checkPlan(RdmaOptions(peer = Peer.listen(18515)), scenario)
            val client = checkPlan(RdmaOptions(peer = Peer.connect("h")), scenario)
            server.dataAccess shouldBe setOf(LOCAL_WRITE, REMOTE_WRITE)
            client.dataAccess shouldBe setOf(LOCAL_WRITE)
            client.qpAccess shouldBe setOf(REMOTE_WRITE)
            server.fingerprint shouldBe client.fingerprint
        }

        test("RemoteAccess maps to the verbs flag and back") {
            RemoteAccess.WRITE.access shouldBe REMOTE_WRITE
            RemoteAccess.READ.access shouldBe REMOTE_READ
            RemoteAccess.ATOMIC.access shouldBe REMOTE_ATOMIC
            for (r in RemoteAccess.entries) RemoteAccess.granting(r.access) shouldBe r
        }
    }

    context("settings") {
        test("each setting call lands in the plan") {
            val p = checkPlan {
                device("rxe1"); port(2); gidIndex(3); qps(4); perQpCq(); bufferSize(1024); bufferCount(3); sendDepth(32); recvDepth(16)
                inboxDepth(10); mtu(2048); inlineThreshold(64); signalEvery(4); rnrRetry(3); retry(5, 12)
                completionMode(CompletionMode.EVENT); remoteAccess(RemoteAccess.READ); timeout(7.seconds); bufferReuse(BufferReuse.FAIL)
                connect(peer)
            }
            p.settings shouldBe ScenarioSettings(device = "rxe1", port = 2, gidIndex = 3, qps = 4, cqMode = CqMode.PER_QP,
                bufferSize = 1024, bufferCount = 3, sendDepth = 32, recvDepth = 16, inboxDepth = 10, mtu = 2048,
                inlineThreshold = 64, signalEvery = 4, rnrRetry = 3, retryCount = 5, retryTimeout = 12,
                completionMode = CompletionMode.EVENT, remoteAccess = setOf(RemoteAccess.READ), timeout = 7.seconds,
                bufferReuse = BufferReuse.FAIL)
        }

        test("the last CQ mode set wins") {
            checkPlan { perQpCq(); sharedCq(); connect(peer) }.settings.cqMode shouldBe CqMode.SHARED
            checkPlan { sharedCq(); perQpCq(); connect(peer) }.settings.cqMode shouldBe CqMode.PER_QP
        }

        test("the data region size is a long: 8 x 1 GiB does not overflow") {
            checkPlan { bufferSize(1 shl 30); bufferCount(8); connect(peer) }.settings.dataBytes shouldBe (8L shl 30)
        }

        test("the engine's shape follows the settings") {
            val s = ScenarioSettings(bufferSize = 512, bufferCount = 2, sendDepth = 16, recvDepth = 8, inboxDepth = 5,
                signalEvery = 4, inlineThreshold = 32)
            s.engineConfig() shouldBe EngineConfig(512, 2, 16, 8, 5, 4, 32)
        }

        test("settings survive a JSON round trip (remote access and timeout included)") {
            val s = ScenarioSettings(device = "rxe0", qps = 2, remoteAccess = setOf(RemoteAccess.WRITE, RemoteAccess.ATOMIC), timeout = 3.seconds)
            Json.decodeFromString(ScenarioSettings.serializer(), Json.encodeToString(ScenarioSettings.serializer(), s)) shouldBe s
        }
    }

    context("local overrides") {
        test("given values replace the scenario's, absent ones keep them, shared settings are never touched") {
            val s = ScenarioSettings(device = "mlx5_0", gidIndex = 1, port = 1, completionMode = CompletionMode.BUSY, timeout = 60.seconds,
                qps = 4, bufferSize = 1024, remoteAccess = setOf(RemoteAccess.READ))
            SettingsOverrides().applyTo(s) shouldBe s
            SettingsOverrides(device = "rxe0").applyTo(s) shouldBe s.copy(device = "rxe0")
            SettingsOverrides(gidIndex = 3, port = 2).applyTo(s) shouldBe s.copy(gidIndex = 3, port = 2)
            SettingsOverrides(completionMode = CompletionMode.EVENT, timeout = 5.seconds).applyTo(s) shouldBe
                s.copy(completionMode = CompletionMode.EVENT, timeout = 5.seconds)
        }
    }
})
