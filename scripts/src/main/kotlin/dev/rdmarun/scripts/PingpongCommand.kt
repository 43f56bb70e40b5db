package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.Context
import com.github.ajalt.clikt.parameters.arguments.argument
import com.github.ajalt.clikt.parameters.arguments.optional
import com.github.ajalt.clikt.parameters.options.check
import com.github.ajalt.clikt.parameters.options.convert
import com.github.ajalt.clikt.parameters.options.default
import com.github.ajalt.clikt.parameters.options.flag
import com.github.ajalt.clikt.parameters.options.option
import com.github.ajalt.clikt.parameters.types.int
import com.github.ajalt.clikt.parameters.types.restrictTo
import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.dsl.ControlToken
import dev.rdmarun.dsl.ScenarioException
import dev.rdmarun.runtime.FabricKey
import dev.rdmarun.runtime.Gid
import dev.rdmarun.runtime.Mtu
import dev.rdmarun.runtime.PortAttributes
import java.util.Locale
import java.util.concurrent.ThreadLocalRandom
import dev.rdmarun.scripts.ScenarioCommand.Companion.usage
import kotlin.time.Duration.Companion.seconds

/**
 * `rdma-run pingpong [HOST]`: an RC SEND/RECV ping-pong that speaks ibv_rc_pingpong's protocol, so
 * either side may be rdma-core's `ibv_rc_pingpong`: the same TCP exchange ([PingpongExchange]), the
 * same QP attributes and the same counting (the client sends first; each side keeps rx-depth
 * receives posted and sends again only after its previous send completed and a message arrived).
 * It prints ibv_rc_pingpong's address and result lines.
 *
 * Differences, all on the local side only: without -g a RoCE port uses rdma-run's default GID
 * (ibv_rc_pingpong uses none, which RoCE cannot route); the path MTU defaults to the port's active
 * MTU (ibv_rc_pingpong: 1024); waits on the peer are bounded (--peer-timeout, --timeout); the client
 * retries while the server is not listening yet.
 *
 * Before the exchange (the server once it listens, the client before it connects) a pre-flight
 * warm-up ([PingpongPreflight], --no-preflight turns it off) runs the measured loop between two
 * local QPs until the JIT has compiled it, so the first measured exchange is as fast as
 * ibv_rc_pingpong's without anything on the wire changing.
 */
class PingpongCommand : RdmaCommand("pingpong") {
    private val device by option("-d", "--ib-dev", metavar = "DEV", help = "RDMA device (default: the first one)")
    private val ibPort by option("-i", "--ib-port", metavar = "IBPORT", help = "Port of the device (default 1)")
        .int().restrictTo(1..255).default(1)
    private val gidIndex by option("-g", "--gid-idx", metavar = "GIDX",
        help = "Local GID index (default: RoCE v2 with IPv4 first on RoCE ports, see `rdma-run gids`; none on InfiniBand; -1: none)")
        .int().restrictTo(-1..255)
    private val size by option("-s", "--size", metavar = "SIZE", help = "Message size in bytes: 4096, 4K, 64KiB, 1M (default 4096)")
        .messageSize().default(4096)
    private val iters by option("-n", "--iters", metavar = "ITERS", help = "Number of exchanges (default 1000)")
        .int().restrictTo(min = 1).default(1000)
    private val warmup by option("--warmup", metavar = "ITERS",
        help = "Exchanges before the -n measured ones, not counted, so the JIT has compiled the loop (default 0). " +
            "The peer must be rdma-run pingpong with the same --warmup: ibv_rc_pingpong would count them")
        .int().restrictTo(min = 0).default(0)
    private val preflight by option("--preflight",
        help = "Before the exchange with the peer, ping-pong between two local QPs of the device until the JIT has compiled " +
            "the loop (not counted, nothing sent to the peer; default on). --no-preflight: without it, for the cold figure")
        .flag("--no-preflight", default = true)
    private val tcpPort by option("-p", "--port", metavar = "TCPPORT", help = "TCP port of the address exchange (default 18515)")
        .int().restrictTo(1..65535).default(DEFAULT_TCP_PORT)
    private val rxDepth by option("-r", "--rx-depth", metavar = "DEPTH", help = "Receives to keep posted (default 500)")
        .int().restrictTo(min = 1).default(500)
    private val mtu by option("-m", "--mtu", metavar = "BYTES", help = "Path MTU: 256..4096 (default: the port's active MTU)")
        .int().check("must be 256, 512, 1024, 2048 or 4096") { m -> Mtu.entries.any { it.bytes() == m } }
    private val serviceLevel by option("-l", "--sl", metavar = "SL", help = "Service level (default 0)")
        .int().restrictTo(0..15).default(0)
    private val peerTimeout by option("--peer-timeout", metavar = "DURATION",
        help = "Give up when the peer does not connect, answer, or complete a message for this long " +
            "(whole seconds, or a duration like 30s, 2m, 500ms; 1ms to 7d; default 60s)")
        .convert { text -> usage { ScenarioCommand.parseTimeout(text) } }.default(60.seconds)
    private val timeout by option("--timeout", metavar = "DURATION",
        help = "Give up when the whole run takes longer (whole seconds, or a duration like 30s, 2m, 500ms; 1ms to 7d; default: no limit)")
        .convert { text -> usage { ScenarioCommand.parseTimeout(text) } }
    private val host by argument("HOST", help = "Server to connect to; without it, wait for a client").optional()

    override fun help(context: Context) =
        "RC ping-pong, wire-compatible with ibv_rc_pingpong: without HOST wait for a client, with HOST connect to that server."

    override fun execute() {
        val limits = Limits(peerTimeout.inWholeMilliseconds.coerceAtLeast(1), timeout?.inWholeMilliseconds)
        run(interruption(), limits)
    }

    private fun run(interruption: Interruption, limits: Limits) {
        val context = DeviceList.open().use { list ->
            val dev = device?.let { list.find(it) } ?: list.defaultDevice()
            if (device == null && dev.isSoftware()) {
                emit("rdma-run pingpong: no RDMA device here: using ${dev.name()}, rdma-run's software emulation" +
                    " (its peer must use it too; ibv_rc_pingpong cannot)", err = true)
            }
            dev.open()
        }
        context.use { ctx ->
            val port = ctx.queryPort(ibPort)
            if (port.state() != PortAttributes.PortState.ACTIVE) {
                throw CommandFailure("port $ibPort of ${ctx.deviceName()} is ${port.state()}, not ACTIVE (check the link and `ibv_devinfo -d ${ctx.deviceName()}`)")
            }
            // What the device cannot take is said with the flag that asked for it, before any verbs object exists.
            val attributes = ctx.queryDevice()
            if (rxDepth > attributes.maxQpWr) throw CommandFailure("-r $rxDepth (--rx-depth) is more than ${ctx.deviceName()}'s max_qp_wr ${attributes.maxQpWr}")
            if (rxDepth + 1 > attributes.maxCqe) throw CommandFailure("-r $rxDepth (--rx-depth) needs a CQ of ${rxDepth + 1} entries, more than ${ctx.deviceName()}'s max_cqe ${attributes.maxCqe}")
            if (size.toLong() > port.maxMessageSize()) {
                throw CommandFailure("-s $size (--size) is more than max_msg_sz ${port.maxMessageSize()} of ${ctx.deviceName()} port $ibPort")
            }
            val roce = port.linkLayer() == PortAttributes.LinkLayer.ETHERNET
            if (!roce && port.lid() == 0) {
                throw CommandFailure("port $ibPort of ${ctx.deviceName()} has no LID (is a subnet manager running?)")
            }
            val gidx = gidIndex ?: if (roce) {
                val chosen = ctx.defaultGid(ibPort)
                emit("rdma-run pingpong: no -g given: using GID index ${chosen.index()} (${chosen.ipv4() ?: chosen.gid()}, " +
                    "${chosen.type().label()}${chosen.netdev()?.let { " on $it" } ?: ""}), rdma-run's default;" +
                    " ibv_rc_pingpong has none by default, so give it -g with the same kind of GID", err = true)
                chosen.index()
            } else -1
            if (gidx < 0 && roce) {
                throw CommandFailure("a RoCE port needs a GID: give -g INDEX (see `rdma-run gids -d ${ctx.deviceName()}`)")
            }
            val localGid = if (gidx >= 0) ctx.gid(ibPort, gidx).gid() else Gid.ZERO
            val pathMtu = mtu?.let { Mtu.ofBytes(it) } ?: port.activeMtu()

            val setup = PingpongSetup(ctx, ibPort, gidx, localGid, port.lid(), pathMtu, serviceLevel, size, rxDepth)

            Resources().use { r ->
                val q = setup.create(r)
                val local = setup.dest(q, ThreadLocalRandom.current().nextInt(0x1000000))
                emit("  local address:  ${local.describe()}")
                // soft0 only: the key the client makes and sends after its address (the peer is rdma-run then).
                val connect = { remote: PingpongDest, key: FabricKey? -> setup.connect(q, local.psn, remote, key) }
                // Before the exchange: the server's listens meanwhile (a client that connects waits in the
                // backlog); the client's runs once connected (the server waits on its address).
                val preflightFirst = {
                    if (preflight) PingpongPreflight(setup, interruption, limits, { emit("rdma-run pingpong: $it", err = true) }).run()
                }
                val exchange = PingpongExchange(limits, interruption)
                val server = host
                // soft0: the key both derive from the client's nonce and the secret they share, never sent.
                val secret = if (ctx.isSoftware()) softSecret() else null
                val clientNonce = secret?.let { PingpongWire.nonce() }
                val remote = when {
                    server != null -> exchange.asClient(server, tcpPort, local, clientNonce, preflightFirst)
                    secret != null -> exchange.asSoftServer(tcpPort, local, preflightFirst) { r, nonce -> connect(r, PingpongWire.fabricKey(secret, nonce)) }
                    else -> exchange.asServer(tcpPort, local, preflightFirst) { r -> connect(r, null) }
                }
                emit("  remote address: ${remote.describe()}")
                if (server != null) connect(remote, clientNonce?.let { PingpongWire.fabricKey(secret!!, it) })

                val deadline = limits.overallDeadline ?: PingpongSetup.noDeadline()
                val out = LongArray(2)
                val allocatedBefore = if (debug) allocatedBytes() else 0L
                val nanos = setup.pingPong(q, isClient = server != null, warmup, iters, interruption, limits, deadline, 0, out)
                if (warmup > 0) {
                    emit("rdma-run pingpong: warm-up (not counted): " + results(size, warmup, out[0]).last(), err = true)
                }
                emit(results(size, iters, nanos).joinToString("\n"))
                if (debug) {
                    emit("rdma-run pingpong: the ping-pong loop allocated ${allocatedBytes() - allocatedBefore} bytes" +
                        " on the Java heap (a constant for warm-up, whatever -n is)", err = true)
                }
            }
        }
    }

    /**
     * The secret two soft0 pingpong peers derive their fabric key from: `$RDMA_RUN_TOKEN`, else the
     * per-user secret (so two processes of one user, or hosts sharing the home directory, agree).
     */
    private fun softSecret(): ControlToken = try {
        ControlToken.fromEnvironment()
    } catch (e: ScenarioException) {
        throw CommandFailure(e.message.orEmpty(), cause = e)
    }

    /** Heap bytes this thread allocated so far (HotSpot's per-thread counter), or 0 where unsupported. */
    private fun allocatedBytes(): Long =
        (java.lang.management.ManagementFactory.getThreadMXBean() as? com.sun.management.ThreadMXBean)
            ?.currentThreadAllocatedBytes ?: 0L

    companion object {
        const val DEFAULT_TCP_PORT = 18515

        /** ibv_rc_pingpong's wr_ids; a bit each, so "pending" is a mask of both. */
        const val RECV_WRID = 1L
        const val SEND_WRID = 2L

        /** ibv_rc_pingpong fills its buffer with 0x7b ('{'). */
        const val BUFFER_FILL: Byte = 0x7b

        /**
         * ibv_rc_pingpong's two result lines: bytes (size x iters, both ways), seconds and Mbit/s;
         * iterations, seconds and microseconds per iteration.
         */
        fun results(size: Int, iters: Int, nanos: Long): List<String> {
            val usec = nanos / 1000.0
            val bytes = size.toLong() * iters * 2
            return listOf(
                String.format(Locale.ROOT, "%d bytes in %.2f seconds = %.2f Mbit/sec", bytes, usec / 1_000_000.0, bytes * 8.0 / usec),
                String.format(Locale.ROOT, "%d iters in %.2f seconds = %.2f usec/iter", iters, usec / 1_000_000.0, usec / iters),
            )
        }
    }
}
