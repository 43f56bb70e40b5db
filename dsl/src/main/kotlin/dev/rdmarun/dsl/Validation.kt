package dev.rdmarun.dsl

import dev.rdmarun.runtime.DeviceAttributes
import dev.rdmarun.runtime.PortAttributes
import dev.rdmarun.runtime.VerbsException
import dev.rdmarun.runtime.engine.EngineException
import kotlinx.coroutines.TimeoutCancellationException

/**
 * A scenario that cannot run as written, or a peer that does not match: one sentence saying what
 * and, where it helps, how to fix it. Launchers print [message] without a stack trace.
 */
public open class ScenarioException @JvmOverloads constructor(message: String, cause: Throwable? = null, public val hint: String? = null) : RuntimeException(message, cause) {
    /** The message and, on a second line, the hint. */
    public fun describe(): String = if (hint == null) message.orEmpty() else "$message\n  hint: $hint"
}

/** The peer reported a failure, closed the control connection or went silent. */
public class PeerException(message: String, cause: Throwable? = null) : ScenarioException(message, cause) {
    /**
     * A server that refused this connection stops waiting for another: the peer proved the secret,
     * so it is this scenario's own client, and it runs another plan.
     */
    internal var endsTheWait = false

    /** A server says at once that it refused this connection (a peer that proved the wrong secret or plan), not only at the end. */
    internal var worthNoting = false

    /** The peer's own failure report (escaped), when this exception is the peer saying it failed; null otherwise. */
    internal var peerSaid: String? = null
}

/** What a launcher prints for a failed run: the sentence, and the hint on a second line when there is one. */
public fun describeFailure(t: Throwable): String = when (t) {
    is ScenarioException -> t.describe()
    is RdmaTimeoutException -> t.message.orEmpty()
    is VerbsException -> t.describe()
    is EngineException -> if (t.hint() == null) t.message.orEmpty() else "${t.message}\n  hint: ${t.hint()}"
    // Only the script's own withTimeout { } throws it out of a scenario (kotlinx's message names no place).
    is TimeoutCancellationException -> "the script's own withTimeout { } ran out: TimeoutCancellationException: ${t.message}"
    else -> t.message ?: t.toString()
}

/**
 * Checks of a scenario's settings, in two stages: the settings alone ([checkSettings], at
 * `connect` before any device is touched), and against a device ([checkDevice]; the device is
 * given as values, so all of it is testable without RDMA hardware).
 */
internal object Validation {
    private val MTUS = setOf(256, 512, 1024, 2048, 4096)

    fun checkSettings(s: ScenarioSettings) {
        checkValues(s)
        if (s.signalEvery !in 1..s.sendDepth) {
            throw ScenarioException("signalEvery(${s.signalEvery}) must be 1..sendDepth (${s.sendDepth}): a group of unsignaled work requests has to fit the send queue")
        }
    }

    /** The checks of one value each, which a script's setting call makes at once (the relation of two waits for connect). */
    fun checkValues(s: ScenarioSettings) {
        fun fail(msg: String): Nothing = throw ScenarioException(msg)
        if (s.qps < 1) fail("qps(${s.qps}): a scenario needs at least 1 QP")
        if (s.port !in 1..255) fail("port(${s.port}): ports are numbered 1..255")
        s.gidIndex?.let { if (it !in 0..255) fail("gidIndex($it): GID indexes are 0..255") }
        if (s.bufferSize < 1) fail("bufferSize(${s.bufferSize}): a buffer needs at least 1 byte")
        if (s.bufferCount < 1) fail("bufferCount(${s.bufferCount}): each QP needs at least 1 buffer")
        if (s.sendDepth < 1) fail("sendDepth(${s.sendDepth}): the send queue needs at least 1 entry")
        if (s.recvDepth < 1) fail("recvDepth(${s.recvDepth}): the receive queue needs at least 1 entry")
        if (s.inboxDepth < 0) fail("inboxDepth(${s.inboxDepth}) cannot be negative")
        s.mtu?.let { if (it !in MTUS) fail("mtu($it): the MTU must be 256, 512, 1024, 2048 or 4096") }
        if (s.inlineThreshold < 0) fail("inlineThreshold(${s.inlineThreshold}) cannot be negative")
        if (s.signalEvery < 1) fail("signalEvery(${s.signalEvery}) must be at least 1")
        if (s.rnrRetry !in 0..7) fail("rnrRetry(${s.rnrRetry}) must be 0..7 (7 retries forever)")
        if (s.retryCount !in 0..7) fail("retry(count = ${s.retryCount}) must be 0..7")
        if (s.retryTimeout !in 0..31) fail("retry(timeout = ${s.retryTimeout}) must be 0..31")
        if (!s.timeout.isPositive()) fail("timeout(${s.timeout}) must be positive")
        if (s.timeout > MAX_DURATION) fail("timeout(${s.timeout}) is longer than $MAX_DURATION, the longest timeout rdma-run accepts")
    }

    /**
     * Checks the plan against the devices there are and the chosen device's attributes (and its
     * port's, when known); returns the device name to open: the scenario's, else the first (real
     * devices are listed before the software one). [missing] says why kernel devices may be
     * missing (no RDMA support, say), for the error that names an unknown device; [software] names
     * the software providers' devices among [devices], so that on a machine with only those the
     * error names the way out there (a script that says `device("rxe0")`, run where there is none).
     */
    fun checkDevice(plan: ScenarioPlan, devices: List<String>, attributes: (String) -> DeviceAttributes,
                    port: ((String) -> PortAttributes)? = null, missing: String? = null,
                    software: Collection<String> = emptyList()): String {
        val s = plan.settings
        fun fail(msg: String, hint: String? = null): Nothing = throw ScenarioException(msg, hint = hint)
        if (devices.isEmpty()) fail("there are no RDMA devices (load rdma_rxe and add a Soft-RoCE device, or use a machine with an RDMA NIC)")
        val name = s.device ?: devices.first()
        if (name !in devices) {
            val only = devices.filter { it in software }.takeIf { it.size == devices.size }?.first()
            fail("no RDMA device named '$name' (devices: ${devices.joinToString(", ")})",
                if (only == null) missing
                else "this machine has no RDMA device, only rdma-run's software provider $only: run there with " +
                    "-d $only (rdma-run) or device(\"$only\")" + (missing?.let { "; why there is no '$name': $it" } ?: ""))
        }
        val a = attributes(name)
        if (s.port > a.physPortCount) fail("port ${s.port} does not exist on $name, which has ${a.physPortCount} port${if (a.physPortCount == 1) "" else "s"}")
        if (s.qps > a.maxQp) fail("qps(${s.qps}) is outside 1..${a.maxQp}, the QP limit (max_qp) of $name")
        // max_mr_size is a u64 (Soft-RoCE reports 2^64-1, which a Java long shows as -1).
        val maxMr = java.lang.Long.toUnsignedString(a.maxMrSize)
        if (java.lang.Long.compareUnsigned(s.dataBytes, a.maxMrSize) > 0) {
            fail("a data region of ${s.dataBytes} bytes (bufferCount ${s.bufferCount} x bufferSize ${s.bufferSize}) is larger than max_mr_size $maxMr of $name")
        }
        val slots = s.engineConfig().receiveRegionBytes()
        if (java.lang.Long.compareUnsigned(slots, a.maxMrSize) > 0) {
            fail("the receive region of a QP ($slots bytes: recvDepth ${s.recvDepth} x bufferSize ${s.bufferSize}, a credit word and sendDepth ${s.sendDepth} atomic result words) exceeds max_mr_size $maxMr of $name")
        }
        if (s.sendDepth + 1 > a.maxQpWr) fail("sendDepth(${s.sendDepth}) plus the engine's credit slot exceeds max_qp_wr ${a.maxQpWr} of $name")
        if (s.recvDepth > a.maxQpWr) fail("recvDepth(${s.recvDepth}) exceeds max_qp_wr ${a.maxQpWr} of $name")
        val perQp = s.engineConfig().completionQueueEntries().toLong()
        val cqEntries = if (s.cqMode == CqMode.SHARED) perQp * s.qps else perQp
        if (cqEntries > a.maxCqe) {
            val fix = if (s.cqMode == CqMode.SHARED) "use perQpCq() or smaller queue depths" else "use smaller queue depths"
            fail("the ${if (s.cqMode == CqMode.SHARED) "shared " else ""}CQ needs $cqEntries entries but max_cqe of $name is ${a.maxCqe}: $fix")
        }
        val cqs = if (s.cqMode == CqMode.SHARED) 1 else s.qps
        if (cqs > a.maxCq) fail("perQpCq() with ${s.qps} QPs needs $cqs CQs but max_cq of $name is ${a.maxCq}: use sharedCq()")
        val mrs = 2L * s.qps + 1 // data and receive region per QP, one for the credit words
        if (mrs > a.maxMr) fail("${s.qps} QPs need up to $mrs memory regions but max_mr of $name is ${a.maxMr}")
        if (RemoteAccess.ATOMIC in s.remoteAccess && a.atomicCap == DeviceAttributes.AtomicCapability.NONE) {
            fail("remoteAccess(ATOMIC) needs atomic operations, but $name reports atomic_cap NONE")
        }
        if (port != null) {
            val p = port(name)
            if (p.state() != PortAttributes.PortState.ACTIVE) fail("port ${s.port} of $name is ${p.state()}, not ACTIVE (check the link and `rdma link`)")
            if (s.bufferSize > p.maxMessageSize()) {
                fail("bufferSize(${s.bufferSize}) exceeds max_msg_sz ${p.maxMessageSize()} of $name port ${s.port}: a message of a whole buffer could not be sent")
            }
        }
        return name
    }
}
