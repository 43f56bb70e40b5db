package dev.rdmarun.dsl

import java.io.Closeable
import java.net.InetAddress
import java.net.ServerSocket
import java.util.concurrent.atomic.AtomicReference
import kotlin.time.Duration

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

    /** The last barrier's number, once it began ([barrier] with `last`): its release ends the run here. */
    @Volatile
    private var lastSeq = -1

    /** "rank 3 (host 10.0.0.3, pid 4242)"; this rank's own host is left out of rank 0's sentences. */
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
                onLost = { e -> if (!ended) fail(PeerException(if (rank == 0) "${describe(r)} is lost: ${e.message}" else "rank 0 ended the run: ${e.message}", e), told = r) },
                onHeartbeat = {},
                // In order with the connection's end: the last barrier's release comes before rank 0 closes.
                onFrame = { if (it is RankBarrier && it.seq == lastSeq) ended = true },
                heartbeat = { Heartbeat(waiting = doing) },
            )
        }
    }

    /**
     * Records the first failure and tells the others: rank 0 every other rank (but [told], which
     * said it), another rank rank 0, which passes it on.
     */
    fun fail(cause: Throwable, told: Int? = null) {
        if (!failureRef.compareAndSet(null, cause)) return
        val sentence = if (rank == 0 || told != null) cause.message.orEmpty() else "${describe(rank)} failed: ${cause.message}"
        for ((r, c) in hub) if (r != told) c.trySend(Failure(printable(sentence, 2 * MAX_PEER_TEXT)))
        onFailure(cause)
    }

    /**
     * A barrier across every rank, through rank 0 (see [RanksScope.barrier]). The [last] one ends
     * the run: once every rank reached it, a rank that closes its connections is no failure.
     */
    suspend fun barrier(what: String = "barrier ${barrierSeq + 1}", last: Boolean = false) {
        val seq = ++barrierSeq
        if (last) lastSeq = seq
        val check: () -> Unit = { failure?.let { throw it } }
        doing = what
        try {
            if (rank == 0) {
                for ((r, c) in hub) c.await(RankBarrier(seq), "${describe(r)} to reach $what", check)
                if (last) ended = true
                kotlinx.coroutines.withContext(kotlinx.coroutines.Dispatchers.IO) { hub.values.forEach { it.send(RankBarrier(seq)) } }
            } else {
                val c = hub.getValue(0)
                kotlinx.coroutines.withContext(kotlinx.coroutines.Dispatchers.IO) { c.send(RankBarrier(seq)) }
                c.await(RankBarrier(seq), "every rank to reach $what (rank 0 says when)", check)
            }
        } finally {
            doing = null
        }
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
         * socket it opened is registered with [sockets] as soon as it exists, so that closing them
         * (a cancellation) ends the wait; on failure all are closed.
         */
        fun meet(ranks: Ranks, timeout: Duration, credentials: Handshake.Credentials, sockets: MutableList<Closeable>,
                 note: (String) -> Unit, keepWaiting: () -> Boolean): RankTeam {
            val opened = ArrayList<Closeable>()
            fun <T : Closeable> opened(c: T): T = c.also { synchronized(sockets) { sockets.add(it); opened.add(it) } }
            try {
                val listeners = (ranks.rank + 1 until ranks.size).associateWith { opened(ServerSocket(0)) }
                val pid = ProcessHandle.current().pid()
                return when (val at = ranks.rendezvous) {
                    is Peer.Listen -> {
                        val rendezvous = opened(ControlServer.listen(at, timeout))
                        val accepted = ControlServer.acceptAll(rendezvous, timeout, credentials, ranks.size - 1, keepWaiting, note)
                        accepted.forEach { opened(it.connection) }
                        val end = deadlineAfter(timeout)
                        val hellos = HashMap<Int, Pair<ControlConnection, RankHello>>()
                        for (a in accepted) {
                            val c = a.connection
                            c.handshakeDeadline(end)
                            val hello = c.receive("rank's hello") as? RankHello
                                ?: throw PeerException("${c.peerLabel} sent something else than a rank's hello: it is not a compatible rdma-run")
                            validate(hello, ranks.size, c.peerLabel)?.let { c.trySend(Failure(it)); throw PeerException(it) }
                            hellos.put(hello.rank, c to hello)?.let {
                                val sentence = "two processes say they are rank ${hello.rank} (${it.first.remoteHost} and ${c.remoteHost}): is another run using the rendezvous port?"
                                c.trySend(Failure(sentence))
                                throw PeerException(sentence)
                            }
                        }
                        rendezvous.close()
                        val hosts = List(ranks.size) { r -> if (r == 0) "" else hellos.getValue(r).first.remoteHost }
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
                        val c = opened(ControlClient.connect(at, timeout, keepWaiting))
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
                opened.forEach { runCatching { it.close() } }
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
