package dev.rdmarun.scripts

import dev.rdmarun.runtime.Context as VerbsContext
import dev.rdmarun.runtime.Device
import dev.rdmarun.runtime.Gid
import dev.rdmarun.runtime.GidEntry
import dev.rdmarun.runtime.GidType
import dev.rdmarun.runtime.SoftTransport
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactly
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldEndWith
import io.kotest.matchers.string.shouldNotEndWith
import io.kotest.matchers.string.shouldStartWith

class GidTableSpec : FunSpec({
    fun entry(port: Int, index: Int, hex: String, type: GidType, netdev: String? = "dummy0") =
        GidEntry(port, index, Gid.parseHex(hex), type, netdev)

    val linkLocal = "fe800000000000005054fffe12345678"
    val ipv4 = "00000000000000000000ffff0a4d0001"
    val ipv6 = "20010db8000000000000000000000042"

    /** The rows of the table, split into fields (trailing padding dropped). */
    fun rows(tables: List<Pair<String, List<GidEntry>>>) =
        formatGidTable(tables).drop(2).filter { it.contains('\t') }.map { line -> line.split('\t').map { it.trimEnd() } }

    test("an rxe port: the RoCE v2 IPv4 GID is the marked default, with its IPv4 address and netdev") {
        val table = listOf("rxe0" to listOf(
            entry(1, 0, linkLocal, GidType.ROCE_V2),
            entry(1, 1, ipv4, GidType.ROCE_V2),
        ))
        rows(table) shouldBe listOf(
            listOf("rxe0", "1", "0", "fe80:0000:0000:0000:5054:fffe:1234:5678", "", "RoCE v2", "dummy0"),
            listOf("rxe0", "1", "1", "0000:0000:0000:0000:0000:ffff:0a4d:0001", "10.77.0.1", "RoCE v2", "dummy0", "*"),
        )
        val lines = formatGidTable(table)
        lines[0].split('\t').map { it.trim() } shouldContainExactly listOf("DEV", "PORT", "INDEX", "GID", "IPv4", "VER", "DEV")
        lines[lines.size - 2] shouldStartWith "* the GID index rdma-run uses"
        lines.last() shouldBe "n_gids_found=2"
    }

    test("RoCE v2 IPv4 wins over RoCE v1 IPv4 and over earlier RoCE v2 IPv6 entries") {
        val table = listOf("mlx5_0" to listOf(
            entry(1, 0, linkLocal, GidType.ROCE_V1, "eth0"),
            entry(1, 1, linkLocal, GidType.ROCE_V2, "eth0"),
            entry(1, 2, ipv6, GidType.ROCE_V2, "eth0"),
            entry(1, 3, ipv4, GidType.ROCE_V1, "eth0"),
            entry(1, 4, ipv4, GidType.ROCE_V2, "eth0"),
        ))
        rows(table).filter { it.last() == "*" }.map { it[2] } shouldBe listOf("4")
    }

    test("without an IPv4 GID the first RoCE v2 one is the default; each port and device has its own") {
        val table = listOf(
            "mlx5_0" to listOf(
                entry(1, 0, linkLocal, GidType.ROCE_V1, "eth0"),
                entry(1, 1, linkLocal, GidType.ROCE_V2, "eth0"),
                entry(2, 0, linkLocal, GidType.ROCE_V1, "eth1"),
            ),
            "rxe0" to listOf(entry(1, 1, ipv4, GidType.ROCE_V2)),
        )
        rows(table).filter { it.last() == "*" }.map { "${it[0]}/${it[1]}/${it[2]}" } shouldBe
            listOf("mlx5_0/1/1", "mlx5_0/2/0", "rxe0/1/1")
        formatGidTable(table).last() shouldBe "n_gids_found=4"
    }

    test("an InfiniBand port without netdev: its first GID is the default, the netdev column is empty") {
        val table = listOf("mlx4_0" to listOf(entry(1, 0, linkLocal, GidType.IB, null)))
        rows(table) shouldBe listOf(listOf("mlx4_0", "1", "0", "fe80:0000:0000:0000:5054:fffe:1234:5678", "", "IB", "", "*"))
    }

    test("no GIDs: header, no legend, n_gids_found=0") {
        val lines = formatGidTable(listOf("rxe0" to emptyList()))
        lines.size shouldBe 3
        lines.last() shouldBe "n_gids_found=0"
    }

    test("columns line up: the IPv4 column starts at the same place in every row") {
        val table = listOf("rxe0" to listOf(entry(1, 0, linkLocal, GidType.ROCE_V2), entry(1, 1, ipv4, GidType.ROCE_V2)))
        val lines = formatGidTable(table).take(4)
        lines.map { it.split('\t')[3].length }.toSet() shouldBe setOf(39)
        lines.map { it.split('\t')[4].length }.toSet() shouldBe setOf(15)
        lines[2] shouldNotEndWith "*"
        lines[3] shouldEndWith "\t*"
    }

    fun device(name: String, guid: Long, software: Boolean) = object : Device(name, guid) {
        override fun isSoftware() = software
        override fun open(softTransport: SoftTransport): VerbsContext = error("not opened in this spec")
    }

    test("the devices table is ibv_devices' format, the software device marked as such") {
        formatDeviceTable(listOf(device("rxe0", 0x505400fffe123456, false), device("soft0", 0x0200000000000001, true))) shouldBe listOf(
            "    device          \t   node GUID",
            "    ------          \t----------------",
            "    rxe0            \t505400fffe123456",
            "    soft0           \t0200000000000001\t(software emulation, rdma-run's own provider; no kernel RDMA)",
        )
    }
})
