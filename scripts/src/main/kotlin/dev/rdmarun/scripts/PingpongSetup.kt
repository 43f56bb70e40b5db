package dev.rdmarun.scripts

import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.CompletionQueue
import dev.rdmarun.runtime.Context
import dev.rdmarun.runtime.FabricKey
import dev.rdmarun.runtime.Gid
import dev.rdmarun.runtime.MemoryRegion
import dev.rdmarun.runtime.Mtu
import dev.rdmarun.runtime.ProtectionDomain
import dev.rdmarun.runtime.QpEndpoint
import dev.rdmarun.runtime.QpType
import dev.rdmarun.runtime.QueuePair
import dev.rdmarun.runtime.QueuePairConfig
import dev.rdmarun.runtime.RtrAttributes
import dev.rdmarun.runtime.RtsAttributes
import dev.rdmarun.runtime.SendFlags
import dev.rdmarun.runtime.VerbsException
import dev.rdmarun.runtime.WcStatus
import dev.rdmarun.runtime.WorkCompletions
import java.util.EnumSet

/** pp_init_ctx's objects of one side ([PingpongSetup.create] makes them), and the flags of its sends. */
internal class PingpongQp(
    val pd: ProtectionDomain,
    val mr: MemoryRegion,
    val cq: CompletionQueue,
    val qp: QueuePair,
    val wc: WorkCompletions,
    val sendFlags: Int,
)

/**
 * What the real QP and the pre-flight warm-up's two ([PingpongPreflight]) share: the device, port,
 * GID and ibv_rc_pingpong's attributes, how a side's objects are made and connected, and the
 * measured loop itself ([pingPong]), so the warm-up runs exactly the code that is measured.
 */
internal class PingpongSetup(
    val ctx: Context,
    val ibPort: Int,
    /** The local GID index, -1 for none (InfiniBand without -g). */
    val gidx: Int,
    val localGid: Gid,
    /** The port's LID (soft0's comes from the QP, see [dest]). */
    val portLid: Int,
    val pathMtu: Mtu,
    val serviceLevel: Int,
    val size: Int,
    val rxDepth: Int,
) {
    /**
     * pp_init_ctx: buffer (LOCAL_WRITE only), CQ of rx-depth + 1, QP with 1 send and rx-depth
     * receives, in INIT with rx-depth receives posted. Everything goes into [r].
     */
    fun create(r: Resources): PingpongQp {
        val pd = r.add(ctx.allocateProtectionDomain())
        val mr = r.add(pd.registerMemory(size.toLong(), EnumSet.of(Access.LOCAL_WRITE)))
        mr.segment().fill(PingpongCommand.BUFFER_FILL)
        val cq = r.add(ctx.createCompletionQueue(rxDepth + 1))
        val qp = r.add(pd.createQueuePair(QueuePairConfig(QpType.RC, cq, cq, 1, rxDepth, 1, 1, 0, false)))
        val wc = r.add(WorkCompletions(2))
        qp.modifyToInit(ibPort, EnumSet.noneOf(Access::class.java))
        repeat(rxDepth) { qp.postReceive(PingpongCommand.RECV_WRID, mr, 0, size) }
        val sendFlags = SendFlags.SIGNALED or (if (qp.maxInlineData() >= size) SendFlags.INLINE else 0)
        return PingpongQp(pd, mr, cq, qp, wc, sendFlags)
    }

    /** The side's address for the exchange. soft0's LID depends on the GID (the port of its listener on that address): ask the QP. */
    fun dest(q: PingpongQp, psn: Int): PingpongDest {
        val lid = if (ctx.isSoftware()) q.qp.localEndpoint(ibPort, gidx, 0).lid() else portLid
        return PingpongDest(lid, q.qp.qpNum(), psn, localGid)
    }

    /**
     * pp_connect_ctx: RTR then RTS with ibv_rc_pingpong's attributes. [key]: soft0's fabric key
     * (null on hardware, which ignores it).
     */
    fun connect(q: PingpongQp, localPsn: Int, remote: PingpongDest, key: FabricKey?) {
        val endpoint = QpEndpoint(remote.lid, remote.qpn, remote.psn, remote.gid, pathMtu)
        q.qp.modifyToRtr(RtrAttributes(endpoint, ibPort, maxOf(gidx, 0), pathMtu, 1, 12, 1, 0, serviceLevel, key))
        q.qp.modifyToRts(RtsAttributes(localPsn, 14, 7, 7, 1))
    }

    /**
     * ibv_rc_pingpong's loop: busy-polls the CQ two completions at a time until [warmup] + [iters]
     * sends and receives completed; returns the nanoseconds from the [warmup]-th message's arrival
     * to the last completion, and leaves in [out] the warm-up's nanoseconds ([0]) and how many
     * receives are still posted ([1]). One loop for both phases: a second loop could not tell a
     * next-phase message, polled with the last of this phase, from this phase's. The phase boundary
     * is marked without a branch: a branch first taken at the boundary is one the JIT compiled
     * during the warm-up as never taken, and taking it throws the compiled loop away (an uncommon
     * trap), so the measured exchanges ran in the interpreter until it was compiled again (seconds
     * under emulation). For the same reason the end is the last completion's time, not a read after
     * the loop, whose exit is the other never-taken branch; and the pre-flight ([PingpongPreflight])
     * runs this very method, with every branch the real run takes also taken there: both sides of
     * [isClient], and of the idle yield (see [yieldMask]). Allocation-free on the success path.
     * Stops with a failure on an error completion, Ctrl-C, no completion for the peer timeout, or
     * [deadline] (System.nanoTime; far away for none).
     *
     * [yieldMask]: 0 for the real run. The pre-flight's two threads may share one CPU (taskset):
     * with a non-zero mask the idle branch (every 1024 empty polls) yields the CPU on the idle
     * checks whose count has a bit of the mask set, and not on the others, so that both ways of
     * that branch are profiled and the real run, which never yields, takes no new one.
     */
    fun pingPong(q: PingpongQp, isClient: Boolean, warmup: Int, iters: Int, interruption: Interruption, limits: Limits,
                 deadline: Long, yieldMask: Int, out: LongArray): Long {
        val qp = q.qp
        val cq = q.cq
        val mr = q.mr
        val wc = q.wc
        val sendFlags = q.sendFlags
        val total = warmup + iters
        val size = size
        val rxDepth = rxDepth
        var routs = rxDepth
        var rcnt = 0
        var scnt = 0
        var pending = PingpongCommand.RECV_WRID
        if (isClient) {
            qp.postSend(PingpongCommand.SEND_WRID, mr, 0, size, sendFlags)
            pending = pending or PingpongCommand.SEND_WRID
        }
        val peerTimeoutNanos = limits.peerTimeoutMs * 1_000_000
        val start = System.nanoTime()
        // [0]: the arrival of the warm-up's last message (the start without a warm-up); [1]: later arrivals.
        val marks = longArrayOf(start, start)
        var lastCompletion = start
        var idlePolls = 0
        var idleChecks = 0
        while (rcnt < total || scnt < total) {
            if (interruption.requested) throw interruption.interrupted()
            val n = cq.poll(wc)
            if (n == 0) {
                if (++idlePolls and 0x3ff == 0) {
                    val now = System.nanoTime()
                    if (now - lastCompletion > peerTimeoutNanos) {
                        throw limits.peerTimeout("waiting for a completion after $scnt of $total sends and $rcnt of $total receives", stalledHint(scnt + rcnt))
                    }
                    if (now - deadline >= 0) {
                        // A silence of a second or more: the peer may have stopped; a shorter one is the exchange's own pace.
                        val silent = now - lastCompletion >= 1_000_000_000L
                        throw overallTimeout(limits, scnt, rcnt, total, if (silent) stalledHint(scnt + rcnt) else RUN_TOO_LONG_HINT)
                    }
                    if (++idleChecks and yieldMask != 0) Thread.yield()
                }
                continue
            }
            idlePolls = 0
            lastCompletion = System.nanoTime()
            // Also while completions keep coming: --timeout bounds the whole run, not only its silences.
            if (lastCompletion - deadline >= 0) throw overallTimeout(limits, scnt, rcnt, total, RUN_TOO_LONG_HINT)
            for (i in 0 until n) {
                if (!wc.isSuccess(i)) throw exchangeFailed(wc.status(i), wc.failure(i), scnt + rcnt)
                val wrId = wc.wrId(i)
                when (wrId) {
                    PingpongCommand.SEND_WRID -> scnt++
                    PingpongCommand.RECV_WRID -> {
                        if (--routs <= 1) {
                            val more = rxDepth - routs
                            for (k in 0 until more) qp.postReceive(PingpongCommand.RECV_WRID, mr, 0, size)
                            routs += more
                        }
                        rcnt++
                        marks[(warmup - rcnt) ushr 31] = lastCompletion // 0 while rcnt <= warmup, then 1
                    }
                    else -> throw CommandFailure("completion for unknown wr_id $wrId")
                }
                pending = pending and wrId.inv()
                if (scnt < total && pending == 0L) {
                    qp.postSend(PingpongCommand.SEND_WRID, mr, 0, size, sendFlags)
                    pending = PingpongCommand.RECV_WRID or PingpongCommand.SEND_WRID
                }
            }
        }
        out[0] = marks[0] - start
        out[1] = routs.toLong()
        return lastCompletion - marks[0]
    }

    /**
     * A failed completion of the ping-pong, after [completions] good ones. No ACK in the middle of
     * the exchange means the peer's QP went away; any other failure most likely the peer's other -s.
     */
    private fun exchangeFailed(status: WcStatus, e: VerbsException, completions: Int) = CommandFailure(
        "${RdmaCommand.oneLine(e)}; this side sends and receives $size bytes: " +
            if (status == WcStatus.RETRY_EXC_ERR && completions > 0) STOPPED_HINT else FLAGS_HINT, cause = e)

    /** --timeout's failure in the middle of the ping-pong, with what completed and [hint]. */
    private fun overallTimeout(limits: Limits, scnt: Int, rcnt: Int, total: Int, hint: String) =
        limits.overallTimeout("ping-ponging ($scnt of $total sends and $rcnt of $total receives completed)", hint)

    /**
     * Why the ping-pong stopped with no completion for a while, after [completions]: none at all on
     * soft0 is most likely another fabric key (packets under it are dropped, unanswered); some, a
     * peer that ended or was stopped (ibv_rc_pingpong's exchange leaves no connection to see it by).
     */
    private fun stalledHint(completions: Int) = when {
        completions > 0 -> STOPPED_HINT
        ctx.isSoftware() -> TOKEN_HINT
        else -> FLAGS_HINT
    }

    companion object {
        /**
         * ibv_rc_pingpong's exchange carries addresses only, so neither side can check the other's
         * flags before the ping-pong: a larger -s fails its work requests, a smaller -n ends first.
         */
        const val FLAGS_HINT = "a peer run with another -s, -n or --warmup ends the ping-pong this way: give both sides the same -s, -n and --warmup"

        const val RUN_TOO_LONG_HINT = "the exchange was still running: raise --timeout or lower -n"

        const val STOPPED_HINT = "the peer stopped answering in the middle of the ping-pong: it ended (another -n or --warmup gives it " +
            "fewer exchanges), or it was interrupted or failed; give both sides the same -s, -n and --warmup"

        const val TOKEN_HINT = "no message of the peer arrived: on soft0 both sides need the same RDMA_RUN_TOKEN (their fabric key comes " +
            "from it, and a packet under another key is dropped), and the same -s, -n and --warmup"

        /** A deadline for "none": about 73 years from now, never reached by System.nanoTime differences. */
        fun noDeadline(): Long = System.nanoTime() + Long.MAX_VALUE / 4
    }
}
