package dev.rdmarun.scripts

/**
 * The statuses rdma-run exits with. The commands exit through these, and `rdma-run run --help` and
 * the man page ([ManPage]) list them from here, so that what is documented is what is declared.
 * [brief]: the words of `run --help`; [meaning]: the man page's.
 *
 * Not in the list because rdma-run does not choose them: a script's own `System.exit(n)` ends the
 * JVM with n ([SCRIPT_EXIT]). Usage errors are clikt's, which exits 1 ([FAILURE]) for them.
 */
enum class ExitStatus(val code: Int, val brief: String, val meaning: String) {
    SUCCESS(0, "success", "success (with --loopback: both sides)"),
    FAILURE(1, "the run failed",
        "the command failed: the cause on standard error, with a hint where one is known (what the script's " +
            "own code threw as \"script failed at FILE:LINE: Type: message\"); a usage error (a wrong option or value: " +
            "the usage line and the error); \"devices\" when the kernel has no RDMA device"),
    SCRIPT_UNUSABLE(2, "the file is not a script that compiles or it runs no rdma { }",
        "the script cannot run: it does not compile (the compiler's errors on standard error), is not a Kotlin " +
            "script (binary, not UTF-8), or runs no rdma { } block"),
    INTERRUPTED(130, "interrupted",
        "interrupted by Ctrl-C (SIGINT), within about ${Interruption.GRACE_MS / 1000} s even when the script is busy in a loop; the scenario " +
            "is torn down first where it can be"),
    ;

    companion object {
        /** The status rdma-run passes on rather than chooses, in the words of `run --help` and the man page. */
        const val SCRIPT_EXIT = "the script called System.exit(n)"

        /** `0 success, 1 the run failed, ..., n the script called System.exit(n)`: `run --help`'s sentence. */
        fun summary(): String = (entries.map { "${it.code} ${it.brief}" } + "n $SCRIPT_EXIT").joinToString(", ")
    }
}
