package dev.rdmarun.scripts

import com.github.ajalt.clikt.testing.test
import io.kotest.assertions.withClue
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldNotContain
import java.io.File
import java.nio.file.Files

/**
 * A process as a rank of a run: from `--rank/--ranks/--rendezvous` or a launcher's variables to
 * the side it plays (rank 0 the server, rank 1 its client), seen through `--check`'s plan.
 */
class RankOptionsSpec : FunSpec({
    val dir = Files.createTempDirectory("rank-options").toFile()
    val cache = File(dir, "cache")
    afterSpec { dir.deleteRecursively() }
    val script = File(dir, "two.main.kts").apply {
        writeText("@file:DependsOn(\"dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT\")\n\nimport dev.rdmarun.dsl.*\n\nrdma { connect(peer); send() }\n")
    }

    fun run(env: Map<String, String>, vararg args: String) =
        rdmaRun(cache).test(withImplicitRun(arrayOf(script.path, "--check", *args)).toList(), envvars = env)

    val none = emptyMap<String, String>()
    val openMpiRank1 = mapOf("OMPI_COMM_WORLD_RANK" to "1", "OMPI_COMM_WORLD_SIZE" to "2", "OMPI_COMM_WORLD_LOCAL_SIZE" to "2")

    test("rank 0 listens at the rendezvous and rank 1 connects to it, from the options or the launcher") {
        val cases = listOf(
            Triple(none, listOf("--rank", "0", "--ranks", "2"), "rank 0 of 2 (--rank): the server, listen on *:18515"),
            Triple(none, listOf("--rank", "1", "--ranks", "2", "--rendezvous", "node7:18600"), "rank 1 of 2 (--rank): the client, connect to node7:18600"),
            Triple(none, listOf("--rank", "1", "--ranks", "2", "--rendezvous", "node7", "-p", "18601"), "the client, connect to node7:18601"),
            Triple(openMpiRank1, emptyList(), "rank 1 of 2 (Open MPI): the client, connect to 127.0.0.1:18515"),
            Triple(openMpiRank1, listOf("--ranks", "2", "-p", "18602"), "rank 1 of 2 (Open MPI): the client, connect to 127.0.0.1:18602"),
            // --rank that agrees with the launcher: the rendezvous host is then --rendezvous's.
            Triple(openMpiRank1, listOf("--rank", "1", "--ranks", "2", "--rendezvous", "h0"), "rank 1 of 2 (--rank): the client, connect to h0:18515"),
            Triple(mapOf("SLURM_PROCID" to "1", "SLURM_NTASKS" to "2", "SLURM_STEP_ID" to "0", "SLURM_STEP_NODELIST" to "n[03-04]"),
                emptyList(), "rank 1 of 2 (Slurm): the client, connect to n03:18515"),
            Triple(mapOf("PMI_RANK" to "0", "PMI_SIZE" to "2"), emptyList(), "rank 0 of 2 (MPICH/Hydra): the server, listen on *:18515"),
        )
        for ((env, args, said) in cases) {
            val result = run(env, *args.toTypedArray())
            withClue("$env $args\n${result.output}") {
                result.statusCode shouldBe 0
                result.stderr shouldContain said
                result.stdout shouldContain "peer: " + said.substringAfter(", ")
            }
        }
    }

    test("more than 2 ranks: rdmaRanks { } plans its first pair, and a two-peer rdma { } is told to use it") {
        val ranks = File(dir, "ranks.main.kts").apply {
            writeText("@file:DependsOn(\"dev.rdmarun:rdma-dsl:0.1.0-SNAPSHOT\")\n\nimport dev.rdmarun.dsl.*\n\nrdmaRanks { java.io.File(param(\"out\", \"\")).writeText(\"local rank \$localRank\"); allToAll { qps(3); connect(peer); send() } }\n")
        }
        // The script writes its local rank to the file `out` (its println is not the command's output here).
        val out = File(dir, "local-rank.txt")
        val planned = rdmaRun(cache).test(withImplicitRun(arrayOf(ranks.path, "--check", "--rank", "3", "--ranks", "4", "--rendezvous", "h",
            "--set", "out=$out")).toList())
        withClue(planned.output) {
            planned.statusCode shouldBe 0
            planned.stderr shouldContain "rank 3 of 4 (--rank): rendezvous: connect to h:18515"
            planned.stdout shouldContain "QPs: 3 RC"
            out.readText() shouldBe "local rank null"
        }
        // The launcher's local rank reaches the script.
        val launched = rdmaRun(cache).test(withImplicitRun(arrayOf(ranks.path, "--check", "--rendezvous", "h", "--set", "out=$out")).toList(), envvars = mapOf(
            "OMPI_COMM_WORLD_RANK" to "3", "OMPI_COMM_WORLD_SIZE" to "4", "OMPI_COMM_WORLD_LOCAL_SIZE" to "2", "OMPI_COMM_WORLD_LOCAL_RANK" to "1"))
        withClue(launched.output) { out.readText() shouldBe "local rank 1" }
        val twoPeer = run(none, "--rank", "0", "--ranks", "4")
        withClue(twoPeer.output) {
            twoPeer.statusCode shouldBe 1
            twoPeer.stderr shouldContain "rank 0 of 4 (--rank): the rendezvous, listen on *:18515"
            twoPeer.stderr shouldContain "this process is rank 0 of 4, and rdma { } runs between two peers: " +
                "run the block once per peer with rdmaRanks { allToAll { ... } }"
        }
    }

    // The sample fails a rank whose payload is wrong: exit 0 says every rank checked every byte.
    test("--loopback --ranks 3 runs every rank in this JVM: each writes to the others and checks what they wrote") {
        val sample = File("../samples/alltoall.main.kts").path
        val result = rdmaRun(cache).test(withImplicitRun(arrayOf(sample, "--loopback", "--ranks", "3", "-d", "soft0",
            "--set", "warmup=0", "--set", "preflight=0", "--set", "iterations=20", "--set", "size=4K")).toList())
        withClue(result.output) {
            result.statusCode shouldBe 0
            result.stderr shouldContain "loopback: 3 ranks in this JVM"
            result.stdout shouldContain "loopback on soft0: all 3 ranks succeeded"
            result.stdout shouldContain "ranks: 3, 6 pair results gathered on rank 0"
            result.stdout shouldContain "pair matrix"
            for ((r, p) in listOf(0 to 1, 0 to 2, 1 to 0, 1 to 2, 2 to 0, 2 to 1)) result.stdout shouldContain "rank $r with rank $p on soft0"
        }
        val one = rdmaRun(cache).test(withImplicitRun(arrayOf(sample, "--loopback", "--ranks", "1")).toList())
        one.statusCode shouldBe 1
        one.stderr shouldContain "Error: --loopback --ranks 1: a run of ranks has at least 2"
    }

    test("a launcher of one process, or none, leaves the side to --listen, --peer and --loopback") {
        run(mapOf("OMPI_COMM_WORLD_RANK" to "0", "OMPI_COMM_WORLD_SIZE" to "1"), "--listen", "18603").stdout shouldContain "peer: listen on *:18603"
        run(openMpiRank1 - "OMPI_COMM_WORLD_RANK", "--peer", "h").stdout shouldContain "peer: connect to h:18515"
        run(mapOf("OMPI_COMM_WORLD_RANK" to "0", "OMPI_COMM_WORLD_SIZE" to "1")).stderr shouldNotContain "rank 0"
    }

    test("what cannot place this process is one sentence, and nothing runs") {
        val refusals = listOf(
            none to listOf("--rank", "1") to "--rank 1 needs --ranks N, the number of ranks",
            none to listOf("--rank", "2", "--ranks", "2") to "--rank 2 is not one of the 2 ranks 0..1",
            none to listOf("--ranks", "2") to
                "--ranks and --rendezvous need this process's rank: give --rank K, or start rdma-run under mpirun, mpiexec or srun",
            none to listOf("--rank", "0", "--ranks", "1") to
                "a run of 1 rank has no peer: give --ranks 2, or run both sides in this JVM with --loopback",
            none to listOf("--rank", "0", "--ranks", "2", "--listen", "18604") to
                "--rank, --ranks and --rendezvous make this process a rank of a run; --listen, --peer and --loopback choose a side: give one or the other",
            none to listOf("--rank", "1", "--ranks", "2", "--rendezvous", "h:1", "-p", "2") to
                "--rendezvous h:1 and -p/--port 2 give different TCP ports: give the port once",
            openMpiRank1 to listOf("--ranks", "3") to "--ranks 3 but Open MPI started 2 ranks: give the launcher's count, or leave --ranks out",
            openMpiRank1 to listOf("--rank", "0", "--ranks", "2") to
                "--rank 0 --ranks 2 but Open MPI says this process is rank 1 of 2: under a launcher leave --rank and --ranks out",
            (openMpiRank1 + ("OMPI_COMM_WORLD_LOCAL_SIZE" to "1")) to emptyList<String>() to
                "rank 1 of 2 (Open MPI) does not know where rank 0 runs: give --rendezvous HOST, rank 0's host",
            (openMpiRank1 + mapOf("SLURM_PROCID" to "0", "SLURM_NTASKS" to "1", "SLURM_STEP_ID" to "4")) to emptyList<String>() to
                "the launchers disagree: Open MPI says rank 1 of 2 (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE) but Slurm says rank 0 of 1 " +
                "(SLURM_PROCID, SLURM_NTASKS); start rdma-run under one launcher, or give --rank and --ranks",
        )
        for ((given, sentence) in refusals) {
            val (env, args) = given
            val result = run(env, *args.toTypedArray())
            withClue("$env $args\n${result.output}") {
                result.statusCode shouldBe 1
                result.stderr shouldContain "Error: $sentence"
                result.stdout shouldNotContain "scenario plan"
            }
        }
    }
})
