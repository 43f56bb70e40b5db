package dev.rdmarun.dsl

import dev.rdmarun.runtime.DeviceAttributes
import dev.rdmarun.runtime.Mtu
import dev.rdmarun.runtime.PortAttributes

/** Device values as Soft-RoCE reports them (ibv_devinfo -v of rxe0), for validation without a device. */
object Fixtures {
    fun rxe(
        maxQp: Int = 1_048_560,
        maxMrSize: Long = -1L, // u64 max, as rxe reports it
        maxQpWr: Int = 1_048_576,
        maxCqe: Int = 32_767,
        maxCq: Int = 16_384,
        maxMr: Int = 524_288,
        atomicCap: DeviceAttributes.AtomicCapability = DeviceAttributes.AtomicCapability.HCA,
    ) = DeviceAttributes("0.0.0", 0x1234L, maxMrSize, 0xffffff, 0, maxQp, maxQpWr, 32, maxCq, maxCqe, maxMr, 1_048_576,
        128, 128, atomicCap, 1)

    fun activePort() = PortAttributes(1, PortAttributes.PortState.ACTIVE, Mtu.MTU_4096, Mtu.MTU_1024, 1024, 8L shl 20, 0,
        PortAttributes.LinkLayer.ETHERNET)

    val peer: Peer = Peer.connect("10.0.0.1", 18515)

    /** Plans [block] with [peer] as the given peer: inside it, `peer` is the scope's (as in scripts). */
    fun plan(parameters: Map<String, String> = emptyMap(), block: suspend ScenarioScope.() -> Unit): ScenarioPlan =
        planScenario(RdmaOptions(parameters = parameters, peer = peer), block)

    fun check(plan: ScenarioPlan, devices: List<String> = listOf("rxe0"), attributes: DeviceAttributes = rxe()): String =
        Validation.checkDevice(plan, devices, { attributes }, { activePort() })
}
