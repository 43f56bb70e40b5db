package dev.rdmarun.scripts

import java.io.Closeable
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicBoolean
import java.util.logging.Handler
import java.util.logging.Level
import java.util.logging.LogRecord
import java.util.logging.Logger

/**
 * Ctrl-C (SIGINT/SIGTERM) and `System.exit` for a command that holds verbs objects. The JVM runs
 * shutdown hooks while the command's thread keeps running, and halts when the hooks return. So
 * the hook here never touches verbs objects (the poll loop may be using them): it raises
 * [requested], closes the socket the command is blocked on (if any) so accept/connect/read
 * return, and then waits (at most [GRACE_MS]) until the command has left its `use` blocks,
 * reported its failure and called [close] ([RdmaCommand] does that).
 *
 * A command that does not get there in time (a script busy in `while (true) {}` never reaches a
 * suspension point, so cancelling its scenario does nothing) is left behind: the hook says
 * "interrupted" itself ([report]) and the JVM exits; the kernel releases the verbs objects with
 * the process's device files, and soft0's live in the process.
 *
 * A script's `System.exit(n)` also runs the hooks, on the thread that called it, which never
 * returns: the command cannot finish, so the hook does not wait for it, says so and lets the
 * JVM exit with n.
 */
class Interruption(private val report: (String) -> Unit = {}) : AutoCloseable {
    @Volatile
    var requested = false
        private set

    private val finished = CountDownLatch(1)
    private var blockedOn: Closeable? = null
    private val hook = Thread(::onSignal, "rdma-run-interrupt")
    private val reported = AtomicBoolean()

    init {
        ExitWatcher.install()
        Runtime.getRuntime().addShutdownHook(hook)
    }

    private fun onSignal() {
        val exitStatus = ExitWatcher.exitStatus
        requestStop()
        if (exitStatus != null) {
            if (claimReport()) report("the script called System.exit($exitStatus)")
            return
        }
        if (!finished.await(GRACE_MS, TimeUnit.MILLISECONDS) && claimReport()) report("interrupted")
    }

    /**
     * True the first time only: the end of a run is reported once, by the command after its
     * cleanup, or by the hook once the grace period is over.
     */
    fun claimReport(): Boolean = reported.compareAndSet(false, true)

    /** What the signal does, without waiting: the command stops at its next check or blocking call. */
    internal fun requestStop() {
        requested = true
        synchronized(this) { blockedOn }?.let { runCatching { it.close() } }
    }

    /** Throws the "interrupted" failure (exit 130, as a shell reports SIGINT) once Ctrl-C came. */
    fun check() {
        if (requested) throw interrupted()
    }

    fun interrupted(cause: Throwable? = null) = CommandFailure("interrupted", ExitStatus.INTERRUPTED, cause)

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
        /** How long a Ctrl-C waits for the command to tear its scenario down before the JVM exits anyway. */
        const val GRACE_MS = 3_000L
    }
}

/**
 * Learns the status of a `System.exit` / `Runtime.exit` call, which a shutdown hook is not told:
 * since JDK 21 `Runtime.exit` logs its status to the `java.lang.Runtime` logger at DEBUG (FINE),
 * before the hooks run. Signals go through the same log call but not through `Runtime.exit`,
 * which tells the two apart. Nothing is printed.
 */
internal object ExitWatcher {
    private val STATUS = Regex("""Runtime\.exit\((-?\d+)\)""")

    // Held here: java.util.logging keeps only weak references to loggers.
    private val logger: Logger = Logger.getLogger("java.lang.Runtime")

    /** The status given to Runtime.exit, once it was called; null before, and for signals. */
    @Volatile
    var exitStatus: Int? = null
        private set

    private val installed = AtomicBoolean()

    fun install() {
        if (!installed.compareAndSet(false, true)) return
        logger.useParentHandlers = false
        logger.level = Level.FINE
        logger.addHandler(object : Handler() {
            override fun publish(record: LogRecord) {
                val thrown = record.thrown ?: return
                if (thrown.stackTrace.none { it.className == "java.lang.Runtime" && it.methodName == "exit" }) return
                exitStatus = STATUS.find(thrown.message.orEmpty())?.groupValues?.get(1)?.toIntOrNull()
            }

            override fun flush() {}
            override fun close() {}
        })
    }
}
