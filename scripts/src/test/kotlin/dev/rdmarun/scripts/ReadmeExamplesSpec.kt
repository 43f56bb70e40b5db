package dev.rdmarun.scripts

import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldBeEmpty
import io.kotest.matchers.collections.shouldNotBeEmpty
import java.io.File

/**
 * The two-host examples a user copies (the README's shell blocks, the samples' and bench scripts'
 * header comments): a server line and the client line after it give the same parameters, since
 * both peers must (the handshake refuses a difference). A client-only `--set qps=2` once made
 * both sides of the README's first example exit 1.
 */
class ReadmeExamplesSpec : FunSpec({
    // Options that set a scenario parameter (PerftestOptions and --set), with a value or without.
    val withValue = setOf("-s", "--size", "-n", "--iters", "-q", "--qp", "-t", "--tx-depth", "-D", "--duration",
        "-I", "--inline-size", "--inline_size", "--set")
    val alone = setOf("-a", "--all")

    fun parameters(line: String): List<String> {
        val words = line.substringBefore(" #").trim().split(Regex("\\s+"))
        return buildList {
            var i = 0
            while (i < words.size) {
                val w = words[i]
                when {
                    w in withValue && i + 1 < words.size -> { add("$w ${words[i + 1]}"); i++ }
                    w in alone -> add(w)
                    w.startsWith("--set=") -> add("--set ${w.removePrefix("--set=")}")
                }
                i++
            }
        }.sorted()
    }

    /** (where, server line, client line) for each server line followed by a client line of the same script. */
    fun pairs(file: File): List<Triple<String, String, String>> {
        val lines = file.readLines().map { it.removePrefix("//").trim().removePrefix("server:").removePrefix("client:").trim() }
        fun script(l: String) = l.split(Regex("\\s+")).getOrNull(1)
        return lines.indices.filter { i ->
            i + 1 < lines.size && lines[i].startsWith("bin/rdma-run ") && " --listen" in lines[i] &&
                lines[i + 1].startsWith("bin/rdma-run ") && " --peer" in lines[i + 1] && script(lines[i]) == script(lines[i + 1])
        }.map { i -> Triple("${file.name}:${i + 1}", lines[i], lines[i + 1]) }
    }

    val files = listOf(File("../README.md")) +
        listOf("../samples", "../bench/scenarios").flatMap { d -> File(d).listFiles { f -> f.name.endsWith(".main.kts") }.orEmpty().sortedBy { it.name } }

    test("every two-host example gives both peers the same parameters") {
        val all = files.flatMap(::pairs)
        all.shouldNotBeEmpty() // the README's write-bw pair at least: the search itself works
        all.filter { (_, server, client) -> parameters(server) != parameters(client) }
            .map { (where, server, client) -> "$where: server ${parameters(server)}, client ${parameters(client)}" }
            .shouldBeEmpty()
    }
})
