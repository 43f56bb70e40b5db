package dev.rdmarun.scripts

import dev.rdmarun.dsl.ScenarioMonitor

/**
 * Waits for [thread], which runs a side's script, and gives up on it once its scenario failed (its
 * own failure or its peer's) while its script kept running in its own code for [graceMs]: a loop
 * that never suspends, which cancelling the scenario does not reach, so its `rdma { }` would never
 * return and the side would never end. Returns null when the thread ended, else that failure. The
 * busy code and its verbs objects are left to the process's exit, as after Ctrl-C ([Interruption]).
 */
internal fun awaitOrGiveUp(thread: Thread, monitor: ScenarioMonitor, graceMs: Long = Interruption.GRACE_MS): StuckScenarioException? {
    while (true) {
        thread.join(CHECK_MS)
        if (!thread.isAlive) return null
        if (monitor.runningAfterFailureNanos() > graceMs * 1_000_000) monitor.failure?.let { return StuckScenarioException(it) }
    }
}

private const val CHECK_MS = 100L

/** [cause], the failure of a scenario whose script kept running in its own code after it. */
internal class StuckScenarioException(cause: Throwable) : Exception(cause.message, cause)
