package dev.rdmarun.scripts.host

import java.io.File
import java.io.IOException
import java.nio.channels.FileChannel
import java.nio.file.Files
import java.nio.file.StandardCopyOption.ATOMIC_MOVE
import java.nio.file.StandardCopyOption.REPLACE_EXISTING
import java.nio.file.StandardOpenOption.CREATE
import java.nio.file.StandardOpenOption.WRITE

/**
 * The compiled-script cache's index: the file `index` in the cache folder, one line per cache
 * key after a header line:
 *
 * ```
 * rdma-run compiled-script index v1
 * KEY SCRIPT_SHA256 CLASSPATH_SHA256 JAR_SHA256
 * ```
 *
 * (the script text's digest, the digest of the DSL and runtime jars and Kotlin version that go
 * into the key with it, and the jar's). Readers read it without a lock: it is only ever replaced
 * whole (temp file, then an atomic rename), so they see one version or the next. Writers take
 * `index.lock` (a file lock, between processes) and a lock within the JVM, so that concurrent
 * compiles of different scripts keep each other's entries. An index that cannot be read or
 * parsed is empty: every jar is then compiled again and the index rewritten.
 */
internal class CacheIndex(private val dir: File) {
    class Entry(val scriptSha256: String, val classpathSha256: String, val jarSha256: String)

    private val file = File(dir, "index")

    /** The entries by key; empty if there is no index or it cannot be read. */
    fun read(): Map<String, Entry> {
        val lines = try {
            file.readLines()
        } catch (_: IOException) {
            return emptyMap()
        }
        if (lines.firstOrNull() != HEADER) return emptyMap()
        return lines.drop(1).mapNotNull { line ->
            val f = line.split(' ')
            if (f.size != 4 || f.any { !HEX.matches(it) }) null else f[0] to Entry(f[1], f[2], f[3])
        }.toMap()
    }

    /**
     * Writes the jar of [key] with [write] (into a temp file of the cache folder), then, under the
     * lock, moves it into place and records its digest: a jar and its entry change together.
     */
    fun store(key: String, scriptText: String, classpathSha256: String, write: (File) -> Unit) {
        val temp = Files.createTempFile(dir.toPath(), "$key.", ".jar.tmp") // 0600, a name no one else picked
        try {
            write(temp.toFile())
            val entry = Entry(ScenarioScriptHost.sha256(scriptText.toByteArray()), classpathSha256,
                ScenarioScriptHost.sha256(Files.readAllBytes(temp)))
            locked {
                // Temp files of a process killed mid-store: nobody moves them any more (a live store's are minutes old at most).
                val stale = System.currentTimeMillis() - STALE_TEMP_MS
                dir.listFiles { f -> f.name.endsWith(".tmp") && f.lastModified() < stale }?.forEach { it.delete() }
                Files.move(temp, File(dir, "$key.jar").toPath(), ATOMIC_MOVE, REPLACE_EXISTING)
                val entries = read() + (key to entry)
                val text = buildString {
                    append(HEADER).append('\n')
                    for ((k, e) in entries.toSortedMap()) append("$k ${e.scriptSha256} ${e.classpathSha256} ${e.jarSha256}\n")
                }
                val next = Files.createTempFile(dir.toPath(), "index.", ".tmp")
                try {
                    Files.writeString(next, text)
                    Files.move(next, file.toPath(), ATOMIC_MOVE, REPLACE_EXISTING)
                } finally {
                    Files.deleteIfExists(next)
                }
            }
        } finally {
            Files.deleteIfExists(temp)
        }
    }

    private fun <T> locked(block: () -> T): T = synchronized(JVM_LOCK) {
        FileChannel.open(File(dir, "index.lock").toPath(), CREATE, WRITE).use { channel ->
            channel.lock().use { block() }
        }
    }

    companion object {
        const val HEADER = "rdma-run compiled-script index v1"
        private val HEX = Regex("[0-9a-f]{40,64}")
        private const val STALE_TEMP_MS = 3_600_000L

        // FileChannel.lock is per process: threads of one JVM queue here first.
        private val JVM_LOCK = Any()
    }
}
