package dev.rdmarun.scripts

import com.github.ajalt.mordant.terminal.Terminal
import dev.rdmarun.dsl.LiveTotals
import dev.rdmarun.dsl.PerftestFormat
import dev.rdmarun.dsl.ScenarioMonitor
import java.util.Locale

/**
 * The live line under a running scenario on a terminal: per side its elapsed time, bytes, work
 * requests, messages and current rate, redrawn in place twice a second once a run has gone on
 * for a second. Other output goes [above] it. Reads the monitors' totals only (a display thread;
 * the data path does not know it exists).
 */
internal class ProgressLine(
    terminal: Terminal,
    private val sides: List<Pair<String, ScenarioMonitor>>,
    /** The `seconds` a time-based run lasts (`-D`): its percentage and ETA come from the clock. */
    private val plannedSeconds: Double? = null,
    /** `--report_gbits`: the rate in Gb/sec instead of MB/sec (the run's one unit). */
    private val gbits: Boolean = false,
) : AutoCloseable {
    private val line = StatusLine(terminal)
    private val lastBytes = LongArray(sides.size)
    private val lastNanos = LongArray(sides.size)
    private val thread = Thread.ofPlatform().daemon(true).name("rdma-run-progress").start {
        try {
            while (true) {
                Thread.sleep(TICK_MS)
                tick()
            }
        } catch (_: InterruptedException) {
            // closed
        }
    }

    private fun tick() {
        val now = System.nanoTime()
        class Part(val text: String, val busy: Boolean)
        val parts = sides.mapIndexedNotNull { i, (label, monitor) ->
            val t = monitor.totals()
            if (t == null) {
                lastNanos[i] = 0 // not running (yet, or any more): no rate until two readings
                return@mapIndexedNotNull null
            }
            val bytes = t.bytesSent + t.bytesReceived
            // The totals are of the measured phase: they start again from 0 when a warm-up ends (no rate then).
            val bytesPerNano = if (lastNanos[i] == 0L || bytes < lastBytes[i]) null else (bytes - lastBytes[i]).toDouble() / (now - lastNanos[i])
            lastBytes[i] = bytes
            lastNanos[i] = now
            val fraction = plannedSeconds?.let { (t.elapsedNanos / 1e9 / it).coerceIn(0.0, 1.0) } ?: monitor.fractionDone()
            if (t.elapsedNanos < SHOW_AFTER_NANOS) null
            else Part(describe(label, t, bytesPerNano?.let { rate(it * 1e9, gbits) }) + eta(t, fraction), t.operations + t.messagesReceived > 0)
        }
        // With --loopback, a side with no traffic of its own (the target of WRITEs) says nothing.
        val shown = parts.filter { it.busy }.ifEmpty { parts }
        line.show(if (shown.isEmpty()) null else shown.joinToString("  |  ") { it.text })
    }

    /** Prints [block]'s output with the line out of the way, then draws the line again below it. */
    fun above(block: () -> Unit) = line.above(block)

    override fun close() {
        line.close()
        thread.interrupt()
    }

    private companion object {
        const val TICK_MS = 500L
        const val SHOW_AFTER_NANOS = 1_000_000_000L

        fun describe(label: String, t: LiveTotals, rate: String?): String = String.format(Locale.ROOT,
            "%s %.1f s: %s out, %s in, %d WRs, %d msgs%s", label, t.elapsedNanos / 1e9, bytes(t.bytesSent), bytes(t.bytesReceived),
            t.operations, t.messagesReceived, rate?.let { ", $it" } ?: "")

        /** Both directions' bytes per second in the run's unit: MB/sec (2^20 bytes) or Gb/sec. */
        fun rate(bytesPerSecond: Double, gbits: Boolean): String =
            String.format(Locale.ROOT, "%.2f %s", PerftestFormat.rate(bytesPerSecond, gbits), PerftestFormat.unit(gbits))

        /** ", 42% (ETA 3.1 s)" once some of a known amount is done; "" otherwise. */
        fun eta(t: LiveTotals, fraction: Double?): String {
            if (fraction == null || fraction <= 0.0) return ""
            val left = t.elapsedNanos / 1e9 * (1 - fraction) / fraction
            return String.format(Locale.ROOT, ", %.0f%% (ETA %.1f s)", fraction * 100, left)
        }

        fun bytes(n: Long): String = when {
            n >= 1L shl 30 -> String.format(Locale.ROOT, "%.2f GiB", n / (1L shl 30).toDouble())
            n >= 1L shl 20 -> String.format(Locale.ROOT, "%.1f MiB", n / (1L shl 20).toDouble())
            n >= 1L shl 10 -> String.format(Locale.ROOT, "%.1f KiB", n / (1L shl 10).toDouble())
            else -> "$n B"
        }
    }
}

/**
 * One line at the bottom of a terminal, redrawn in place with "\r" only (no cursor movement: mordant
 * passes raw prints through as they are, and every terminal reads "\r" alike), while other lines
 * are printed above it: [above] wipes it, lets the caller print whole lines, and draws it again at
 * once, so that frequent lines (`--interval 0.1`) neither run into it nor leave it blank until the
 * next redraw.
 */
internal class StatusLine(private val terminal: Terminal) {
    private val lock = Any()
    // No wrapping: "\r" must reach the line's start. A terminal that reports no size (0) gets 100.
    private val width = terminal.size.width.let { if (it <= 0) 100 else (it - 1).coerceAtLeast(20) }
    /** What the line says (null: nothing), and how many columns of it are on the screen now. */
    private var text: String? = null
    private var drawn = 0
    private var closed = false

    /** Draws [text] in place of what the line said (null: wipes it). */
    fun show(text: String?) {
        synchronized(lock) {
            if (closed) return
            this.text = text?.take(width)
            draw()
        }
    }

    /** Prints [block]'s output (whole lines) with the line out of the way, then draws it again below. */
    fun above(block: () -> Unit) = synchronized(lock) {
        wipe()
        block()
        if (!closed) draw()
    }

    /** Wipes the line for good: what follows is printed where it was. */
    fun close() = synchronized(lock) {
        closed = true
        wipe()
    }

    private fun draw() {
        val t = text ?: return wipe()
        // Spaces cover the end of a longer text drawn before.
        terminal.rawPrint("\r" + t + " ".repeat((drawn - t.length).coerceAtLeast(0)))
        drawn = t.length
    }

    private fun wipe() {
        if (drawn == 0) return
        terminal.rawPrint("\r" + " ".repeat(drawn) + "\r")
        drawn = 0
    }
}
