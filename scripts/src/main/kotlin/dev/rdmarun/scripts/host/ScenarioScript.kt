package dev.rdmarun.scripts.host

import kotlin.script.experimental.annotations.KotlinScript
import kotlin.script.experimental.api.ResultWithDiagnostics
import kotlin.script.experimental.api.ScriptCompilationConfiguration
import kotlin.script.experimental.api.ScriptConfigurationRefinementContext
import kotlin.script.experimental.api.ScriptDiagnostic
import kotlin.script.experimental.api.ScriptEvaluationConfiguration
import kotlin.script.experimental.api.asSuccess
import kotlin.script.experimental.api.defaultImports
import kotlin.script.experimental.api.refineConfiguration
import kotlin.script.experimental.api.collectedAnnotations
import kotlin.script.experimental.dependencies.DependsOn
import kotlin.script.experimental.dependencies.Repository
import kotlin.script.experimental.jvm.dependenciesFromClassContext
import kotlin.script.experimental.jvm.jvm
import kotlin.script.experimental.jvm.jvmTarget

/**
 * The script definition of scenario files (`*.main.kts`). The files stay plain main-kts scripts,
 * so IntelliJ opens them with completion through their `@file:DependsOn("dev.rdmarun:rdma-dsl:…")`;
 * here the DSL is already on the classpath, so that annotation is accepted without resolving
 * anything (no network, no Maven), and any other dependency is refused with a clear error.
 *
 * The default imports are main-kts's own (the annotations), nothing more: a script imports the
 * DSL itself (`import dev.rdmarun.dsl.*`), so what compiles here compiles in the IDE and under
 * `kotlin FILE.main.kts`, and the other way round (StockMainKtsSpec checks the repository's).
 */
@KotlinScript(
    displayName = "rdma-run scenario",
    fileExtension = "main.kts",
    compilationConfiguration = ScenarioScriptCompilation::class,
    evaluationConfiguration = ScenarioScriptEvaluation::class,
)
abstract class ScenarioScript(val args: Array<String>)

/** Group of the artifacts the launcher itself supplies to scripts. */
const val SUPPLIED_GROUP = "dev.rdmarun:"

object ScenarioScriptCompilation : ScriptCompilationConfiguration({
    defaultImports(DependsOn::class, Repository::class)
    jvm {
        // The launcher's own classpath (DSL, runtime, coroutines) is the scripts' classpath.
        dependenciesFromClassContext(ScenarioScript::class, wholeClasspath = true)
        jvmTarget("25")
    }
    refineConfiguration {
        onAnnotations(DependsOn::class, Repository::class, handler = ::acceptSuppliedDependencies)
    }
}) {
    private fun readResolve(): Any = ScenarioScriptCompilation
}

/** The script's `args` are given per run ([ScenarioScriptHost.run]), as the constructor argument. */
object ScenarioScriptEvaluation : ScriptEvaluationConfiguration({}) {
    private fun readResolve(): Any = ScenarioScriptEvaluation
}

private fun acceptSuppliedDependencies(
    context: ScriptConfigurationRefinementContext,
): ResultWithDiagnostics<ScriptCompilationConfiguration> {
    val annotations = context.collectedData?.get(ScriptCollectedData.collectedAnnotations)
        ?: return context.compilationConfiguration.asSuccess()
    val refused = annotations.mapNotNull { located ->
        val annotation = located.annotation
        if (annotation is DependsOn) {
            val foreign = annotation.artifactsCoordinates.filterNot { it.startsWith(SUPPLIED_GROUP) }
            if (foreign.isEmpty()) null
            else ScriptDiagnostic(
                ScriptDiagnostic.unspecifiedError,
                "rdma-run supplies only its own DSL ($SUPPLIED_GROUP*); it does not download " +
                    foreign.joinToString() + ": put what the scenario needs into the DSL or a JVM program",
                ScriptDiagnostic.Severity.ERROR,
                locationWithId = located.location,
            )
        } else null
    }
    return if (refused.isEmpty()) context.compilationConfiguration.asSuccess()
    else ResultWithDiagnostics.Failure(refused)
}

private typealias ScriptCollectedData = kotlin.script.experimental.api.ScriptCollectedData
