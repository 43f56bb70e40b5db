package dev.rdmarun.scripts

import com.github.ajalt.clikt.core.CliktCommand
import com.github.ajalt.clikt.core.CliktError
import com.github.ajalt.clikt.core.ProgramResult
import com.github.ajalt.clikt.core.UsageError
import com.github.ajalt.clikt.core.findOrSetObject
import com.github.ajalt.clikt.core.terminal
import dev.rdmarun.runtime.VerbsException
import java.io.IOException

/** Options of the root command that subcommands read (set by [RdmaRun.run] before they run). */
class GlobalOptions(var debug: Boolean = false)

/**
 * A failure the command explains itself: printed as one line on stderr, then exit with [status].
 * The message says what went wrong and, where known, what to do. [namesFile]: the message names
 * the file itself, so the line starts with plain `rdma-run:` instead of the command's prefix.
 */
class CommandFailure(
    message: String,
    val status: ExitStatus = ExitStatus.FAILURE,
    cause: Throwable? = null,
    val namesFile: Boolean = false,
) : RuntimeException(message, cause) {
    val exitCode: Int get() = status.code
}

/**
 * Base of the rdma-run subcommands: runs [execute] and turns the failures people cause (no RDMA in
 * the kernel, libibverbs missing, a wrong device or GID index, a peer that went away) into one line
 * on stderr and a non-zero exit. The stack trace is printed only with `rdma-run --debug`.
 */
abstract class RdmaCommand(name: String) : CliktCommand(name = name) {
    private val global by findOrSetObject { GlobalOptions() }

    private var interruption: Interruption? = null

    /** `rdma-run --debug`: stack traces on errors, and diagnostics some commands print. */
    protected val debug: Boolean get() = global.debug || debugOption

    /** A command's own `--debug` (given after its name), for commands people type without the root's. */
    protected open val debugOption: Boolean get() = false

    /** What error lines start with. */
    protected open val errorPrefix: String get() = "rdma-run $commandName"

    protected abstract fun execute()

    /**
     * Ctrl-C handling for a command that holds verbs objects (see [Interruption]). It is released
     * only after the command's failure, if any, has been reported, so that a Ctrl-C still prints
     * "interrupted" before the JVM halts.
     */
    protected fun interruption(): Interruption =
        interruption ?: Interruption { sayFromHook("$errorPrefix: $it") }.also { interruption = it }

    /** How the shutdown hook's sentence ("interrupted", a script's System.exit) is printed: on stderr. */
    protected open fun sayFromHook(text: String) = emit(text, err = true)

    final override fun run() {
        try {
            execute()
        } catch (e: CliktError) {
            // Usage errors and exit codes: clikt reports them. One found after parsing gets this
            // command's usage line, not the top-level one clikt gives an error without a context.
            if (e is UsageError && e.context == null) e.context = currentContext
            throw e
        } catch (e: VerbsException) {
            fail(oneLine(e), e, ExitStatus.FAILURE)
        } catch (e: UnsatisfiedLinkError) {
            // LibIbverbs says which packages to install when libibverbs.so.1 is missing.
            fail(e.message ?: e.toString(), e, ExitStatus.FAILURE)
        } catch (e: CommandFailure) {
            // After Ctrl-C, "interrupted" is said once: here, or by the shutdown hook if the command was late.
            if (e.status == ExitStatus.INTERRUPTED && interruption?.claimReport() == false) throw ProgramResult(e.exitCode)
            fail(e.message ?: "failed", e, e.status, if (e.namesFile) "rdma-run" else errorPrefix)
        } catch (e: WireFormatException) {
            fail(e.message ?: "bad message from the peer", e, ExitStatus.FAILURE)
        } catch (e: IOException) {
            fail(e.message ?: e.toString(), e, ExitStatus.FAILURE)
        } catch (e: RuntimeException) {
            fail("internal error: $e" + if (debug) "" else " (rdma-run --debug shows the stack trace)", e, ExitStatus.FAILURE)
        } finally {
            interruption?.close()
            interruption = null
        }
    }

    /**
     * Prints [text] and a newline exactly as given, on stdout or stderr. (clikt's echo renders
     * through mordant, which would expand the tabs that ibv_devices and show_gids print.)
     */
    protected fun emit(text: String, err: Boolean = false) = terminal.rawPrint(text + "\n", stderr = err)

    private fun fail(message: String, cause: Throwable, status: ExitStatus, prefix: String = errorPrefix): Nothing {
        emit("$prefix: $message", err = true)
        if (debug) emit(cause.stackTraceToString().trimEnd(), err = true)
        throw ProgramResult(status.code)
    }

    companion object {
        /** A [VerbsException] on one line: the message, then the hint when there is one. */
        fun oneLine(e: VerbsException): String =
            if (e.hint() == null) e.message.orEmpty() else "${e.message}; hint: ${e.hint()}"
    }
}
