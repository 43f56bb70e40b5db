package dev.rdmarun.dsl

import dev.rdmarun.runtime.VerbsException
import dev.rdmarun.runtime.engine.EngineException
import java.io.IOException
import kotlin.coroutines.jvm.internal.CoroutineStackFrame
import kotlinx.coroutines.TimeoutCancellationException

/**
 * The script a launcher runs, for sentences about what its code threw: [path] as the user gave it
 * (`samples/x.main.kts`), [fileName], the name its compiled classes carry in stack traces, and its
 * number of [lines]: a frame past them is code the compiler inlined from the DSL (`repeat { }`),
 * not a line of the script.
 */
public data class ScriptSource(val path: String, val fileName: String, val lines: Int = Int.MAX_VALUE)

/**
 * The line of [script] that threw [cause], if the script's own code threw it: any exception with
 * a frame of the script, except those the DSL, the runtime or a cancellation raise (their
 * sentences say what happened), which count only when the script itself threw them (a
 * `throw ScenarioException("...")` of its own: its innermost frame is the script's), a
 * [ScriptCallException] or an [EngineException.isCallError], whose line is the script's call that
 * was wrong, and the TimeoutCancellationException of the script's own `withTimeout { }` that ran
 * out, whose line is the script's call of `withTimeout`.
 */
public fun scriptLine(cause: Throwable, script: ScriptSource): Int? {
    fun scripts(f: StackTraceElement) = f.fileName == script.fileName && f.lineNumber in 1..script.lines
    // Thrown by kotlinx's timer thread, whose stack names no place: the line is where the script called withTimeout.
    if (cause is TimeoutCancellationException) return withTimeoutSite(cause)?.takeIf(::scripts)?.lineNumber
    if (cause is java.util.concurrent.CancellationException || cause is PeerException) return null
    val trace = cause.stackTrace
    val dsl = !isCallError(cause) && (cause is ScenarioException || cause is VerbsException || cause is EngineException ||
        cause is IOException || cause.javaClass.name.startsWith("dev.rdmarun."))
    val frame = if (dsl) trace.firstOrNull() else trace.firstOrNull(::scripts)
    return frame?.takeIf(::scripts)?.lineNumber
}

/** The DSL's own classes: frames of these are not the script's. */
private val DSL_DOMAIN = ScriptSource::class.java.protectionDomain

/**
 * The first of a suspended coroutine's frames, from [start] outwards, that is neither the DSL's
 * nor Kotlin's or kotlinx's: where the script's code made the call that suspended; null when none is.
 */
internal fun scriptFrame(start: CoroutineStackFrame?): StackTraceElement? {
    var frame = start
    while (frame != null) {
        val name = frame.javaClass.name
        if (frame.javaClass.protectionDomain != DSL_DOMAIN && !name.startsWith("kotlin.") && !name.startsWith("kotlinx.")) {
            return frame.getStackTraceElement()
        }
        frame = frame.callerFrame
    }
    return null
}

/**
 * Where the script called the `withTimeout { }` that threw [e]: kotlinx keeps the block's
 * TimeoutCoroutine in the exception's public JVM field `coroutine` (internal to Kotlin callers),
 * and that coroutine's caller frame is the script's continuation, still at the call. Null when the
 * field is gone (another kotlinx) or no frame is the script's.
 */
private fun withTimeoutSite(e: TimeoutCancellationException): StackTraceElement? {
    val coroutine = runCatching { TimeoutCancellationException::class.java.getField("coroutine").get(e) }.getOrNull()
    return scriptFrame(coroutine as? CoroutineStackFrame)
}

/**
 * [describeFailure], but what the script's own code threw ([scriptLine]) reads
 * `script failed at FILE:LINE: Type: message` (the message escaped, as any text that may reach a
 * peer or a terminal): the same words for this side's launcher and, in its failure report, the peer.
 */
public fun describeFailure(cause: Throwable, script: ScriptSource?): String {
    val line = script?.let { scriptLine(cause, it) } ?: return describeFailure(cause)
    val hint = ((cause as? ScenarioException)?.hint ?: (cause as? EngineException)?.hint())?.let { "\n  hint: ${printable(it)}" } ?: ""
    val at = "script failed at ${printable(script.path)}:$line: "
    if (isCallError(cause)) return at + printable(cause.message.orEmpty()) + hint
    if (cause is TimeoutCancellationException) return at + printable(describeFailure(cause))
    val type = cause.javaClass.simpleName.ifEmpty { cause.javaClass.name }
    return at + type + (cause.message?.let { ": ${printable(it)}" } ?: "") + hint
}

/** A call the script made wrongly, the DSL's or an operation's arguments the engine refused: its line is the script's. */
private fun isCallError(cause: Throwable) = cause is ScriptCallException || (cause is EngineException && cause.isCallError)

/**
 * A call the script should not have made as it did (a section name's second kind, an await with
 * nothing to await): thrown at the call, before it does anything, so that [scriptLine] names the
 * script's line that made it. Still a [ScenarioException] to whoever catches it.
 */
internal class ScriptCallException(message: String, hint: String? = null) : ScenarioException(message, hint = hint)
