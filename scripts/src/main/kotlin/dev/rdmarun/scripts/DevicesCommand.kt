package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.Context
import dev.rdmarun.runtime.DeviceList

/**
 * `rdma-run devices`: the RDMA devices and their node GUIDs, in ibv_devices' format.
 *
 * Unlike ibv_devices, which prints an empty table and exits 0 when there is no device, this says
 * "No RDMA devices found" on stderr and exits 1, so `rdma-run devices && ...` works as a check.
 */
class DevicesCommand : RdmaCommand("devices") {
    override fun help(context: Context) =
        "List RDMA devices and their node GUIDs (like ibv_devices). Exits 1 when there is none."

    override fun execute() {
        val devices = DeviceList.open().use { it.devices() }
        if (devices.isEmpty()) {
            throw CommandFailure("No RDMA devices found (the kernel supports RDMA but has no device:" +
                " add a Soft-RoCE one with `rdma link add rxe0 type rxe netdev <netdev>`, or check the NIC driver)")
        }
        formatDeviceTable(devices.map { it.name() to it.nodeGuidHex() }).forEach { emit(it) }
    }
}

/** ibv_devices' table: a two-line header, then one row per (name, 16-hex-digit GUID). */
fun formatDeviceTable(rows: List<Pair<String, String>>): List<String> = buildList {
    add("    %-16s\t   node GUID".format("device"))
    add("    %-16s\t----------------".format("------"))
    rows.forEach { (name, guid) -> add("    %-16s\t%s".format(name, guid)) }
}
