package dev.rdmarun.dsl

import dev.rdmarun.dsl.Fixtures.activePort
import dev.rdmarun.dsl.Fixtures.check
import dev.rdmarun.dsl.Fixtures.checkPlan
import dev.rdmarun.dsl.Fixtures.checkRun
import dev.rdmarun.dsl.Fixtures.peer
import dev.rdmarun.dsl.Fixtures.rxe
import dev.rdmarun.runtime.DeviceAttributes
import dev.rdmarun.runtime.PortAttributes
import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldBeEmpty
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import io.kotest.matchers.string.shouldStartWith
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import kotlin.time.Duration
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.CancellationException

/**
 * One pass: `rdma { }` runs the block once; `connect(peer)` validates the settings and builds the
 * plan. Check-only runs (`--check`) stop there and touch no device; device limits are given as
 * values. Nothing here needs RDMA hardware.
 */
class PlanSpec : FunSpec({
    afterTest {
        RdmaDefaults.options = RdmaOptions()
        RdmaDefaults.checkOnly = false
        RdmaDefaults.onResult = null
    }

    /** A real (not check-only) run: it fails before it touches a device in every test that uses it. */
    fun realRun(options: RdmaOptions = RdmaOptions(peer = peer), block: suspend ScenarioScope.() -> Unit) = rdma(options, block)

    fun call(name: String, block: suspend ScenarioScope.() -> Unit) = name to block
    fun setting(message: String, block: suspend ScenarioScope.() -> Unit) = block to message

    test("defaults are safe: one QP on port 1 of the first device, shared CQ, one 4 KiB buffer, 64-deep queues, no remote access") {
        val s = ScenarioSettings()
        s.device shouldBe null
        s.port shouldBe 1
        s.gidIndex shouldBe null
        s.qps shouldBe 1
        s.cqMode shouldBe CqMode.SHARED
        s.bufferSize shouldBe 4096
        s.bufferCount shouldBe 1
        s.sendDepth shouldBe 64
        s.recvDepth shouldBe 64
        s.inboxDepth shouldBe 1024
        s.mtu shouldBe null
        s.inlineThreshold shouldBe 0
        s.signalEvery shouldBe 1
        s.rnrRetry shouldBe 7
        s.retryCount shouldBe 7
        s.retryTimeout shouldBe 14
        s.completionMode shouldBe CompletionMode.BUSY
        s.remoteAccess shouldBe emptySet()
        s.timeout shouldBe 30.seconds
        // A scenario that sets nothing gets exactly these.
        checkPlan { connect(peer) }.settings shouldBe s
    }

    context("a check-only run (--check)") {
        test("runs the block up to connect, reports the validated plan once, returns an empty result") {
            var afterConnect = false
            var calls = 0
            val (plans, result) = checkRun(RdmaOptions(peer = peer, onPlan = { calls++ })) {
                device("rxe0")
                qps(4)
                connect(peer)
                afterConnect = true
                repeat(1000) { send(); awaitCompletion() }
            }
            calls shouldBe 1
            val p = plans.single()
            p.settings.device shouldBe "rxe0"
            p.settings.qps shouldBe 4
            p.peer shouldBe peer
            p.peerGiven shouldBe true
            afterConnect shouldBe false
            result.role shouldBe Role.CLIENT
            result.device shouldBe "rxe0"
            result.qps.size shouldBe 4
            result.total.operations shouldBe 0
            result.total.bytesSent shouldBe 0
        }

        test("sizeParam(\"size\", n): n is the buffer size of a script without bufferSize(n), unless -s gives one") {
            checkRun { sizeParam("size", 256); connect(peer) }.first.single().settings.bufferSize shouldBe 256
            checkRun(RdmaOptions(peer = peer, parameters = mapOf("size" to "1K"))) { sizeParam("size", 256); connect(peer) }
                .first.single().settings.bufferSize shouldBe 1024
            checkRun { sizeParam("size", 256); bufferSize(100); connect(peer) }.first.single().settings.bufferSize shouldBe 100
            checkRun { bufferSize(100); sizeParam("size", 256); connect(peer) }.first.single().settings.bufferSize shouldBe 100
            checkRun { sizeParam("other", 256); connect(peer) }.first.single().settings.bufferSize shouldBe ScenarioSettings().bufferSize
        }

        test("touches no device: a device that does not exist here is only named in the plan and the result") {
            val (plans, result) = checkRun(RdmaOptions(peer = peer, overrides = SettingsOverrides(device = "mlx5_9"))) { connect(peer) }
            plans.single().settings.device shouldBe "mlx5_9"
            result.device shouldBe "mlx5_9"
        }

        test("an invalid scenario still fails, and onPlan never sees it") {
            var calls = 0
            shouldThrow<ScenarioException> {
                checkRun(RdmaOptions(peer = peer, onPlan = { calls++ })) { qps(0); connect(peer) }
            }.message shouldBe "qps(0): a scenario needs at least 1 QP"
            calls shouldBe 0
        }

        test("reports no result to onResult (nothing ran)") {
            val results = mutableListOf<ScenarioResult>()
            RdmaDefaults.forThisThread(RdmaOptions(peer = peer), checkOnly = true, onResult = { results.add(it) }) {
                rdma { connect(peer) }.total.operations shouldBe 0
            }
            results.shouldBeEmpty()
        }

        test("the application-wide defaults: parameters, overrides and onPlan reach rdma { } without options") {
            val plans = mutableListOf<ScenarioPlan>()
            val results = mutableListOf<ScenarioResult>()
            RdmaDefaults.options = RdmaOptions(parameters = mapOf("n" to "3"), overrides = SettingsOverrides(device = "mlx5_9"),
                onPlan = { plans.add(it) }, peer = peer)
            RdmaDefaults.checkOnly = true
            RdmaDefaults.onResult = { results.add(it) }
            var rounds = 0
            val result = rdma {
                qps(2)
                repeat(intParam("n", 1)) { rounds++ }
                connect(peer)
                send()
            }
            rounds shouldBe 3
            plans.single().settings.device shouldBe "mlx5_9"
            plans.single().settings.qps shouldBe 2
            plans.single().parameters shouldBe mapOf("n" to "3")
            result.qps.size shouldBe 2
            result.total.operations shouldBe 0
            results.shouldBeEmpty()
        }
    }

    context("structure errors are one sentence") {
        test("an operation before connect says to connect first, naming the call") {
            val calls = listOf(
                call("send()") { send() },
                call("sendWithImm()") { sendWithImm(1) },
                call("receive()") { receive() },
                call("write()") { write() },
                call("writeWithImm()") { writeWithImm(1) },
                call("read()") { read() },
                call("awaitCompletion()") { awaitCompletion() },
                call("awaitAll()") { awaitAll() },
                call("barrier()") { barrier() },
                call("qp(0) { }") { qp(0) { } },
                call("forEachQp { }") { forEachQp { } },
            )
            for ((name, op) in calls) {
                shouldThrow<ScenarioException> { realRun { op(); connect(peer) } }.message shouldBe
                    "$name before connect(peer): operations need the peer's QPs, connect first"
                // The same in a check-only run: the block runs as written up to connect.
                shouldThrow<ScenarioException> { checkRun { op(); connect(peer) } }.message shouldBe
                    "$name before connect(peer): operations need the peer's QPs, connect first"
            }
        }

        test("a block that never calls connect fails, without opening a device") {
            var planned = false
            shouldThrow<ScenarioException> { realRun(RdmaOptions(peer = peer, onPlan = { planned = true })) { qps(2) } }.message shouldBe
                "the scenario never calls connect(peer)"
            planned shouldBe false
        }

        test("a check-only run of a block that never calls connect fails the same way") {
            shouldThrow<ScenarioException> { checkRun { qps(2) } }.message shouldBe "the scenario never calls connect(peer)"
        }

        test("a setting after connect names the call") {
            // connect(peer) fails on settings that do not fit together before any device is touched;
            // the block goes on and sets something: connect already ran.
            val e = shouldThrow<ScenarioException> {
                realRun {
                    sendDepth(8); signalEvery(16)
                    runCatching { connect(peer) }.exceptionOrNull()!!.message shouldStartWith "signalEvery(16) must be 1..sendDepth (8)"
                    bufferSize(8)
                }
            }
            e.message shouldBe "bufferSize(8) after connect(peer): settings come before connect(peer)"
            shouldThrow<ScenarioException> {
                realRun { sendDepth(8); signalEvery(16); runCatching { connect(peer) }; remoteAccess(RemoteAccess.WRITE, RemoteAccess.READ) }
            }.message shouldBe "remoteAccess(WRITE, READ) after connect(peer): settings come before connect(peer)"
            shouldThrow<ScenarioException> {
                realRun { sendDepth(8); signalEvery(16); runCatching { connect(peer) }; device("rxe0") }
            }.message shouldBe "device(\"rxe0\") after connect(peer): settings come before connect(peer)"
        }

        test("connect twice") {
            shouldThrow<ScenarioException> { realRun { sendDepth(8); signalEvery(16); runCatching { connect(peer) }; connect(peer) } }.message shouldBe
                "connect() is called twice: a scenario has one control connection"
        }

        test("settings out of range fail at their call (two that do not fit together at connect), in check-only and real runs alike, before onPlan") {
            val cases = listOf(
                setting("qps(0): a scenario needs at least 1 QP") { qps(0) },
                setting("port(0): ports are numbered 1..255") { port(0) },
                setting("port(256): ports are numbered 1..255") { port(256) },
                setting("gidIndex(256): GID indexes are 0..255") { gidIndex(256) },
                setting("gidIndex(-1): GID indexes are 0..255") { gidIndex(-1) },
                setting("bufferSize(0): a buffer needs at least 1 byte") { bufferSize(0) },
                setting("bufferCount(0): each QP needs at least 1 buffer") { bufferCount(0) },
                setting("sendDepth(0): the send queue needs at least 1 entry") { sendDepth(0) },
                setting("recvDepth(0): the receive queue needs at least 1 entry") { recvDepth(0) },
                setting("inboxDepth(-1) cannot be negative") { inboxDepth(-1) },
                setting("mtu(1500): the MTU must be 256, 512, 1024, 2048 or 4096") { mtu(1500) },
                setting("inlineThreshold(-1) cannot be negative") { inlineThreshold(-1) },
                setting("signalEvery(16) must be 1..sendDepth (8): a group of unsignaled work requests has to fit the send queue") {
                    sendDepth(8); signalEvery(16)
                },
                setting("signalEvery(0) must be at least 1") { signalEvery(0) },
                setting("rnrRetry(8) must be 0..7 (7 retries forever)") { rnrRetry(8) },
                setting("retry(count = 8) must be 0..7") { retry(8) },
                setting("retry(timeout = 32) must be 0..31") { retry(7, 32) },
                setting("timeout(0s) must be positive") { timeout(Duration.ZERO) },
            )
            for ((settings, message) in cases) {
                var planned = false
                shouldThrow<ScenarioException> {
                    checkRun(RdmaOptions(peer = peer, onPlan = { planned = true })) { settings(); connect(peer) }
                }.message shouldBe message
                shouldThrow<ScenarioException> {
                    realRun(RdmaOptions(peer = peer, onPlan = { planned = true })) { settings(); connect(peer) }
                }.message shouldBe message
                planned shouldBe false
            }
        }

        test("the edges of the ranges are valid") {
            val p = checkPlan {
                port(255); gidIndex(0); bufferSize(1); inboxDepth(0); mtu(256); sendDepth(8); signalEvery(8)
                rnrRetry(0); retry(0, 31)
                connect(peer)
            }
            p.settings.inboxDepth shouldBe 0
            p.settings.signalEvery shouldBe 8
            p.settings.retryTimeout shouldBe 31
        }
    }

    context("device limits, given as values") {
        test("the chosen device, or the first") {
            check(checkPlan { device("rxe1"); connect(peer) }, listOf("rxe0", "rxe1")) shouldBe "rxe1"
            check(checkPlan { connect(peer) }, listOf("mlx5_0", "rxe0")) shouldBe "mlx5_0"
        }
        test("an unknown device lists the devices, with the reason kernel devices may be missing as the hint") {
            val p = checkPlan { device("mlx5_0"); connect(peer) }
            shouldThrow<ScenarioException> { check(p, listOf("rxe0", "siw0")) }.message shouldBe
                "no RDMA device named 'mlx5_0' (devices: rxe0, siw0)"
            val e = shouldThrow<ScenarioException> {
                Validation.checkDevice(p, listOf("rxe0"), { rxe() }, missing = "mlx5_0: the driver is not loaded")
            }
            e.hint shouldBe "mlx5_0: the driver is not loaded"
            e.describe() shouldBe "no RDMA device named 'mlx5_0' (devices: rxe0)\n  hint: mlx5_0: the driver is not loaded"
        }
        test("where only the software provider is, an unknown device's hint names it as the way out") {
            val p = checkPlan { device("rxe0"); connect(peer) }
            val e = shouldThrow<ScenarioException> {
                Validation.checkDevice(p, listOf("soft0"), { rxe() }, missing = "this kernel has no RDMA support", software = listOf("soft0"))
            }
            e.message shouldBe "no RDMA device named 'rxe0' (devices: soft0)"
            e.hint shouldBe "this machine has no RDMA device, only rdma-run's software provider soft0: run there with " +
                "-d soft0 (rdma-run) or device(\"soft0\"); why there is no 'rxe0': this kernel has no RDMA support"
            // With a kernel device too, the hint stays the reason alone: the user may have meant that one.
            shouldThrow<ScenarioException> {
                Validation.checkDevice(p, listOf("mlx5_0", "soft0"), { rxe() }, missing = "why", software = listOf("soft0"))
            }.hint shouldBe "why"
        }
        test("no devices at all") {
            shouldThrow<ScenarioException> { check(checkPlan { connect(peer) }, emptyList()) }.message shouldStartWith
                "there are no RDMA devices"
        }
        test("a port the device does not have") {
            shouldThrow<ScenarioException> { check(checkPlan { port(2); connect(peer) }) }.message shouldBe
                "port 2 does not exist on rxe0, which has 1 port"
            check(checkPlan { port(2); connect(peer) }, attributes = rxe(physPortCount = 2)) shouldBe "rxe0"
        }
        test("qps above max_qp") {
            shouldThrow<ScenarioException> { check(checkPlan { qps(300); connect(peer) }, attributes = rxe(maxQp = 256)) }.message shouldBe
                "qps(300) is outside 1..256, the QP limit (max_qp) of rxe0"
        }
        test("a data region larger than max_mr_size") {
            val p = checkPlan { bufferSize(1 shl 20); bufferCount(4); recvDepth(1); connect(peer) }
            shouldThrow<ScenarioException> { check(p, attributes = rxe(maxMrSize = 1L shl 21)) }.message shouldBe
                "a data region of 4194304 bytes (bufferCount 4 x bufferSize 1048576) is larger than max_mr_size 2097152 of rxe0"
        }
        test("receive slots larger than max_mr_size") {
            val p = checkPlan { bufferSize(1 shl 20); connect(peer) }
            shouldThrow<ScenarioException> { check(p, attributes = rxe(maxMrSize = 1L shl 21)) }.message shouldBe
                "the receive region of a QP (67109384 bytes: recvDepth 64 x bufferSize 1048576, a credit word and sendDepth 64 atomic result words) exceeds max_mr_size 2097152 of rxe0"
        }
        test("the receive region counts its credit and result words: slots that alone fit max_mr_size may not") {
            val p = checkPlan { bufferSize(1024); recvDepth(16); connect(peer) }
            shouldThrow<ScenarioException> { check(p, attributes = rxe(maxMrSize = 16L * 1024)) }.message shouldContain
                "the receive region of a QP (16904 bytes"
        }
        test("max_mr_size is unsigned: Soft-RoCE's 2^64-1 allows any buffer") {
            check(checkPlan { bufferSize(1 shl 30); bufferCount(8); connect(peer) }, attributes = rxe(maxMrSize = -1L),
                port = activePort(maxMessageSize = 1L shl 31)) shouldBe "rxe0"
        }
        test("queue depths against max_qp_wr: the send queue needs one more entry for credit updates") {
            shouldThrow<ScenarioException> { check(checkPlan { sendDepth(64); connect(peer) }, attributes = rxe(maxQpWr = 64)) }.message shouldBe
                "sendDepth(64) plus the engine's credit slot exceeds max_qp_wr 64 of rxe0"
            check(checkPlan { sendDepth(63); recvDepth(64); connect(peer) }, attributes = rxe(maxQpWr = 64)) shouldBe "rxe0"
            shouldThrow<ScenarioException> {
                check(checkPlan { sendDepth(16); recvDepth(128); connect(peer) }, attributes = rxe(maxQpWr = 64))
            }.message shouldBe "recvDepth(128) exceeds max_qp_wr 64 of rxe0"
        }
        test("a shared CQ larger than max_cqe") {
            val p = checkPlan { qps(1000); connect(peer) }
            shouldThrow<ScenarioException> { check(p) }.message shouldBe
                "the shared CQ needs 129000 entries but max_cqe of rxe0 is 32767: use perQpCq() or smaller queue depths"
            check(checkPlan { qps(1000); perQpCq(); connect(peer) }) shouldBe "rxe0"
        }
        test("a per-QP CQ larger than max_cqe, and more CQs than max_cq") {
            shouldThrow<ScenarioException> { check(checkPlan { perQpCq(); sendDepth(20000); recvDepth(20000); connect(peer) }) }.message shouldBe
                "the CQ needs 40001 entries but max_cqe of rxe0 is 32767: use smaller queue depths"
            shouldThrow<ScenarioException> { check(checkPlan { qps(20); perQpCq(); connect(peer) }, attributes = rxe(maxCq = 16)) }.message shouldBe
                "perQpCq() with 20 QPs needs 20 CQs but max_cq of rxe0 is 16: use sharedCq()"
            check(checkPlan { qps(20); perQpCq(); sharedCq(); connect(peer) }, attributes = rxe(maxCq = 16)) shouldBe "rxe0"
        }
        test("memory regions against max_mr: data and receive region per QP, one for the credit words") {
            shouldThrow<ScenarioException> { check(checkPlan { qps(10); connect(peer) }, attributes = rxe(maxMr = 20)) }.message shouldBe
                "10 QPs need up to 21 memory regions but max_mr of rxe0 is 20"
            check(checkPlan { qps(10); connect(peer) }, attributes = rxe(maxMr = 21)) shouldBe "rxe0"
        }
        test("atomics are checked when this side grants remoteAccess(ATOMIC)") {
            val none = rxe(atomicCap = DeviceAttributes.AtomicCapability.NONE)
            shouldThrow<ScenarioException> { check(checkPlan { remoteAccess(RemoteAccess.ATOMIC); connect(peer) }, attributes = none) }.message shouldBe
                "remoteAccess(ATOMIC) needs atomic operations, but rxe0 reports atomic_cap NONE"
            check(checkPlan { connect(peer) }, attributes = none) shouldBe "rxe0"
            check(checkPlan { remoteAccess(RemoteAccess.WRITE, RemoteAccess.READ); connect(peer) }, attributes = none) shouldBe "rxe0"
            check(checkPlan { remoteAccess(RemoteAccess.ATOMIC); connect(peer) }) shouldBe "rxe0"
        }
        test("the port must be ACTIVE") {
            shouldThrow<ScenarioException> { check(checkPlan { connect(peer) }, port = activePort(state = PortAttributes.PortState.DOWN)) }.message shouldBe
                "port 1 of rxe0 is DOWN, not ACTIVE (check the link and `rdma link`)"
        }
        test("max_msg_sz is checked against bufferSize") {
            val small = activePort(maxMessageSize = 4096)
            shouldThrow<ScenarioException> { check(checkPlan { bufferSize(8192); connect(peer) }, port = small) }.message shouldBe
                "bufferSize(8192) exceeds max_msg_sz 4096 of rxe0 port 1: a message of a whole buffer could not be sent"
            check(checkPlan { bufferSize(4096); connect(peer) }, port = small) shouldBe "rxe0"
            // Without the port's attributes, the port checks are skipped.
            Validation.checkDevice(checkPlan { bufferSize(8192); connect(peer) }, listOf("rxe0"), { rxe() }) shouldBe "rxe0"
        }
        test("local overrides replace the scenario's device, GID index, port, completion mode and timeout") {
            val overrides = SettingsOverrides(device = "rxe1", gidIndex = 3, port = 2, completionMode = CompletionMode.EVENT, timeout = 5.seconds)
            val p = checkPlan(RdmaOptions(peer = peer, overrides = overrides)) {
                device("mlx5_0"); gidIndex(1); port(1); completionMode(CompletionMode.BUSY); timeout(60.seconds); qps(2)
                connect(peer)
            }
            p.settings shouldBe ScenarioSettings(device = "rxe1", gidIndex = 3, port = 2, completionMode = CompletionMode.EVENT,
                timeout = 5.seconds, qps = 2)
            check(p, listOf("rxe0", "rxe1"), attributes = rxe(physPortCount = 2)) shouldBe "rxe1"
            // What the overrides leave out stays the scenario's.
            val q = checkPlan(RdmaOptions(peer = peer, overrides = SettingsOverrides(gidIndex = 3))) { device("mlx5_0"); connect(peer) }
            q.settings.device shouldBe "mlx5_0"
            q.settings.gidIndex shouldBe 3
        }
        test("overrides are validated like the scenario's settings") {
            shouldThrow<ScenarioException> {
                checkPlan(RdmaOptions(peer = peer, overrides = SettingsOverrides(gidIndex = 300))) { connect(peer) }
            }.message shouldBe "gidIndex(300): GID indexes are 0..255"
        }
    }

    context("describe()") {
        test("names QPs, CQs, buffer sizes, receive slots, inbox, credit words and access flags") {
            val text = checkPlan(RdmaOptions(peer = peer, parameters = mapOf("b" to "2", "a" to "1"))) {
                qps(2); bufferSize(1024); bufferCount(2); sendDepth(32); recvDepth(16); inboxDepth(100)
                remoteAccess(RemoteAccess.WRITE, RemoteAccess.READ)
                connect(peer)
            }.describe()
            text shouldStartWith "scenario plan of the client (fingerprint "
            text shouldContain "QPs: 2 RC, send depth 32 (+1 for credit updates), receive depth 16"
            text shouldContain "CQs: 1 shared CQ of 98 entries"
            text shouldContain "data region 2 x 1024 B = 2048 B LOCAL_WRITE+REMOTE_WRITE+REMOTE_READ"
            text shouldContain "receive slots 16 x 1024 B"
            text shouldContain "inbox up to 100 messages"
            text shouldContain "credit words: 2 x 8 B LOCAL_WRITE+REMOTE_WRITE"
            text shouldContain "QP access: REMOTE_WRITE+REMOTE_READ; the peer may write into, read the data buffers"
            text shouldContain "parameters: a=1, b=2"
            text shouldContain "peer: connect to 10.0.0.1:18515"
        }
        test("per-QP CQs, and a side that grants nothing") {
            val text = checkPlan(RdmaOptions(peer = Peer.listen(18600))) { qps(3); perQpCq(); connect(peer) }.describe()
            text shouldStartWith "scenario plan of the server"
            text shouldContain "CQs: 3 CQs (one per QP) of 129 entries"
            text shouldContain "data region 1 x 4096 B = 4096 B LOCAL_WRITE;"
            text shouldContain "QP access: REMOTE_WRITE; the peer may not touch the data buffers (remoteAccess not declared)"
            text shouldNotContain "parameters:"
            text shouldContain "peer: listen on *:18600"
        }
        test("atomics are named") {
            checkPlan { remoteAccess(RemoteAccess.ATOMIC); connect(peer) }.describe() shouldContain
                "QP access: REMOTE_WRITE+REMOTE_ATOMIC; the peer may run atomics on the data buffers"
        }
    }

    context("the peer and the role") {
        test("`peer` is the options' peer, and the plan's") {
            val given = Peer.listen(18600)
            var seen: Peer? = null
            val p = checkPlan(RdmaOptions(peer = given)) {
                seen = peer
                connect(peer)
            }
            seen shouldBe given
            p.peer shouldBe given
            p.peerGiven shouldBe true
            p.role shouldBe Role.SERVER
        }

        test("without a peer, reading `peer` is one sentence, before any device is touched") {
            var planned = false
            val e = shouldThrow<ScenarioException> { realRun(RdmaOptions(onPlan = { planned = true })) { connect(peer) } }
            e.message shouldBe "the scenario reads `peer` but none was given: run it with rdma-run --listen, --peer or --loopback, " +
                "or pass RdmaOptions(peer = ...)"
            planned shouldBe false
        }

        test("a check-only run without a peer gets a placeholder, checked as the server, and the plan says none was given") {
            var server: Boolean? = null
            val (plans, result) = checkRun(RdmaOptions()) {
                server = isServer
                connect(peer)
            }
            server shouldBe true
            val p = plans.single()
            p.peerGiven shouldBe false
            val text = p.describe()
            text shouldStartWith "scenario plan (fingerprint "
            text shouldContain "peer: (none given"
            result.total.operations shouldBe 0
        }

        test("a check-only run that connects to a peer of its own has it given") {
            val p = checkPlan(RdmaOptions()) { connect(Peer.connect("h", 1)) }
            p.peerGiven shouldBe true
            p.role shouldBe Role.CLIENT
            p.describe() shouldContain "peer: connect to h:1"
        }

        test("before connect, isServer/isClient and the role branches follow the options' peer") {
            for ((given, server) in listOf(Peer.listen(1) to true, Peer.connect("h", 1) to false)) {
                val seen = mutableListOf<String>()
                checkPlan(RdmaOptions(peer = given)) {
                    seen += "isServer=$isServer isClient=$isClient"
                    server { seen += "server { }" }
                    client { seen += "client { }" }
                    connect(peer)
                }
                seen shouldBe listOf("isServer=$server isClient=${!server}", if (server) "server { }" else "client { }")
            }
        }

        test("without a peer, the role is a ScenarioException that says how to give one") {
            shouldThrow<ScenarioException> { realRun(RdmaOptions()) { isServer } }.message shouldBe
                "the scenario asks whether it is the server or the client (isServer, isClient) but no peer was given: " +
                "run it with rdma-run --listen, --peer or --loopback, or pass RdmaOptions(peer = ...)"
            shouldThrow<ScenarioException> { realRun(RdmaOptions()) { client { } } }.message shouldStartWith "the scenario asks whether it is the server"
        }
    }

    context("parameters and loops") {
        test("parameters reach the block and the plan") {
            val p = checkPlan(mapOf("qps" to "8")) {
                qps(intParam("qps", 1))
                bufferSize(intParam("size", 512))
                param("missing", "fallback") shouldBe "fallback"
                connect(peer)
            }
            p.settings.qps shouldBe 8
            p.settings.bufferSize shouldBe 512
            p.parameters shouldBe mapOf("qps" to "8")
        }

        test("intParam of a non-number names the parameter") {
            shouldThrow<ScenarioException> {
                realRun(RdmaOptions(peer = peer, parameters = mapOf("qps" to "four"))) { qps(intParam("qps", 1)); connect(peer) }
            }.message shouldBe "parameter qps must be a whole number, not 'four'"
        }

        test("qpCount is the QP count set so far") {
            val counts = mutableListOf<Int>()
            checkPlan { counts += qpCount; qps(4); counts += qpCount; connect(peer) }
            counts shouldBe listOf(1, 4)
        }

        test("repeat { } runs `iterations` times, default 1000") {
            var n = 0
            checkPlan(mapOf("iterations" to "7")) { repeat { n++ }; connect(peer) }
            n shouldBe 7
            n = 0
            checkPlan { repeat { n++ }; connect(peer) }
            n shouldBe 1000
            n = 0
            checkPlan(mapOf("iterations" to "0")) { repeat { n++ }; connect(peer) }
            n shouldBe 0
            // Kotlin's repeat(n) { } is still Kotlin's.
            n = 0
            checkPlan(mapOf("iterations" to "7")) { repeat(3) { n++ }; connect(peer) }
            n shouldBe 3
        }

        test("repeat { } with seconds=0 runs no round; runFor(0) neither") {
            var n = 0
            checkPlan(mapOf("seconds" to "0", "iterations" to "7")) { repeat { n++ }; runFor(Duration.ZERO) { n++ }; connect(peer) }
            n shouldBe 0
        }

        test("bad loop parameters name the parameter") {
            shouldThrow<ScenarioException> { checkPlan(mapOf("iterations" to "many")) { repeat { }; connect(peer) } }.message shouldBe
                "parameter iterations must be a whole number, not 'many'"
            shouldThrow<ScenarioException> { checkPlan(mapOf("seconds" to "soon")) { repeat { }; connect(peer) } }.message shouldBe
                "parameter seconds must be a number of seconds from 0 to 604800 (7d), not 'soon'"
            shouldThrow<ScenarioException> { checkPlan(mapOf("seconds" to "-1")) { repeat { }; connect(peer) } }.message shouldBe
                "parameter seconds must be a number of seconds from 0 to 604800 (7d), not '-1'"
        }
    }

    test("a script that catches the check-only stop at connect still goes no further, and the result is the planned role's") {
        var after = 0
        val (plans, result) = Fixtures.checkRun(RdmaOptions()) {
            try {
                connect(Peer.connect("10.0.0.9"))
            } catch (e: Exception) {
                after++ // never: the stop is no Exception
            }
            runCatching { send() }
            after++
        }
        after shouldBe 0
        plans.single().role shouldBe Role.CLIENT
        result.role shouldBe Role.CLIENT
    }

    test("a launcher's defaults for one thread win there, other threads keep theirs (two scripts at once)") {
        RdmaDefaults.options = RdmaOptions(parameters = mapOf("side" to "application"))
        val seen = ConcurrentHashMap<String, String>()
        val plans = ConcurrentHashMap<String, ScenarioPlan>()
        val failures = ConcurrentHashMap<String, Throwable>()
        val started = CountDownLatch(2)
        val threads = listOf("server" to Peer.listen(1), "client" to Peer.connect("h", 1)).map { (name, given) ->
            Thread {
                try {
                    RdmaDefaults.forThisThread(RdmaOptions(parameters = mapOf("side" to name), peer = given, onPlan = { plans[name] = it }),
                        checkOnly = true) {
                        started.countDown()
                        started.await(30, TimeUnit.SECONDS) // both threads hold their own defaults at the same time
                        rdma {
                            seen[name] = param("side", "none") + " " + peer.role.label + " " + RdmaDefaults.checkOnly
                            connect(peer)
                        }
                    }
                } catch (t: Throwable) {
                    failures[name] = t
                }
            }.apply { start() }
        }
        threads.forEach { it.join() }
        failures shouldBe emptyMap()
        seen shouldBe mapOf("server" to "server server true", "client" to "client client true")
        plans.mapValues { it.value.role } shouldBe mapOf("server" to Role.SERVER, "client" to Role.CLIENT)
        // The application-wide values are untouched, and back in force on these threads afterwards.
        RdmaDefaults.options.parameters shouldBe mapOf("side" to "application")
        RdmaDefaults.checkOnly shouldBe false
        RdmaDefaults.forThisThread(RdmaOptions(), checkOnly = true) {
            RdmaDefaults.checkOnly shouldBe true
            // Threads started inside inherit them.
            var inherited: Boolean? = null
            Thread { inherited = RdmaDefaults.checkOnly }.apply { start() }.join()
            inherited shouldBe true
            RdmaDefaults.forThisThread(RdmaOptions(), checkOnly = false) { RdmaDefaults.checkOnly shouldBe false }
            RdmaDefaults.checkOnly shouldBe true
        }
        RdmaDefaults.checkOnly shouldBe false
    }

    context("the launcher's monitor") {
        test("no totals while no scenario runs (a check-only run never starts one)") {
            val monitor = ScenarioMonitor()
            monitor.totals() shouldBe null
            var during: LiveTotals? = LiveTotals(1, 1, 1, 1, 1)
            checkRun(RdmaOptions(peer = peer, monitor = monitor, onPlan = { during = monitor.totals() })) { connect(peer); send() }
            during shouldBe null
            monitor.totals() shouldBe null
        }

        test("a cancelled monitor ends the scenario before the block runs, with a CancellationException") {
            val monitor = ScenarioMonitor()
            monitor.cancel("interrupted")
            monitor.cancelled shouldBe true
            var ran = false
            var planned = false
            shouldThrow<CancellationException> {
                realRun(RdmaOptions(peer = Peer.connect("127.0.0.1", 1), monitor = monitor, onPlan = { planned = true })) {
                    ran = true
                    connect(peer)
                    send()
                }
            }
            ran shouldBe false
            planned shouldBe false
            monitor.totals() shouldBe null
        }

        test("cancelling while the block runs ends it at connect, before a device is opened") {
            val monitor = ScenarioMonitor()
            var afterConnect = false
            var planned = 0
            // A device that does not exist: opening it would fail with a ScenarioException, not a cancellation.
            val options = RdmaOptions(peer = Peer.connect("127.0.0.1", 1), monitor = monitor, onPlan = { planned++ },
                overrides = SettingsOverrides(device = "no-such-device"))
            shouldThrow<CancellationException> {
                realRun(options) {
                    monitor.cancel("Ctrl-C")
                    connect(peer)
                    afterConnect = true
                }
            }
            afterConnect shouldBe false
            planned shouldBe 1 // connect validated and reported the plan, then the session stopped before the device
            monitor.cancelled shouldBe true
        }
    }
})
