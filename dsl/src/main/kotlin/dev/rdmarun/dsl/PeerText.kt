package dev.rdmarun.dsl

/** Longest stretch of peer text shown in one sentence: a peer cannot flood a terminal or a log. */
internal const val MAX_PEER_TEXT: Int = 300

/** Longest peer sentence shown whole (a failure, a deadlock verdict, a rank's line): twice a stretch of text. */
internal const val MAX_PEER_SENTENCE: Int = 2 * MAX_PEER_TEXT

/**
 * Text that came from the peer (failure messages, parameter names and values, GIDs, frame types,
 * what it waits for), made safe for a terminal, a log or a JSON file: control characters (escape
 * sequences among them), line and paragraph separators, bidirectional and invisible formatting
 * characters and lone surrogates become `\uXXXX`; text longer than [max] characters is cut with
 * a note of how much was left out. Every sentence that quotes the peer goes through here.
 */
public fun printable(text: String, max: Int = MAX_PEER_TEXT): String = buildString(minOf(text.length, max) + 16) {
    var shown = 0
    var i = 0
    while (i < text.length) {
        if (shown >= max) {
            append("... (${text.length - i} more characters)")
            break
        }
        val c = text[i]
        val pair = c.isHighSurrogate() && i + 1 < text.length && text[i + 1].isLowSurrogate()
        when {
            pair -> {
                append(c).append(text[i + 1])
                i++
            }
            unsafe(c) -> append("\\u%04x".format(c.code))
            else -> append(c)
        }
        shown++
        i++
    }
}

private fun unsafe(c: Char): Boolean =
    c.isISOControl() || // C0, DEL, C1 (CSI 0x9b among them)
        c.isSurrogate() || // a lone half of a pair
        c == '\u061c' || c in '\u200b'..'\u200f' || c in '\u2028'..'\u202e' || c in '\u2060'..'\u2069' || c == '\ufeff' ||
        c in '\ufff9'..'\ufffb'
