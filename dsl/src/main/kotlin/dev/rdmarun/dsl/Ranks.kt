package dev.rdmarun.dsl

import java.net.ServerSocket
import kotlinx.serialization.Serializable

/**
 * This process's place in a run of several ranks: its [rank] of [size], and the [rendezvous]
 * where they meet (rank 0 listens there, [Peer.Listen]; every other rank connects to it,
 * [Peer.Connect]). A launcher makes one from `mpirun`'s, `mpiexec`'s or `srun`'s variables or
 * from `--rank K --ranks N --rendezvous HOST:PORT`; an application passes it as [RdmaOptions.ranks].
 * [localRank] is the process's rank among the ranks on its host, where the launcher says it
 * (`OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID`, `SLURM_LOCALID`), else null.
 */
public data class Ranks(
    val rank: Int,
    val size: Int,
    val rendezvous: Peer,
    val localRank: Int? = null,
    /**
     * The launcher's name for this run (its job: Open MPI's `PMIX_NAMESPACE`, Slurm's
     * `SLURM_JOB_ID.SLURM_STEP_ID`), or null: the ranks compare it at the rendezvous, so a rank of
     * another run that reaches the same port is refused with a sentence saying so, rather than
     * taken for one of this run's.
     */
    val run: String? = null,
) {
    init {
        require(size in 2..MAX_RANKS) { "a run of ranks has 2..$MAX_RANKS ranks, not $size" }
        require(rank in 0 until size) { "rank $rank is not one of the $size ranks 0..${size - 1}" }
        require((rank == 0) == (rendezvous is Peer.Listen)) {
            "rank 0 listens at the rendezvous (Peer.Listen) and every other rank connects to it (Peer.Connect): rank $rank was given $rendezvous"
        }
        require(localRank == null || localRank in 0 until size) { "local rank $localRank is not one of 0..${size - 1}" }
    }

    public companion object {
        /** The most ranks one run takes. */
        public const val MAX_RANKS: Int = 4096
    }
}

/** Which pair of ranks a [ScenarioResult] measured: this side's [rank], its peer's [peerRank], of [ranks]. */
@Serializable
public data class RankPair(val rank: Int, val peerRank: Int, val ranks: Int)

/**
 * The block of [rdmaRanks], run once on every rank: who this rank is, and the pairs it connects.
 *
 * Each pair of ranks is an ordinary two-peer scenario ([forEachPeer]): its own QPs, memory and
 * control connection, the lower rank its server. So any two-peer script body runs in a run of
 * ranks unchanged, once per peer, and measures what it measures today.
 */
@RdmaDsl
public interface RanksScope {
    /** This process's rank, 0 until [ranks]. */
    public val rank: Int

    /** How many ranks the run has. */
    public val ranks: Int

    /**
     * This process's rank among the ranks on its host, where the launcher says it
     * (`OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID`, `SLURM_LOCALID`; each rank of
     * `--loopback --ranks N` is its own rank), else null (`--rank`). For what is chosen per
     * process on a host: `device(devices[localRank % devices.size])`, a GID index, a CPU.
     */
    public val localRank: Int?

    /** Every other rank, in ascending order. */
    public val peers: List<Int>

    /** The script parameter [name] (`--set name=value`, a perftest flag), or [default]. */
    public fun param(name: String, default: String): String

    /**
     * Runs [block] once for each rank of [peers] (default: every other rank), all at once, each as
     * a two-peer scenario of its own with that rank: settings, `connect(peer)` (this pair's peer),
     * operations, as in `rdma { }`, with [CommonScope.rank] and [CommonScope.peerRank] saying which
     * pair it is, in every scope (`forEachQp` too); the lower rank is the pair's server. Returns once
     * every pair finished, with their results.
     *
     * Both ranks of a pair must name each other: rank 0 in `forEachPeer(listOf(3))` waits for
     * rank 3's `forEachPeer` that names rank 0 (the patterns [allToAll], [incast] and [ring] pair
     * ranks that way). A pair that fails ends the whole run on every rank ([rdmaRanks]).
     * Called again, it connects the pairs again (new QPs, same listeners).
     */
    public suspend fun forEachPeer(peers: Collection<Int> = this.peers, block: suspend ScenarioScope.() -> Unit): List<ScenarioResult>

    /**
     * Waits until every rank reached its barrier of the same number, through rank 0; every wait
     * ends at the latest when a rank fails or goes silent for the timeout.
     */
    public suspend fun barrier()
}

/** Every rank with every other: each pair once, both ranks in it ([RanksScope.forEachPeer] with every peer). */
public suspend fun RanksScope.allToAll(block: suspend ScenarioScope.() -> Unit): List<ScenarioResult> = forEachPeer(peers, block)

/** Every other rank with rank [to] (many senders, one receiver): rank [to] runs [block] with each, the others with [to] only. */
public suspend fun RanksScope.incast(to: Int = 0, block: suspend ScenarioScope.() -> Unit): List<ScenarioResult> {
    if (to !in 0 until ranks) throw ScenarioException("incast(to = $to): rank $to is not one of the $ranks ranks 0..${ranks - 1}")
    return forEachPeer(if (rank == to) peers else listOf(to), block)
}

/** Each rank with the next and the previous (rank + 1 and rank - 1, around): a ring of pairs. */
public suspend fun RanksScope.ring(block: suspend ScenarioScope.() -> Unit): List<ScenarioResult> =
    forEachPeer(setOf((rank + 1) % ranks, (rank + ranks - 1) % ranks), block)

/**
 * Runs [block] on this rank of a run of several ranks, **blocking the calling thread** (as [rdma]
 * does) until it and every pair it started finished; returns this rank's pair results and, on
 * rank 0, every rank's ([RanksResult], whose `table()` sums them up per rank and per pair).
 *
 * ```
 * rdmaRanks {
 *     allToAll {                       // once per other rank, all at once
 *         qps(2)
 *         remoteAccess(RemoteAccess.WRITE)
 *         connect(peer)                // this pair's peer: the lower rank listens
 *         forEachQp { repeat { write(); awaitCompletion() } }
 *     }
 *     barrier()
 * }
 * ```
 *
 * Where the ranks come from: [RdmaOptions.ranks] (a launcher sets it under `mpirun`, `mpiexec`,
 * `srun` or with `--rank/--ranks/--rendezvous`), else a two-peer run's [RdmaOptions.peer] (its
 * server is rank 0, its client rank 1), so the same script also runs with `--listen`/`--peer`.
 *
 * **The rendezvous.** Every rank first binds one TCP port (ephemeral) for each higher rank, then
 * meets rank 0 at the rendezvous over the control protocol: the same handshake as a pair's
 * (the secret proved both ways, the parameters and the script compared, every frame validated,
 * stray and wrong-token connections closed and counted), then its hello (rank, pid, ports). Rank 0
 * answers each rank, once all came, with every rank's host (as rank 0 saw it connect) and the
 * ports the lower ranks opened for it. Each pair then runs its own handshake on its own port.
 *
 * **Failures.** Rank 0 stays connected to every rank until the end, and each connection carries
 * heartbeats: a rank that fails tells rank 0, which tells every other rank; a rank that dies or
 * goes silent for the timeout is noticed by rank 0 and by its pairs. Either way every rank ends
 * with a failure that names the rank, its host and pid, and releases its verbs objects.
 * `--check` runs [block] up to the first pair's `connect(peer)` and meets nobody.
 */
public fun rdmaRanks(options: RdmaOptions = RdmaDefaults.options, block: suspend RanksScope.() -> Unit): RanksResult =
    kotlinx.coroutines.runBlocking { RankRun(options, RdmaDefaults.checkOnly, RdmaDefaults.onResult, RdmaDefaults.onRanks).run(block) }

/** How a pair scenario of a run of ranks differs from a two-peer one: the team's listener, its sentences and results. */
internal class Pairing(val listener: ServerSocket?, val peerLabel: String, val pair: RankPair)

/** The pair of a scenario's [role] in a two-peer run: the server is rank 0, the client rank 1. */
internal fun twoPeerPair(role: Role): RankPair = if (role == Role.SERVER) RankPair(0, 1, 2) else RankPair(1, 0, 2)
