package dev.rdmarun.dsl

import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.CompletionChannel
import dev.rdmarun.runtime.CompletionQueue
import dev.rdmarun.runtime.Context
import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.runtime.FabricKey
import dev.rdmarun.runtime.Gid
import dev.rdmarun.runtime.MemoryRegion
import dev.rdmarun.runtime.Mtu
import dev.rdmarun.runtime.PollingDispatcher
import dev.rdmarun.runtime.PortAttributes
import dev.rdmarun.runtime.ProtectionDomain
import dev.rdmarun.runtime.QpEndpoint
import dev.rdmarun.runtime.QueuePair
import dev.rdmarun.runtime.QueuePairConfig
import dev.rdmarun.runtime.RtrAttributes
import dev.rdmarun.runtime.RtsAttributes
import dev.rdmarun.runtime.SoftTransport
import dev.rdmarun.runtime.VerbsException
import dev.rdmarun.runtime.engine.QpEngine
import java.security.SecureRandom
import java.util.EnumSet
import kotlin.time.toJavaDuration

/**
 * This side's verbs objects of one scenario: [openDevice] opens and checks the device,
 * [createResources] creates PD, CQs, MRs (with the declared access flags) and QPs (to INIT) and
 * reads their endpoints, [hello] describes them for the peer, [connectQps] takes them to RTR and RTS
 * with the peer's, and [close] closes them in dependency order (after [toError] flushed the QPs).
 */
internal class ScenarioVerbs(
    private val plan: ScenarioPlan,
    private val polling: PollingDispatcher,
    /** How soft0 reaches the peer; null: [SoftTransport.configured]. */
    private val softTransport: SoftTransport?,
    /** "the server" or "the client": the other side, for sentences. */
    private val peerLabel: String,
) {
    private val settings = plan.settings
    var context: Context? = null
        private set
    private var pd: ProtectionDomain? = null
    var channel: CompletionChannel? = null
        private set
    val cqs = ArrayList<CompletionQueue>()
    private var creditMr: MemoryRegion? = null
    private val mrs = ArrayList<MemoryRegion>()
    private val queuePairs = ArrayList<QueuePair>()

    /** One per QP, in QP order, once [createResources] made them. */
    val engines = ArrayList<QpEngine>()
    var deviceName = settings.device ?: "?"
        private set
    var gidIndex = 0
        private set
    private val psns = IntArray(settings.qps)

    /** Each QP's half of the exchange, read at setup: a bad GID index fails before any peer is waited for. */
    private val endpoints = ArrayList<QpEndpoint>()

    /** This side's port, read once when the resources are made (MTU, link layer). */
    private var portAttributes: PortAttributes? = null

    /** Device, port and QPs once the QPs are connected: the results' header. */
    var connection: ConnectionInfo? = null
        private set

    fun openDevice() {
        DeviceList.open().use { list ->
            val names = list.devices().map { it.name() }
            deviceName = Validation.checkDevice(plan, names,
                attributes = { name ->
                    val device = list.find(name)
                    // No transport given: Device.open() applies its documented default.
                    (softTransport?.let(device::open) ?: device.open()).also { context = it }.queryDevice()
                },
                port = { context!!.queryPort(settings.port) },
                missing = list.unavailable().firstOrNull()?.describeInline(),
                software = list.devices().filter { it.isSoftware() }.map { it.name() })
        }
    }

    /**
     * READs and atomics in flight per QP: the device's maximum, as perftest's default (`-o`). A cap
     * of 16 left rxe (128) at a third of ib_atomic_bw's rate, each atomic being a round trip.
     */
    private fun atomicDepth(initiator: Boolean): Int {
        val a = context!!.queryDevice()
        return minOf(MAX_RD_ATOMIC, if (initiator) a.maxQpInitRdAtom() else a.maxQpRdAtom()).coerceAtLeast(1)
    }

    fun createResources() {
        val ctx = context!!
        val s = settings
        val engine = s.engineConfig()
        val protection = ctx.allocateProtectionDomain().also { pd = it }
        if (s.completionMode == CompletionMode.EVENT) channel = ctx.createCompletionChannel()
        val perQp = engine.completionQueueEntries()
        if (s.cqMode == CqMode.SHARED) {
            cqs.add(ctx.createCompletionQueue(perQp * s.qps, channel))
        } else {
            repeat(s.qps) { cqs.add(ctx.createCompletionQueue(perQp, channel)) }
        }
        val credits = protection.registerMemory(s.qps * 8L, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE)).also { creditMr = it }
        gidIndex = s.gidIndex ?: ctx.defaultGid(s.port).index()
        ctx.gid(s.port, gidIndex) // a GID index that does not exist fails here, before a server waits for its client
        portAttributes = ctx.queryPort(s.port)
        val random = SecureRandom()
        for (i in 0 until s.qps) {
            val data = protection.registerMemory(s.dataBytes, plan.dataAccess).also { mrs.add(it) }
            val recv = protection.registerMemory(engine.receiveRegionBytes(), EnumSet.of(Access.LOCAL_WRITE)).also { mrs.add(it) }
            val cq = cqs[if (s.cqMode == CqMode.SHARED) 0 else i]
            val qp = try {
                protection.createQueuePair(QueuePairConfig.rc(cq)
                    .withDepth(engine.sendQueueDepth(), s.recvDepth)
                    .withMaxInlineData(s.inlineThreshold))
            } catch (e: VerbsException) {
                // The device does not say which attribute it refused: name the settings that set them (and their flags).
                throw ScenarioException("QP $i cannot be created on $deviceName with inlineThreshold ${s.inlineThreshold} (-I), " +
                    "sendDepth ${s.sendDepth} (-t) and recvDepth ${s.recvDepth}: ${e.message}", e, e.hint())
            }
            queuePairs.add(qp)
            qp.modifyToInit(s.port, plan.qpAccess)
            psns[i] = random.nextInt(1 shl 24)
            endpoints.add(qp.localEndpoint(s.port, gidIndex, psns[i]))
            engines.add(QpEngine(i, qp, data, recv, credits, engine, polling))
        }
    }

    fun hello(): Hello {
        val credits = creditMr!!
        return Hello(
            version = CONTROL_PROTOCOL_VERSION,
            role = plan.role,
            qpCount = settings.qps,
            recvDepth = settings.recvDepth,
            maxDestRdAtomic = atomicDepth(initiator = false),
            fingerprint = plan.fingerprint,
            parameters = plan.parameters,
            plan = plan.canonicalLines(),
            access = settings.remoteAccess,
            qps = engines.map { q ->
                val data = q.dataRegion()
                val e = endpoints[q.index()]
                QpInfo(
                    qpn = e.qpn(),
                    psn = e.psn(),
                    lid = e.lid(),
                    gid = e.gid().toHex(),
                    mtu = e.mtu().bytes(),
                    buffer = BufferInfo(data.address(), data.rkey(), data.length()),
                    credit = BufferInfo(credits.address() + q.index() * 8L, credits.rkey(), 8),
                )
            },
        )
    }

    fun connectQps(remote: Hello, fabricKey: FabricKey?) {
        val cap = settings.mtu?.let { Mtu.ofBytes(it) }
        val port = portAttributes!!
        val outgoing = minOf(atomicDepth(initiator = true), remote.maxDestRdAtomic.coerceIn(1, MAX_RD_ATOMIC))
        val incoming = atomicDepth(initiator = false)
        for (q in engines) {
            val r = remote.qps[q.index()]
            val endpoint = try {
                QpEndpoint(r.lid, r.qpn, r.psn, Gid.parseHex(r.gid), Mtu.ofBytes(r.mtu))
            } catch (e: IllegalArgumentException) {
                throw PeerException("$peerLabel sent an invalid endpoint for QP ${q.index()}: ${printable(e.message.orEmpty())}", e)
            }
            var mtu = Mtu.min(port.activeMtu(), endpoint.mtu())
            if (cap != null) mtu = Mtu.min(mtu, cap)
            pathMtu = mtu
            val qp = q.queuePair()
            qp.modifyToRtr(RtrAttributes.of(endpoint, settings.port, gidIndex, mtu).withMaxDestRdAtomic(incoming).withFabricKey(fabricKey)
                .withConnectTimeout(settings.timeout.toJavaDuration())) // soft0 waits for its first connection that long
            qp.modifyToRts(RtsAttributes.of(psns[q.index()])
                .withRnrRetry(settings.rnrRetry)
                .withRetry(settings.retryTimeout, settings.retryCount)
                .withMaxRdAtomic(outgoing))
        }
        val ctx = context!!
        connection = ConnectionInfo(
            device = deviceName,
            software = ctx.isSoftware(),
            firmware = ctx.queryDevice().firmwareVersion(),
            port = settings.port,
            linkLayer = when (port.linkLayer()) {
                PortAttributes.LinkLayer.INFINIBAND -> "InfiniBand"
                PortAttributes.LinkLayer.ETHERNET -> "Ethernet"
                else -> "unspecified"
            },
            mtu = pathMtu.bytes(),
            gidIndex = gidIndex,
            gid = endpoints.firstOrNull()?.gid()?.toString() ?: "",
            qps = engines.map { q ->
                val r = remote.qps[q.index()]
                val data = q.dataRegion()
                QpConnection(q.index(), q.queuePair().qpNum(), r.qpn, psns[q.index()], r.psn, Gid.parseHex(r.gid).toString(),
                    localLid = endpoints[q.index()].lid(), remoteLid = r.lid,
                    localRkey = data.rkey().toLong() and 0xFFFF_FFFFL, remoteRkey = r.buffer.rkey.toLong() and 0xFFFF_FFFFL,
                    localAddress = data.address(), remoteAddress = r.buffer.addr)
            },
            sendDepth = settings.sendDepth,
            signalEvery = settings.signalEvery,
            inlineThreshold = settings.inlineThreshold,
        )
    }

    /** The path MTU the QPs were connected with. */
    private var pathMtu = Mtu.MTU_1024

    /** Takes every QP to ERR, each in its own [attempt]: that flushes every outstanding work request. */
    fun toError(attempt: (() -> Unit) -> Unit) {
        for (qp in queuePairs) attempt { qp.modifyToError() }
    }

    /** Closes everything, in dependency order, each in its own [attempt]. */
    fun close(attempt: (() -> Unit) -> Unit) {
        for (qp in queuePairs.asReversed()) attempt { qp.close() }
        for (mr in mrs.asReversed()) attempt { mr.close() }
        attempt { creditMr?.close() }
        for (cq in cqs.asReversed()) attempt { cq.close() }
        attempt { channel?.close() }
        attempt { pd?.close() }
        attempt { context?.close() }
    }

    private companion object {
        /** The largest max_rd_atomic / max_dest_rd_atomic: the attributes are 8-bit. */
        const val MAX_RD_ATOMIC = 255
    }
}
