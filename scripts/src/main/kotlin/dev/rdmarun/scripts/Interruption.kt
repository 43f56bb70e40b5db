package dev.rdmarun.scripts

import java.io.Closeable
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit

/**
 * Ctrl-C (SIGINT/SIGTERM) for a command that holds verbs objects. The JVM runs shutdown hooks
 * while the command's thread keeps running, and halts when the hooks return. So the hook here
 * never touches verbs objects (the poll loop may be using them): it raises [requested], closes
 * the socket the command is blocked on (if any) so accept/connect/read return, and then waits
 * (at most [CLEANUP_WAIT_MS]) until the command has left its `use` blocks, reported its failure
 * and called [close] ([RdmaCommand] does that).
 */
class Interruption : AutoCloseable {
    @Volatile
    var requested = false
        private set

    private val finished = CountDownLatch(1)
    private var blockedOn: Closeable? = null
    private val hook = Thread(::onSignal, "rdma-run-interrupt")

    init {
        Runtime.getRuntime().addShutdownHook(hook)
    }

    private fun onSignal() {
        requestStop()
        finished.await(CLEANUP_WAIT_MS, TimeUnit.MILLISECONDS)
    }

    /** What the signal does, without waiting: the command stops at its next check or blocking call. */
    internal fun requestStop() {
        requested = true
        synchronized(this) { blockedOn }?.let { runCatching { it.close() } }
    }

    /** Throws the "interrupted" failure (exit 130, as a shell reports SIGINT) once Ctrl-C came. */
    fun check() {
        if (requested) throw interrupted()
    }

    fun interrupted(cause: Throwable? = null) = CommandFailure("interrupted", exitCode = 130, cause = cause)

    /** Runs [block], which blocks on [resource]; Ctrl-C closes the resource to wake it up. */
    fun <C : Closeable, R> blockingOn(resource: C, block: (C) -> R): R {
        synchronized(this) {
            if (requested) throw interrupted()
            blockedOn = resource
        }
        try {
            return block(resource)
        } catch (e: Exception) {
            if (requested) throw interrupted(e)
            throw e
        } finally {
            synchronized(this) { if (blockedOn === resource) blockedOn = null }
        }
    }

    /** Call once every resource is closed: lets a pending shutdown proceed, and unregisters the hook. */
    override fun close() {
        finished.countDown()
        try {
            Runtime.getRuntime().removeShutdownHook(hook)
        } catch (_: IllegalStateException) {
            // shutdown already in progress: the hook is running or ran
        }
    }

    companion object {
        const val CLEANUP_WAIT_MS = 10_000L
    }
}
