package dev.rdmarun.dsl

import java.security.MessageDigest
import java.util.HexFormat

/**
 * A digest of what both peers must agree on: the shared settings, the parameters and the
 * scenario's source (the script text). Local choices (device, port, GID index, completion mode,
 * timeout) and each side's own remoteAccess stay out, so one script runs on different hosts.
 */
internal object Fingerprint {
    /** Bump when the canonical form changes: old and new peers then differ by version, not by fingerprint. */
    private const val FORMAT = "rdma-run-plan-2"

    fun canonicalLines(plan: ScenarioPlan): List<String> = buildList {
        add(FORMAT)
        plan.settings.shared().forEach { (k, v) -> add("setting $k=$v") }
        plan.parameters.toSortedMap().forEach { (k, v) -> add("parameter $k=$v") }
        plan.sourceDigest?.let { add("script sha256=$it") }
    }

    /**
     * Digests of the plan's shared settings, parameters and script: what the handshake proves
     * part by part ([Handshake.sectionProofs]), so that a mismatch names the part that differs
     * without sending the plan itself.
     */
    fun sections(plan: ScenarioPlan): Map<String, String> = sections(canonicalLines(plan))

    /** [sections] of a plan's [canonicalLines]. */
    fun sections(lines: List<String>): Map<String, String> {
        fun digest(prefix: String) = sha256(lines.filter { it.startsWith(prefix) }.joinToString("") { it + "\n" })
        return linkedMapOf("settings" to digest("setting "), "parameters" to digest("parameter "), "script" to digest("script "))
    }

    fun of(plan: ScenarioPlan): String = sha256(canonicalLines(plan).joinToString("") { it + "\n" })

    fun sha256(text: String): String =
        HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(text.toByteArray(Charsets.UTF_8)))
}
