package dev.rdmarun.scripts

import dev.rdmarun.dsl.PerftestFormat
import dev.rdmarun.dsl.Role
import dev.rdmarun.dsl.ScenarioResult
import java.util.Locale

/**
 * What `-a` prints, as perftest prints its sweep: one table, on the client only. As each size
 * ends, the client prints its row under perftest's header, the banner (that of the first size:
 * each size connects QPs of its own) and the header coming before the first row only; when the
 * sweep ends (or fails), perftest's closing dashed line, then rdma-run's own lines of every size
 * (the latencies perftest's block does not show under one header, a row per size for each, and the
 * pre-flight and warm-up lines, each naming its size) and a last dashed line. The server prints
 * one summary line per size (perftest's server prints no table of the sweep either: ib_write_bw's
 * shows the last size's row only). With `--loopback` both sides share standard output, so the
 * server's lines come after the client's table.
 */
internal class SweepOutput(
    /** The test's name in the banner: the script's file name. */
    private val title: String,
    private val gbits: Boolean,
    private val say: (String) -> Unit,
) {
    /** The block header printed last; null until the client's first row. */
    private var header: String? = null
    private var opened = false
    private var description: String? = null
    /** rdma-run's own latency rows of every size, by label (one group per label, sizes in order). */
    private val latencyRows = LinkedHashMap<String, MutableList<String>>()
    private val notes = ArrayList<String>()
    private val serverLines = ArrayList<String>()

    /** The line said once the table is closed (--loopback's verdict), or null. */
    var lastLine: String? = null

    /** A size ended on one side: [label] names the size (`size=4096`); [deferServer]: keep the server's line for [close]. */
    @Synchronized
    fun ended(run: ResultsRun, label: String, deferServer: Boolean) {
        val r = run.end
        if (r.role == Role.SERVER) {
            val line = serverLine(r, label)
            if (deferServer) serverLines += line else say(line)
            return
        }
        val out = buildList {
            if (!opened) {
                opened = true
                add(String.format(Locale.ROOT, "%s on %s: %d QP%s, -a: one row per size", r.role.label, r.device, r.qps.size,
                    if (r.qps.size == 1) "" else "s"))
                add(r.perftestBanner(title))
                description = r.latencyNote()
            }
            val h = r.perftestHeader(gbits)
            if (h != null && h != header) {
                if (header != null) add(PerftestFormat.RULE)
                add(h)
                header = h
            }
            r.perftestRow(gbits, run.bwPeakBytesPerSecond)?.let { add(it) }
        }
        say(out.joinToString("\n"))
        for ((name, row) in r.ownLatencies()) latencyRows.getOrPut(name) { ArrayList() } += row
        if (r.total.messagesNotReceived > 0) notes += " $label: ${r.total.messagesNotReceived} messages arrived that no receive() took"
        notes += r.notes().map { " $label: $it" }
    }

    /** The sweep ended (or failed): closes the client's table and says what waited for it. */
    @Synchronized
    fun close() {
        if (opened) {
            val out = buildList {
                if (header != null) add(PerftestFormat.RULE)
                description?.let { add(it) }
                add(" the addresses above are the first size's: each size connects QPs of its own")
                if (latencyRows.isNotEmpty()) {
                    add(ScenarioResult.OWN_LATENCY_HEADER)
                    latencyRows.values.forEach { addAll(it) }
                }
                addAll(notes)
                add(PerftestFormat.RULE)
            }
            say(out.joinToString("\n"))
            opened = false
            header = null
            description = null
            latencyRows.clear()
            notes.clear()
        }
        serverLines.forEach(say)
        serverLines.clear()
        lastLine?.let(say)
        lastLine = null
    }

    /** The server's line of one size: its traffic, in the run's unit. */
    private fun serverLine(r: ScenarioResult, label: String): String = String.format(Locale.ROOT,
        "%s on %s, -a %s: %d QP%s, %.3f s, %d WRs, %d msgs in, %.2f %s", r.role.label, r.device, label, r.qps.size,
        if (r.qps.size == 1) "" else "s", r.seconds, r.total.operations, r.total.messagesReceived,
        PerftestFormat.rate(r.bytesPerSecond, gbits), PerftestFormat.unit(gbits))
}
