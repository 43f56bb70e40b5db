package dev.rdmarun.dsl

import dev.rdmarun.runtime.FabricKey
import java.io.IOException

/*
 * The handshake on a [ControlConnection], its roles' common steps (the server's accept loop is
 * [ControlServer]'s, the client's connect [ControlClient]'s).
 *
 * The handshake has three steps, and nothing about this side's QPs or memory goes out before the
 * peer passed the first two:
 *  1. [authenticate]: both sides write the magic and an [Intro] (version, role, a fresh nonce,
 *     the kind of secret) at once, and judge the other's: another version, a secret on one side
 *     only end the connection with one sentence. Nothing of the scenario is in it.
 *  2. also in [authenticate]: the client sends its [Proof] of the secret and of each part of the
 *     plan (HMACs over both nonces); the server checks it (constant time) and only then sends its
 *     own, which the client checks. Both derive soft0's fabric key; it never travels.
 *  3. [exchangeHellos]: the [Hello]s (QP endpoints, buffers, rkeys, PSNs), each validated field
 *     by field before use.
 */

/** Ends the handshake with [sentence]: the peer is told [toPeer] (once), this side throws. */
private fun ControlConnection.reject(sentence: String, toPeer: String = sentence, noteNow: Boolean = false): Nothing {
    trySend(Failure(toPeer))
    throw PeerException(sentence).also { it.worthNoting = noteNow }
}

/**
 * Reads the peer's next handshake frame of type [T] ([what] names it), of at most [max] bytes;
 * its failure report or another frame ends the handshake.
 */
private inline fun <reified T : Frame> ControlConnection.readStep(what: String, max: Int = FrameCodec.MAX_INTRO_FRAME): T =
    when (val f = readFrame(what, max = max)) {
        is T -> f
        is Failure -> throw refusal(f)
        else -> throw PeerException("$peerLabel sent ${ControlConnection.frameName(f)} where its $what was due: it is not a compatible rdma-run")
    }

/**
 * Steps 1 and 2 of the handshake (see above): returns soft0's fabric key for this
 * connection ([Handshake.fabricKey], derived on both sides, never sent) once the peer proved
 * that it knows the secret and runs the same plan. Sends nothing but this side's intro and
 * proof, the latter on the server only after the client's proof held. When both proved the
 * secret but their plans differ, both show their plan's lines and end with the first
 * difference, and the server stops waiting for another client ([PeerException.endsTheWait]).
 */
internal fun ControlConnection.authenticate(local: Handshake.Credentials): FabricKey {
    val intro = Intro(CONTROL_PROTOCOL_VERSION, local.role, Handshake.nonce(), local.token.kind)
    // A peer that closed at once (a port scan) breaks this write: what it sent, or its EOF, says more.
    val unsent = try {
        sendIntro(intro)
        null
    } catch (e: PeerException) {
        e
    }
    val frame = try {
        readFrame("hello", magic = true, max = FrameCodec.MAX_INTRO_FRAME).also { if (unsent != null) throw unsent }
    } catch (e: PeerException) {
        // Another version, another protocol, garbage: tell the peer, which may be an rdma-run.
        if (e.cause !is IOException) trySend(Failure(e.message.orEmpty()))
        throw e
    } catch (e: RdmaTimeoutException) {
        trySend(Failure(e.message.orEmpty())) // a silent or dripping peer may still read
        throw e
    }
    val remote = when (frame) {
        is Intro -> frame
        is Failure -> throw refusal(frame)
        else -> throw PeerException("$peerLabel sent ${ControlConnection.frameName(frame)} where its hello was due: it is not a compatible rdma-run")
    }
    Handshake.introMismatch(intro, remote, peerLabel)?.let { reject(printable(it)) }
    val secret = local.token.key()
    try {
        val client = local.role == Role.CLIENT
        val (cn, sn) = if (client) intro.nonce to remote.nonce else remote.nonce to intro.nonce
        val mine = Proof(Handshake.secretProof(secret, local.role, cn, sn), Handshake.sectionProofs(secret, local.sections, local.role, cn, sn))
        if (client) send(mine)
        val proof = readStep<Proof>("proof")
        if (!Handshake.proofMatches(Handshake.secretProof(secret, remote.role, cn, sn), proof.secret)) {
            when {
                local.token.kind == SecretKind.NONE -> reject("$peerLabel sent a wrong proof: it is not a compatible rdma-run")
                client -> reject("$peerLabel does not know the secret (its proof is wrong): it is not the peer this side expects")
                else -> reject(Handshake.secretsDiffer(local.token.kind, remote.secret, peerLabel),
                    toPeer = Handshake.secretsDiffer(remote.secret, local.token.kind, "the ${local.role.label}"), noteNow = true)
            }
        }
        val differing = Handshake.differingSections(Handshake.sectionProofs(secret, local.sections, remote.role, cn, sn), proof.sections)
        if (differing.isNotEmpty() && local.token.kind == SecretKind.NONE) {
            // Without a secret the plan is all a client proves: show nothing more to one that does not match it.
            val words = Handshake.sectionWords(differing)
            reject("$peerLabel runs a different scenario: the $words differ",
                toPeer = "the ${local.role.label} runs a different scenario: the $words differ", noteNow = true)
        }
        if (!client) send(mine)
        if (differing.isNotEmpty()) {
            // Both proved the secret: each shows its plan, and each names the first difference.
            if (!client) send(PlanLines(local.planLines))
            // Only a peer that proved the secret gets here: its plan may be as long as Handshake.validate allows.
            val theirs = readStep<PlanLines>("plan", max = FrameCodec.MAX_FRAME)
            if (client) send(PlanLines(local.planLines))
            if (theirs.lines.size > Handshake.MAX_LIST || theirs.lines.any { it.length > Handshake.MAX_STRING }) {
                throw PeerException("$peerLabel sent an invalid plan: more than ${Handshake.MAX_LIST} lines or a line longer than ${Handshake.MAX_STRING} characters")
            }
            val difference = Handshake.planDifference(local.planLines, theirs.lines, remote.role)
                ?: "the ${Handshake.sectionWords(differing)} differ"
            // A rank of another launcher's run is no client of this one: refused, and the wait goes on for this run's own.
            val foreign = Handshake.otherRun(local.planLines, theirs.lines)
            throw PeerException(printable("$peerLabel runs a different scenario: $difference")).also {
                if (foreign) it.worthNoting = true else it.endsTheWait = true
            }
        }
        return Handshake.fabricKey(local.token, local.fingerprint, cn, sn)
    } finally {
        secret?.fill(0)
    }
}

/**
 * Step 3: sends [local] and returns the remote's hello once it fits this side's
 * ([Handshake.mismatch]) and every field is valid ([Handshake.validate] against [expected]).
 * Both sides send at once: by now each knows the other is its peer.
 */
internal fun ControlConnection.exchangeHellos(local: Hello, expected: Handshake.Expected): Hello {
    send(local)
    val frame = receive("hello") // the peer's failure report ends it
    val remote = frame as? Hello ?: throw PeerException("$peerLabel sent ${ControlConnection.frameName(frame)} where its hello was due: it is not a compatible rdma-run")
    // Both quote the remote's plan and parameters: escaped.
    Handshake.mismatch(local, remote)?.let { reject(printable(it)) }
    Handshake.validate(remote, expected, peerLabel)?.let { reject(printable(it)) }
    return remote
}

/** Steps 1 to 3 in one call (tests; a [local] hello of either role), with [token] or none. */
internal fun ControlConnection.handshake(local: Hello, token: ControlToken = ControlToken.none(), expected: Handshake.Expected? = null): Hello {
    authenticate(Handshake.Credentials(local.role, local.fingerprint, Fingerprint.sections(local.plan), local.plan, token))
    return exchangeHellos(local, expected ?: Handshake.Expected(local.qpCount, local.recvDepth,
        local.qps.firstOrNull()?.buffer?.length ?: 0))
}
