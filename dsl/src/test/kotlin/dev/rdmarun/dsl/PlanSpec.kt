package dev.rdmarun.dsl

import dev.rdmarun.dsl.Fixtures.check
import dev.rdmarun.dsl.Fixtures.peer
import dev.rdmarun.dsl.Fixtures.plan
import dev.rdmarun.dsl.Fixtures.rxe
import dev.rdmarun.runtime.DeviceAttributes
import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import kotlin.time.Duration.Companion.seconds

/** The plan pass and validation: no device involved, device limits given as values. */
class PlanSpec : FunSpec({
    test("the issue's example records settings, the peer and one send per QP per iteration") {
        val p = plan {
            device("rxe0")
            qps(4)
            connect(peer)
            repeat(1000) { send(); awaitCompletion() }
        }
        p.settings.device shouldBe "rxe0"
        p.settings.qps shouldBe 4
        p.peer shouldBe peer
        p.ops shouldContainExactly listOf(OpUse(OpKind.SEND, Side.BOTH, OpUse.ALL_QPS, 4096, 1000))
    }

    test("defaults are safe: one QP, shared CQ, 4 KiB buffer, rnr_retry 7, every request signaled") {
        val s = plan { connect(peer) }.settings
        s.qps shouldBe 1
        s.cqMode shouldBe CqMode.SHARED
        s.bufferSize shouldBe 4096
        s.bufferCount shouldBe 1
        s.rnrRetry shouldBe 7
        s.signalEvery shouldBe 1
        s.port shouldBe 1
        s.gidIndex shouldBe null
    }

    test("both role branches run in the plan, runFor once, forEachQp once as all QPs") {
        var runForBodies = 0
        val p = plan {
            qps(3)
            connect(peer)
            server { write(size = 64) }
            client { read(size = 128) }
            runFor(10.seconds) { runForBodies++; send(size = 8) }
            forEachQp { postWrite(); awaitAll() }
            qp(2) { fetchAndAdd(1) }
            barrier()
        }
        runForBodies shouldBe 1
        p.ops shouldContainExactly listOf(
            OpUse(OpKind.WRITE, Side.SERVER, OpUse.ALL_QPS, 64, 1),
            OpUse(OpKind.READ, Side.CLIENT, OpUse.ALL_QPS, 128, 1),
            OpUse(OpKind.SEND, Side.BOTH, OpUse.ALL_QPS, 8, 1),
            OpUse(OpKind.WRITE, Side.BOTH, OpUse.ALL_QPS, 4096, 1),
            OpUse(OpKind.FETCH_AND_ADD, Side.BOTH, 2, 8, 1),
        )
        p.barriers shouldBe 1
    }

    test("operations return placeholders in the plan pass") {
        var message: Message? = null
        var old = -1L
        var planning = false
        plan {
            connect(peer)
            qp(0) {
                planning = this.planning
                send(size = 4)
                message = receive()
                old = compareAndSwap(0, 1)
            }
        }
        planning shouldBe true
        val m = message!!
        m.length shouldBe 0
        m.immediate shouldBe null
        old shouldBe 0
    }

    test("parameters reach the block") {
        val p = plan(mapOf("qps" to "8")) {
            qps(intParam("qps", 1))
            connect(peer)
        }
        p.settings.qps shouldBe 8
        p.parameters shouldBe mapOf("qps" to "8")
    }

    context("structure errors are one sentence") {
        test("a setting after connect") {
            shouldThrow<ScenarioException> { plan { connect(peer); qps(2) } }.message shouldBe
                "qps(2) after connect(): settings must come before connect(peer)"
        }
        test("an operation before connect") {
            shouldThrow<ScenarioException> { plan { send(); connect(peer) } }.message shouldBe
                "send() before connect(peer): operations need the peer's QPs, connect first"
        }
        test("no connect at all") {
            shouldThrow<ScenarioException> { plan { qps(2) } }.message shouldBe "the scenario never calls connect(peer)"
        }
        test("connect twice") {
            shouldThrow<ScenarioException> { plan { connect(peer); connect(peer) } }.message shouldContain "connect() is called twice"
        }
        test("a setting inside a role branch") {
            shouldThrow<ScenarioException> { plan { server { qps(2) }; connect(peer) } }.message shouldBe
                "qps(2) inside server { }: settings apply to both sides, set them before the branches"
        }
        test("a barrier inside a role branch") {
            shouldThrow<ScenarioException> { plan { connect(peer); client { barrier() } } }.message shouldContain
                "barrier() inside client { }"
        }
        test("nested role branches") {
            shouldThrow<ScenarioException> { plan { connect(peer); server { client { } } } }.message shouldContain "do not nest"
        }
        test("a QP index outside the QP count") {
            shouldThrow<ScenarioException> { plan { qps(4); connect(peer); qp(4) { send() } } }.message shouldBe
                "qp(4) is outside 0..3 (qps(4))"
        }
        test("a message larger than the buffer") {
            shouldThrow<ScenarioException> { plan { bufferSize(1024); connect(peer); send(size = 2048) } }.message shouldBe
                "send(size = 2048) is larger than bufferSize 1024: raise bufferSize(...)"
        }
        test("a buffer index outside the buffer count") {
            shouldThrow<ScenarioException> { plan { bufferCount(2); connect(peer); write(buffer = 2) } }.message shouldContain
                "write(buffer = 2) is outside 0..1"
        }
        test("a misaligned atomic") {
            shouldThrow<ScenarioException> { plan { connect(peer); qp(0) { fetchAndAdd(1, remoteOffset = 4) } } }.message shouldBe
                "fetchAndAdd(remoteOffset = 4): atomics need an 8-byte aligned offset"
        }
        test("a receive the peer never feeds") {
            shouldThrow<ScenarioException> { plan { connect(peer); server { qp(0) { receive() } } } }.message shouldBe
                "the server calls receive() but the client never sends (send, sendWithImm or writeWithImm), so it would wait forever"
        }
        test("an operation whose remote access was not granted") {
            shouldThrow<ScenarioException> { plan { remoteAccess(RemoteAccess.READ); connect(peer); write() } }.message shouldBe
                "write() needs REMOTE_WRITE on the peer's buffers, but remoteAccess(READ) does not grant it"
        }
        test("settings out of range") {
            shouldThrow<ScenarioException> { plan { qps(0); connect(peer) } }.message shouldBe "qps(0): a scenario needs at least 1 QP"
            shouldThrow<ScenarioException> { plan { mtu(1500); connect(peer) } }.message shouldContain "256, 512, 1024, 2048 or 4096"
            shouldThrow<ScenarioException> { plan { rnrRetry(8); connect(peer) } }.message shouldContain "rnrRetry(8) must be 0..7"
            shouldThrow<ScenarioException> { plan { sendDepth(8); signalEvery(16); connect(peer) } }.message shouldContain
                "signalEvery(16) must be 1..sendDepth (8)"
        }
    }

    context("device limits, given as values") {
        test("the chosen device, or the first") {
            check(plan { device("rxe1"); connect(peer) }, listOf("rxe0", "rxe1")) shouldBe "rxe1"
            check(plan { connect(peer) }, listOf("mlx5_0", "rxe0")) shouldBe "mlx5_0"
        }
        test("an unknown device lists the devices") {
            shouldThrow<ScenarioException> { check(plan { device("mlx5_0"); connect(peer) }, listOf("rxe0", "siw0")) }.message shouldBe
                "no RDMA device named 'mlx5_0' (devices: rxe0, siw0)"
        }
        test("no devices at all") {
            shouldThrow<ScenarioException> { check(plan { connect(peer) }, emptyList()) }.message shouldContain "there are no RDMA devices"
        }
        test("qps above max_qp") {
            shouldThrow<ScenarioException> { check(plan { qps(300); connect(peer) }, attributes = rxe(maxQp = 256)) }.message shouldBe
                "qps(300) is outside 1..256, the QP limit (max_qp) of rxe0"
        }
        test("a buffer larger than max_mr_size") {
            val p = plan { bufferSize(1 shl 20); bufferCount(4); connect(peer) }
            shouldThrow<ScenarioException> { check(p, attributes = rxe(maxMrSize = 1L shl 21)) }.message shouldBe
                "a data region of 4194304 bytes (bufferCount 4 x bufferSize 1048576) is larger than max_mr_size 2097152 of rxe0"
        }
        test("max_mr_size is unsigned: Soft-RoCE's 2^64-1 allows any buffer") {
            check(plan { bufferSize(1 shl 30); bufferCount(8); connect(peer) }, attributes = rxe(maxMrSize = -1L)) shouldBe "rxe0"
        }
        test("a shared CQ larger than max_cqe") {
            val p = plan { qps(1000); connect(peer) }
            shouldThrow<ScenarioException> { check(p) }.message shouldBe
                "the shared CQ needs 129000 entries but max_cqe of rxe0 is 32767: use perQpCq() or smaller queue depths"
            check(plan { qps(1000); perQpCq(); connect(peer) }) shouldBe "rxe0"
        }
        test("atomics on a device without them") {
            val p = plan { connect(peer); qp(0) { compareAndSwap(0, 1) } }
            shouldThrow<ScenarioException> { check(p, attributes = rxe(atomicCap = DeviceAttributes.AtomicCapability.NONE)) }.message shouldBe
                "compareAndSwap() needs atomic operations, but rxe0 reports atomic_cap NONE"
        }
        test("local overrides replace the scenario's device") {
            val p = planScenario(RdmaOptions(overrides = SettingsOverrides(device = "rxe1", gidIndex = 3))) { device("mlx5_0"); connect(peer) }
            p.settings.device shouldBe "rxe1"
            p.settings.gidIndex shouldBe 3
            check(p, listOf("rxe0", "rxe1")) shouldBe "rxe1"
        }
    }

    test("describe() names QPs, buffers, access flags per role and operations") {
        val text = plan { qps(2); connect(peer); client { write() } }.describe()
        text shouldContain "QPs: 2 RC, one shared CQ"
        text shouldContain "server: data region LOCAL_WRITE+REMOTE_WRITE, no receive slots"
        text shouldContain "client: data region (no access flags), no receive slots"
        text shouldContain "write x1 on every QP by client, 4096 B"
    }
})

/** The launcher's hooks: ambient options, plan-only runs (--check), result capture (--json). */
class RdmaDefaultsSpec : FunSpec({
    afterTest {
        RdmaDefaults.options = RdmaOptions()
        RdmaDefaults.planOnly = false
        RdmaDefaults.onResult = null
    }

    test("a plan-only rdma { } validates, reports the plan, touches no device and returns an empty result") {
        val plans = mutableListOf<ScenarioPlan>()
        val results = mutableListOf<ScenarioResult>()
        RdmaDefaults.options = RdmaOptions(parameters = mapOf("n" to "3"), overrides = SettingsOverrides(device = "mlx5_9"), onPlan = { plans.add(it) })
        RdmaDefaults.planOnly = true
        RdmaDefaults.onResult = { results.add(it) }
        val result = rdma {
            qps(2)
            connect(Fixtures.peer)
            repeat(intParam("n", 1)) { send() }
        }
        plans.single().ops.single().count shouldBe 3
        plans.single().settings.device shouldBe "mlx5_9"
        result.qps.size shouldBe 2
        result.total.operations shouldBe 0
        results.single() shouldBe result
    }

    test("a plan-only run still fails on an invalid scenario") {
        RdmaDefaults.planOnly = true
        shouldThrow<ScenarioException> { rdma { send() } }.message shouldContain "before connect(peer)"
    }

    test("`peer` is the peer the options give, in the plan and as the plan's peer") {
        val given = Peer.listen(18600)
        var seen: Peer? = null
        val p = planScenario(RdmaOptions(peer = given)) {
            seen = peer
            connect(peer)
        }
        seen shouldBe given
        p.peer shouldBe given
    }

    test("without a peer, reading `peer` fails with one sentence before any device is touched") {
        val e = shouldThrow<ScenarioException> { rdma(RdmaOptions()) { connect(peer) } }
        e.message shouldBe "the scenario reads `peer` but none was given: run it with rdma-run --listen, --peer or --loopback, " +
            "or pass RdmaOptions(peer = ...)"
    }

    test("a plan-only pass without a peer gets a placeholder, and the plan says none was given") {
        val p = planScenario(RdmaOptions()) { connect(peer) }
        p.peer shouldBe null
        p.describe() shouldContain "peer: (none given)"
        RdmaDefaults.planOnly = true
        rdma(RdmaOptions()) { connect(peer) }.total.operations shouldBe 0
    }

    test("a launcher's defaults for one thread win there, other threads keep theirs (two scripts at once)") {
        RdmaDefaults.options = RdmaOptions(parameters = mapOf("side" to "application"))
        val seen = java.util.concurrent.ConcurrentHashMap<String, String>()
        val results = java.util.concurrent.ConcurrentHashMap<String, ScenarioResult>()
        val started = java.util.concurrent.CountDownLatch(2)
        val threads = listOf("server" to Peer.listen(1), "client" to Peer.connect("h", 1)).map { (name, given) ->
            Thread {
                RdmaDefaults.forThisThread(RdmaOptions(parameters = mapOf("side" to name), peer = given), planOnly = true,
                    onResult = { results[name] = it }) {
                    started.countDown()
                    started.await() // both threads hold their own defaults at the same time
                    rdma {
                        seen[name] = param("side", "none") + " " + peer.role.label
                        connect(peer)
                    }
                }
            }.apply { start() }
        }
        threads.forEach { it.join() }
        seen shouldBe mapOf("server" to "server server", "client" to "client client")
        results.keys shouldBe setOf("server", "client")
        // The application-wide values are untouched, and back in force on these threads afterwards.
        RdmaDefaults.options.parameters shouldBe mapOf("side" to "application")
        RdmaDefaults.planOnly shouldBe false
        RdmaDefaults.forThisThread(RdmaOptions(), planOnly = true) { RdmaDefaults.planOnly shouldBe true }
        RdmaDefaults.planOnly shouldBe false
    }
})

/** The launcher's window into a run: live totals and cancellation. */
class ScenarioMonitorSpec : FunSpec({
    test("no totals while no scenario runs (a plan-only run never enters the run pass)") {
        val monitor = ScenarioMonitor()
        monitor.totals() shouldBe null
        RdmaDefaults.forThisThread(RdmaOptions(peer = Fixtures.peer, monitor = monitor), planOnly = true) {
            rdma { connect(peer); send() }
        }
        monitor.totals() shouldBe null
    }

    test("a cancelled monitor ends the scenario before it opens a device, with a CancellationException") {
        val monitor = ScenarioMonitor()
        monitor.cancel("interrupted")
        monitor.cancelled shouldBe true
        var planned = false
        shouldThrow<kotlinx.coroutines.CancellationException> {
            rdma(RdmaOptions(peer = Peer.connect("127.0.0.1", 1), monitor = monitor, onPlan = { planned = true })) {
                connect(peer)
                send()
            }
        }
        planned shouldBe true // the plan pass ran; the session did not start
    }
})
