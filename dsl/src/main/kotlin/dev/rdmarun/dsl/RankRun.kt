package dev.rdmarun.dsl

import java.io.Closeable
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.isActive
import kotlinx.coroutines.job
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext

/**
 * One [rdmaRanks] on this rank: meets the others ([RankTeam.meet]), runs the block, whose
 * [forEachPeer] runs one [Scenario] per pair, and ends with a barrier of every rank, so that no
 * rank closes its connections while another still runs. A failure anywhere ends every rank
 * ([RankTeam.fail]).
 */
internal class RankRun(private val options: RdmaOptions, private val checkOnly: Boolean, private val onResult: ((ScenarioResult) -> Unit)?,
                       private val onRanks: ((RanksResult) -> Unit)? = null) : RanksScope {
    private val place: Ranks = options.ranks
        ?: options.peer?.let { Ranks(if (it is Peer.Listen) 0 else 1, 2, it) }
        ?: if (checkOnly) Ranks(0, 2, Peer.Listen(Peer.DEFAULT_PORT)) else throw ScenarioException(NO_RANKS)

    override val rank: Int get() = place.rank
    override val ranks: Int get() = place.size
    override val localRank: Int? get() = place.localRank
    override val peers: List<Int> = (0 until place.size).filter { it != place.rank }
    override fun param(name: String, default: String): String = options.parameters[name] ?: default

    private var team: RankTeam? = null
    private val results = ArrayList<ScenarioResult>()
    private val timeout = options.overrides.timeout ?: ScenarioSettings().timeout

    /** Rank 0: every rank's pair results, once gathered. */
    private var gathered: List<ScenarioResult> = emptyList()

    suspend fun run(block: suspend RanksScope.() -> Unit): RanksResult {
        val monitor = options.monitor
        try {
            coroutineScope {
                val job = coroutineContext.job
                monitor?.attach(job)
                try {
                    if (!checkOnly) {
                        val t = meet()
                        team = t
                        t.startWatching { cause -> job.cancel(CancellationException(cause.message, cause)) }
                    }
                    try {
                        block()
                    } catch (_: CheckStop) {
                        return@coroutineScope // --check planned the first pair
                    }
                    team?.let { t -> gathered = t.gather(results.toList()) }
                    team?.barrier("the end of the run", last = true)
                } finally {
                    monitor?.detach(job)
                }
            }
        } catch (e: Throwable) {
            val t = team ?: throw e
            val recorded = t.failure
            // What this rank's own script threw is its own cause, whatever came back from the others meanwhile.
            val own = e !is CancellationException && e !is PeerException && e !is RdmaTimeoutException
            if (recorded != null && recorded !== e && !own) {
                recorded.addSuppressed(e)
                throw recorded
            }
            t.fail(e) // the others hear it from rank 0
            throw e
        } finally {
            monitor?.stopped()
            team?.close()
        }
        return RanksResult(rank, ranks, results.toList(), gathered).also { if (!checkOnly) onRanks?.invoke(it) }
    }

    /** The rendezvous, on the IO pool; a cancellation (Ctrl-C) closes its sockets, which ends it. */
    private suspend fun meet(): RankTeam {
        val coroutine = currentCoroutineContext()
        val sockets = ArrayList<Closeable>()
        return coroutineScope {
            var meeting = true
            val unblocker = launch(Dispatchers.IO) {
                try {
                    awaitCancellation()
                } finally {
                    if (meeting) synchronized(sockets) { sockets.toList() }.forEach { runCatching { it.close() } }
                }
            }
            try {
                withContext(Dispatchers.IO) {
                    val secret = options.token ?: ControlToken.userSecret()
                    RankTeam.meet(place, timeout, credentials(secret), sockets, ::note) { coroutine.isActive }
                }
            } finally {
                meeting = false
                unblocker.cancel()
            }
        }
    }

    /**
     * What the rendezvous proves, as a pair's handshake does ([Handshake.Credentials]): the secret,
     * and that every rank runs the same number of ranks, parameters and script.
     */
    private fun credentials(secret: ControlToken): Handshake.Credentials {
        val lines = listOf(FORMAT, "setting ranks=$ranks") + listOfNotNull(place.run?.let { "setting $RUN_SETTING=$it" }) + options.parameters.toSortedMap().map { (k, v) -> "parameter $k=$v" } +
            listOfNotNull(options.scenarioSource?.let { "script sha256=${Fingerprint.sha256(it)}" })
        return Handshake.Credentials(if (rank == 0) Role.SERVER else Role.CLIENT, Fingerprint.sha256(lines.joinToString("") { it + "\n" }),
            Fingerprint.sections(lines), lines, secret)
    }

    private fun note(line: String) {
        val text = printable(line, MAX_PEER_SENTENCE)
        options.monitor?.note(text) ?: System.err.println("rdma-run: rank $rank: $text")
    }

    override suspend fun forEachPeer(peers: Collection<Int>, block: suspend ScenarioScope.() -> Unit): List<ScenarioResult> {
        val chosen = peers.toList()
        chosen.firstOrNull { it !in 0 until ranks || it == rank }?.let {
            throw ScenarioException("forEachPeer: $it is not another rank (this is rank $rank of $ranks, the others are 0..${ranks - 1} but $rank)")
        }
        chosen.groupingBy { it }.eachCount().entries.firstOrNull { it.value > 1 }?.let {
            throw ScenarioException("forEachPeer names rank ${it.key} ${it.value} times: each pair runs once")
        }
        if (checkOnly) {
            // --check: the first pair's plan, up to its connect; nobody is met, and the run stops there.
            val first = chosen.firstOrNull() ?: return emptyList()
            Scenario(options.copy(peer = null, ranks = null), true, Pairing(null, "rank $first", RankPair(rank, first, ranks))).run(block)
            throw CheckStop
        }
        val t = team!!
        t.doing = "its pairs with ranks ${chosen.joinToString()}"
        val done = coroutineScope {
            chosen.map { p ->
                async {
                    try {
                        val monitor = options.pairMonitors?.invoke(RankPair(rank, p, ranks))
                        Scenario(options.copy(peer = t.peer(p), ranks = null, monitor = monitor, pairMonitors = null), false, t.peerOf(p)).run(block)
                    } catch (e: Exception) {
                        val named = naming(t.describe(p), e)
                        // Told now, before the other pairs are cancelled: their peers' failures must not come back first.
                        if (named !is CancellationException) t.fail(named)
                        throw named
                    }
                }
            }.awaitAll()
        }
        t.doing = null
        done.forEach { onResult?.invoke(it) }
        results += done
        return done
    }

    /**
     * A pair's peer failure or timeout [e], said of [who] ("rank 2 (host 10.0.0.3, pid 4242)")
     * unless its sentence names it already; same type. What the script threw is left as it is.
     */
    private fun naming(who: String, e: Exception): Exception {
        val message = e.message.orEmpty()
        if (e is CancellationException || message.contains(who)) return e
        return when (e) {
            is PeerException -> PeerException("$who: $message", e)
            is RdmaTimeoutException -> RdmaTimeoutException("with $who: $message", e)
            else -> e
        }
    }

    override suspend fun barrier() {
        team?.barrier()
    }

    /** `--check`: the first pair reported its plan; a Throwable, so that a script's `catch (e: Exception)` does not take it. */
    private object CheckStop : Throwable() {
        private fun readResolve(): Any = CheckStop
        override fun fillInStackTrace(): Throwable = this
    }

    private companion object {
        const val FORMAT = "rdma-run-ranks-1"
    }
}

/** What rdmaRanks { } says when it is not told which rank it is. */
internal const val NO_RANKS =
    "rdmaRanks { } does not know this process's rank: run it under mpirun, mpiexec or srun with 2 ranks or more (one process alone " +
        "is no run of ranks), with --rank K --ranks N --rendezvous HOST:PORT, with --listen/--peer (2 ranks), or pass RdmaOptions(ranks = Ranks(...))"

/** The rendezvous plan's line naming the launcher's run ([Ranks.run]): ranks of two runs differ there. */
internal const val RUN_SETTING = "launcher-run"
