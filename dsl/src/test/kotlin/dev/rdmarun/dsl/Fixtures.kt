package dev.rdmarun.dsl

import dev.rdmarun.runtime.DeviceAttributes
import dev.rdmarun.runtime.Mtu
import dev.rdmarun.runtime.PortAttributes

/**
 * Device values as Soft-RoCE reports them (ibv_devinfo -v of rxe0), for validation without a
 * device, and check-only runs of scenarios (`rdma-run --check`), which touch no device either.
 */
object Fixtures {
    fun rxe(
        maxQp: Int = 1_048_560,
        maxMrSize: Long = -1L, // u64 max, as rxe reports it
        maxQpWr: Int = 1_048_576,
        maxCqe: Int = 32_767,
        maxCq: Int = 16_384,
        maxMr: Int = 524_288,
        atomicCap: DeviceAttributes.AtomicCapability = DeviceAttributes.AtomicCapability.HCA,
        physPortCount: Int = 1,
    ) = DeviceAttributes("0.0.0", 0x1234L, maxMrSize, 0xffffff, 0, maxQp, maxQpWr, 32, maxCq, maxCqe, maxMr, 1_048_576,
        128, 128, atomicCap, physPortCount)

    fun activePort(
        state: PortAttributes.PortState = PortAttributes.PortState.ACTIVE,
        maxMessageSize: Long = 8L shl 20,
    ) = PortAttributes(1, state, Mtu.MTU_4096, Mtu.MTU_1024, 1024, maxMessageSize, 0, PortAttributes.LinkLayer.ETHERNET)

    val peer: Peer = Peer.connect("10.0.0.1", 18515)

    /**
     * Runs [block] as `rdma-run --check` does (check-only defaults for this thread: the block runs
     * up to `connect(peer)`, which reports the plan and stops it) and returns the plan `connect`
     * reported. [options] default to [peer] as the given peer: inside the block, `peer` is the
     * scope's, as in scripts. Any onPlan of [options] is called too.
     */
    fun checkPlan(options: RdmaOptions = RdmaOptions(peer = peer), block: suspend ScenarioScope.() -> Unit): ScenarioPlan =
        checkRun(options, block).first.single()

    /** [checkPlan] with these parameters (and [peer]). */
    fun checkPlan(parameters: Map<String, String>, block: suspend ScenarioScope.() -> Unit): ScenarioPlan =
        checkPlan(RdmaOptions(parameters = parameters, peer = peer), block)

    /** A check-only run of [block]: every plan reported to onPlan, and what `rdma { }` returned. */
    fun checkRun(options: RdmaOptions = RdmaOptions(peer = peer), block: suspend ScenarioScope.() -> Unit): Pair<List<ScenarioPlan>, ScenarioResult> {
        val plans = mutableListOf<ScenarioPlan>()
        val given = options.onPlan
        val recording = options.copy(onPlan = { plans.add(it); given?.invoke(it) })
        val result = RdmaDefaults.forThisThread(recording, checkOnly = true) { rdma(block = block) }
        return plans to result
    }

    fun check(plan: ScenarioPlan, devices: List<String> = listOf("rxe0"), attributes: DeviceAttributes = rxe(),
              port: PortAttributes = activePort()): String =
        Validation.checkDevice(plan, devices, { attributes }, { port })
}
