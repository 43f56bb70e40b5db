package dev.rdmarun.scripts

import com.github.ajalt.clikt.completion.CompletionCandidates
import com.github.ajalt.clikt.core.Context
import com.github.ajalt.clikt.core.ProgramResult
import com.github.ajalt.clikt.core.terminal
import com.github.ajalt.clikt.parameters.arguments.argument
import com.github.ajalt.clikt.core.UsageError
import com.github.ajalt.clikt.parameters.groups.mutuallyExclusiveOptions
import com.github.ajalt.clikt.parameters.groups.provideDelegate
import com.github.ajalt.clikt.parameters.groups.single
import com.github.ajalt.clikt.parameters.options.convert
import com.github.ajalt.clikt.parameters.options.flag
import com.github.ajalt.clikt.parameters.options.multiple
import com.github.ajalt.clikt.parameters.options.option
import com.github.ajalt.clikt.parameters.options.switch
import com.github.ajalt.clikt.parameters.options.validate
import com.github.ajalt.clikt.parameters.types.file
import com.github.ajalt.clikt.parameters.types.int
import com.github.ajalt.clikt.parameters.types.restrictTo
import dev.rdmarun.dsl.CompletionMode
import dev.rdmarun.dsl.ControlToken
import dev.rdmarun.dsl.MAX_DURATION
import dev.rdmarun.dsl.Ranks
import dev.rdmarun.dsl.MAX_DURATION_SECONDS
import dev.rdmarun.dsl.Peer
import dev.rdmarun.dsl.RdmaDefaults
import dev.rdmarun.dsl.RdmaOptions
import dev.rdmarun.dsl.Role
import dev.rdmarun.dsl.ScenarioMonitor
import dev.rdmarun.dsl.RanksResult
import dev.rdmarun.dsl.ScenarioResult
import dev.rdmarun.dsl.ScriptSource
import dev.rdmarun.dsl.SettingsOverrides
import dev.rdmarun.dsl.StandardParameters
import dev.rdmarun.dsl.describeFailure
import dev.rdmarun.dsl.printable
import dev.rdmarun.dsl.scriptLine
import dev.rdmarun.runtime.DeviceList
import dev.rdmarun.runtime.SoftTransport
import dev.rdmarun.scripts.host.NotAScriptException
import dev.rdmarun.scripts.host.ScenarioScriptHost
import dev.rdmarun.scripts.host.ScriptCompilationException
import dev.rdmarun.scripts.host.ScriptFailedException
import java.io.Closeable
import java.io.File
import java.net.InetAddress
import java.net.ServerSocket
import java.util.Locale
import kotlin.script.experimental.api.CompiledScript
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/**
 * `rdma-run FILE.main.kts ...` (the subcommand `run`): compiles a scenario script, or takes it from
 * the compiled-script cache, and evaluates it with this command line as the defaults of its
 * `rdma { }`: the peer (`--listen` makes this side the server, `--peer` the client, `--loopback`
 * runs both in this JVM; `-p` the TCP port, as perftest's), local device choices (`-d`, `-x`/`-g`,
 * `-i`: perftest's letters), `--set` parameters and perftest's flags ([PerftestOptions]), and
 * `--timeout`. Prints each scenario's results table, a live progress line on a terminal, and with
 * `--json` the numbers.
 *
 * The control connection's shared secret is `--token TEXT` (default: `$RDMA_RUN_TOKEN`), else the
 * per-user secret (`~/.config/rdma-run/secret`, created on first use, mode 0600), else nothing
 * with `--no-token`: each side proves it knows the secret and the scenario (HMAC-SHA256 over fresh
 * nonces) before the other sends its QPs, buffers and rkeys, and soft0's key is derived from it; a
 * server started with `--listen` ignores (closes and counts) connections that fail the handshake
 * and keeps waiting for its client until the timeout. `--loopback` uses a fresh random secret
 * unless one is given. The secret is never printed.
 *
 * Exit status: [ExitStatus] (1 the run failed, 2 the script cannot run, 130 Ctrl-C), or n when
 * the script calls `System.exit(n)`.
 */
class ScenarioCommand(private val scriptCache: File?) : RdmaCommand(NAME) {
    /** Where `--json` goes: [file], or standard output when null (`--json -`). */

    /** Who this process is in the scenario. */
    private sealed interface Mode {
        /** [text]: the option's value as typed; [namesPort]: it gives the TCP port (a --peer may leave it to the default or -p). */
        /** [ranks]: this process is a rank of a run ([RankOptions]), whose rendezvous is [peer]. */
        data class Side(val peer: Peer, val text: String, val namesPort: Boolean, val ranks: Ranks? = null) : Mode
        data object Loopback : Mode
    }

    private val script by argument("FILE.main.kts", help = "The scenario script", completionCandidates = ShellCompletion.SCRIPTS)
        .file(mustExist = true, canBeDir = false, mustBeReadable = true)
    private val mode by mutuallyExclusiveOptions(
        option("--listen", metavar = "PORT|ADDR:PORT",
            help = "Be the server: wait for the client on this TCP port (perftest's is ${Peer.DEFAULT_PORT})")
            .convert { text -> Mode.Side(usage { Peer.parseListen(text) }, text, namesPort = true) },
        option("--peer", metavar = "HOST|HOST:PORT",
            help = "Be the client: connect to the server at HOST (TCP port ${Peer.DEFAULT_PORT} unless given)")
            .convert { text -> Mode.Side(usage { parsePeer(text) }, text, namesPort(text)) },
        option(help = "Run server and client in this JVM, connected over 127.0.0.1, on the same device")
            .switch("--loopback" to Mode.Loopback),
    ).single()
    /** perftest's -p: the exchange's TCP port, here the control connection's (see [chosenMode]). */
    private val tcpPort by option("-p", "--port", metavar = "TCPPORT",
        help = "TCP port of the control connection, as perftest's -p: the port of --peer HOST (default ${Peer.DEFAULT_PORT}) " +
            "or of --loopback (default: a free one); with --listen PORT or --peer HOST:PORT it must be the same port")
        .int().restrictTo(1..65535)
    private val device by option("-d", "--ib-dev", metavar = "DEV", help = "RDMA device (default: the scenario's choice, else the first one)")
    private val gidIndex by option("-g", "--gid-idx", "-x", "--gid-index", metavar = "GIDX",
        help = "Local GID index (default: the first RoCE v2 IPv4 GID, see `rdma-run gids`)").int().restrictTo(0..255)
    private val ibPort by option("-i", "--ib-port", metavar = "IBPORT", help = "Port of the device, as perftest's -i (default 1)").int().restrictTo(1..255)
    private val parameters by option("--set", metavar = "NAME=VALUE",
        help = "Script parameter, read with param()/intParam(); repeatable; both sides must give the same")
        .convert { text -> usage { parseParameter(text) } }
        .multiple()
        .validate { sets ->
            val twice = sets.groupBy { it.first }.filterValues { it.size > 1 }.keys
            require(twice.isEmpty()) { "--set ${twice.first()} is given more than once" }
        }
    private val json by option("--json", metavar = "FILE|-", completionCandidates = CompletionCandidates.Path,
        help = "Also write the results as JSON (schema 2, docs/results-json.md) to FILE, or with - to standard output (the rest, the script's own println too, then goes to standard error); written on failure too")
        .convert { text -> JsonTarget(if (text == "-") null else File(text)) }
        .validate { target -> target.file?.let(::outputFileProblem)?.let { fail(it) } }
    /** No short name: perftest uses every letter, and -i is its --ib-port. */
    private val interval by option("--interval", metavar = "SECONDS",
        help = "Every SECONDS, iperf3's interval lines of this side's traffic (sent and received, in iperf3's units whatever --report_gbits says; " +
            "above the progress line on a terminal) and an interval record in the JSON (no short name: -i is perftest's --ib-port)")
        .convert { text -> text.toDoubleOrNull()?.takeIf { it >= 0.1 && it <= MAX_DURATION_SECONDS } ?: fail("'$text' is not a number of seconds from 0.1 to $MAX_DURATION_SECONDS ($MAX_DURATION)") }
    private val histogram by option("--histogram", metavar = "FILE", completionCandidates = CompletionCandidates.Path,
        help = "Write the latency the results lead with (the first measure section, one way for measureRoundTrip, else the work requests) as HdrHistogram's .hgrm percentile distribution, in microseconds, to FILE")
        .convert { text -> File(text) }
        .validate { f ->
            require(f.path != "-") { "- (standard output) is --json's; give --histogram a file" }
            outputFileProblem(f)?.let { fail(it) }
        }
    private val timeout by option("--timeout", metavar = "DURATION",
        help = "Bound on every wait: connecting, the handshake, and once connected any wait while the peer makes no progress " +
            "(whole seconds, or a duration like 30s, 2m, 500ms; 1ms to 7d; default: the scenario's, else 30s)")
        .convert { text -> usage { parseTimeout(text) } }
    private val token by option("--token", metavar = "TEXT", envvar = TOKEN_ENV,
        help = "Shared secret of the control connection: each side proves it knows it before the other sends its QPs, " +
            "buffers and rkeys; both sides must give the same one (default: \$$TOKEN_ENV, else the per-user secret " +
            "~/.config/rdma-run/secret, made on first use: copy it to hosts that do not share the home directory)")
        .convert { text -> usage { ControlToken.of(text) } }
    private val noToken by option("--no-token",
        help = "No shared secret: whoever knows the script and its parameters can be the peer, and an observer of the " +
            "control connection can read and write soft0 memory (as with perftest's exchange); for closed test networks only")
        .flag()
    private val check by option("--check",
        help = "Only compile the script and run it up to connect(peer): validate the settings and print what connect would create; touches no device. " +
            "The script's top-level code (and its rdma { } block up to connect) does run: check only scripts you would run")
        .flag()
    private val listParameters by option("--params",
        help = "List the parameters the script reads (with their defaults, docs and the flags that set them) and exit").flag()
    private val perftest by PerftestOptions()
    private val rankOptions by RankOptions()
    private val debugFlag by option("--debug", help = "On errors, print the stack trace too; say whether the compiled script came from the cache").flag()

    override val debugOption get() = debugFlag
    override val errorPrefix get() = "rdma-run ${script.name}"

    override fun help(context: Context) =
        "Run a scenario script on this side: the server with --listen, the client with --peer, or both in this JVM with --loopback. " +
            "Exit status: ${ExitStatus.summary()}."

    /** The live line, while one is shown: launcher output goes above it. */
    @Volatile
    private var progress: ProgressLine? = null

    override fun execute() {
        perftest.refuseUnsupported()
        val chosen = chosenMode() // usage errors before the compile's seconds
        interruption() // from here on: Ctrl-C says "interrupted", System.exit says so too
        val host = ScenarioScriptHost(scriptCache) { say("rdma-run: $it", err = true) }
        host.debug = debug
        val compiled = compile(host)
        val source = script.readText()
        val declared = ScriptParameters.of(source)
        if (listParameters) return listParameters(declared)
        val given = givenParameters(declared)
        val options = RdmaOptions(
            parameters = given,
            overrides = SettingsOverrides(device = device, gidIndex = gidIndex, port = ibPort, timeout = timeout,
                completionMode = if (perftest.events) CompletionMode.EVENT else null),
            scenarioSource = source, // both peers must run the same script: its digest is in the fingerprint
            token = secret(),
            script = ScriptSource(script.path, script.name, source.lines().size).also { scriptSource = it },
        )
        val side = chosen as? Mode.Side
        // Two ranks are also a server and its client: rdma { } reads the peer, rdmaRanks { } the ranks.
        val withPeer = options.copy(peer = side?.peer?.takeIf { side.ranks == null || side.ranks.size == 2 }, ranks = side?.ranks)
        val start = ResultsStart.of(if (chosen == Mode.Loopback) "loopback" else withPeer.peer?.role?.label ?: side?.ranks?.let { "rank" } ?: "none",
            script.path, source, given)
        // Ranks under one launcher share the command line: each but rank 0 writes files of its own.
        val rank = side?.ranks?.rank ?: 0
        val jsonTarget = json?.let { t -> t.file?.let { JsonTarget(RunResults.ofRank(it, rank)) } ?: t }
        val histogramFile = histogram?.let { RunResults.ofRank(it, rank) }
        if (rank != 0 && !check) listOfNotNull(jsonTarget?.file?.let { "--json" to it }, histogramFile?.let { "--histogram" to it }).forEach { (o, f) ->
            say("rdma-run ${script.name}: rank $rank writes $o to $f (rank 0's file holds its own runs, and every rank's pairs of an rdmaRanks)", err = true)
        }
        results = RunResults(script.name, perftest.reportGbits, json = jsonTarget,
            histogram = histogramFile, sweep = if (perftest.all && !check) SweepOutput(script.name, perftest.reportGbits) { say(it) } else null,
            say = { say(it) }, emit = { emit(it, err = false) })
        // `--json -`: standard output is the document's alone, so the script's own println goes
        // to standard error with the rest of the run's output.
        val stdout = System.out.takeIf { jsonToStdout && !check }?.also { System.setOut(System.err) }
        try {
            // -a: the script once per size, each a scenario of its own (connection and results).
            val runs = if (perftest.all && !check) PerftestOptions.SWEEP_SIZES.map { size ->
                "size=$size" to withPeer.copy(parameters = given + (StandardParameters.SIZE to size.toString()))
            } else listOf(null to withPeer)
            for ((label, run) in runs) {
                if (label != null) say("rdma-run ${script.name}: -a: $label", err = true)
                results.runLabel = label
                when {
                    check -> check(host, compiled, run)
                    // Both sides in this JVM: a fresh secret no other process can know, unless one was given.
                    chosen == Mode.Loopback -> loopback(host, compiled, run.copy(peer = null, token = run.token ?: ControlToken.random()))
                    else -> oneSide(host, compiled, run)
                }
            }
        } catch (e: Throwable) {
            if (!check) results.failed(e)
            throw e
        } finally {
            stdout?.let { System.setOut(it) }
            results.sweep?.close()
            if (!check) results.write(start)
        }
    }

    /**
     * `--listen`/`--peer`/`--loopback` with `-p` applied: the port of a `--peer` that names none
     * (and of `--loopback`, in [loopbackRun]). A port given both ways must be the same one; `-p`
     * without a role has nothing to set.
     */
    private fun chosenMode(): Mode? {
        if (mode == Mode.Loopback && rankOptions.loopbackRanks != null) {
            if (rankOptions.loopbackRanks!! < 2) throw UsageError("--loopback --ranks ${rankOptions.loopbackRanks}: a run of ranks has at least 2")
        } else if (mode != null && rankOptions.given) {
            throw UsageError("--rank, --ranks and --rendezvous make this process a rank of a run; --listen, --peer and --loopback choose a side: give one or the other")
        }
        if (mode == null) rankOptions.place { currentContext.readEnvvar(it) }?.let { place -> return rankMode(place) }
        val port = tcpPort ?: return mode
        return when (val m = mode) {
            null -> throw UsageError("-p/--port $port is the TCP port of --listen, --peer, --loopback or --rendezvous: give one of them")
            Mode.Loopback -> m
            is Mode.Side -> {
                val peer = m.peer
                if (!m.namesPort && peer is Peer.Connect) return m.copy(peer = peer.copy(port = port))
                val given = when (peer) {
                    is Peer.Listen -> peer.port
                    is Peer.Connect -> peer.port
                }
                if (given != port) {
                    throw UsageError("${if (peer.role == Role.SERVER) "--listen" else "--peer"} ${m.text} and -p/--port $port " +
                        "give different TCP ports: give the port once")
                }
                m
            }
        }
    }

    /** This process's rank: rank 0 listens at the rendezvous, the others connect to it; said on standard error. */
    private fun rankMode(place: RankPlace): Mode.Side {
        val peer = rankOptions.peer(place, tcpPort)
        val what = if (place.ranks == 2) "the ${peer.role.label}, $peer" else if (peer is Peer.Listen) "the rendezvous, $peer" else "rendezvous: $peer"
        say("rdma-run ${script.name}: rank ${place.rank} of ${place.ranks} (${place.launcher}): $what", err = true)
        return Mode.Side(peer, peer.toString(), namesPort = true, ranks = Ranks(place.rank, place.ranks, peer, place.localRank, place.run))
    }

    /** `--token`, `--no-token`, or null for the per-user secret (the DSL's default). */
    private fun secret(): ControlToken? {
        if (noToken && token != null) {
            throw UsageError("--no-token and --token (or \$$TOKEN_ENV) contradict each other: give one of them")
        }
        return if (noToken) ControlToken.none() else token
    }

    /** The runs' results and the files they go to, from [execute] on. */
    private lateinit var results: RunResults

    /**
     * `--set` and perftest's flags as one map; a name given both ways, or one the script does not
     * read ([ScriptParameters]), is a usage error.
     */
    private fun givenParameters(declared: ScriptParameters): Map<String, String> {
        val sets = parameters.toMap()
        val flagged = perftest.parameters()
        flagged.keys.firstOrNull { it in sets }?.let {
            throw UsageError("${StandardParameters.FLAGS[it]} and --set $it both give the parameter $it: give it once")
        }
        val given = sets + flagged
        val fixed = declared.sizeFixedBy
        if (perftest.all && !declared.incomplete && StandardParameters.SIZE !in declared.read && fixed != null) {
            throw UsageError("-a sweeps the message size, but ${script.name} fixes it with ${printable(fixed.text)} at line ${fixed.line}: " +
                "remove one (or let the script read it: bufferSize(sizeParam(\"size\", 4096)))")
        }
        val names = given.keys + if (perftest.all) listOf(StandardParameters.SIZE) else emptyList()
        declared.unknown(names, script.name) { name ->
            if (name in flagged || (perftest.all && name == StandardParameters.SIZE)) StandardParameters.FLAGS.getValue(name) else "--set $name"
        }?.let { throw UsageError(it) }
        return given
    }

    /** `--params`: what the script reads, with defaults, docs and the flags that set them. */
    private fun listParameters(declared: ScriptParameters) {
        val rows = declared.read.values.map { p ->
            listOf(p.name, p.default.ifEmpty { "-" }, StandardParameters.FLAGS[p.name]?.substringBefore('/') ?: "", p.doc)
        }
        val widths = (0..2).map { c -> (rows.map { it[c].length } + listOf("NAME", "DEFAULT", "FLAG")[c].length).max() }
        fun line(cells: List<String>) = cells.take(3).mapIndexed { c, t -> t.padEnd(widths[c]) }.joinToString("  ") + "  " + cells[3]
        say(line(listOf("NAME", "DEFAULT", "FLAG", "DOC")).trimEnd())
        rows.forEach { say(printable(line(it).trimEnd())) }
        if (declared.incomplete) {
            say("(${script.name} also reads parameters whose names it computes: --set names are not checked against this list)")
        }
    }

    private fun compile(host: ScenarioScriptHost): CompiledScript {
        val start = System.nanoTime()
        val compiled = try {
            host.compile(script) {
                say("rdma-run: compiling ${script.name}" + if (scriptCache != null) " (not in the compiled-script cache yet)" else "", err = true)
            }
        } catch (e: NotAScriptException) {
            throw CommandFailure(e.message!!, ExitStatus.SCRIPT_UNUSABLE, e, namesFile = true)
        } catch (e: ScriptCompilationException) {
            // A binary that happens to be valid UTF-8 gives one error per byte: the first few say enough.
            e.diagnostics.take(MAX_DIAGNOSTICS).forEach { say(it, err = true) }
            if (e.diagnostics.size > MAX_DIAGNOSTICS) say("... and ${e.diagnostics.size - MAX_DIAGNOSTICS} more errors", err = true)
            e.hint?.let { say("hint: $it", err = true) }
            throw ProgramResult(ExitStatus.SCRIPT_UNUSABLE.code)
        }
        if (debug) {
            val seconds = String.format(Locale.ROOT, "%.1f", (System.nanoTime() - start) / 1e9)
            say(if (compiled.fromCache) "rdma-run: compiled script cache hit: ${compiled.cacheJar} ($seconds s)"
                else "rdma-run: compiled ${script.name} in $seconds s" + (compiled.cacheJar?.let { "; cached as $it" } ?: ""), err = true)
            compiled.storeError?.let { say("rdma-run: could not store the compiled script in the cache: $it", err = true) }
        }
        return compiled.script
    }

    /** Evaluates the script once with these defaults on the calling thread; returns what it threw, if anything. */
    private fun evaluate(host: ScenarioScriptHost, compiled: CompiledScript, options: RdmaOptions, checkOnly: Boolean = false,
                         onRanks: ((RanksResult) -> Unit)? = null, onResult: ((ScenarioResult) -> Unit)? = null): Throwable? =
        try {
            RdmaDefaults.forThisThread(options, checkOnly, onResult, onRanks) { host.run(compiled) }
            null
        } catch (e: ScriptFailedException) {
            e.cause ?: e
        }

    private fun check(host: ScenarioScriptHost, compiled: CompiledScript, options: RdmaOptions) {
        var plans = 0
        val failure = evaluate(host, compiled, options.copy(onPlan = { plans++; say(it.describe()) }), checkOnly = true)
        interruption().check()
        if (failure != null) throw failed(failure)
        if (plans == 0) throw nothingToRun()
    }

    /**
     * A script that ran to its end without one `rdma { }` finishing or failing (empty, or only
     * top-level code): an `rdma { }` that ran returns a result or throws, and --check stops at its connect.
     */
    private fun nothingToRun() = CommandFailure("${script.path} has no rdma { } block: nothing to run", ExitStatus.SCRIPT_UNUSABLE, namesFile = true)

    /**
     * The run's failure as one line: what the DSL, the runtime or the peer say about it, or, for
     * what the script's own code threw, where: `script failed at FILE:LINE: Type: message`.
     */
    /** The script, for sentences about what its code threw (set once its text is read). */
    private var scriptSource: ScriptSource? = null

    private fun failed(cause: Throwable): CommandFailure {
        if (cause is StuckScenarioException) {
            val f = failed(cause.cause!!)
            return CommandFailure(f.message + STILL_RUNNING, cause = f.cause, namesFile = f.namesFile)
        }
        val source = scriptSource ?: ScriptSource(script.path, script.name)
        return CommandFailure(describeFailure(cause, source), cause = cause, namesFile = scriptLine(cause, source) != null)
    }

    private fun oneSide(host: ScenarioScriptHost, compiled: CompiledScript, options: RdmaOptions) {
        val label = options.peer?.role?.label
        val monitor = runningNote(label)
        var ran = 0
        val failure = pairSamplers().use { pairs ->
            sampler(label ?: "run", monitor).use { sampler ->
                withProgress(listOf((label ?: "run") to monitor), options.parameters) {
                    interruption().blockingOn(Closeable { monitor.cancel("interrupted") }) {
                        // On a thread of its own, as each side of --loopback: a script busy in its
                        // own code after its scenario failed is given up on, not waited for.
                        var outcome: Result<Throwable?> = Result.success(null)
                        val thread = Thread.ofPlatform().name("rdma-run-${label ?: "run"}-script").start {
                            // Rank 0 of a run of ranks: the other ranks' pairs join its own in the JSON, and its summary follows them.
                            outcome = runCatching {
                                evaluate(host, compiled, options.copy(monitor = monitor, pairMonitors = pairs::monitor),
                                    onRanks = { ranks -> ran++; results.gathered(ranks) }) { result ->
                                    ran++
                                    results.show(results.ended(result, result.pair?.let { pairs.sampler(it) } ?: sampler), deferServer = false)
                                }
                            }
                        }
                        awaitOrGiveUp(thread, monitor) ?: outcome.getOrThrow()
                    }
                }
            }
        }
        interruption().check()
        if (failure != null) throw failed(failure)
        if (ran == 0) throw nothingToRun()
    }

    /** Samples a side's totals for the peak bandwidth and `--interval`'s records and lines (above the progress line on a terminal). */
    private fun sampler(label: String, monitor: ScenarioMonitor) = IntervalSampler(monitor, label, interval,
        output = if (interval != null) intervalOutput else null)

    /** The monitors and samplers of the pairs of a run of ranks: each pair's peak and `--interval` lines and records. */
    private fun pairSamplers() = PairSamplers(interval, if (interval != null) intervalOutput else null) { label, line ->
        say("rdma-run ${script.name}: $label: $line", err = true) // escaped by the session already
    }

    /** The `--interval` lines of both sides (--loopback's too: one header). */
    private val intervalOutput = IntervalOutput { line -> put(line) }

    /** One side of a --loopback run: its own thread, defaults, monitor and outcome. */
    private class LoopbackSide(val label: String, val options: (RdmaOptions) -> RdmaOptions, val monitor: ScenarioMonitor) {
        val results = mutableListOf<ResultsRun>()
        var failure: Throwable? = null
        lateinit var thread: Thread
    }

    /**
     * The device a scenario that names none runs on, said so that nobody mistakes the emulation for
     * RDMA hardware. The script may still name its own (`device("rxe0")`): that is known only once
     * it runs, so the line says so rather than promise a device.
     */
    private fun defaultDevice(): String = DeviceList.open().use { list ->
        val d = list.defaultDevice()
        "the script's device, else " +
            if (d.isSoftware()) "${d.name()} (rdma-run's software emulation: this machine has no RDMA device)"
            else "${d.name()} (the first RDMA device)"
    }

    /**
     * After the sentence of a side given up on ([awaitOrGiveUp]): why it ends although its
     * script has not.
     */
    private val STILL_RUNNING = "; this side's script kept running in its own code after that (a loop that never " +
        "suspends, which cancelling does not stop): it was left behind"

    /**
     * What is wrong with an output file (`--json`, `--histogram`), or null: checked before the
     * run, not when the results are written after it, which may be days later (`-D`).
     */
    private fun outputFileProblem(f: File): String? {
        val dir = f.absoluteFile.parentFile
        return when {
            f.path.isBlank() -> "the file name is empty"
            f.isDirectory -> "$f is a folder"
            dir == null || !dir.isDirectory -> "the folder of $f does not exist"
            !dir.canWrite() || (f.exists() && !f.canWrite()) -> "$f is not writable"
            else -> writeProblem(f)
        }
    }

    /** Whether [f] can be opened for writing (a folder may let only some names be made: /proc): tried, and a file made for it removed. */
    private fun writeProblem(f: File): String? {
        val existed = f.exists()
        return try {
            java.io.FileOutputStream(f, true).close() // append: an existing file keeps its content until the run ends
            null
        } catch (e: java.io.IOException) {
            "$f cannot be written (${e.message})"
        } finally {
            if (!existed) f.delete()
        }
    }

    private fun loopback(host: ScenarioScriptHost, compiled: CompiledScript, given: RdmaOptions) {
        // Both peers are in this JVM: soft0 then opens no socket at all (the system property, when set, wins).
        val options = if (System.getProperty(SoftTransport.PROPERTY) == null) given.withSoftTransport(SoftTransport.MEMORY) else given
        val port = tcpPort ?: ServerSocket(0, 1, InetAddress.getLoopbackAddress()).use { it.localPort }
        val ranks = rankOptions.loopbackRanks // --loopback --ranks N: N ranks of a run, each on a thread of this JVM
        val summaries = ArrayList<String>() // rank 0's table of every pair, one per rdmaRanks (per size of -a)
        var ranRanks = false // an rdmaRanks ended (a rank may have had no pair); read after the joins
        val sides = if (ranks == null) {
            listOf(Peer.listen(port, "127.0.0.1"), Peer.connect("127.0.0.1", port))
                .map { peer -> LoopbackSide(peer.role.label, { it.copy(peer = peer) }, runningNote(peer.role.label)) }
        } else {
            (0 until ranks).map { k ->
                // Rank 0 listens at the rendezvous; with 2 ranks, a two-peer rdma { } reads the peer too.
                val peer = if (k == 0) Peer.listen(port, "127.0.0.1") else Peer.connect("127.0.0.1", port)
                LoopbackSide("rank $k", { it.copy(peer = peer.takeIf { ranks == 2 }, ranks = Ranks(k, ranks, peer, localRank = k)) }, runningNote("rank $k"))
            }
        }
        say("rdma-run ${script.name}: loopback: ${ranks?.let { "$it ranks" } ?: "server and client"} in this JVM on ${device ?: defaultDevice()}, " +
            "${if (ranks == null) "control connection" else "rendezvous"} over 127.0.0.1:$port", err = true)
        pairSamplers().use { pairs -> withProgress(sides.map { it.label to it.monitor }, options.parameters) {
            for (side in sides) {
                side.thread = Thread.ofPlatform().name("rdma-run-${side.label}-script").start {
                    side.failure = sampler(side.label, side.monitor).use { sampler ->
                        try {
                            // Every rank's pairs are this JVM's already: rank 0's summary only.
                            evaluate(host, compiled, side.options(options).copy(monitor = side.monitor, pairMonitors = pairs::monitor),
                                onRanks = { ranks ->
                                    if (ranks.gathered.isNotEmpty()) {
                                        results.summed(ranks)
                                        val label = results.runLabel?.takeIf { results.sweep != null }?.let { "$it: " } ?: ""
                                        synchronized(summaries) { summaries += label + ranks.table(perftest.reportGbits) }
                                    }
                                    ranRanks = true
                                }) { result ->
                                val run = results.ended(result, result.pair?.let { pairs.sampler(it) } ?: sampler)
                                synchronized(side.results) { side.results += run }
                            }
                        } catch (e: Throwable) {
                            e // not the script's failure but the host's: still this side's
                        }
                    }
                    // Said as soon as it is known: the other side may be blocked in its own code for long.
                    // After Ctrl-C, "interrupted" is the one sentence (interruption().check() below).
                    side.failure?.takeUnless { interruption().requested }?.let { reportFailure(side.label, it) }
                }
            }
            interruption().blockingOn(Closeable { sides.forEach { it.monitor.cancel("interrupted") } }) {
                for (side in sides) {
                    // A side busy in its own code after its scenario failed: said here, its thread never will.
                    awaitOrGiveUp(side.thread, side.monitor)?.let { stuck ->
                        side.failure = stuck
                        if (!interruption().requested) reportFailure(side.label, stuck)
                    }
                }
            }
        } }
        interruption().check()
        results.sweep?.lastLine = null
        sides.forEach { side -> side.results.forEach { results.show(it, deferServer = true) } }
        summaries.forEach { say(it) }
        if (sides.any { it.failure != null }) throw ProgramResult(ExitStatus.FAILURE.code)
        if (!ranRanks && sides.all { it.results.isEmpty() }) throw nothingToRun()
        val devices = sides.flatMap { s -> s.results.map { it.end.device } }.distinct()
        if (devices.isNotEmpty()) {
            val verdict = "loopback on ${devices.joinToString()}: ${ranks?.let { "all $it ranks" } ?: "server and client"} succeeded"
            results.sweep?.let { it.lastLine = verdict } ?: say(verdict) // -a: once, after the table
        }
    }

    /** A loopback side's failure, in one sentence (and its stack with --debug); the side's thread. */
    private fun reportFailure(label: String, cause: Throwable) {
        val described = failed(cause)
        synchronized(results) {
            results.lastFailure = "$label: ${described.message}"
            say("${if (described.namesFile) "rdma-run" else errorPrefix} ($label): ${described.message}", err = true)
            if (debug) say(cause.stackTraceToString().trimEnd(), err = true)
        }
    }

    /** A monitor that says when its side's QPs are connected (a waiting server is otherwise silent). */
    private fun runningNote(label: String?) = ScenarioMonitor(
        onRunning = { say("rdma-run ${script.name}: ${label?.let { "$it: " } ?: ""}connected, running the scenario", err = true) },
        // Stray connections a server closed: escaped by the session already.
        onNote = { say("rdma-run ${script.name}: ${label?.let { "$it: " } ?: ""}$it", err = true) },
    )

    /** Runs [block] with a live progress line under it when stdout is a terminal ([parameters]: the run's, for a -D run's length). */
    private fun <T> withProgress(sides: List<Pair<String, ScenarioMonitor>>, parameters: Map<String, String>, block: () -> T): T {
        if (!terminal.terminalInfo.outputInteractive) return block()
        val line = ProgressLine(terminal, sides, parameters[StandardParameters.SECONDS]?.toDoubleOrNull(), perftest.reportGbits)
        progress = line
        try {
            return block()
        } finally {
            progress = null
            line.close()
        }
    }

    override fun sayFromHook(text: String) = say(text, err = true)

    /** Launcher output: above the progress line, when there is one; on stderr when stdout carries the JSON (`--json -`). */
    private fun say(text: String, err: Boolean = false) {
        // Output where the interval lines go (not notes on stderr) comes between rows and their header.
        if (!err) intervalOutput.interrupted()
        put(text, err)
    }

    /** [say] for the interval lines themselves. */
    private fun put(text: String, err: Boolean = false) {
        val toErr = err || jsonToStdout
        val line = progress
        if (line != null) line.above { emit(text, toErr) } else emit(text, toErr)
    }

    private val jsonToStdout: Boolean get() = json?.let { it.file == null } ?: false

    companion object {
        const val NAME = "run"

        /** The environment variable `--token` defaults to (a token on a command line is visible in `ps`). */
        const val TOKEN_ENV = ControlToken.ENV

        /** Compiler errors shown at most; the rest are counted. */
        const val MAX_DIAGNOSTICS = 10

        private val PARAMETER_NAME = Regex("[A-Za-z_][A-Za-z0-9_.-]*")

        /** Lets a parse error of an option value become clikt's usage error. */
        internal inline fun <T> com.github.ajalt.clikt.parameters.options.OptionCallTransformContext.usage(parse: () -> T): T =
            try {
                parse()
            } catch (e: IllegalArgumentException) {
                fail(e.message ?: "invalid value")
            }

        /** `HOST` or `HOST:PORT` (`[V6ADDR]:PORT`); the port defaults to 18515. */
        fun parsePeer(text: String): Peer.Connect {
            val peer = Peer.parse(text) as Peer.Connect
            require(peer.host.isNotBlank()) { "'$text' has no host: give HOST or HOST:PORT" }
            return peer
        }

        /** Whether a `--peer` value names the TCP port: `HOST:PORT` or `[V6ADDR]:PORT`, as [Peer.parse] splits it. */
        fun namesPort(text: String): Boolean {
            val t = text.trim()
            return if (t.startsWith("[")) t.substringAfter(']', "").isNotEmpty() else ':' in t
        }

        /** `NAME=VALUE` (the value may be empty and may contain '='). */
        fun parseParameter(text: String): Pair<String, String> {
            val eq = text.indexOf('=')
            require(eq >= 0) { "'$text' is not NAME=VALUE" }
            val name = text.substring(0, eq)
            require(PARAMETER_NAME.matches(name)) { "'$name' is not a parameter name (a letter or _, then letters, digits, _ . -)" }
            return name to text.substring(eq + 1)
        }

        /**
         * A kotlin Duration from 1 ms (the resolution every deadline keeps) to [MAX_DURATION]:
         * `30s`, `2m`, `500ms`, `1m 30s`, or a whole number of seconds (`60`), as pingpong's and
         * perftest's users type them; one parser for every command's timeouts.
         */
        fun parseTimeout(text: String): Duration {
            val t = text.trim()
            val d = t.toLongOrNull()?.seconds ?: Duration.parseOrNull(t)
                ?: throw IllegalArgumentException("'$text' is not a whole number of seconds or a duration like 30s, 2m or 500ms")
            require(d.isPositive()) { "the timeout must be positive, not $text" }
            require(d >= 1.milliseconds) { "the timeout must be at least 1ms, not $text" }
            require(d <= MAX_DURATION) { "the timeout must be at most $MAX_DURATION, not $text" }
            return d
        }
    }
}
