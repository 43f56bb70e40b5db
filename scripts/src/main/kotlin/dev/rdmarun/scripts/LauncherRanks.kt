package dev.rdmarun.scripts

/**
 * This process's place in a run of several ranks: its [rank] of [ranks], as [launcher] numbers
 * them. [rendezvousHost] is where rank 0 runs when the launcher says so (Slurm's first node; the
 * loopback address when every rank is on this host), else null. [localRank]: its rank among the
 * ranks on its host, where the launcher says it. [run]: the launcher's job (Open MPI's and PMIx's
 * `PMIX_NAMESPACE`, Slurm's `SLURM_JOB_ID.SLURM_STEP_ID`; Hydra exports none), which the ranks
 * compare at the rendezvous, so that a rank of another run sharing the port is refused.
 */
data class RankPlace(val rank: Int, val ranks: Int, val launcher: String, val rendezvousHost: String?, val localRank: Int? = null,
                     /** The launcher's name for this run (its job), which every rank shares; null where it has none. */
                     val run: String? = null) {
    init {
        require(ranks >= 1 && rank in 0 until ranks) { "rank $rank is not one of 0..${ranks - 1}" }
    }
}

/**
 * Rank and size from the variables of the launcher that started this process, innermost first:
 * Open MPI's `mpirun`, MPICH's and Intel MPI's Hydra (`mpiexec`), PMIx, then Slurm's `srun`.
 * rdma-run never calls MPI: a launcher only starts the processes, and says who each one is.
 *
 * Where two launchers speak (an `mpirun` inside an `srun` step sees Slurm's `SLURM_PROCID` of its
 * step, 0 in every rank), they must agree: a rank that two launchers number differently cannot be
 * placed, and the run says so in one sentence naming both, rather than guess.
 */
object LauncherRanks {
    /** Ranks beyond this are a typo, not a run. */
    const val MAX_RANKS: Int = dev.rdmarun.dsl.Ranks.MAX_RANKS

    /** One launcher's variables; [size], [localSize], [localRank] and [nodes] are null where it has none. */
    private class Launcher(val name: String, val rank: String, val size: String?, val localSize: String?, val localRank: String?,
                           val nodes: String? = null, val needs: String? = null, val job: (env: (String) -> String?) -> String? = { null })

    private val LAUNCHERS = listOf(
        Launcher("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
            job = { env -> env("PMIX_NAMESPACE") ?: env("OMPI_MCA_ess_base_jobid") }),
        Launcher("MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS", "MPI_LOCALRANKID"),
        Launcher("PMIx", "PMIX_RANK", null, null, null, job = { env -> env("PMIX_NAMESPACE") }),
        // SLURM_PROCID is also set in a batch script, which is not a step of tasks: only srun's steps count.
        Launcher("Slurm", "SLURM_PROCID", "SLURM_NTASKS", null, "SLURM_LOCALID", nodes = "SLURM_STEP_NODELIST", needs = "SLURM_STEP_ID",
            job = { env -> env("SLURM_JOB_ID")?.let { job -> "$job.${env("SLURM_STEP_ID")}" } }),
    )

    /** What one launcher said. */
    private class Said(val launcher: Launcher, val rank: Int, val size: Int?, val host: String?, val localRank: Int?) {
        fun text(): String {
            val names = listOfNotNull(launcher.rank, launcher.size.takeIf { size != null }).joinToString(", ")
            return "${launcher.name} says rank $rank${if (size != null) " of $size" else ""} ($names)"
        }
    }

    /**
     * The place [env] gives (a variable's value, or null), or null when no launcher started this
     * process. Throws [IllegalArgumentException] with one sentence when a variable is not a
     * number in range, or two launchers disagree.
     */
    fun fromEnvironment(env: (String) -> String?): RankPlace? {
        val said = LAUNCHERS.mapNotNull { l -> read(l, env) }
        val first = said.firstOrNull() ?: return null
        for (other in said.drop(1)) {
            if (other.rank != first.rank || other.size != null && first.size != null && other.size != first.size) {
                throw IllegalArgumentException("the launchers disagree: ${first.text()} but ${other.text()}; " +
                    "start rdma-run under one launcher, or give --rank and --ranks")
            }
        }
        val size = said.firstNotNullOfOrNull { it.size }
            ?: throw IllegalArgumentException("${first.launcher.rank} gives this process's rank but no variable gives the number of ranks: give --ranks N")
        require(first.rank < size) { "${first.text()}: a rank must be below the number of ranks, $size" }
        return RankPlace(first.rank, size, first.launcher.name, said.firstNotNullOfOrNull { it.host }, said.firstNotNullOfOrNull { it.localRank },
            first.launcher.job(env)?.let { job -> job.filter { it.isLetterOrDigit() || it in "._:-" }.take(MAX_RUN).ifEmpty { null } })
    }

    /** Characters of a launcher's job name kept (they are shown to the other ranks in a sentence). */
    private const val MAX_RUN = 64

    private fun read(l: Launcher, env: (String) -> String?): Said? {
        val rankText = env(l.rank) ?: return null
        if (l.needs != null && env(l.needs) == null) return null
        val rank = number(l.rank, rankText, 0 until MAX_RANKS)
        val size = l.size?.let { v -> env(v)?.let { number(v, it, 1..MAX_RANKS) } }
        val local = l.localSize?.let { v -> env(v)?.let { number(v, it, 1..MAX_RANKS) } }
        val localRank = l.localRank?.let { v -> env(v)?.let { number(v, it, 0 until (local ?: size ?: MAX_RANKS)) } }
        val host = when {
            l.nodes != null -> env(l.nodes)?.let { Hostlist.expand(it).first() }
            size != null && local == size -> "127.0.0.1" // every rank on this host
            else -> null
        }
        return Said(l, rank, size, host, localRank)
    }

    private fun number(name: String, text: String, range: IntRange): Int =
        text.trim().toIntOrNull()?.takeIf { it in range }
            ?: throw IllegalArgumentException("$name is '${printable(text)}', not a whole number from ${range.first} to ${range.last}")

    private fun printable(text: String) = dev.rdmarun.dsl.printable(text.take(40))
}

/** Slurm's hostlist syntax: `node[01-04,07],gpu1` is node01..node04, node07 and gpu1 (zero padding kept). */
object Hostlist {
    /** Hosts beyond this are refused rather than expanded (a malformed range could name millions). */
    private const val MAX_HOSTS = 65536

    /** The hosts [text] names, in order; [IllegalArgumentException] with one sentence when it is not a hostlist. */
    fun expand(text: String): List<String> {
        val hosts = ArrayList<String>()
        for (item in topLevelItems(text)) {
            var names = listOf("")
            var rest = item
            while (rest.isNotEmpty()) {
                val open = rest.indexOf('[')
                if (open < 0) {
                    names = names.map { it + rest }
                    break
                }
                val close = rest.indexOf(']', open)
                require(close > open) { "the host list '${text.take(80)}' has a '[' without its ']'" }
                val prefix = rest.substring(0, open)
                val choices = rest.substring(open + 1, close).split(',').flatMap { range(it, text) }
                names = names.flatMap { n -> choices.map { n + prefix + it } }
                require(hosts.size + names.size <= MAX_HOSTS) { "the host list '${text.take(80)}' names more than $MAX_HOSTS hosts" }
                rest = rest.substring(close + 1)
            }
            hosts += names
        }
        require(hosts.isNotEmpty() && hosts.none { it.isBlank() }) { "the host list '${text.take(80)}' names no host" }
        return hosts
    }

    /** The comma-separated items outside brackets. */
    private fun topLevelItems(text: String): List<String> {
        val items = ArrayList<String>()
        var depth = 0
        var start = 0
        text.forEachIndexed { i, c ->
            when (c) {
                '[' -> depth++
                ']' -> depth--
                ',' -> if (depth == 0) { items += text.substring(start, i); start = i + 1 }
            }
            require(depth in 0..1) { "the host list '${text.take(80)}' has unbalanced brackets" }
        }
        items += text.substring(start)
        return items.map { it.trim() }.filter { it.isNotEmpty() }
    }

    /** `07` or `01-04`, padded to the first bound's width. */
    private fun range(part: String, text: String): List<String> {
        val bounds = part.trim().split('-')
        val lo = bounds[0]
        val hi = bounds.getOrElse(1) { lo }
        require(bounds.size <= 2 && lo.isNotEmpty() && lo.all(Char::isDigit) && hi.isNotEmpty() && hi.all(Char::isDigit)) {
            "the host list '${text.take(80)}' has '$part' where a number or a range like 01-04 belongs"
        }
        val from = lo.toLongOrNull() ?: -1
        val to = hi.toLongOrNull() ?: -1
        require(from in 0..to && to - from < MAX_HOSTS) { "the host list '${text.take(80)}' has the range '$part', which is empty or too long" }
        return (from..to).map { it.toString().padStart(lo.length, '0') }
    }
}
