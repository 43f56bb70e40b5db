package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.Context
import com.github.ajalt.clikt.parameters.arguments.argument
import com.github.ajalt.clikt.parameters.arguments.optional
import com.github.ajalt.clikt.parameters.options.check
import com.github.ajalt.clikt.parameters.options.default
import com.github.ajalt.clikt.parameters.options.option
import com.github.ajalt.clikt.parameters.types.int
import com.github.ajalt.clikt.parameters.types.restrictTo
import dev.rdmarun.dsl.MAX_DURATION_SECONDS
import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.CompletionQueue
import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.dsl.ControlToken
import dev.rdmarun.dsl.ScenarioException
import dev.rdmarun.runtime.FabricKey
import dev.rdmarun.runtime.Gid
import dev.rdmarun.runtime.MemoryRegion
import dev.rdmarun.runtime.Mtu
import dev.rdmarun.runtime.PortAttributes
import dev.rdmarun.runtime.QpEndpoint
import dev.rdmarun.runtime.QpType
import dev.rdmarun.runtime.QueuePair
import dev.rdmarun.runtime.QueuePairConfig
import dev.rdmarun.runtime.RtrAttributes
import dev.rdmarun.runtime.RtsAttributes
import dev.rdmarun.runtime.SendFlags
import dev.rdmarun.runtime.WorkCompletions
import java.util.EnumSet
import java.util.Locale
import java.util.concurrent.ThreadLocalRandom

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
 */
class PingpongCommand : RdmaCommand("pingpong") {
    private val device by option("-d", "--ib-dev", metavar = "DEV", help = "RDMA device (default: the first one)")
    private val ibPort by option("-i", "--ib-port", metavar = "IBPORT", help = "Port of the device (default 1)")
        .int().restrictTo(1..255).default(1)
    private val gidIndex by option("-g", "--gid-idx", metavar = "GIDX",
        help = "Local GID index (default: RoCE v2 with IPv4 first on RoCE ports, see `rdma-run gids`; none on InfiniBand; -1: none)")
        .int().restrictTo(-1..255)
    private val size by option("-s", "--size", metavar = "SIZE", help = "Message size in bytes (default 4096)")
        .int().restrictTo(min = 1).default(4096)
    private val iters by option("-n", "--iters", metavar = "ITERS", help = "Number of exchanges (default 1000)")
        .int().restrictTo(min = 1).default(1000)
    private val warmup by option("--warmup", metavar = "ITERS",
        help = "Exchanges before the -n measured ones, not counted, so the JIT has compiled the loop (default 0). " +
            "The peer must be rdma-run pingpong with the same --warmup: ibv_rc_pingpong would count them")
        .int().restrictTo(min = 0).default(0)
    private val tcpPort by option("-p", "--port", metavar = "TCPPORT", help = "TCP port of the address exchange (default 18515)")
        .int().restrictTo(1..65535).default(DEFAULT_TCP_PORT)
    private val rxDepth by option("-r", "--rx-depth", metavar = "DEPTH", help = "Receives to keep posted (default 500)")
        .int().restrictTo(min = 1).default(500)
    private val mtu by option("-m", "--mtu", metavar = "BYTES", help = "Path MTU: 256..4096 (default: the port's active MTU)")
        .int().check("must be 256, 512, 1024, 2048 or 4096") { m -> Mtu.entries.any { it.bytes() == m } }
    private val serviceLevel by option("-l", "--sl", metavar = "SL", help = "Service level (default 0)")
        .int().restrictTo(0..15).default(0)
    private val peerTimeout by option("--peer-timeout", metavar = "SECONDS",
        help = "Give up when the peer does not connect, answer, or complete a message for this long (default 60)")
        .int().restrictTo(1..MAX_DURATION_SECONDS).default(60)
    private val timeout by option("--timeout", metavar = "SECONDS", help = "Give up when the whole run takes longer (default: no limit)")
        .int().restrictTo(1..MAX_DURATION_SECONDS)
    private val host by argument("HOST", help = "Server to connect to; without it, wait for a client").optional()

    override fun help(context: Context) =
        "RC ping-pong, wire-compatible with ibv_rc_pingpong: without HOST wait for a client, with HOST connect to that server."

    override fun execute() {
        val limits = Limits(peerTimeout * 1000L, timeout?.let { System.nanoTime() + it * 1_000_000_000L })
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

            Resources().use { r ->
                // pp_init_ctx: buffer (LOCAL_WRITE only), CQ of rx-depth + 1, QP with 1 send and rx-depth receives.
                val pd = r.add(ctx.allocateProtectionDomain())
                val mr = r.add(pd.registerMemory(size.toLong(), EnumSet.of(Access.LOCAL_WRITE)))
                mr.segment().fill(BUFFER_FILL)
                val cq = r.add(ctx.createCompletionQueue(rxDepth + 1))
                val qp = r.add(pd.createQueuePair(QueuePairConfig(QpType.RC, cq, cq, 1, rxDepth, 1, 1, 0, false)))
                val wc = r.add(WorkCompletions(2))
                qp.modifyToInit(ibPort, EnumSet.noneOf(Access::class.java))
                repeat(rxDepth) { qp.postReceive(RECV_WRID, mr, 0, size) }

                // soft0's LID depends on the GID (the port of its listener on that address): ask the QP.
                val lid = if (ctx.isSoftware()) qp.localEndpoint(ibPort, gidx, 0).lid() else port.lid()
                val local = PingpongDest(lid, qp.qpNum(), ThreadLocalRandom.current().nextInt(0x1000000), localGid)
                emit("  local address:  ${local.describe()}")
                // pp_connect_ctx: RTR then RTS with ibv_rc_pingpong's attributes.
                // soft0 only: the key the client makes and sends after its address (the peer is rdma-run then).
                val connect = { remote: PingpongDest, key: FabricKey? ->
                    val endpoint = QpEndpoint(remote.lid, remote.qpn, remote.psn, remote.gid, pathMtu)
                    qp.modifyToRtr(RtrAttributes(endpoint, ibPort, maxOf(gidx, 0), pathMtu, 1, 12, 1, 0, serviceLevel, key))
                    qp.modifyToRts(RtsAttributes(local.psn, 14, 7, 7, 1))
                }
                val exchange = PingpongExchange(limits, interruption)
                val server = host
                // soft0: the key both derive from the client's nonce and the secret they share, never sent.
                val secret = if (ctx.isSoftware()) softSecret() else null
                val clientNonce = secret?.let { PingpongWire.nonce() }
                val remote = when {
                    server != null -> exchange.asClient(server, tcpPort, local, clientNonce)
                    secret != null -> exchange.asSoftServer(tcpPort, local) { r, nonce -> connect(r, PingpongWire.fabricKey(secret, nonce)) }
                    else -> exchange.asServer(tcpPort, local) { r -> connect(r, null) }
                }
                emit("  remote address: ${remote.describe()}")
                if (server != null) connect(remote, clientNonce?.let { PingpongWire.fabricKey(secret!!, it) })

                val sendFlags = SendFlags.SIGNALED or (if (qp.maxInlineData() >= size) SendFlags.INLINE else 0)
                val allocatedBefore = if (debug) allocatedBytes() else 0L
                val nanos = pingPong(qp, cq, mr, wc, sendFlags, isClient = server != null, interruption, limits)
                if (warmup > 0) {
                    emit("rdma-run pingpong: warm-up (not counted): " + results(size, warmup, warmupNanos).last(), err = true)
                }
                emit(results(size, iters, nanos).joinToString("\n"))
                if (debug) {
                    emit("rdma-run pingpong: the ping-pong loop allocated ${allocatedBytes() - allocatedBefore} bytes" +
                        " on the Java heap (a constant for warm-up, whatever -n is)", err = true)
                }
            }
        }
    }

    /** How long the --warmup exchanges took (set by [pingPong]). */
    private var warmupNanos = 0L

    /**
     * ibv_rc_pingpong's loop: busy-polls the CQ two completions at a time until [warmup] + [iters]
     * sends and receives completed; returns the nanoseconds from the [warmup]-th message's arrival
     * to the last completion. One loop for both phases: a second loop could not tell a next-phase
     * message, polled with the last of this phase, from this phase's. The phase boundary is marked
     * without a branch: a branch first taken at the boundary is one the JIT compiled during the
     * warm-up as never taken, and taking it throws the compiled loop away (an uncommon trap), so the
     * measured exchanges ran in the interpreter until it was compiled again (seconds under
     * emulation). For the same reason the end is the last completion's time, not a read after the
     * loop, whose exit is the other never-taken branch. Allocation-free on the success path. Stops
     * with a failure on an error completion, Ctrl-C, or no completion within the limits.
     */
    private fun pingPong(qp: QueuePair, cq: CompletionQueue, mr: MemoryRegion, wc: WorkCompletions, sendFlags: Int,
                         isClient: Boolean, interruption: Interruption, limits: Limits): Long {
        val iters = warmup + iters
        val warmup = warmup
        val size = size
        val rxDepth = rxDepth
        var routs = rxDepth
        var rcnt = 0
        var scnt = 0
        var pending = RECV_WRID
        if (isClient) {
            qp.postSend(SEND_WRID, mr, 0, size, sendFlags)
            pending = pending or SEND_WRID
        }
        val peerTimeoutNanos = limits.peerTimeoutMs * 1_000_000
        val deadline = limits.overallDeadline
        val start = System.nanoTime()
        // [0]: the arrival of the warm-up's last message (the start without a warm-up); [1]: later arrivals.
        val marks = longArrayOf(start, start)
        var lastCompletion = start
        var idlePolls = 0
        while (rcnt < iters || scnt < iters) {
            if (interruption.requested) throw interruption.interrupted()
            val n = cq.poll(wc)
            if (n == 0) {
                if (++idlePolls and 0x3ff == 0) {
                    val now = System.nanoTime()
                    if (now - lastCompletion > peerTimeoutNanos) {
                        throw limits.peerTimeout("waiting for a completion after $scnt sends and $rcnt receives")
                    }
                    if (deadline != null && now - deadline >= 0) {
                        throw limits.overallTimeout("ping-ponging ($scnt sends and $rcnt receives completed)")
                    }
                }
                continue
            }
            idlePolls = 0
            lastCompletion = System.nanoTime()
            for (i in 0 until n) {
                if (!wc.isSuccess(i)) throw wc.failure(i)
                val wrId = wc.wrId(i)
                when (wrId) {
                    SEND_WRID -> scnt++
                    RECV_WRID -> {
                        if (--routs <= 1) {
                            val more = rxDepth - routs
                            for (k in 0 until more) qp.postReceive(RECV_WRID, mr, 0, size)
                            routs += more
                        }
                        rcnt++
                        marks[(warmup - rcnt) ushr 31] = lastCompletion // 0 while rcnt <= warmup, then 1
                    }
                    else -> throw CommandFailure("completion for unknown wr_id $wrId")
                }
                pending = pending and wrId.inv()
                if (scnt < iters && pending == 0L) {
                    qp.postSend(SEND_WRID, mr, 0, size, sendFlags)
                    pending = RECV_WRID or SEND_WRID
                }
            }
        }
        warmupNanos = marks[0] - start
        return lastCompletion - marks[0]
    }

    /** Heap bytes this thread allocated so far (HotSpot's per-thread counter), or 0 where unsupported. */
    /**
     * The secret two soft0 pingpong peers derive their fabric key from: `$RDMA_RUN_TOKEN`, else the
     * per-user secret (so two processes of one user, or hosts sharing the home directory, agree).
     */
    private fun softSecret(): ControlToken = try {
        System.getenv(ScenarioCommand.TOKEN_ENV)?.takeIf { it.isNotEmpty() }?.let { ControlToken.of(it) } ?: ControlToken.userSecret()
    } catch (e: ScenarioException) {
        throw CommandFailure(e.message.orEmpty(), cause = e)
    }

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
