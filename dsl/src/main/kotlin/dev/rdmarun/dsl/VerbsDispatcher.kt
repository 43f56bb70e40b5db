package dev.rdmarun.dsl

import dev.rdmarun.runtime.PollingDispatcher
import java.util.concurrent.RejectedExecutionException
import kotlin.coroutines.CoroutineContext
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.cancel

/**
 * The runtime's polling thread as a coroutine dispatcher: scenario coroutines post work requests
 * on the thread that polls their CQs, so the data path needs no locks and no thread hops. A
 * completion resumes the coroutine that waits for it directly, inside the poll loop (QpDriver);
 * everything else (launches, kotlinx's own resumptions) goes through the dispatcher's task queue.
 */
internal class VerbsDispatcher(val polling: PollingDispatcher) : CoroutineDispatcher() {
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

    override fun toString() = "VerbsDispatcher"
}
