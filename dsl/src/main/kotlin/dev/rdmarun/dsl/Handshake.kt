package dev.rdmarun.dsl

internal object Handshake {

    /** Bytes of an [Intro.nonce]. */
    const val NONCE_BYTES = 32

    /** Bounds of the strings and lists a hello may carry. */
    const val MAX_LIST = 1024
    const val MAX_STRING = 4096

    private val HEX64 = Regex("[0-9a-f]{64}")
    private val HEX32 = Regex("[0-9a-f]{32}")
    private val MTUS = setOf(256, 512, 1024, 2048, 4096)
    private const val QP24 = 0xFFFFFF

    /** The parts of the plan that are proved one by one, so that a mismatch names the part. */
    val SECTIONS = listOf("settings", "parameters", "script")

    /** A fresh nonce from SecureRandom. */
    fun nonce(): String = java.util.HexFormat.of().formatHex(ByteArray(NONCE_BYTES).also { RANDOM.nextBytes(it) })

    private val RANDOM = java.security.SecureRandom()


    private fun hmac(key: ByteArray, vararg parts: String): ByteArray {
        val mac = javax.crypto.Mac.getInstance("HmacSHA256")
        mac.init(javax.crypto.spec.SecretKeySpec(key, "HmacSHA256"))
        // Domain-separated: NUL never occurs in the parts (roles, hex digits, section names).
        return mac.doFinal(("rdma-run control protocol $CONTROL_PROTOCOL_VERSION\u0000" + parts.joinToString("\u0000")).toByteArray(Charsets.UTF_8))
    }

    private fun hex(bytes: ByteArray) = java.util.HexFormat.of().formatHex(bytes)

    /**
     * The proof [sender] sends in step 2 that it knows the secret ([secret]: the token's bytes,
     * null without one): HMAC-SHA256 keyed with the secret over a domain-separated transcript
     * (protocol, sender's role, both nonces), good for this connection and this direction only.
     */
    fun secretProof(secret: ByteArray?, sender: Role, clientNonce: String, serverNonce: String): String =
        hex(hmac(secret ?: ControlToken.NO_SECRET, "secret proof", sender.label, clientNonce, serverNonce))

    /**
     * One proof per part of the plan ([SECTIONS], [digests] from [Fingerprint.sections]): keyed by
     * the secret and the part's digest, over the same transcript. A peer without the secret learns
     * nothing of the plan from them; with `--no-token` they prove the plan alone.
     */
    fun sectionProofs(secret: ByteArray?, digests: Map<String, String>, sender: Role, clientNonce: String, serverNonce: String): Map<String, String> =
        SECTIONS.associateWith { section ->
            val key = hmac(secret ?: ControlToken.NO_SECRET, "plan key", section, digests[section].orEmpty())
            hex(hmac(key, "section proof", sender.label, section, clientNonce, serverNonce))
        }

    /** Constant-time comparison of a received proof with the expected one. */
    fun proofMatches(expected: String, received: String): Boolean =
        java.security.MessageDigest.isEqual(expected.toByteArray(Charsets.US_ASCII), received.toByteArray(Charsets.US_ASCII))

    /** The parts of the plan whose proofs do not match, in [SECTIONS] order. */
    fun differingSections(expected: Map<String, String>, received: Map<String, String>): List<String> =
        SECTIONS.filter { !proofMatches(expected.getValue(it), received[it].orEmpty()) }

    /** "the --set parameters and scripts": how a list of differing parts reads. */
    fun sectionWords(sections: List<String>): String = sections.joinToString(" and ") { SECTION_WORDS[it] ?: it }

    /**
     * soft0's fabric key for this connection, which both sides derive (never send): HKDF-SHA256
     * of the secret, salted with both nonces, for this plan ([fingerprint]). Without a secret,
     * whoever knows the plan and saw the nonces can derive it too.
     */
    fun fabricKey(token: ControlToken, fingerprint: String, clientNonce: String, serverNonce: String): dev.rdmarun.runtime.FabricKey =
        token.fabricKey((clientNonce + serverNonce).toByteArray(Charsets.US_ASCII), "rdma-run control protocol $CONTROL_PROTOCOL_VERSION soft0 fabric key\u0000$fingerprint")

    /**
     * The first way the remote's intro does not fit this side's, as one sentence with the remote
     * named [peer] ("the server at host:port"), or null when the two sides may go on to step 2.
     */
    fun introMismatch(local: Intro, remote: Intro, peer: String): String? {
        if (remote.version != local.version) {
            return "remote speaks control protocol version ${remote.version}, this side ${local.version}: use the same rdma-run version on both sides"
        }
        if (remote.role == local.role) {
            return "both sides are ${local.role.label}s: one side must listen and the other connect"
        }
        if (!HEX64.matches(remote.nonce)) return "$peer sent an invalid intro: its nonce is not ${NONCE_BYTES * 2} hex digits"
        if (remote.nonce == local.nonce) return "$peer sent this side's own nonce back: it replays this side's intro"
        if (local.secret != SecretKind.NONE && remote.secret == SecretKind.NONE) {
            return "$peer runs without a secret (--no-token) and this side with ${secretWords(local.secret)}: " +
                "give both sides the same secret, or --no-token to both"
        }
        if (local.secret == SecretKind.NONE && remote.secret != SecretKind.NONE) {
            return "$peer uses ${secretWords(remote.secret)} and this side runs without one (--no-token): " +
                "give both sides the same secret, or --no-token to both"
        }
        return null
    }

    private fun secretWords(kind: SecretKind) = when (kind) {
        SecretKind.TOKEN -> "a token (--token or RDMA_RUN_TOKEN)"
        SecretKind.USER -> "its per-user secret"
        SecretKind.NONE -> "no secret"
    }

    /**
     * The sentence for a proof of the secret that did not hold, from this side ([local]) about
     * [peer] ([remote] its kind of secret): how to give both sides the same one, never the secret
     * itself nor where this side keeps it (the sentence is also sent to the peer).
     */
    fun secretsDiffer(local: SecretKind, remote: SecretKind, peer: String): String = when {
        local == SecretKind.USER && remote == SecretKind.USER ->
            "the per-user secrets differ: copy the file \$XDG_CONFIG_HOME/rdma-run/secret (by default ~/.config/rdma-run/secret) " +
                "from one host to the same place on the other (mode 0600, e.g. with scp -p), or give both sides the same --token"
        local == SecretKind.TOKEN && remote == SecretKind.TOKEN -> "the tokens differ: give both sides the same --token or RDMA_RUN_TOKEN"
        else -> "this side uses ${secretWords(local)} and $peer ${secretWords(remote)}: give both sides the same --token " +
            "(or RDMA_RUN_TOKEN), or neither, so that both use the per-user secret"
    }

    /**
     * The first difference between two plans' lines ([ScenarioPlan.canonicalLines]) in the words
     * of this side: "--set count is 100 here and 99 on the client" ("-q (--set qps) is 2 here..."
     * for a parameter a launcher flag gives). Null when they are the same.
     */
    fun planDifference(local: List<String>, remote: List<String>, peerRole: Role): String? {
        fun entries(lines: List<String>) = lines.drop(1).associate { line ->
            val eq = line.indexOf('=')
            if (eq < 0) line to "" else line.substring(0, eq) to line.substring(eq + 1)
        }
        val mine = entries(local)
        val theirs = entries(remote)
        val on = "on the ${peerRole.label}"
        // Parameters first: a --set that differs is the cause of the settings it changes.
        val order = listOf("parameter ", "setting ", "script ")
        for (key in (mine.keys + theirs.keys).distinct().sortedBy { k -> order.indexOfFirst { k.startsWith(it) }.let { if (it < 0) order.size else it } }) {
            val l = mine[key]
            val r = theirs[key]
            if (l == r) continue
            val name = when {
                key == "setting $RUN_SETTING" ->
                    return "the launchers' runs differ (job ${l ?: "none"} here, ${r ?: "none"} $on): is another run using the rendezvous port?"
                key.startsWith("parameter ") -> key.removePrefix("parameter ").let { p ->
                    StandardParameters.FLAGS[p]?.let { "${it.substringBefore('/')} (--set $p)" } ?: "--set $p"
                }
                key.startsWith("setting ") -> "the setting " + key.removePrefix("setting ")
                key.startsWith("script ") -> return "the scripts differ (SHA-256 ${l?.take(12) ?: "none"} here, ${r?.take(12) ?: "none"} $on)"
                else -> key
            }
            return when {
                l == null -> "$name is $r $on and not set here"
                r == null -> "$name is $l here and not set $on"
                else -> "$name is $l here and $r $on"
            }
        }
        return if (local == remote) null else "the plans' formats differ: use the same rdma-run version on both sides"
    }

    /** Whether two plans name different launcher runs ([Ranks.run]): the peer belongs to another run. */
    fun otherRun(local: List<String>, remote: List<String>): Boolean {
        fun run(lines: List<String>) = lines.firstOrNull { it.startsWith("setting $RUN_SETTING=") }
        return run(local) != run(remote)
    }

    private val SECTION_WORDS = mapOf("settings" to "shared settings", "parameters" to "--set parameters", "script" to "scripts")

    /**
     * What this side proves in step 2 without sending it: its [role], its plan ([fingerprint],
     * the [sections]' digests from [Fingerprint.sections], the [planLines] it shows a peer that
     * proved the secret when the plans differ) and its secret ([token]).
     */
    class Credentials(val role: Role, val fingerprint: String, val sections: Map<String, String>, val planLines: List<String>, val token: ControlToken) {
        constructor(plan: ScenarioPlan, token: ControlToken) :
            this(plan.role, plan.fingerprint, Fingerprint.sections(plan), plan.canonicalLines(), token)
    }

    /** The limits a remote hello is checked against ([validate]): this side's scenario. */
    class Expected(val qpCount: Int, val recvDepth: Int, val dataBytes: Long, val creditBytes: Long = 8)

    /**
     * Checks every field of the remote's hello before anything uses it: counts match the plan,
     * QPNs and PSNs are 24-bit, LIDs 16-bit, GIDs 16 bytes, MTUs valid, buffer lengths exactly
     * this scenario's (so never negative nor larger than what was registered), address plus
     * length does not overflow, strings and lists are bounded. Returns the first problem as one sentence naming the field, or null.
     */
    fun validate(remote: Hello, expected: Expected, peer: String): String? {
        fun bad(field: String, problem: String) = "$peer sent an invalid hello: $field $problem"
        if (remote.qpCount != expected.qpCount) return bad("qpCount", "is ${remote.qpCount}, not the ${expected.qpCount} of this scenario")
        if (remote.qps.size != expected.qpCount) return bad("qps", "lists ${remote.qps.size} QP endpoints, not ${expected.qpCount}")
        if (remote.recvDepth != expected.recvDepth) return bad("recvDepth", "is ${remote.recvDepth}, not the ${expected.recvDepth} of this scenario")
        if (remote.maxDestRdAtomic !in 0..255) return bad("maxDestRdAtomic", "is ${remote.maxDestRdAtomic}, outside 0..255")
        if (!HEX64.matches(remote.fingerprint)) return bad("fingerprint", "is not 64 hex digits")
        if (remote.parameters.size > MAX_LIST) return bad("parameters", "has ${remote.parameters.size} entries, more than $MAX_LIST")
        if (remote.parameters.any { (k, v) -> k.length > MAX_STRING || v.length > MAX_STRING }) {
            return bad("parameters", "has a name or value longer than $MAX_STRING characters")
        }
        if (remote.plan.size > MAX_LIST) return bad("plan", "has ${remote.plan.size} lines, more than $MAX_LIST")
        if (remote.plan.any { it.length > MAX_STRING }) return bad("plan", "has a line longer than $MAX_STRING characters")
        for ((i, q) in remote.qps.withIndex()) {
            val at = "qps[$i]"
            if (q.qpn !in 1..QP24) return bad("$at.qpn", "is ${q.qpn}, not a 24-bit QP number")
            if (q.psn !in 0..QP24) return bad("$at.psn", "is ${q.psn}, not a 24-bit PSN")
            if (q.lid !in 0..0xFFFF) return bad("$at.lid", "is ${q.lid}, not a 16-bit LID")
            if (!HEX32.matches(q.gid)) return bad("$at.gid", "'${printable(q.gid, 40)}' is not 16 bytes in 32 hex digits")
            if (q.mtu !in MTUS) return bad("$at.mtu", "is ${q.mtu}, not 256, 512, 1024, 2048 or 4096")
            region(q.buffer, expected.dataBytes)?.let { return bad("$at.buffer", it) }
            region(q.credit, expected.creditBytes)?.let { return bad("$at.credit", it) }
        }
        return null
    }

    private fun region(b: BufferInfo, bytes: Long): String? = when {
        b.length != bytes -> "length is ${b.length}, not the $bytes bytes this scenario registers"
        // An unsigned 64-bit address: addr + length must not wrap around.
        java.lang.Long.compareUnsigned(b.addr, -1L - b.length) > 0 ->
            "address 0x${java.lang.Long.toHexString(b.addr)} plus length ${b.length} overflows 64 bits"
        else -> null
    }

    /**
     * The first way the remote's hello does not fit this side's, as one sentence seen from this
     * side ("remote has 2 QPs, this side 4"), or null when they fit.
     */
    fun mismatch(local: Hello, remote: Hello): String? {
        if (remote.version != local.version) {
            return "remote speaks control protocol version ${remote.version}, this side ${local.version}: use the same rdma-run version on both sides"
        }
        if (remote.role == local.role) {
            return "both sides are ${local.role.label}s: one side must listen and the other connect"
        }
        if (remote.qpCount != local.qpCount) {
            return "remote has ${remote.qpCount} QP${if (remote.qpCount == 1) "" else "s"}, this side ${local.qpCount}"
        }
        if (remote.qps.size != remote.qpCount) {
            return "the remote's hello lists ${remote.qps.size} QP endpoints for ${remote.qpCount} QPs: it is not a compatible rdma-run"
        }
        parameterMismatch(local.parameters, remote.parameters)?.let { return it }
        if (remote.fingerprint != local.fingerprint) {
            val mine = local.plan.toSet()
            val theirs = remote.plan.toSet()
            val remoteOnly = remote.plan.firstOrNull { it !in mine }
            val localOnly = local.plan.firstOrNull { it !in theirs }
            val diff = when {
                remoteOnly != null && localOnly != null -> ": remote has '$remoteOnly', this side '$localOnly'"
                remoteOnly != null -> ": remote has '$remoteOnly', this side does not"
                localOnly != null -> ": this side has '$localOnly', remote does not"
                else -> ""
            }
            return "remote runs a different scenario (plan ${remote.fingerprint.take(12)}, this side ${local.fingerprint.take(12)})$diff"
        }
        return null
    }

    private fun parameterMismatch(local: Map<String, String>, remote: Map<String, String>): String? {
        for (name in (local.keys + remote.keys).sorted()) {
            val l = local[name]
            val r = remote[name]
            when {
                l == r -> continue
                l == null -> return "parameter $name is set on the remote ($r) but not on this side"
                r == null -> return "parameter $name is set on this side ($l) but not on the remote"
                else -> return "parameter $name is $r on the remote, $l on this side"
            }
        }
        return null
    }
}
