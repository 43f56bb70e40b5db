package dev.rdmarun.dsl

import dev.rdmarun.runtime.PollingDispatcher
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.ScheduledThreadPoolExecutor
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicLong
import kotlin.coroutines.CoroutineContext
import kotlin.coroutines.resume
import kotlinx.coroutines.CancellableContinuation
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.Delay
import kotlinx.coroutines.DisposableHandle
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.InternalCoroutinesApi
import kotlinx.coroutines.Job
import kotlinx.coroutines.cancel

/**
 * The runtime's polling thread as a coroutine dispatcher: scenario coroutines post work requests
 * on the thread that polls their CQs, so the data path needs no locks and no thread hops. A
 * completion resumes the coroutine that waits for it directly, inside the poll loop (QpDriver);
 * everything else (launches, kotlinx's own resumptions) goes through the dispatcher's task queue.
 *
 * It is also the scenario's [Delay], only to count the timers in progress ([delaysPending]): a
 * coroutine in `delay()`, or in a `select { onTimeout }` or `withTimeout { }` (kotlinx's
 * [invokeOnTimeout]), will go on by itself, so its side is not stalled, even when the coroutine has
 * children that wait (PeerProgress cannot see that from the jobs alone). For the same reason it
 * counts what it dispatches ([dispatched]): a coroutine that keeps being resumed (a `yield()` loop)
 * is running, whatever its children wait for.
 */
@OptIn(InternalCoroutinesApi::class)
internal class VerbsDispatcher(val polling: PollingDispatcher) : CoroutineDispatcher(), Delay {
    private val delays = AtomicInteger()
    private val dispatches = AtomicLong()

    /** The scenario's timers now running on this dispatcher: `delay()`s, `withTimeout`s and `select`'s `onTimeout`s. */
    val delaysPending: Int get() = delays.get()

    /** How many resumptions and launches this dispatcher was given so far (not the completions the poll loop resumes). */
    val dispatched: Long get() = dispatches.get()

    override fun dispatch(context: CoroutineContext, block: Runnable) {
        dispatches.incrementAndGet()
        try {
            polling.execute(block)
        } catch (e: RejectedExecutionException) {
            // The scenario is being torn down: cancel the coroutine and let it finish elsewhere,
            // as kotlinx's executor dispatchers do.
            context[Job]?.cancel("the RDMA dispatcher is closed", e)
            Dispatchers.IO.dispatch(context, block)
        }
    }

    override fun scheduleResumeAfterDelay(timeMillis: Long, continuation: CancellableContinuation<Unit>) {
        // Dispatched to the polling thread: the continuation is intercepted.
        val timer = countedTimer(timeMillis) { continuation.resume(Unit) }
        continuation.invokeOnCancellation { timer.dispose() }
    }

    // The block dispatches what it resumes itself (kotlinx's contract): it runs on the timer thread.
    override fun invokeOnTimeout(timeMillis: Long, block: Runnable, context: CoroutineContext): DisposableHandle =
        countedTimer(timeMillis, block::run)

    /** Runs [action] on the timer thread after [timeMillis], counted in [delaysPending] until it runs or is disposed. */
    private fun countedTimer(timeMillis: Long, action: () -> Unit): DisposableHandle {
        delays.incrementAndGet()
        val over = AtomicBoolean()
        fun end() {
            if (over.compareAndSet(false, true)) delays.decrementAndGet()
        }
        val timer = TIMER.schedule({
            end()
            action()
        }, timeMillis, TimeUnit.MILLISECONDS)
        return DisposableHandle {
            timer.cancel(false)
            end()
        }
    }

    override fun toString() = "VerbsDispatcher"

    private companion object {
        /** One daemon thread for every scenario's delays: it only hands each resumption to its dispatcher. */
        val TIMER = ScheduledThreadPoolExecutor(1) { r -> Thread.ofPlatform().name("rdma-run-delay").daemon(true).unstarted(r) }
            .apply { removeOnCancelPolicy = true }
    }
}
