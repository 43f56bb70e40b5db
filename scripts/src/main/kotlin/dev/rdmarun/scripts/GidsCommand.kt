package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.Context
import com.github.ajalt.clikt.parameters.options.option
import dev.rdmarun.runtime.Context as VerbsContext
import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.runtime.GidEntry

/**
 * `rdma-run gids [-d DEV]`: every valid GID of every port, like show_gids (tab-separated columns
 * DEV PORT INDEX GID IPv4 VER DEV), with the entry rdma-run picks by default on each port marked.
 */
class GidsCommand : RdmaCommand("gids") {
    private val device by option("-d", "--ib-dev", metavar = "DEV", help = "Only this device (default: all)")

    override fun help(context: Context) =
        "Show the GID tables (like show_gids) and mark the GID index rdma-run uses by default (*)."

    override fun execute() {
        val tables = DeviceList.open().use { list ->
            if (device == null && list.kernelDevices().isEmpty()) {
                val why = list.unavailable().firstOrNull()?.let { oneLine(it) } ?: "the kernel has no RDMA device"
                emit("rdma-run gids: $why; showing the software emulation only", err = true)
            }
            val devices = device?.let { listOf(list.find(it)) } ?: list.devices()
            devices.map { dev -> dev.name() to dev.open().use { it.gidTable() } }
        }
        formatGidTable(tables).forEach { emit(it) }
    }
}

/** Marks the default entry in the table and legend. */
const val DEFAULT_GID_MARK = "*"

/**
 * show_gids' table for these (device, GID table) pairs: header, one row per entry, the legend when
 * a row is marked, and show_gids' closing "n_gids_found=N". Columns are separated by one tab and
 * padded so they line up (GID 39 characters, IPv4 15), so both people and `cut -f` can read them.
 * The default entry of each port is the one [VerbsContext.defaultGid] picks:
 * RoCE v2 with an IPv4 address first, then any RoCE v2, then the first valid one.
 */
fun formatGidTable(tables: List<Pair<String, List<GidEntry>>>): List<String> = buildList {
    add(gidRow("DEV", "PORT", "INDEX", "GID", "IPv4", "VER", "DEV", ""))
    add(gidRow("---", "----", "-----", "---", "------------", "---", "---", ""))
    var count = 0
    var marked = false
    for ((device, entries) in tables) {
        val defaults = entries.groupBy { it.port() }.values
            .mapNotNull { VerbsContext.defaultGid(it).orElse(null) }.toSet()
        for (e in entries) {
            val isDefault = e in defaults
            marked = marked || isDefault
            add(gidRow(device, e.port().toString(), e.index().toString(), e.gid().toString(), e.ipv4() ?: "",
                e.type().label(), e.netdev() ?: "", if (isDefault) DEFAULT_GID_MARK else ""))
            count++
        }
    }
    if (marked) {
        add("$DEFAULT_GID_MARK the GID index rdma-run uses on that port when none is given" +
            " (RoCE v2 with IPv4 first); choose another with pingpong -g INDEX")
    }
    add("n_gids_found=$count")
}

private fun gidRow(dev: String, port: String, index: String, gid: String, ipv4: String, ver: String,
                   netdev: String, mark: String): String {
    val row = "%s\t%s\t%s\t%-39s\t%-15s\t%-7s\t%s".format(dev, port, index, gid, ipv4, ver, netdev)
    return if (mark.isEmpty()) row else "$row\t$mark"
}
