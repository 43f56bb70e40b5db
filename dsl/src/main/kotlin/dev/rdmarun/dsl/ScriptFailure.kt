package dev.rdmarun.dsl

import dev.rdmarun.runtime.VerbsException
import dev.rdmarun.runtime.engine.EngineException
import java.io.IOException

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
 * `throw ScenarioException("...")` of its own: its innermost frame is the script's), and a
 * [ScriptCallException] or an [EngineException.isCallError], whose line is the script's call that was wrong.
 */
public fun scriptLine(cause: Throwable, script: ScriptSource): Int? {
    if (cause is java.util.concurrent.CancellationException || cause is PeerException) return null
    val trace = cause.stackTrace
    val dsl = !isCallError(cause) && (cause is ScenarioException || cause is VerbsException || cause is EngineException ||
        cause is IOException || cause.javaClass.name.startsWith("dev.rdmarun."))
    fun scripts(f: StackTraceElement) = f.fileName == script.fileName && f.lineNumber in 1..script.lines
    val frame = if (dsl) trace.firstOrNull() else trace.firstOrNull(::scripts)
    return frame?.takeIf(::scripts)?.lineNumber
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
