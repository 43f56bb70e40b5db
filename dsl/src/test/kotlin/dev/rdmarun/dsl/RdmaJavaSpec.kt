package dev.rdmarun.dsl

import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldBeEmpty
import kotlin.reflect.KClass
import kotlin.reflect.KFunction
import kotlin.reflect.KParameter
import kotlin.reflect.KVisibility
import kotlin.reflect.full.findAnnotation
import kotlin.reflect.full.memberFunctions
import kotlin.reflect.full.memberProperties

/**
 * RdmaJava's promise, the same operations as `rdma { }`: every operation is declared once, in
 * [ScenarioScope] or [QpScope], and the Java entry point only bridges it (a blocking call on the
 * scenario's thread). So every public member of the Kotlin scopes has a Java bridge of the same
 * name taking the same parameters (names, types, which ones are optional), but for the
 * Kotlin-only forms listed here; a bridge that drifts from its declaration fails this spec.
 */
class RdmaJavaSpec : FunSpec({
    /** Members Java reaches under another name: a Duration is Kotlin's. */
    val kotlinOnly = mapOf("timeout" to "timeoutMillis")

    fun KFunction<*>.shown(): String = "$name(" + valueParameters().joinToString { p ->
        // A suspend block is a Consumer or Supplier in Java: only its name must match.
        val type = p.type.toString().let { if ("->" in it || it.startsWith("java.util.function.")) "block" else it }
        "${p.name}: $type${if (p.isOptional) " = ..." else ""}"
    } + ")"

    /** A member deprecated at ERROR level is a signpost to the right scope, not an operation: it has no bridge. */
    fun KFunction<*>.signpost(): Boolean = findAnnotation<Deprecated>()?.level == DeprecationLevel.ERROR

    fun public(type: KClass<*>): List<KFunction<*>> =
        type.memberFunctions.filter {
            it.visibility == KVisibility.PUBLIC && it.name !in setOf("equals", "hashCode", "toString") && !it.signpost()
        }

    /** The Kotlin declarations of [kotlin] that [java] has no bridge for, shown with their parameters. */
    fun missing(kotlin: KClass<*>, java: KClass<*>): List<String> {
        val bridges = public(java).map { it.shown() }.toSet() + java.memberProperties.map { it.name }
        val functions = public(kotlin).filter { f -> kotlinOnly[f.name]?.let { alias -> public(java).none { it.name == alias } } ?: true }
            .map { it.shown() }.filter { it !in bridges }
        val properties = kotlin.memberProperties.filter { it.visibility == KVisibility.PUBLIC }.map { it.name }.filter { it !in bridges }
        return (functions + properties).sorted()
    }

    test("every operation of QpScope has a JavaQp bridge with its parameters") {
        missing(QpScope::class, JavaQp::class).shouldBeEmpty()
    }

    test("every operation of ScenarioScope has a JavaScenario bridge with its parameters") {
        missing(ScenarioScope::class, JavaScenario::class).shouldBeEmpty()
    }
})

private fun KFunction<*>.valueParameters(): List<KParameter> = parameters.filter { it.kind == KParameter.Kind.VALUE }
