package dev.rdmarun.bench

import kotlin.coroutines.Continuation
import kotlin.coroutines.EmptyCoroutineContext
import kotlin.coroutines.intrinsics.COROUTINE_SUSPENDED
import kotlin.coroutines.intrinsics.suspendCoroutineUninterceptedOrReturn
import kotlin.coroutines.resume
import kotlin.coroutines.startCoroutine

/**
 * The DSL's wait for a completion, alone (for `ResumeBench`): a coroutine that parks its own
 * continuation, as `QpDriver.park` does, and is resumed in place on the calling thread, as a
 * completion resumes it on the dispatcher thread. One [completion] = one resume and the next suspend.
 */
class ResumeLoop {
    private var waiter: Continuation<Unit>? = null
    private var rounds = 0L

    init {
        suspend {
            while (true) {
                suspendCoroutineUninterceptedOrReturn<Unit> { c -> waiter = c; COROUTINE_SUSPENDED }
                rounds++
            }
        }.startCoroutine(Continuation(EmptyCoroutineContext) { it.getOrThrow() })
    }

    /** Resumes the parked coroutine; returns when it has parked again. */
    fun completion(): Long {
        val c = waiter!!
        waiter = null
        c.resume(Unit)
        return rounds
    }
}
