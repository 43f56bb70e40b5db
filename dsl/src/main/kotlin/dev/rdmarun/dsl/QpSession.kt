package dev.rdmarun.dsl

import dev.rdmarun.runtime.MemoryRegion
import dev.rdmarun.runtime.PendingOperation
import dev.rdmarun.runtime.QueuePair
import dev.rdmarun.runtime.SendFlags
import dev.rdmarun.runtime.WcOpcode
import dev.rdmarun.runtime.WorkCompletions
import java.lang.foreign.MemorySegment
import java.lang.foreign.ValueLayout
import java.lang.invoke.VarHandle
import java.nio.ByteOrder
import kotlinx.coroutines.CancellableContinuation
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.ensureActive
import kotlinx.coroutines.suspendCancellableCoroutine
import kotlinx.coroutines.yield

/**
 * One QP's data path. Everything here runs on the dispatcher thread (scenario coroutines and
 * completion handlers alike), so plain fields need no locks.
 *
 * **Send queue.** Each work request gets a sequence number and a slot in a ring of sendDepth
 * preallocated operations. At most sendDepth are in flight; post forms are handed to the device
 * in groups of signalEvery with only the last signaled, and a group is handed over early whenever
 * anything waits, so every work request in flight is covered by a signaled one and every wait
 * ends. A signaled completion completes its whole group (RC completes in order).
 *
 * **Receives and credits (why a scenario cannot RNR-fail).** Each side posts recvDepth receives
 * per QP before the handshake, so the peer may start with recvDepth credits. A sender spends one
 * credit per receive-consuming work request (send, sendWithImm, writeWithImm) and may only post
 * while it has one: credits = peerRecvDepth + peerReposted - consumingSent. The receiver re-posts
 * a slot as soon as the message in it has been taken (by `receive()`, or at once when this side
 * never calls receive), counts the re-posts, and RDMA-WRITEs that cumulative count into the
 * sender's credit word (8 bytes per QP, exchanged in the handshake) after every recvDepth/4
 * re-posts, one write in flight at a time (the source word never changes under the HCA). The
 * count only grows after the receive is posted, so a sender never sends into an empty receive
 * queue: no RNR NAK can happen, whatever rnr_retry is. A sender out of credits polls its credit
 * word by yielding to the dispatcher; if the peer takes no message within the timeout the
 * scenario fails with that sentence instead of hanging (the peer calls receive() too rarely).
 */
internal class QpSession(
    val index: Int,
    private val session: Session,
    val qp: QueuePair,
    private val data: MemoryRegion,
    private val recv: MemoryRegion?,
    /** This side's credit words (shared by all QPs; this QP's is at index * 8), written by the peer. */
    private val creditWords: MemoryRegion?,
    private val settings: ScenarioSettings,
    holdMessages: Boolean,
) {
    val counters = QpCounters()
    private val bufferSize = settings.bufferSize
    private val depth = settings.sendDepth
    private val maxInline = minOf(settings.inlineThreshold, qp.maxInlineData())

    // ---- peer ----
    private var remoteData: BufferInfo? = null
    private var remoteCredit: BufferInfo? = null
    private var peerRecvDepth = 0

    /** This QP's data region as the peer addresses it. */
    fun dataInfo() = BufferInfo(data.address(), data.rkey(), data.length())

    fun connectTo(remote: QpInfo, peerRecvDepth: Int) {
        this.remoteData = remote.buffer
        this.remoteCredit = remote.credit
        this.peerRecvDepth = peerRecvDepth
    }

    // ---- waiting ----
    private class Waiter(val condition: () -> Boolean, val cont: CancellableContinuation<Unit>)

    private val waiters = ArrayList<Waiter>()

    /** Suspends until [condition] holds; re-checked after every wake-up, since another coroutine may have taken what woke it. */
    private suspend fun awaitUntil(condition: () -> Boolean) {
        while (!condition()) {
            suspendCancellableCoroutine { c -> waiters.add(Waiter(condition, c)) }
        }
    }

    /** Resumes the waiters whose condition now holds (they run later, through the dispatcher's queue). */
    private fun wake() {
        if (waiters.isEmpty()) return
        val it = waiters.iterator()
        while (it.hasNext()) {
            val w = it.next()
            if (!w.cont.isActive) {
                it.remove()
            } else if (w.condition()) {
                it.remove()
                w.cont.resumeWith(Result.success(Unit))
            }
        }
    }

    // ---- send queue ----
    private inner class SendOp : PendingOperation {
        var seq = 0L
        var kind = OpKind.SEND
        var size = 0
        var localOffset = 0L
        var remoteAddress = 0L
        var rkey = 0
        var imm = 0
        var compareAdd = 0L
        var swap = 0L
        var awaitable = false
        var postNanos = 0L

        override fun complete(completions: WorkCompletions, index: Int) {
            if (session.tearingDown) return
            if (!completions.isSuccess(index)) {
                session.completionFailed(this@QpSession, kind.label, completions, index)
                return
            }
            guarded { sendCompleted(seq) }
        }

        override fun fail(cause: Throwable) = Unit // the dispatcher is shutting down; the scenario already ended
    }

    private val ring = Array(depth) { SendOp() }
    private var nextSeq = 1L
    private var postedThrough = 0L
    private var completedThrough = 0L
    private var awaitablePosted = 0L
    private var awaitableCompleted = 0L
    private var awaited = 0L
    private var consumingSent = 0L

    private fun slot(seq: Long) = ring[(seq % depth).toInt()]
    private fun inFlight() = nextSeq - 1 - completedThrough

    val outstanding: Int get() = (awaitablePosted - awaited).toInt()

    /**
     * Queues one work request and returns its sequence number; waits first for a credit (if it
     * consumes a peer receive) and for room in the send queue.
     */
    suspend fun start(kind: OpKind, size: Int, buffer: Int, remoteBuffer: Int, remoteOffset: Long,
                      imm: Int, compareAdd: Long, swap: Long, awaitable: Boolean): Long {
        val bytes = when {
            kind.isAtomic -> 8
            size == -1 -> bufferSize
            else -> size
        }
        if (bytes !in 0..bufferSize) throw ScenarioException("${kind.label}(size = $bytes) on QP $index is outside 0..bufferSize ($bufferSize)")
        if (buffer !in 0 until settings.bufferCount) throw ScenarioException("${kind.label}(buffer = $buffer) on QP $index is outside 0..${settings.bufferCount - 1}")
        var remoteAddress = 0L
        var rkey = 0
        if (kind.peerAccess != null) {
            val r = remoteData ?: throw ScenarioException("${kind.label}() on QP $index: the peer granted no buffer")
            val offset = remoteBuffer.toLong() * bufferSize + (if (kind.isAtomic) remoteOffset else 0L)
            if (remoteBuffer !in 0 until settings.bufferCount || offset < 0 || offset + bytes > r.length) {
                throw ScenarioException("${kind.label}(remoteBuffer = $remoteBuffer) on QP $index is outside the peer's ${r.length}-byte region")
            }
            remoteAddress = r.addr + offset
            rkey = r.rkey
        }
        while (true) {
            currentCoroutineContext().ensureActive()
            if (kind.consumesPeerReceive && credits() <= 0) {
                flush()
                awaitCredit()
                continue
            }
            if (inFlight() >= depth) {
                flush()
                awaitUntil { inFlight() < depth }
                continue
            }
            break
        }
        val seq = nextSeq++
        val op = slot(seq)
        op.seq = seq
        op.kind = kind
        op.size = bytes
        op.localOffset = buffer.toLong() * bufferSize
        op.remoteAddress = remoteAddress
        op.rkey = rkey
        op.imm = imm
        op.compareAdd = compareAdd
        op.swap = swap
        op.awaitable = awaitable
        if (kind.consumesPeerReceive) consumingSent++
        if (awaitable) awaitablePosted++
        if (!awaitable || seq - postedThrough >= settings.signalEvery) flush()
        return seq
    }

    /** Hands every queued work request to the device, the last one signaled. */
    fun flush() {
        val last = nextSeq - 1
        if (postedThrough >= last) return
        val dispatcher = session.dispatcher
        var s = postedThrough + 1
        while (s <= last) {
            val op = slot(s)
            val signaled = s == last
            val wrId = if (signaled) dispatcher.register(op) else UNSIGNALED
            op.postNanos = System.nanoTime()
            try {
                post(op, wrId, if (signaled) SendFlags.SIGNALED else SendFlags.NONE)
            } catch (e: RuntimeException) {
                if (signaled) dispatcher.unregister(wrId)
                throw e
            }
            postedThrough = s
            s++
        }
    }

    private fun post(op: SendOp, wrId: Long, signal: Int) {
        val inline = if (op.size in 1..maxInline && !op.kind.writesLocalBuffer) SendFlags.INLINE else 0
        val flags = signal or inline
        when (op.kind) {
            OpKind.SEND -> qp.postSend(wrId, data, op.localOffset, op.size, flags)
            OpKind.SEND_WITH_IMM -> qp.postSendWithImm(wrId, data, op.localOffset, op.size, op.imm, flags)
            OpKind.WRITE -> qp.postWrite(wrId, data, op.localOffset, op.size, op.remoteAddress, op.rkey, flags)
            OpKind.WRITE_WITH_IMM -> qp.postWriteWithImm(wrId, data, op.localOffset, op.size, op.remoteAddress, op.rkey, op.imm, flags)
            OpKind.READ -> qp.postRead(wrId, data, op.localOffset, op.size, op.remoteAddress, op.rkey, flags)
            OpKind.COMPARE_AND_SWAP -> qp.postCompareAndSwap(wrId, data, op.localOffset, op.remoteAddress, op.rkey, op.compareAdd, op.swap, flags)
            OpKind.FETCH_AND_ADD -> qp.postFetchAndAdd(wrId, data, op.localOffset, op.remoteAddress, op.rkey, op.compareAdd, flags)
            OpKind.RECEIVE -> error("receives are not posted on the send queue")
        }
    }

    /** A signaled completion: it and every earlier work request of the group are done. */
    private fun sendCompleted(seq: Long) {
        var s = completedThrough + 1
        while (s <= seq) {
            val op = slot(s)
            counters.operations++
            if (op.kind.writesLocalBuffer) counters.bytesReceived += op.size else counters.bytesSent += op.size
            if (op.awaitable) awaitableCompleted++
            s++
        }
        counters.recordLatency(System.nanoTime() - slot(seq).postNanos)
        completedThrough = seq
        wake()
    }

    suspend fun awaitSeq(seq: Long) {
        flush()
        awaitUntil { completedThrough >= seq }
    }

    /** The 64-bit value an atomic left in [buffer] (its old value at the peer). */
    fun atomicResult(buffer: Int): Long = data.segment().get(ValueLayout.JAVA_LONG, buffer.toLong() * bufferSize)

    fun buffer(i: Int): MemorySegment {
        if (i !in 0 until settings.bufferCount) throw ScenarioException("buffer($i) on QP $index is outside 0..${settings.bufferCount - 1}")
        return data.segment().asSlice(i.toLong() * bufferSize, bufferSize.toLong())
    }

    suspend fun awaitCompletion() {
        if (awaited >= awaitablePosted) return
        flush()
        val target = ++awaited
        awaitUntil { awaitableCompleted >= target }
    }

    suspend fun awaitAll() {
        if (awaited >= awaitablePosted) return
        flush()
        val target = awaitablePosted
        awaited = target
        awaitUntil { awaitableCompleted >= target }
    }

    /** Waits for every work request this side queued (end of the scenario). */
    suspend fun quiesce() {
        flush()
        val last = nextSeq - 1
        awaitUntil { completedThrough >= last }
        awaited = awaitablePosted
    }

    // ---- credits, sender side ----
    private fun peerReposted(): Long {
        val words = creditWords ?: return 0
        VarHandle.acquireFence() // the HCA wrote it; read the current value, not a cached one
        return words.segment().get(BIG_ENDIAN_LONG, index * 8L)
    }

    private fun credits(): Long = peerRecvDepth + peerReposted() - consumingSent

    private suspend fun awaitCredit() {
        // The credit word changes without a completion: poll it between the dispatcher's rounds.
        val deadline = System.nanoTime() + settings.timeout.inWholeNanoseconds
        while (credits() <= 0) {
            if (System.nanoTime() - deadline > 0) {
                throw ScenarioException("QP $index waited ${settings.timeout} for the peer to take its messages " +
                    "($peerRecvDepth are outstanding): the peer calls receive() less often than this side sends")
            }
            yield()
        }
    }

    // ---- receives, receiver side ----
    private inner class RecvSlot(val slot: Int) : PendingOperation {
        val offset = slot.toLong() * bufferSize

        override fun complete(completions: WorkCompletions, index: Int) {
            if (session.tearingDown) return
            if (!completions.isSuccess(index)) {
                session.completionFailed(this@QpSession, "receive", completions, index)
                return
            }
            val length = completions.byteLength(index)
            val hasImm = completions.hasImmediate(index)
            val imm = if (hasImm) completions.immediate(index) else 0
            val write = completions.opcode(index) == WcOpcode.RECV_RDMA_WITH_IMM
            guarded { received(slot, length, hasImm, imm, write) }
        }

        override fun fail(cause: Throwable) = Unit
    }

    private val slotCount = if (recv != null) settings.recvDepth else 0
    private val slots = Array(slotCount) { RecvSlot(it) }
    private val creditSourceOffset = (slotCount.toLong() * bufferSize + 7) / 8 * 8
    private val creditBatch = maxOf(1, settings.recvDepth / 4)

    // FIFO of filled slots waiting for receive()
    private val inboxSlot = IntArray(slotCount)
    private val inboxLength = IntArray(slotCount)
    private val inboxImm = IntArray(slotCount)
    private val inboxHasImm = BooleanArray(slotCount)
    private val inboxWrite = BooleanArray(slotCount)
    private var inboxHead = 0
    private var inboxSize = 0

    /** Arrivals are counted and re-posted at once (this side never calls receive, or the scenario ended). */
    private var sink = !holdMessages
    private var reposted = 0L
    private var reported = 0L
    private var creditInFlight = false

    private val creditWrite = object : PendingOperation {
        override fun complete(completions: WorkCompletions, index: Int) {
            creditInFlight = false
            if (session.tearingDown) return
            if (!completions.isSuccess(index)) {
                if (!session.creditsStopped) session.completionFailed(this@QpSession, "credit update", completions, index)
                return
            }
            guarded {
                returnCredits()
                wake()
            }
        }

        override fun fail(cause: Throwable) = Unit
    }

    companion object {
        private const val UNSIGNALED = -1L
        private val BIG_ENDIAN_LONG: ValueLayout.OfLong = ValueLayout.JAVA_LONG.withOrder(ByteOrder.BIG_ENDIAN)

        /** The receive slots, then (8-byte aligned) the source word of credit writes. */
        fun receiveRegionBytes(settings: ScenarioSettings): Long = (settings.recvDepth.toLong() * settings.bufferSize + 7) / 8 * 8 + 8
    }

    fun postInitialReceives() {
        for (i in 0 until slotCount) postReceive(i)
    }

    private fun postReceive(slot: Int) {
        val s = slots[slot]
        val dispatcher = session.dispatcher
        val wrId = dispatcher.register(s)
        try {
            qp.postReceive(wrId, recv!!, s.offset, bufferSize)
        } catch (e: RuntimeException) {
            dispatcher.unregister(wrId)
            throw e
        }
    }

    private fun received(slot: Int, length: Int, hasImm: Boolean, imm: Int, write: Boolean) {
        counters.messagesReceived++
        counters.bytesReceived += length
        if (sink) {
            repost(slot)
            return
        }
        val at = (inboxHead + inboxSize) % slotCount
        inboxSlot[at] = slot
        inboxLength[at] = length
        inboxImm[at] = imm
        inboxHasImm[at] = hasImm
        inboxWrite[at] = write
        inboxSize++
        wake()
    }

    suspend fun receive(): Message {
        if (slotCount == 0) throw ScenarioException("receive() on QP $index: the peer never sends on it")
        awaitUntil { inboxSize > 0 }
        val at = inboxHead
        inboxHead = (inboxHead + 1) % slotCount
        inboxSize--
        val slot = inboxSlot[at]
        val length = inboxLength[at]
        val bytes = if (inboxWrite[at]) EMPTY else ByteArray(length).also {
            MemorySegment.copy(recv!!.segment(), ValueLayout.JAVA_BYTE, slots[slot].offset, it, 0, length)
        }
        val message = Message(index, length, if (inboxHasImm[at]) inboxImm[at] else null, bytes)
        repost(slot)
        return message
    }

    private fun repost(slot: Int) {
        if (session.tearingDown) return
        postReceive(slot)
        reposted++
        returnCredits()
    }

    /** Tells the peer how many receives were re-posted, when enough are unreported and no update is in flight. */
    private fun returnCredits() {
        val target = remoteCredit ?: return
        if (creditInFlight || session.creditsStopped || session.tearingDown) return
        if (reposted - reported < creditBatch) return
        val source = recv!!
        source.segment().set(BIG_ENDIAN_LONG, creditSourceOffset, reposted)
        reported = reposted
        creditInFlight = true
        val dispatcher = session.dispatcher
        val wrId = dispatcher.register(creditWrite)
        try {
            qp.postWrite(wrId, source, creditSourceOffset, 8, target.addr, target.rkey, SendFlags.SIGNALED)
        } catch (e: RuntimeException) {
            dispatcher.unregister(wrId)
            creditInFlight = false
            throw e
        }
    }

    /** The scenario ended on this side: messages still arriving are counted and their slots re-posted. */
    fun switchToSink() {
        sink = true
        while (inboxSize > 0) {
            val slot = inboxSlot[inboxHead]
            inboxHead = (inboxHead + 1) % slotCount
            inboxSize--
            repost(slot)
        }
    }

    suspend fun awaitCreditIdle() = awaitUntil { !creditInFlight }

    /** A completion handler must not throw into the poll loop: a failure ends the scenario instead. */
    private inline fun guarded(body: () -> Unit) {
        try {
            body()
        } catch (e: RuntimeException) {
            session.fail(e)
        }
    }
}

private val EMPTY = ByteArray(0)
