package dev.rdmarun.dsl

import dev.rdmarun.runtime.PollingDispatcher
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.ScheduledThreadPoolExecutor
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicInteger
import kotlin.coroutines.CoroutineContext
import kotlin.coroutines.resume
import kotlinx.coroutines.CancellableContinuation
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.Delay
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
 * It is also the scenario's [Delay], only to count the `delay()`s in progress ([delaysPending]):
 * a coroutine in `delay()` will go on by itself, so its side is not stalled, even when the
 * coroutine has children that wait (PeerProgress cannot see that from the jobs alone).
 */
@OptIn(InternalCoroutinesApi::class)
internal class VerbsDispatcher(val polling: PollingDispatcher) : CoroutineDispatcher(), Delay {
    private val delays = AtomicInteger()

    /** The scenario's coroutines now in `delay()` on this dispatcher. */
    val delaysPending: Int get() = delays.get()

    override fun dispatch(context: CoroutineContext, block: Runnable) {
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
        delays.incrementAndGet()
        val over = AtomicBoolean()
        fun end() {
            if (over.compareAndSet(false, true)) delays.decrementAndGet()
        }
        val timer = TIMER.schedule({
            end()
            continuation.resume(Unit) // dispatched to the polling thread: the continuation is intercepted
        }, timeMillis, TimeUnit.MILLISECONDS)
        continuation.invokeOnCancellation {
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
