package dev.rdmarun.scripts

import dev.rdmarun.dsl.StandardParameters

/** One parameter a script reads: its [default] and [doc] as the source gives them (empty when it gives none). */
data class ScriptParameter(val name: String, val default: String, val doc: String)

/** A call in a script's source: its [text] as written (e.g. `bufferSize(4096)`) and its 1-based [line]. */
data class SourceCall(val text: String, val line: Int)

/**
 * The parameters a scenario script reads, found in its source before anything runs, so that a
 * `--set` name nobody reads is an error instead of a silent no-op, and `--params` can list them.
 *
 * What counts: calls `param("NAME", DEFAULT)`, `intParam(...)`, `sizeParam(...)` with a string
 * literal name (outside comments and other strings), the doc being the `//` comment that ends the
 * line; the names the DSL reads itself ([StandardParameters]): `qps`, `depth`, `inline`, `mtu` and
 * `signal` at every connect, `warmup` and `preflight` always, `size`
 * unless the script calls `bufferSize(`, `iterations` and `seconds` when it uses `repeat { }`. A
 * reader called with a name that is not a literal makes the list [incomplete]: the check is then
 * skipped.
 */
class ScriptParameters private constructor(
    /** By name, in the order the source first reads them. */
    val read: Map<String, ScriptParameter>,
    /** A reader's name is computed: the script may read names not in [read]. */
    val incomplete: Boolean,
    /** The script's first `bufferSize(...)` call, which fixes the message size (so it does not read `size`), or null. */
    val sizeFixedBy: SourceCall? = null,
) {
    /**
     * The first of [given] that the script does not read, as one sentence with a "did you mean";
     * null when every name is read or the list is [incomplete].
     */
    fun unknown(given: Collection<String>, scriptName: String, flagOf: (String) -> String): String? {
        if (incomplete) return null
        val name = given.firstOrNull { it !in read } ?: return null
        val close = read.keys.minByOrNull { distance(it, name) }?.takeIf { distance(it, name) <= maxOf(2, name.length / 3) }
        return "${flagOf(name)}: $scriptName does not read a parameter named $name " +
            "(it reads: ${read.keys.joinToString()})" + (close?.let { "; did you mean $it?" } ?: "")
    }

    companion object {
        private val READER = Regex("""\b(param|intParam|sizeParam)\s*\(\s*""")
        private val LITERAL = Regex(""""([A-Za-z_][A-Za-z0-9_.-]*)"\s*(?:,\s*([^,)\n]*))?""")
        private val BUFFER_SIZE_CALL = Regex("""\bbufferSize\s*\(""")
        private val REPEAT_BLOCK = Regex("""\brepeat\s*\{""")

        private val STANDARD_DOCS = mapOf(
            StandardParameters.QPS to ("" to "QPs, replaces qps(n) (-q)"),
            StandardParameters.DEPTH to ("" to "send queue depth, replaces sendDepth(n) (-t)"),
            StandardParameters.INLINE to ("" to "largest inline send or write in bytes, replaces inlineThreshold(n) (-I)"),
            StandardParameters.MTU to ("" to "path MTU cap in bytes (256, 512, 1024, 2048 or 4096), replaces mtu(n) (-m)"),
            StandardParameters.SIGNAL to ("" to "one work request in this many is signaled, replaces signalEvery(n) (-Q)"),
            StandardParameters.SIZE to ("4096" to "buffer size, the size send() and write() move (-s; 4K, 1M)"),
            StandardParameters.ITERATIONS to ("1000" to "rounds of repeat { } (-n)"),
            StandardParameters.SECONDS to ("" to "run repeat { } for this many seconds instead (-D)"),
            StandardParameters.WARMUP to ("auto" to "auto: warm-up rounds of repeat { } and runFor until the JIT is quiet; 0: none, the cold figure; N: N iterations"),
            StandardParameters.PREFLIGHT to ("auto" to "auto: connect's pre-flight warm-up on two local QPs; 0: none (with warmup=0, a JVM that has run nothing yet)"),
        )

        fun of(source: String): ScriptParameters {
            val code = withoutComments(source)
            val read = LinkedHashMap<String, ScriptParameter>()
            var incomplete = false
            for (call in READER.findAll(code)) {
                val at = call.range.last + 1
                val literal = LITERAL.matchAt(code, at)
                if (literal == null) {
                    incomplete = true
                    continue
                }
                val name = literal.groupValues[1]
                val default = literal.groupValues[2].trim().removeSurrounding("\"")
                read.putIfAbsent(name, ScriptParameter(name, default, lineComment(source, at)))
            }
            fun standard(name: String) {
                val (default, doc) = STANDARD_DOCS.getValue(name)
                read.putIfAbsent(name, ScriptParameter(name, default, doc))
            }
            StandardParameters.READ_AT_CONNECT.forEach(::standard)
            standard(StandardParameters.WARMUP)
            standard(StandardParameters.PREFLIGHT)
            if (!BUFFER_SIZE_CALL.containsMatchIn(code)) standard(StandardParameters.SIZE)
            if (REPEAT_BLOCK.containsMatchIn(code)) {
                standard(StandardParameters.ITERATIONS)
                standard(StandardParameters.SECONDS)
            }
            val sizeCall = BUFFER_SIZE_CALL.find(code)?.let { call(source, code, it.range.first, it.range.last) }
            return ScriptParameters(read, incomplete, sizeCall)
        }

        /**
         * The call that starts at [start] and whose `(` is at [open], as the source writes it (up to
         * its closing parenthesis, found in [code] where strings and comments are blanked; to the
         * end of the line when it does not close there), and its line.
         */
        private fun call(source: String, code: String, start: Int, open: Int): SourceCall {
            val lineEnd = code.indexOf('\n', open).let { if (it < 0) code.length else it }
            var depth = 0
            var end = lineEnd
            for (i in open until lineEnd) {
                if (code[i] == '(') depth++
                if (code[i] == ')' && --depth == 0) {
                    end = i + 1
                    break
                }
            }
            return SourceCall(source.substring(start, end).trim(), source.substring(0, start).count { it == '\n' } + 1)
        }

        /** The `//` comment that ends the line holding [at], trimmed; empty when there is none. */
        private fun lineComment(source: String, at: Int): String {
            val start = source.lastIndexOf('\n', at) + 1
            val end = source.indexOf('\n', at).let { if (it < 0) source.length else it }
            val line = source.substring(start, end)
            val masked = withoutComments(line) // a comment is blanked there, a `//` in a string is not
            val i = (0 until line.length - 1).firstOrNull { line.startsWith("//", it) && masked[it] == ' ' } ?: return ""
            return line.substring(i + 2).trim()
        }

        /**
         * [source] with its comments blanked (same length, newlines kept, so offsets still match)
         * and the insides of string literals blanked too, except their quotes: a `param("x"` in a
         * comment or a string is not a read. Templates inside strings are blanked with the string.
         */
        internal fun withoutComments(source: String): String {
            val out = StringBuilder(source)
            var i = 0
            fun blank(from: Int, to: Int) {
                for (k in from until minOf(to, out.length)) if (out[k] != '\n') out[k] = ' '
            }
            while (i < source.length) {
                val c = source[i]
                when {
                    source.startsWith("//", i) -> {
                        val end = source.indexOf('\n', i).let { if (it < 0) source.length else it }
                        blank(i, end)
                        i = end
                    }
                    source.startsWith("/*", i) -> {
                        val end = source.indexOf("*/", i + 2).let { if (it < 0) source.length else it + 2 }
                        blank(i, end)
                        i = end
                    }
                    source.startsWith("\"\"\"", i) -> {
                        val end = source.indexOf("\"\"\"", i + 3).let { if (it < 0) source.length else it + 3 }
                        blank(i + 3, end - 3)
                        i = end
                    }
                    c == '"' -> {
                        var j = i + 1
                        while (j < source.length && source[j] != '"' && source[j] != '\n') j += if (source[j] == '\\') 2 else 1
                        // Names and defaults stay readable; a string that could hide a call (a
                        // parenthesis, an escape, a template) is blanked inside.
                        val inside = source.substring(i + 1, minOf(j, source.length))
                        if (inside.any { it == '(' || it == '\\' || it == '$' }) blank(i + 1, j)
                        i = j + 1
                    }
                    c == '\'' -> {
                        var j = i + 1
                        while (j < source.length && source[j] != '\'' && source[j] != '\n') j += if (source[j] == '\\') 2 else 1
                        blank(i + 1, j)
                        i = j + 1
                    }
                    else -> i++
                }
            }
            return out.toString()
        }

        /** Edit distance (Levenshtein), for "did you mean". */
        private fun distance(a: String, b: String): Int {
            var prev = IntArray(b.length + 1) { it }
            for (i in 1..a.length) {
                val cur = IntArray(b.length + 1)
                cur[0] = i
                for (j in 1..b.length) {
                    cur[j] = minOf(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + if (a[i - 1] == b[j - 1]) 0 else 1)
                }
                prev = cur
            }
            return prev[b.length]
        }
    }
}
