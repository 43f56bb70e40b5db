package dev.rdmarun.scripts

import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain

/** Rank and size from the launchers' variables, and Slurm's host lists. */
class LauncherRanksSpec : FunSpec({
    fun place(vararg vars: Pair<String, String>) = LauncherRanks.fromEnvironment(mapOf(*vars)::get)
    fun refused(vararg vars: Pair<String, String>) = shouldThrow<IllegalArgumentException> { place(*vars) }.message!!

    test("no launcher: no place") {
        place() shouldBe null
        place("SLURM_PROCID" to "0", "SLURM_NTASKS" to "2") shouldBe null // a batch script, not a step of tasks
    }

    test("each launcher's own variables") {
        place("OMPI_COMM_WORLD_RANK" to "1", "OMPI_COMM_WORLD_SIZE" to "2", "OMPI_COMM_WORLD_LOCAL_SIZE" to "2") shouldBe
            RankPlace(1, 2, "Open MPI", "127.0.0.1")
        place("OMPI_COMM_WORLD_RANK" to "3", "OMPI_COMM_WORLD_SIZE" to "4", "OMPI_COMM_WORLD_LOCAL_SIZE" to "2") shouldBe
            RankPlace(3, 4, "Open MPI", null) // ranks on other hosts: where rank 0 runs is not known
        place("PMI_RANK" to "0", "PMI_SIZE" to "2", "MPI_LOCALNRANKS" to "2") shouldBe RankPlace(0, 2, "MPICH/Hydra", "127.0.0.1")
        place("SLURM_PROCID" to "2", "SLURM_NTASKS" to "4", "SLURM_STEP_ID" to "0", "SLURM_STEP_NODELIST" to "node[07-08]") shouldBe
            RankPlace(2, 4, "Slurm", "node07")
    }

    test("the launcher's job names the run, kept to a short plain name; Hydra exports none") {
        place("OMPI_COMM_WORLD_RANK" to "1", "OMPI_COMM_WORLD_SIZE" to "2", "PMIX_NAMESPACE" to "1300430849")!!.run shouldBe "1300430849"
        place("OMPI_COMM_WORLD_RANK" to "1", "OMPI_COMM_WORLD_SIZE" to "2", "OMPI_MCA_ess_base_jobid" to "77")!!.run shouldBe "77"
        place("SLURM_PROCID" to "2", "SLURM_NTASKS" to "4", "SLURM_STEP_ID" to "3", "SLURM_JOB_ID" to "1042")!!.run shouldBe "1042.3"
        place("PMI_RANK" to "0", "PMI_SIZE" to "2")!!.run shouldBe null
        place("PMIX_RANK" to "0", "OMPI_COMM_WORLD_SIZE" to "2", "OMPI_COMM_WORLD_RANK" to "0",
            "PMIX_NAMESPACE" to "job\u001b[2J;" + "x".repeat(100))!!.run shouldBe "job2J" + "x".repeat(59)
    }

    test("the local rank, where the launcher gives it, checked against the ranks on the host") {
        place("OMPI_COMM_WORLD_RANK" to "3", "OMPI_COMM_WORLD_SIZE" to "4", "OMPI_COMM_WORLD_LOCAL_SIZE" to "2",
            "OMPI_COMM_WORLD_LOCAL_RANK" to "1")!!.localRank shouldBe 1
        place("PMI_RANK" to "1", "PMI_SIZE" to "2", "MPI_LOCALRANKID" to "1")!!.localRank shouldBe 1
        place("SLURM_PROCID" to "2", "SLURM_NTASKS" to "4", "SLURM_STEP_ID" to "0", "SLURM_LOCALID" to "0")!!.localRank shouldBe 0
        place("PMI_RANK" to "1", "PMI_SIZE" to "2")!!.localRank shouldBe null
        refused("OMPI_COMM_WORLD_RANK" to "3", "OMPI_COMM_WORLD_SIZE" to "4", "OMPI_COMM_WORLD_LOCAL_SIZE" to "2",
            "OMPI_COMM_WORLD_LOCAL_RANK" to "2") shouldBe "OMPI_COMM_WORLD_LOCAL_RANK is '2', not a whole number from 0 to 1"
    }

    test("launchers that agree: the innermost names the place, another may add rank 0's host") {
        place("PMIX_RANK" to "1", "OMPI_COMM_WORLD_RANK" to "1", "OMPI_COMM_WORLD_SIZE" to "2") shouldBe RankPlace(1, 2, "Open MPI", null)
        place("PMIX_RANK" to "1", "SLURM_PROCID" to "1", "SLURM_NTASKS" to "2", "SLURM_STEP_ID" to "3", "SLURM_STEP_NODELIST" to "a,b") shouldBe
            RankPlace(1, 2, "PMIx", "a")
    }

    test("launchers that disagree: one sentence naming both") {
        refused("OMPI_COMM_WORLD_RANK" to "3", "OMPI_COMM_WORLD_SIZE" to "4", "SLURM_PROCID" to "0", "SLURM_NTASKS" to "1", "SLURM_STEP_ID" to "0") shouldBe
            "the launchers disagree: Open MPI says rank 3 of 4 (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE) but Slurm says rank 0 of 1 " +
            "(SLURM_PROCID, SLURM_NTASKS); start rdma-run under one launcher, or give --rank and --ranks"
        refused("OMPI_COMM_WORLD_RANK" to "1", "OMPI_COMM_WORLD_SIZE" to "2", "PMI_RANK" to "1", "PMI_SIZE" to "4") shouldContain
            "but MPICH/Hydra says rank 1 of 4"
    }

    test("a variable that is no rank, or a rank past the size, is refused by name") {
        refused("OMPI_COMM_WORLD_RANK" to "one", "OMPI_COMM_WORLD_SIZE" to "2") shouldBe
            "OMPI_COMM_WORLD_RANK is 'one', not a whole number from 0 to 4095"
        refused("PMI_RANK" to "2", "PMI_SIZE" to "2") shouldBe "MPICH/Hydra says rank 2 of 2 (PMI_RANK, PMI_SIZE): a rank must be below the number of ranks, 2"
        refused("PMI_RANK" to "0", "PMI_SIZE" to "0") shouldContain "PMI_SIZE is '0'"
        refused("PMIX_RANK" to "0") shouldBe "PMIX_RANK gives this process's rank but no variable gives the number of ranks: give --ranks N"
    }

    test("Slurm's host lists") {
        Hostlist.expand("node[01-04,07]") shouldBe listOf("node01", "node02", "node03", "node04", "node07")
        Hostlist.expand("gpu1,cpu[9-10]") shouldBe listOf("gpu1", "cpu9", "cpu10")
        Hostlist.expand("rack[1-2]-n[0-1]") shouldBe listOf("rack1-n0", "rack1-n1", "rack2-n0", "rack2-n1")
        Hostlist.expand(" solo ") shouldBe listOf("solo")
        for (bad in listOf("", "node[1-", "node[a-b]", "node[3-1]", "node[]", "n[[1]]", "n[0-99999999]")) {
            shouldThrow<IllegalArgumentException> { Hostlist.expand(bad) }.message!! shouldContain "the host list"
        }
    }
})
