package dev.rdmarun.dsl

import dev.rdmarun.runtime.SoftTransport
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.job
import kotlinx.coroutines.runBlocking

/**
 * What a launcher or an application passes besides the block: script parameters (compared with
 * the peer's and part of the fingerprint) and local overrides of device, GID index, port...
 */
public data class RdmaOptions(
    val parameters: Map<String, String> = emptyMap(),
    val overrides: SettingsOverrides = SettingsOverrides(),
    /** Called at `connect` with what it is about to create, after validation and before any device is touched. */
    val onPlan: ((ScenarioPlan) -> Unit)? = null,
    /** What the scenario reads as [ScenarioScope.peer] (a launcher's --listen/--peer); null: none given. */
    val peer: Peer? = null,
    /** Live totals and cancellation for a launcher (progress line, Ctrl-C). */
    val monitor: ScenarioMonitor? = null,
    /**
     * The script's text, or any string that identifies the scenario's code (a launcher passes the
     * script file's text): its SHA-256 is part of the fingerprint, so two peers running different
     * scripts are told so before anything runs. Null: only settings and parameters are compared.
     */
    val scenarioSource: String? = null,
    /**
     * The control connection's shared secret (see [ControlToken]): both sides must use the same
     * one. Null, the default, is the per-user secret ([ControlToken.userSecret], created on first
     * use): two processes of one user, or hosts sharing the home directory, need nothing else.
     * [ControlToken.none] opts out. A launcher passes `--token` / `RDMA_RUN_TOKEN` / `--no-token`.
     */
    val token: ControlToken? = null,
    /**
     * The script a launcher runs: what its own code throws is then reported, here and to the
     * peer, as `script failed at FILE:LINE: Type: message` ([describeFailure]). Null: an application.
     */
    val script: ScriptSource? = null,
    /**
     * How soft0 reaches the peer's context ([SoftTransport.MEMORY]: only in this JVM, no socket).
     * Null, the default: what the system property [SoftTransport.PROPERTY] says, else
     * [SoftTransport.AUTO] ([SoftTransport.configured]). A libibverbs device ignores it.
     */
    val softTransport: SoftTransport? = null,
    /**
     * This process's place in a run of several ranks, for [rdmaRanks] (a launcher sets it under
     * `mpirun`, `mpiexec`, `srun` or `--rank`); null: a two-peer run. `rdma { }` reads [peer] instead.
     */
    val ranks: Ranks? = null,
    /**
     * A monitor for each pair [RanksScope.forEachPeer] runs (its live totals: a launcher's interval
     * records and peak bandwidth per pair), asked each time the pair runs; null, or a null answer:
     * the pair runs unmonitored. Ctrl-C still goes through [monitor], which ends every pair.
     */
    val pairMonitors: ((RankPair) -> ScenarioMonitor?)? = null,
) {
    /** These parameters instead (for Java, which has no copy with named arguments). */
    public fun withParameters(parameters: Map<String, String>): RdmaOptions = copy(parameters = parameters)

    /** This peer instead. */
    public fun withPeer(peer: Peer?): RdmaOptions = copy(peer = peer)

    /** This control-connection token instead ([ControlToken.of]; null: the per-user secret). */
    public fun withToken(token: String?): RdmaOptions = copy(token = token?.let { ControlToken.of(it) })

    /** This place in a run of ranks instead (null: none). */
    public fun withRanks(ranks: Ranks?): RdmaOptions = copy(ranks = ranks)

    /** This soft0 transport instead (null: [SoftTransport.configured]). */
    public fun withSoftTransport(softTransport: SoftTransport?): RdmaOptions = copy(softTransport = softTransport)
}

/**
 * What a launcher sets before it evaluates a script, whose `rdma { }` takes no options: the
 * parameters and local overrides from its command line, `--check` ([checkOnly]: `rdma { }` then
 * runs the script up to `connect`, reports there what it would create through
 * [RdmaOptions.onPlan], touches no device and returns an empty result) and where finished
 * results go (`--json`, the results table).
 *
 * The properties are application-wide values; a launcher sets its own for one evaluation with
 * [forThisThread], which wins on that thread (and threads it starts), so two scripts can run at
 * once in one JVM (`--loopback`: server and client).
 */
public object RdmaDefaults {
    private class Launch(val options: RdmaOptions, val checkOnly: Boolean, val onResult: ((ScenarioResult) -> Unit)?,
                         val onRanks: ((RanksResult) -> Unit)?)

    private val launch = InheritableThreadLocal<Launch?>()

    @Volatile
    private var globalOptions = RdmaOptions()

    @Volatile
    private var globalCheckOnly = false

    @Volatile
    private var globalOnResult: ((ScenarioResult) -> Unit)? = null

    public var options: RdmaOptions
        get() = launch.get()?.options ?: globalOptions
        set(value) {
            globalOptions = value
        }

    public var checkOnly: Boolean
        get() = launch.get()?.checkOnly ?: globalCheckOnly
        set(value) {
            globalCheckOnly = value
        }

    public var onResult: ((ScenarioResult) -> Unit)?
        get() {
            val l = launch.get()
            return if (l != null) l.onResult else globalOnResult
        }
        set(value) {
            globalOnResult = value
        }

    /** Where each finished [rdmaRanks] goes (a launcher: rank 0's summary and gathered results), after its pairs went to [onResult]. */
    public val onRanks: ((RanksResult) -> Unit)? get() = launch.get()?.onRanks

    /** Runs [block] (a script evaluation) with these defaults on the calling thread instead of the application-wide ones. */
    public fun <T> forThisThread(options: RdmaOptions, checkOnly: Boolean = false, onResult: ((ScenarioResult) -> Unit)? = null,
                                 onRanks: ((RanksResult) -> Unit)? = null, block: () -> T): T {
        val previous = launch.get()
        launch.set(Launch(options, checkOnly, onResult, onRanks))
        try {
            return block()
        } finally {
            if (previous == null) launch.remove() else launch.set(previous)
        }
    }
}

/**
 * Runs a scenario and returns what it measured, **blocking the calling thread** until both sides
 * finished: the scenario's `runBlocking`, for scripts, `main` and tests.
 *
 * ```
 * val result = rdma {
 *     device("rxe0")
 *     qps(4)
 *     connect(peer)
 *     forEachQp { repeat(1000) { send(); awaitCompletion() } }
 * }
 * println(result.table())
 * ```
 *
 * **Blocking or suspending.** The names follow kotlinx's: `rdma { }` is to [rdmaScope] what
 * `runBlocking { }` is to `coroutineScope { }`. Both run the same scenario the same way (`rdma`
 * is `runBlocking { rdmaScope(options, block) }`), on the scenario's own thread; they differ only
 * in what the caller's thread does meanwhile:
 *
 * - `rdma { }` blocks it. Use it where nothing is suspended: a `.main.kts` script, `fun main`, a
 *   plain test. Never inside a coroutine: it would hold that coroutine's thread (on
 *   `Dispatchers.Default`, a core) for the whole run, as `runBlocking` would.
 * - `rdmaScope { }` is a `suspend fun`: it suspends the calling coroutine and frees its thread.
 *   Use it from coroutine code (an application's coroutines, both peers of a test in one
 *   `coroutineScope`, several scenarios at once). It is structured as `coroutineScope` is: it
 *   returns once the scenario and every coroutine it started (`forEachQp`) finished, and
 *   cancelling the caller cancels the scenario, which tears it down and tells the peer.
 * - Java has neither (no suspend lambdas): [RdmaJava.run] blocks, as `rdma` does.
 *
 * The block runs once, on the thread that polls the scenario's completion queues: settings, then
 * `connect(peer)`, which validates them and connects, then operations that post for real. When the
 * block returns, this side waits for its work to complete and for the peer to finish too.
 * Failures are [ScenarioException]s (one sentence, [ScenarioException.hint] when a likely fix is
 * known), [RdmaTimeoutException]s when a wait outlived the scenario's timeout (a
 * `java.util.concurrent.TimeoutException`, never a CancellationException),
 * [dev.rdmarun.runtime.engine.EngineException]s from an operation's call (its
 * [isCallError][dev.rdmarun.runtime.engine.EngineException.isCallError] true when the call's own
 * arguments were wrong, and nothing was posted), or the runtime's VerbsException.
 */
public fun rdma(options: RdmaOptions = RdmaDefaults.options, block: suspend ScenarioScope.() -> Unit): ScenarioResult =
    runBlocking { rdmaScope(options, block) }

/**
 * [rdma] for coroutine callers: runs the same scenario but **suspends** the caller instead of
 * blocking its thread, as `coroutineScope { }` does where `runBlocking { }` blocks (see [rdma]
 * for when to use which). Returns once the scenario and every coroutine it started finished;
 * cancelling the caller cancels the scenario (it is torn down and the peer told), and its failures
 * are [rdma]'s. Two peers in one process:
 *
 * ```
 * coroutineScope {
 *     val server = async(Dispatchers.IO) { rdmaScope(RdmaOptions(peer = Peer.listen(port))) { connect(peer); ... } }
 *     val client = async(Dispatchers.IO) { rdmaScope(RdmaOptions(peer = Peer.connect("127.0.0.1", port))) { connect(peer); ... } }
 *     server.await() to client.await()
 * }
 * ```
 */
public suspend fun rdmaScope(options: RdmaOptions = RdmaDefaults.options, block: suspend ScenarioScope.() -> Unit): ScenarioResult {
    // Read once, on the caller's thread: the rest runs on the scenario's own thread.
    val checkOnly = RdmaDefaults.checkOnly
    val onResult = RdmaDefaults.onResult
    val monitor = options.monitor
    // Its own scope, so that the monitor's cancel() ends this scenario and nothing else of the caller.
    val result = coroutineScope {
        val job = coroutineContext.job
        monitor?.attach(job)
        try {
            Scenario(options, checkOnly).run(block)
        } finally {
            monitor?.detach(job)
        }
    }
    if (!checkOnly) onResult?.invoke(result)
    return result
}

/** [rdmaScope]'s former name: a `run` name reads like kotlinx's blocking `runBlocking`, where this one suspends as `coroutineScope` does. */
@Deprecated("Renamed to rdmaScope, after kotlinx's coroutineScope: a run- name reads like the blocking runBlocking",
    ReplaceWith("rdmaScope(options, block)"))
public suspend fun runRdma(options: RdmaOptions = RdmaDefaults.options, block: suspend ScenarioScope.() -> Unit): ScenarioResult =
    rdmaScope(options, block)

/** What reading `peer` says when neither a launcher nor the application gave one. */
internal const val NO_PEER =
    "the scenario reads `peer` but none was given: run it with rdma-run --listen, --peer or --loopback, or pass RdmaOptions(peer = ...)"

/** What reading `peer` in `rdma { }` says in a run of more than two ranks. */
internal fun twoPeerScenarioInRanks(ranks: Ranks): String =
    "this process is rank ${ranks.rank} of ${ranks.size}, and rdma { } runs between two peers: " +
        "run the block once per peer with rdmaRanks { allToAll { ... } } (or forEachPeer, incast, ring; see samples/alltoall.main.kts)"
