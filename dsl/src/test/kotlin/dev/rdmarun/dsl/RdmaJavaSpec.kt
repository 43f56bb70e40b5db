package dev.rdmarun.dsl

import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldBeEmpty

/**
 * RdmaJava's promise, the same operations as `rdma { }`: every public member of the Kotlin scopes
 * has a Java counterpart of the same name, but for the Kotlin-only forms listed here.
 */
class RdmaJavaSpec : FunSpec({
    /**
     * Members of the Kotlin scopes that Java reaches under another name, with that name: a
     * Duration is Kotlin's (the suspend blocks of server { }, qp { }... are Consumers in Java,
     * under the same names).
     */
    val kotlinOnly = mapOf("timeout" to "timeoutMillis")

    // A Kotlin name with an inline-class parameter is mangled ("timeout-LRDsOJo"): the part before the dash is the name.
    fun names(type: Class<*>): Set<String> =
        type.methods.filter { it.declaringClass != Any::class.java && !it.isSynthetic }.map { it.name.substringBefore('-') }.toSet()

    fun missing(kotlin: Class<*>, java: Class<*>): List<String> {
        val javaNames = names(java)
        return names(kotlin).filter { it !in javaNames && kotlinOnly[it]?.let { alias -> alias in javaNames } != true }.sorted()
    }

    test("every operation of QpScope has a JavaQp counterpart") {
        missing(QpScope::class.java, JavaQp::class.java).shouldBeEmpty()
    }

    test("every operation of ScenarioScope has a JavaScenario counterpart") {
        missing(ScenarioScope::class.java, JavaScenario::class.java).shouldBeEmpty()
    }
})
