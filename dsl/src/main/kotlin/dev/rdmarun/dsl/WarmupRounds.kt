package dev.rdmarun.dsl

import java.lang.management.ManagementFactory
import java.util.Collections
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.selects.onTimeout
import kotlinx.coroutines.selects.select

/**
 * The warm-up rounds (`repeat { }`, `runFor`) this side agrees on with the peer: each loop's
 * rounds end together on both sides ([agreeOnRound], the peer's word arrives in [roundReport]),
 * the warming loops wait for each other before they measure ([warmupGate]), and what each loop's
 * warm-up did is kept for the results ([warmedUp]).
 */
internal class WarmupRounds(private val session: Session) {
    private val role = session.role
    private val peerLabel = session.peerLabel
    private val drivers get() = session.drivers
    private val progress get() = session.progress

    private data class RoundKey(val qp: Int?, val loop: Int, val round: Int)

    /** The peer's round ends, by loop and round: at most one per QP and the scenario's block waits at a time. */
    private val roundReports = ConcurrentHashMap<RoundKey, CompletableDeferred<Round>>()

    private val agreed = AtomicLong()

    /** Warm-up rounds agreed so far: progress for the heartbeats. */
    val roundsAgreed: Long get() = agreed.get()

    /** Where this side's warming loops wait for each other before they measure. */
    val warmupGate = WarmupGate()

    /** What each loop's warm-up did, for the results. */
    private val warmups = Collections.synchronizedList(ArrayList<WarmupSummary>())

    fun warmedUp(summary: WarmupSummary) {
        warmups += summary
    }

    /** The JIT's compile time and the JVM's uptime when the measured phase began (after `connect(peer)`): for a side without a loop. */
    private var compiledAtStart: Long? = null
    private var uptimeAtStart = -1L

    /** The measured phase begins (the end of `connect(peer)`). */
    fun measuringFrom() {
        compiledAtStart = JitQuiet.totalCompilationMillis()
        uptimeAtStart = ManagementFactory.getRuntimeMXBean().uptime
    }

    /**
     * Every loop's warm-up, the scenario block's first, then by QP. A side that moved or measured
     * something without any `repeat { }` or `runFor` (a hand-written loop) gets one summary of
     * mode [WarmupSummary.MODE_NO_LOOP], so its results say that the figures are cold.
     */
    fun summaries(): List<WarmupSummary> {
        if (warmups.isEmpty() && drivers.any { d -> d.engine.stats().let { it.operations() > 0 || it.messagesReceived() > 0 } }) {
            val during = compiledAtStart?.let { at -> JitQuiet.totalCompilationMillis()?.minus(at) } ?: -1
            return listOf(WarmupSummary(null, WarmupSummary.MODE_NO_LOOP, 0, 0, 0, compileMillisMeasured = during, jvmUptimeMillis = uptimeAtStart))
        }
        return warmups.sortedWith(compareBy(nullsFirst()) { it.qp })
    }

    /** On the reader thread: the peer ended a warm-up round. Checked before use: it may not be rdma-run. */
    fun roundReport(r: Round) {
        if ((r.qp != null && r.qp !in drivers.indices) || r.loop < 1 || r.round < 1 ||
            r.sent.size != (if (r.qp == null) drivers.size else 1) || r.sent.any { it < 0 }) {
            session.fail(PeerException("$peerLabel sent the end of warm-up round ${r.round} of loop ${r.loop} on QP ${r.qp}, which this scenario has not: it is not a compatible rdma-run"))
            return
        }
        // Per scope at most this side's round and the peer's next, plus one report per loop of the peer's
        // that found no partner loop here (its first): far more is a broken peer.
        if (roundReports.size > MAX_PENDING_ROUNDS * (drivers.size + 1)) {
            session.fail(PeerException("$peerLabel sent ends of warm-up rounds that no repeat { } here waits for: it is not a compatible rdma-run"))
            return
        }
        roundReports.computeIfAbsent(RoundKey(r.qp, r.loop, r.round)) { CompletableDeferred() }.complete(r)
    }

    /**
     * Tells the peer whether this side wants another warm-up round after [round] of [qp]'s [loop]-th
     * loop, waits for the peer's word on the same round and for every message the peer sent until
     * then (on [qp], or on every QP), and returns whether either wants another round. Null when the
     * peer has no partner loop but answers this one's messages in code of its own (a `while` loop
     * until a stop message): it waits in receive() for this side, stalled, for two heartbeats (a
     * partner loop would be waiting for this word, not for a message). The loop then goes on alone.
     */
    @OptIn(kotlinx.coroutines.ExperimentalCoroutinesApi::class)
    suspend fun agreeOnRound(qp: Int?, loop: Int, round: Int, more: Boolean, dropLeftovers: Boolean, measured: Boolean = false): Boolean? {
        val where = if (qp == null) "in its scenario block" else "on QP $qp"
        val phase = if (measured) "timed round" else "warm-up round"
        val what = "repeat { } $where to end $phase $round"
        val scope = if (qp == null) drivers else listOf(drivers[qp])
        session.sendControl(Round(qp, loop, round, more, scope.map { it.engine.stats().messagesSent() }))
        val key = RoundKey(qp, loop, round)
        val report = roundReports.computeIfAbsent(key) { CompletableDeferred() }
        val since = System.nanoTime()
        progress.controlWait = "$peerLabel's $what"
        try {
            while (true) {
                val peerMore = select {
                    report.onAwait { it }
                    onTimeout(100) { null }
                }
                if (peerMore != null) {
                    agreed.incrementAndGet()
                    // Sent in the peer's warm-up, so in this side's warm-up too: the boundary is exact.
                    // (A timed round of the measured run only waits for them: they are measured.)
                    for ((i, d) in scope.withIndex()) {
                        d.awaitArrivals(peerMore.sent[i])
                        if (!measured) d.afterAgreedRound(peerMore.sent[i], dropLeftovers)
                    }
                    return more || peerMore.more
                }
                session.failure?.let { throw it }
                val peerWaits = progress.lastHeartbeat?.waiting
                if (progress.peerStalls >= UNPAIRED_HEARTBEATS && peerWaits != null &&
                    peerWaits.startsWith(if (qp == null) QpWait.RECEIVING else "${QpWait.RECEIVING} on QP $qp")) {
                    return null
                }
                if (progress.peerFinishedAt != 0L || session.framePending) {
                    throw ScenarioException("the ${role.label}'s repeat { } $where exchanged messages with $peerLabel in $phase $round, " +
                        "but $peerLabel went on without a repeat { } to pair with it: write the peer's loop with repeat { } (or runFor) " +
                        "on the same QP, or give --set warmup=N for a fixed warm-up")
                }
                if (progress.waitExpired(since, System.nanoTime())) {
                    throw RdmaTimeoutException("the ${role.label} waited ${session.settings.timeout} for $peerLabel's repeat { } $where to end $phase $round: " +
                        "a loop that exchanges messages needs its partner repeat { } (or runFor) on the peer, on the same QP, " +
                        "or --set warmup=N for a fixed warm-up")
                }
            }
        } finally {
            roundReports.remove(key)
            progress.controlWait = null
        }
    }

    private companion object {
        /** Heartbeats of a peer stalled in receive() while a loop here waits for its word on a round: it has no partner loop. */
        const val UNPAIRED_HEARTBEATS = 2

        /** Round reports that may wait for a loop here, per QP and the scenario's block. */
        const val MAX_PENDING_ROUNDS = 64
    }
}
