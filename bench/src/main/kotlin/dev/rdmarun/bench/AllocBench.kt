package dev.rdmarun.bench

import dev.rdmarun.dsl.Peer
import dev.rdmarun.dsl.RdmaOptions
import dev.rdmarun.dsl.SettingsOverrides
import dev.rdmarun.dsl.rdma
import dev.rdmarun.dsl.repeat
import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.runtime.IdleMode
import dev.rdmarun.runtime.PollingDispatcher
import dev.rdmarun.runtime.QueuePair
import dev.rdmarun.runtime.QueuePairConfig
import dev.rdmarun.runtime.RemoteRegion
import dev.rdmarun.runtime.RtrAttributes
import dev.rdmarun.runtime.RtsAttributes
import dev.rdmarun.runtime.engine.EngineConfig
import dev.rdmarun.runtime.engine.OpKind
import dev.rdmarun.runtime.engine.QpEngine
import java.lang.management.ManagementFactory
import java.net.ServerSocket
import java.util.EnumSet
import java.util.Locale
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit
import kotlin.concurrent.thread

/**
 * Bytes allocated per operation in steady state, on the thread that does the work (ThreadMXBean),
 * after a warm-up that is not counted:
 *
 * - `runtime`: the engine alone. Two QPs of one context connected to each other, both engines on
 *   one dispatcher thread; QP 0 sends 8 bytes and waits for the completion, QP 1 takes each message
 *   (its receive is re-posted, credits flow back). One operation = one send and its completion.
 * - `dsl`: the design card's loop, `repeat { send(8); awaitCompletion() }`, as a client scenario
 *   against a server scenario that receives every message (both in this JVM); measured inside the
 *   block, on the client scenario's thread.
 *
 * Usage: AllocBench DEVICE OPS WARMUP; prints `runtime_bytes_per_op=` and `dsl_bytes_per_op=` last.
 */
fun main(args: Array<String>) {
    val device = args.getOrElse(0) { "soft0" }
    val ops = args.getOrElse(1) { "1000000" }.toLong()
    val warmup = args.getOrElse(2) { "200000" }.toLong()
    val runtime = runtimeBytesPerOp(device, ops, warmup)
    println(String.format(Locale.ROOT, "runtime: %d operations on %s, %.3f bytes allocated per operation", ops, device, runtime))
    val dsl = dslBytesPerOp(device, ops, warmup)
    println(String.format(Locale.ROOT, "dsl: %d operations on %s, %.3f bytes allocated per operation", ops, device, dsl))
    println(String.format(Locale.ROOT, "runtime_bytes_per_op=%.3f", runtime))
    println(String.format(Locale.ROOT, "dsl_bytes_per_op=%.3f", dsl))
}

private fun allocated(): Long = (ManagementFactory.getThreadMXBean() as com.sun.management.ThreadMXBean).currentThreadAllocatedBytes

private fun runtimeBytesPerOp(device: String, ops: Long, warmup: Long): Double {
    DeviceList.open().use { list ->
        list.find(device).open().use { ctx ->
            val pd = ctx.allocateProtectionDomain()
            val cq = ctx.createCompletionQueue(512, null)
            val config = EngineConfig(64, 1, 64, 64, 16, 1, 0)
            val credits = pd.registerMemory(16, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE))
            val qps = List(2) { pd.createQueuePair(QueuePairConfig.rc(cq).withDepth(config.sendQueueDepth(), config.recvDepth())) }
            val gid = ctx.defaultGid(1)
            qps.forEach { it.modifyToInit(1, EnumSet.of(Access.REMOTE_WRITE)) }
            fun connect(local: QueuePair, remote: QueuePair, psn: Int, remotePsn: Int) {
                val endpoint = remote.localEndpoint(1, gid.index(), remotePsn)
                local.modifyToRtr(RtrAttributes.of(endpoint, 1, gid.index(), endpoint.mtu()))
                local.modifyToRts(RtsAttributes.of(psn))
            }
            connect(qps[0], qps[1], 100, 200)
            connect(qps[1], qps[0], 200, 100)
            val d = PollingDispatcher.start("alloc-bench", IdleMode.BUSY_SPIN, null)
            val result = CompletableFuture<Double>()
            d.execute {
                d.addCompletionQueue(cq)
                val data = List(2) { pd.registerMemory(config.dataBytes(), EnumSet.of(Access.LOCAL_WRITE)) }
                val recv = List(2) { pd.registerMemory(config.receiveRegionBytes(), EnumSet.of(Access.LOCAL_WRITE)) }
                val engines = List(2) { QpEngine(it, qps[it], data[it], recv[it], credits, config, d) }
                for (i in 0..1) {
                    val peer = engines[1 - i]
                    engines[i].postInitialReceives()
                    engines[i].connect(QpEngine.Peer("the peer", config.recvDepth(), RemoteRegion(credits.address() + peer.index() * 8L, 8, credits.rkey()),
                        arrayOf(RemoteRegion(data[1 - i].address(), data[1 - i].length(), data[1 - i].rkey())), emptySet()))
                }
                val sender = engines[0]
                var done = 0L
                var start = 0L
                fun next() {
                    if (done == warmup) start = allocated()
                    if (done == warmup + ops) {
                        result.complete((allocated() - start).toDouble() / ops)
                        return
                    }
                    if (sender.post(OpKind.SEND, 8, 0, 0, 0, 0, 0, 0, 0) <= 0) result.completeExceptionally(IllegalStateException("the sender had to wait"))
                }
                sender.setListener { e, _ ->
                    e.failure()?.let { result.completeExceptionally(it) }
                    if (e.posted() > done && e.completedThrough() == e.posted()) {
                        done++
                        next()
                    }
                }
                engines[1].setListener { e, _ ->
                    e.failure()?.let { result.completeExceptionally(it) }
                    while (e.hasMessage()) e.releaseMessage()
                }
                next()
            }
            try {
                return result.get(30, TimeUnit.MINUTES)
            } finally {
                qps.forEach { it.modifyToError() }
                d.close()
                pd.close()
                cq.close()
            }
        }
    }
}

private fun dslBytesPerOp(device: String, ops: Long, warmup: Long): Double {
    val port = ServerSocket(0).use { it.localPort }
    var bytesPerOp = 0.0
    fun options(peer: Peer) = RdmaOptions(parameters = mapOf("iterations" to ops.toString()), overrides = SettingsOverrides(device = device), peer = peer)
    val server = thread {
        rdma(options(Peer.listen(port, "127.0.0.1"))) {
            bufferSize(64)
            connect(peer)
            qp(0) { for (i in 0 until warmup + ops) receive() }
        }
    }
    rdma(options(Peer.connect("127.0.0.1", port))) {
        bufferSize(64)
        connect(peer)
        qp(0) {
            for (i in 0 until warmup) {
                send(8)
                awaitCompletion()
            }
            val start = allocated()
            repeat { // the card's loop: `iterations` = ops times
                send(8)
                awaitCompletion()
            }
            bytesPerOp = (allocated() - start).toDouble() / ops
        }
    }
    server.join()
    return bytesPerOp
}
