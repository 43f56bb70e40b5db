package dev.rdmarun.dsl

import java.security.MessageDigest
import java.util.HexFormat

/**
 * A digest of what both peers must agree on: the shared settings, the parameters and the
 * operations of the plan (kinds, sides, QPs, sizes, counts, barriers). Local choices (device,
 * port, GID index, completion mode, timeout) stay out, so one script runs on different hosts.
 */
object Fingerprint {
    /** Bump when the canonical form changes: old and new peers then differ by version, not by fingerprint. */
    private const val FORMAT = "rdma-run-plan-1"

    fun canonicalLines(plan: ScenarioPlan): List<String> = buildList {
        add(FORMAT)
        plan.settings.shared().forEach { (k, v) -> add("setting $k=$v") }
        plan.parameters.toSortedMap().forEach { (k, v) -> add("parameter $k=$v") }
        plan.ops.map { "op ${it.kind.label} side=${it.side.name.lowercase()} qp=${if (it.qp == OpUse.ALL_QPS) "all" else it.qp} size=${it.size} count=${it.count}" }
            .sorted().forEach { add(it) }
        add("barriers ${plan.barriers}")
    }

    fun of(plan: ScenarioPlan): String {
        val digest = MessageDigest.getInstance("SHA-256")
        for (line in canonicalLines(plan)) {
            digest.update(line.toByteArray(Charsets.UTF_8))
            digest.update('\n'.code.toByte())
        }
        return HexFormat.of().formatHex(digest.digest())
    }
}
