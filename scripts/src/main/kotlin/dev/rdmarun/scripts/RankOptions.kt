package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.UsageError
import com.github.ajalt.clikt.parameters.groups.OptionGroup
import com.github.ajalt.clikt.parameters.options.convert
import com.github.ajalt.clikt.parameters.options.option
import com.github.ajalt.clikt.parameters.types.int
import com.github.ajalt.clikt.parameters.types.restrictTo
import dev.rdmarun.dsl.Peer
import dev.rdmarun.scripts.ScenarioCommand.Companion.usage

/**
 * A run of ranks: each process learns its rank and the number of ranks from the launcher that
 * started it ([LauncherRanks]: `mpirun`, `mpiexec`, `srun`), or from `--rank K --ranks N`, and
 * meets rank 0 at the rendezvous ([dev.rdmarun.dsl.rdmaRanks]). Two ranks are also today's two
 * sides: rank 0 listens there (the server), rank 1 connects to it (the client), so a two-peer
 * script runs unchanged under a launcher.
 */
class RankOptions : OptionGroup(
    "ranks (mpirun, mpiexec, srun)",
    "Under mpirun, mpiexec or srun each process takes its rank from the launcher; every rank meets rank 0 at the rendezvous " +
        "(of 2 ranks, rank 0 is the server and rank 1 its client)",
) {
    private val rank by option("--rank", metavar = "K",
        help = "This process's rank, where no launcher gives it: 0 listens at the rendezvous, the others connect to it (needs --ranks)")
        .int().restrictTo(0 until LauncherRanks.MAX_RANKS)
    private val ranks by option("--ranks", metavar = "N",
        help = "The number of ranks (default: the launcher's); with --loopback, that many ranks in this JVM")
        .int().restrictTo(1..LauncherRanks.MAX_RANKS)
    private val rendezvous by option("--rendezvous", metavar = "HOST|HOST:PORT",
        help = "Where rank 0 listens and the others connect (default: Slurm's first node, or this host when the launcher " +
            "put every rank here; TCP port ${Peer.DEFAULT_PORT} unless given, or -p)")
        .convert { text -> usage { text to ScenarioCommand.parsePeer(text) } }

    /** Whether a rank option is on the command line (a side given with --listen, --peer or --loopback excludes them). */
    val given: Boolean get() = rank != null || ranks != null || rendezvous != null

    /** `--loopback --ranks N`: N, when --ranks is the only rank option (every rank in this JVM); else null. */
    val loopbackRanks: Int? get() = ranks.takeIf { rank == null && rendezvous == null }

    /**
     * This process's place from the options and [env] (the launcher's variables), or null when
     * neither makes it a rank of a run. Usage errors name what is missing or contradicts.
     */
    fun place(env: (String) -> String?): RankPlace? {
        val fromLauncher = try {
            LauncherRanks.fromEnvironment(env)
        } catch (e: IllegalArgumentException) {
            // --rank says where this process is: unreadable launcher variables are then not in the way.
            if (rank == null) throw UsageError(e.message ?: "the launcher's variables cannot be read") else null
        }
        val place = when {
            rank != null -> {
                val n = ranks ?: throw UsageError("--rank $rank needs --ranks N, the number of ranks")
                if (rank!! >= n) throw UsageError("--rank $rank is not one of the $n ranks 0..${n - 1}")
                // Every process of `mpirun -np 4 rdma-run ... --rank 0` would be rank 0: say so, never guess.
                if (fromLauncher != null && fromLauncher.ranks > 1 && (fromLauncher.rank != rank || fromLauncher.ranks != n)) {
                    throw UsageError("--rank $rank --ranks $n but ${fromLauncher.launcher} says this process is rank ${fromLauncher.rank} of " +
                        "${fromLauncher.ranks}: under a launcher leave --rank and --ranks out")
                }
                RankPlace(rank!!, n, "--rank", null)
            }
            fromLauncher != null -> {
                val n = ranks
                if (n != null && n != fromLauncher.ranks) {
                    throw UsageError("--ranks $n but ${fromLauncher.launcher} started ${fromLauncher.ranks} ranks: give the launcher's count, or leave --ranks out")
                }
                // One process is no run of ranks: `mpirun -np 1 rdma-run ...` is a run of its own.
                if (fromLauncher.ranks == 1 && !given) return null
                fromLauncher
            }
            given -> throw UsageError("--ranks and --rendezvous need this process's rank: give --rank K, or start rdma-run under mpirun, mpiexec or srun")
            else -> return null
        }
        if (place.ranks == 1) throw UsageError("a run of 1 rank has no peer: give --ranks 2, or run both sides in this JVM with --loopback")
        return place
    }

    /** Where this rank meets rank 0: the host (null for rank 0, which listens) and the port (-p is [tcpPort]). */
    fun peer(place: RankPlace, tcpPort: Int?): Peer {
        val (text, at) = rendezvous ?: (null to null)
        val named = at?.port?.takeIf { text != null && ScenarioCommand.namesPort(text) }
        if (named != null && tcpPort != null && named != tcpPort) {
            throw UsageError("--rendezvous $text and -p/--port $tcpPort give different TCP ports: give the port once")
        }
        val port = named ?: tcpPort ?: Peer.DEFAULT_PORT
        if (place.rank == 0) return Peer.Listen(port)
        val host = at?.host ?: place.rendezvousHost
            ?: throw UsageError("rank ${place.rank} of ${place.ranks} (${place.launcher}) does not know where rank 0 runs: give --rendezvous HOST, rank 0's host")
        return Peer.Connect(host, port)
    }
}
