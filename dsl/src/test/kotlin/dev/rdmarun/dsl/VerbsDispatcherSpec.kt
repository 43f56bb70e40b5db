package dev.rdmarun.dsl

import dev.rdmarun.runtime.IdleMode
import dev.rdmarun.runtime.PollingDispatcher
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext
import kotlinx.coroutines.yield

/** Scenario coroutines run on the runtime's polling thread (no device needed: a dispatcher without CQs). */
class VerbsDispatcherSpec : FunSpec({
    for (mode in IdleMode.entries) {
        test("coroutines stay on the $mode polling thread across suspensions and interleave there") {
            PollingDispatcher.start("spec-$mode", mode, null).use { polling ->
                val order = mutableListOf<String>()
                val onThread = withContext(VerbsDispatcher(polling)) {
                    coroutineScope {
                        for (name in listOf("a", "b")) launch {
                            repeat(3) { i ->
                                order.add("$name$i") // no lock: only the polling thread touches it
                                yield()
                            }
                        }
                    }
                    polling.isDispatcherThread()
                }
                onThread shouldBe true
                order shouldBe listOf("a0", "b0", "a1", "b1", "a2", "b2")
            }
        }
    }
})
