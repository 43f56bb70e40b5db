package dev.rdmarun.dsl

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
)

/**
 * What a launcher sets before it evaluates a script, whose `rdma { }` takes no options: the
 * parameters and local overrides from its command line, `--check` ([planOnly]: `rdma { }` then
 * validates and reports the plan through [RdmaOptions.onPlan], touches no device and returns an
 * empty result) and where finished results go (`--json`, the results table).
 */
object RdmaDefaults {
    @Volatile
    var options: RdmaOptions = RdmaOptions()

    @Volatile
    var planOnly: Boolean = false

    @Volatile
    var onResult: ((ScenarioResult) -> Unit)? = null
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
    val plan = planOf(options, block)
    options.onPlan?.invoke(plan)
    val result = if (RdmaDefaults.planOnly) {
        ScenarioResult.empty(plan.peer?.role ?: Role.CLIENT, plan.settings.device ?: "(first device)", plan.settings.qps)
    } else {
        Session(plan, options.parameters).run(block)
    }
    RdmaDefaults.onResult?.invoke(result)
    return result
}

/**
 * Only the plan pass: the validated plan (QPs, buffers, access flags, operations) without
 * touching any device — what `rdma-run --check` prints.
 */
fun planScenario(options: RdmaOptions = RdmaDefaults.options, block: suspend ScenarioScope.() -> Unit): ScenarioPlan =
    runBlocking { planOf(options, block) }

internal suspend fun planOf(options: RdmaOptions, block: suspend ScenarioScope.() -> Unit): ScenarioPlan {
    val recorder = PlanRecorder(options.parameters)
    PlanningScenarioScope(recorder).block()
    val plan = recorder.finish()
    val effective = plan.copy(settings = options.overrides.applyTo(plan.settings))
    Validation.checkSettings(effective.settings)
    return effective
}
