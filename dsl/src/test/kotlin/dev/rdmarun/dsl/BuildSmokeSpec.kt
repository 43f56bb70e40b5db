package dev.rdmarun.dsl

import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.runBlocking

// Placeholder proving the Kotlin + coroutines + kotest + surefire wiring runs a spec.
class BuildSmokeSpec : FunSpec({
    test("runBlocking returns the sum computed by child coroutines") {
        val sum = runBlocking { (1..10).map { n -> async { n * n } }.awaitAll().sum() }
        sum shouldBe 385
    }
})
