package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.Context
import dev.rdmarun.runtime.Device
import dev.rdmarun.runtime.DeviceList

/**
 * `rdma-run devices`: the RDMA devices and their node GUIDs, in ibv_devices' format, then rdma-run's
 * software device (soft0), marked as such.
 *
 * Unlike ibv_devices, which prints an empty table and exits 0 when there is no device, this exits 1
 * when the kernel gives no RDMA device, and says why in one line on stderr (no kernel support,
 * libibverbs missing, no device added), so `rdma-run devices && ...` works as a check for real RDMA.
 */
class DevicesCommand : RdmaCommand("devices") {
    override fun help(context: Context) =
        "List RDMA devices and their node GUIDs (like ibv_devices), and the software device. " +
            "Exits 1 when the kernel has no RDMA device."

    override fun execute() {
        DeviceList.open().use { list ->
            formatDeviceTable(list.devices()).forEach { emit(it) }
            if (list.kernelDevices().isEmpty()) {
                val why = list.unavailable().firstOrNull()?.let { oneLine(it) }
                    ?: "the kernel supports RDMA but has no device: add a Soft-RoCE one with" +
                    " `rdma link add rxe0 type rxe netdev <netdev>`, or check the NIC driver"
                throw CommandFailure("No RDMA devices found: $why. Only the software emulation soft0 is available")
            }
        }
    }
}

/** ibv_devices' table: a two-line header, then one row per device (software ones say so after the GUID). */
fun formatDeviceTable(devices: List<Device>): List<String> = buildList {
    add("    %-16s\t   node GUID".format("device"))
    add("    %-16s\t----------------".format("------"))
    devices.forEach { d ->
        val row = "    %-16s\t%s".format(d.name(), d.nodeGuidHex())
        add(if (d.isSoftware()) "$row\t(software emulation, rdma-run's own provider; no kernel RDMA)" else row)
    }
}
