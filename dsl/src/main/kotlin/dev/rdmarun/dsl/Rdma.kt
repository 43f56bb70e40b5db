package dev.rdmarun.dsl

import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.job
import kotlinx.coroutines.runBlocking

/**
 * What a launcher or an application passes besides the block: script parameters (compared with
 * the peer's and part of the fingerprint) and local overrides of device, GID index, port...
 */
data class RdmaOptions(
    val parameters: Map<String, String> = emptyMap(),
    val overrides: SettingsOverrides = SettingsOverrides(),
    /** Called with the validated plan before any device is touched (to print it, say). */
    val onPlan: ((ScenarioPlan) -> Unit)? = null,
    /** What the scenario reads as [ScenarioScope.peer] (a launcher's --listen/--peer); null: none given. */
    val peer: Peer? = null,
    /** Live totals and cancellation for a launcher (progress line, Ctrl-C). */
    val monitor: ScenarioMonitor? = null,
)

/**
 * What a launcher sets before it evaluates a script, whose `rdma { }` takes no options: the
 * parameters and local overrides from its command line, `--check` ([planOnly]: `rdma { }` then
 * validates and reports the plan through [RdmaOptions.onPlan], touches no device and returns an
 * empty result) and where finished results go (`--json`, the results table).
 *
 * The properties are application-wide values; a launcher sets its own for one evaluation with
 * [forThisThread], which wins on that thread (and threads it starts), so two scripts can run at
 * once in one JVM (`--loopback`: server and client).
 */
object RdmaDefaults {
    private class Launch(val options: RdmaOptions, val planOnly: Boolean, val onResult: ((ScenarioResult) -> Unit)?)

    private val launch = InheritableThreadLocal<Launch?>()

    @Volatile
    private var globalOptions = RdmaOptions()

    @Volatile
    private var globalPlanOnly = false

    @Volatile
    private var globalOnResult: ((ScenarioResult) -> Unit)? = null

    var options: RdmaOptions
        get() = launch.get()?.options ?: globalOptions
        set(value) {
            globalOptions = value
        }

    var planOnly: Boolean
        get() = launch.get()?.planOnly ?: globalPlanOnly
        set(value) {
            globalPlanOnly = value
        }

    var onResult: ((ScenarioResult) -> Unit)?
        get() {
            val l = launch.get()
            return if (l != null) l.onResult else globalOnResult
        }
        set(value) {
            globalOnResult = value
        }

    /** Runs [block] (a script evaluation) with these defaults on the calling thread instead of the application-wide ones. */
    fun <T> forThisThread(options: RdmaOptions, planOnly: Boolean = false, onResult: ((ScenarioResult) -> Unit)? = null, block: () -> T): T {
        val previous = launch.get()
        launch.set(Launch(options, planOnly, onResult))
        try {
            return block()
        } finally {
            if (previous == null) launch.remove() else launch.set(previous)
        }
    }
}

/**
 * Runs a scenario and returns what it measured; blocks the calling thread (scripts, `main`).
 *
 * ```
 * val result = rdma {
 *     device("rxe0")
 *     qps(4)
 *     connect(peer)
 *     forEachQp { repeat(1000) { send(); receive() } }
 * }
 * println(result.table())
 * ```
 *
 * The block runs twice: a plan pass that records and validates the scenario before any device
 * is touched, then the run (see [CommonScope]). Failures are [ScenarioException]s (one sentence,
 * [ScenarioException.hint] when a likely fix is known) or the runtime's VerbsException.
 */
fun rdma(options: RdmaOptions = RdmaDefaults.options, block: suspend ScenarioScope.() -> Unit): ScenarioResult =
    runBlocking { runRdma(options, block) }

/** [rdma] for coroutine callers: suspends instead of blocking; cancelling it tears the scenario down. */
suspend fun runRdma(options: RdmaOptions = RdmaDefaults.options, block: suspend ScenarioScope.() -> Unit): ScenarioResult {
    // Read once, on the caller's thread: the rest may run on other threads.
    val planOnly = RdmaDefaults.planOnly
    val onResult = RdmaDefaults.onResult
    val monitor = options.monitor
    // Its own scope, so that the monitor's cancel() ends this scenario and nothing else of the caller.
    val result = coroutineScope {
        val job = coroutineContext.job
        monitor?.attach(job)
        try {
            val plan = planOf(options, block, placeholderPeer = planOnly)
            options.onPlan?.invoke(plan)
            if (planOnly) {
                ScenarioResult.empty(plan.peer?.role ?: Role.CLIENT, plan.settings.device ?: "(first device)", plan.settings.qps)
            } else {
                Session(plan, options).run(block)
            }
        } finally {
            monitor?.detach(job)
        }
    }
    onResult?.invoke(result)
    return result
}

/**
 * Only the plan pass: the validated plan (QPs, buffers, access flags, operations) without
 * touching any device — what `rdma-run --check` prints. Without [RdmaOptions.peer], `peer` is a
 * placeholder here (the plan then shows no peer).
 */
fun planScenario(options: RdmaOptions = RdmaDefaults.options, block: suspend ScenarioScope.() -> Unit): ScenarioPlan =
    runBlocking { planOf(options, block, placeholderPeer = true) }

internal suspend fun planOf(options: RdmaOptions, block: suspend ScenarioScope.() -> Unit, placeholderPeer: Boolean): ScenarioPlan {
    val recorder = PlanRecorder(options.parameters, options.peer ?: if (placeholderPeer) PLACEHOLDER_PEER else null)
    PlanningScenarioScope(recorder).block()
    val plan = recorder.finish()
    val effective = plan.copy(
        settings = options.overrides.applyTo(plan.settings),
        peer = plan.peer.takeUnless { it === PLACEHOLDER_PEER },
    )
    Validation.checkSettings(effective.settings)
    return effective
}

/** `peer` in a plan-only pass that was given none (`rdma-run --check`); compared by identity. */
private val PLACEHOLDER_PEER: Peer = Peer.Listen(Peer.DEFAULT_PORT)

/** What reading `peer` says when neither a launcher nor the application gave one. */
internal const val NO_PEER =
    "the scenario reads `peer` but none was given: run it with rdma-run --listen, --peer or --loopback, or pass RdmaOptions(peer = ...)"
