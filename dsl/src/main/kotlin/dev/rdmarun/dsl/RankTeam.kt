package dev.rdmarun.dsl

import java.io.Closeable
import java.net.InetAddress
import java.net.ServerSocket
import java.util.concurrent.atomic.AtomicReference
import kotlin.time.Duration
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.withContext

/**
 * The ranks of a run once they met at the rendezvous ([meet]): every rank's host and pid, the
 * listeners this rank opened for the higher ranks, the ports the lower ranks opened for it, and
 * the hub, rank 0's connection to every other rank (each other rank's to rank 0), which carries
 * barriers, failures and heartbeats until the end ([close]).
 */
internal class RankTeam private constructor(
    val rank: Int,
    val size: Int,
    private val timeout: Duration,
    /** Rank 0: every other rank's connection, by rank; another rank: rank 0's, at 0. */
    private val hub: Map<Int, ControlConnection>,
    /** The listener this rank opened for each higher rank. */
    private val listeners: Map<Int, ServerSocket>,
    val hosts: List<String>,
    val pids: List<Long>,
    /** For each lower rank, the port it listens on for this one. */
    private val ports: List<Int>,
) : Closeable {
    private val failureRef = AtomicReference<Throwable?>(null)

    /** The first failure of the run, here or told by another rank; null while it runs. */
    val failure: Throwable? get() = failureRef.get()

    @Volatile
    private var ended = false

    @Volatile
    private var onFailure: (Throwable) -> Unit = {}

    /** What this rank waits for now, for the heartbeats it sends (and so for the sentences of the others). */
    @Volatile
    var doing: String? = null

    private var barrierSeq = 0

    /**
     * Since when (System.nanoTime()) each connected rank's heartbeats say it runs code of its own,
     * outside any pair, barrier or gathering (their `waiting` is null); absent: it does not.
     * A wait for such a rank ends once that lasted the timeout ([idleCheck]).
     */
    private val idleSince = java.util.concurrent.ConcurrentHashMap<Int, Long>()

    /** The last barrier's number, once it began ([barrier] with `last`): its release ends the run here. */
    @Volatile
    private var lastSeq = -1

    /** "rank 3 (host 10.0.0.3, pid 4242)". */
    fun describe(r: Int): String = "rank $r (" + (if (hosts[r].isEmpty()) "" else "host ${printable(hosts[r], 80)}, ") + "pid ${pids[r]})"

    /** The pair scenario's peer: this rank listens for a higher rank, connects to a lower one. */
    fun peerOf(other: Int): Pairing {
        val pair = RankPair(rank, other, size)
        return if (other > rank) Pairing(listeners.getValue(other), describe(other), pair)
            else Pairing(null, describe(other), pair)
    }

    /** The [Peer] of the pair with [other]: [peerOf]'s listener port, or the lower rank's address. */
    fun peer(other: Int): Peer =
        if (other > rank) Peer.Listen(listeners.getValue(other).localPort) else Peer.Connect(hosts[other], ports[other])

    /**
     * From now on the hub's connections are watched: a failure a rank reports, a closed connection
     * or silence for the timeout ends the run through [fail]; [onFailure] hears it (once).
     */
    fun startWatching(onFailure: (Throwable) -> Unit) {
        this.onFailure = onFailure
        for ((r, c) in hub) {
            c.startWatching(
                onLost = { e -> if (!ended) fail(PeerException(lost(r, e), e), told = r) },
                onHeartbeat = { hb -> if (hb.waiting == null) idleSince.putIfAbsent(r, System.nanoTime()) else idleSince.remove(r) },
                // In order with the connection's end: the last barrier's release comes before rank 0 closes.
                onFrame = { if (it is RankBarrier && it.seq == lastSeq) ended = true },
                heartbeat = { Heartbeat(waiting = doing) },
            )
        }
    }

    /**
     * What this rank says when rank [r]'s connection ends with [e]: the sentence of a rank that
     * reported its failure (it names itself), else that [r] is lost.
     */
    private fun lost(r: Int, e: Exception): String = (e as? PeerException)?.peerSaid ?: "${describe(r)} is lost: ${e.message}"

    /**
     * Records the first failure and tells the others: rank 0 every other rank (but [told], which
     * said it), another rank rank 0, which passes it on.
     */
    fun fail(cause: Throwable, told: Int? = null) {
        if (!failureRef.compareAndSet(null, cause)) return
        val sentence = if (told != null) cause.message.orEmpty() else "${describe(rank)} failed: ${cause.message}"
        for ((r, c) in hub) if (r != told) c.trySend(Failure(printable(sentence, MAX_PEER_SENTENCE)))
        onFailure(cause)
    }

    /**
     * A barrier across every rank, through rank 0 (see [RanksScope.barrier]). The [last] one ends
     * the run: once every rank reached it, a rank that closes its connections is no failure.
     */
    suspend fun barrier(what: String = "barrier ${barrierSeq + 1}", last: Boolean = false) {
        val seq = ++barrierSeq
        if (last) lastSeq = seq
        doing = what
        try {
            if (rank == 0) {
                for ((r, c) in hub) c.await(RankBarrier(seq), "${describe(r)} to reach $what", idleCheck(r, what))
                if (last) ended = true
                withContext(Dispatchers.IO) { hub.values.forEach { it.send(RankBarrier(seq)) } }
            } else {
                val c = hub.getValue(0)
                withContext(Dispatchers.IO) { c.send(RankBarrier(seq)) }
                c.await(RankBarrier(seq), "every rank to reach $what (rank 0 says when)", idleCheck(0, what))
            }
        } finally {
            doing = null
        }
    }

    /**
     * Every rank's pair results on rank 0 (this rank's [own] first, then by rank), each checked
     * before use; another rank sends its own to rank 0 and gets an empty list.
     */
    suspend fun gather(own: List<ScenarioResult>): List<ScenarioResult> {
        doing = "gathering the results on rank 0"
        try {
            if (rank != 0) {
                withContext(Dispatchers.IO) { hub.getValue(0).send(RankResults(own)) }
                return emptyList()
            }
            val all = ArrayList(own)
            for (r in hub.keys.sorted()) {
                val sent = (hub.getValue(r).await(RankResults(emptyList()), "${describe(r)} to send its results", idleCheck(r, "the end of its run")) as RankResults).results
                invalid(r, sent)?.let { throw PeerException("${describe(r)} sent invalid results: $it: it is not a compatible rdma-run") }
                all += sent
            }
            return all
        } finally {
            doing = null
        }
    }

    /**
     * What a wait for rank [r] checks every 100 ms: the run's failure, and that [r] has not run
     * code of its own (outside pairs and barriers, per its heartbeats) for the timeout. Pairs and
     * barriers bound themselves; a rank that loops in its own code would hold every other rank.
     */
    private fun idleCheck(r: Int, what: String): () -> Unit = {
        failure?.let { throw it }
        val since = idleSince[r]
        if (since != null && System.nanoTime() - since - timeout.inWholeNanoseconds > 0) {
            throw RdmaTimeoutException("${describe(r)} did not reach $what within $timeout: it runs code of its own, outside any pair or barrier")
        }
    }

    /** The first problem of rank [r]'s [results], or null. */
    private fun invalid(r: Int, results: List<ScenarioResult>): String? = when {
        results.size > Handshake.MAX_LIST -> "${results.size} results, more than ${Handshake.MAX_LIST}"
        results.any { val p = it.pair; p == null || p.rank != r || p.ranks != size || p.peerRank !in 0 until size || p.peerRank == r } ->
            "a result of another pair than rank $r's"
        results.any { it.durationNanos < 0 || it.total.bytesSent < 0 || it.total.bytesReceived < 0 || it.total.operations < 0 || it.total.messagesReceived < 0 } ->
            "a negative count or duration"
        else -> null
    }

    override fun close() {
        ended = true
        hub.values.forEach { runCatching { it.close() } }
        listeners.values.forEach { runCatching { it.close() } }
    }

    companion object {
        /** The version of the rendezvous' frames ([RankHello]). */
        const val VERSION = 1

        /**
         * The rendezvous (see [rdmaRanks]), blocking, under one deadline, the [timeout]: binds this
         * rank's listeners, meets rank 0 (rank 0: every other rank) and returns the team. Every
         * socket it opens is added to [sockets] (empty at the call) as soon as it exists, so that
         * closing them (a cancellation) ends the wait; on failure all are closed.
         */
        fun meet(ranks: Ranks, timeout: Duration, credentials: Handshake.Credentials, sockets: MutableList<Closeable>,
                 note: (String) -> Unit, keepWaiting: () -> Boolean): RankTeam {
            fun <T : Closeable> opened(c: T): T = c.also { synchronized(sockets) { sockets.add(it) } }
            try {
                val listeners = (ranks.rank + 1 until ranks.size).associateWith { opened(ServerSocket(0)) }
                val pid = ProcessHandle.current().pid()
                return when (val at = ranks.rendezvous) {
                    is Peer.Listen -> {
                        val rendezvous = opened(ControlServer.listen(at, timeout))
                        val accepted = ControlServer.acceptAll(rendezvous, timeout, credentials, ranks.size - 1, keepWaiting, note, who = "a rank")
                        accepted.forEach { opened(it.connection) }
                        val end = deadlineAfter(timeout)
                        val hellos = HashMap<Int, Pair<ControlConnection, RankHello>>()
                        // A bad hello ends the rendezvous for every rank, which all hear why.
                        fun refuse(sentence: String): Nothing {
                            accepted.forEach { it.connection.trySend(Failure("rank 0 ended the rendezvous: $sentence")) }
                            throw PeerException(sentence)
                        }
                        for (a in accepted) {
                            val c = a.connection
                            c.handshakeDeadline(end)
                            val hello = c.receive("rank's hello") as? RankHello
                                ?: refuse("${c.peerLabel} sent something else than a rank's hello: it is not a compatible rdma-run")
                            validate(hello, ranks.size, c.peerLabel)?.let { refuse(it) }
                            hellos.put(hello.rank, c to hello)?.let {
                                refuse("two processes say they are rank ${hello.rank} (${it.first.remoteHost} and ${c.remoteHost}): is another run using the rendezvous port?")
                            }
                        }
                        rendezvous.close()
                        // Rank 0's own: the address the ranks reached (its failure, told to them, names it as theirs do).
                        val hosts = List(ranks.size) { r -> if (r == 0) hellos.getValue(1).first.localHost else hellos.getValue(r).first.remoteHost }
                        val pids = List(ranks.size) { r -> if (r == 0) pid else hellos.getValue(r).second.pid }
                        for ((r, entry) in hellos) {
                            val (c, _) = entry
                            // Rank 0's address for each rank: where that rank reached it.
                            val table = RankTable(hosts.mapIndexed { i, h -> if (i == 0) c.localHost else h }, pids,
                                List(r) { i -> if (i == 0) listeners.getValue(r).localPort else hellos.getValue(i).second.ports[r - i - 1] })
                            c.send(table)
                        }
                        RankTeam(0, ranks.size, timeout, hellos.mapValues { it.value.first }, listeners, hosts, pids, emptyList())
                    }
                    is Peer.Connect -> {
                        val c = try {
                            opened(ControlClient.connect(at, timeout, keepTrying = keepWaiting))
                        } catch (e: RdmaTimeoutException) {
                            // ControlClient's hint speaks of --listen; rank 0 may also have ended already.
                            throw RdmaTimeoutException("rank ${ranks.rank} found no rank 0 at ${printable(at.host, 80)}:${at.port} within $timeout: " +
                                "${e.cause?.message ?: "no answer"} (is rank 0 started there, with the same rendezvous port? it stops listening once every rank came, or when it fails)", e)
                        }
                        c.authenticate(credentials)
                        c.send(RankHello(VERSION, ranks.rank, ranks.size, pid, (ranks.rank + 1 until ranks.size).map { listeners.getValue(it).localPort }))
                        c.handshakeDeadline(deadlineAfter(timeout)) // rank 0 answers once every rank came: as long as that may take
                        val table = c.receive("table of ranks") as? RankTable
                            ?: throw PeerException("rank 0 sent something else than the table of ranks: it is not a compatible rdma-run")
                        validate(table, ranks)?.let { throw PeerException("rank 0 sent an invalid table of ranks: $it") }
                        // Rank 0's own address: the one this rank reached it at, whatever rank 0 says.
                        val hosts = table.hosts.mapIndexed { i, h -> if (i == 0) at.host else h }
                        RankTeam(ranks.rank, ranks.size, timeout, mapOf(0 to c), listeners, hosts, table.pids, table.ports)
                    }
                }
            } catch (e: Throwable) {
                synchronized(sockets) { sockets.toList() }.forEach { runCatching { it.close() } }
                throw e
            }
        }

        /** The first problem of a rank's hello, as one sentence, or null. */
        private fun validate(h: RankHello, size: Int, who: String): String? = when {
            h.version != VERSION -> "$who speaks rendezvous version ${h.version}, this side $VERSION: use the same rdma-run version on every rank"
            h.ranks != size -> "$who says the run has ${h.ranks} ranks, rank 0 says $size: start every rank with the same number"
            h.rank !in 1 until size -> "$who says it is rank ${h.rank}, not one of 1..${size - 1}"
            h.pid <= 0 -> "$who sent pid ${h.pid}, not a process id"
            h.ports.size != size - 1 - h.rank -> "$who (rank ${h.rank}) sent ${h.ports.size} ports, not one for each of the ${size - 1 - h.rank} higher ranks"
            h.ports.any { it !in 1..65535 } -> "$who (rank ${h.rank}) sent a TCP port outside 1..65535"
            else -> null
        }

        /** The first problem of rank 0's table, or null. */
        private fun validate(t: RankTable, ranks: Ranks): String? = when {
            t.hosts.size != ranks.size || t.pids.size != ranks.size -> "it lists ${t.hosts.size} hosts and ${t.pids.size} pids, not ${ranks.size}"
            t.ports.size != ranks.rank -> "it lists ${t.ports.size} ports, not one for each of the ${ranks.rank} lower ranks"
            t.ports.any { it !in 1..65535 } -> "a TCP port is outside 1..65535"
            t.pids.any { it <= 0 } -> "a pid is not a process id"
            t.hosts.any { it.isEmpty() || it.length > 255 || !isAddress(it) } -> "a host is not an IP address"
            else -> null
        }

        /** A literal IPv4 or IPv6 address (rank 0 sends the addresses it saw): no name is looked up. */
        private fun isAddress(text: String): Boolean =
            (text.all { it.isDigit() || it == '.' } || (text.contains(':') && text.all { it.isLetterOrDigit() || it == ':' || it == '.' || it == '%' })) &&
                runCatching { InetAddress.getByName(text) }.isSuccess
    }
}
