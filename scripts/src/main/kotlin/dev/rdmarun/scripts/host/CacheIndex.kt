package dev.rdmarun.scripts.host

import java.io.File
import java.io.IOException
import java.nio.channels.FileChannel
import java.nio.file.Files
import java.nio.file.StandardCopyOption.ATOMIC_MOVE
import java.nio.file.StandardCopyOption.REPLACE_EXISTING
import java.nio.file.LinkOption.NOFOLLOW_LINKS
import java.nio.file.StandardOpenOption.CREATE
import java.nio.file.StandardOpenOption.READ
import java.nio.file.StandardOpenOption.WRITE
import java.nio.file.attribute.PosixFilePermissions
import java.security.MessageDigest
import javax.crypto.Mac
import javax.crypto.spec.SecretKeySpec

/**
 * The compiled-script cache's index: the file `index` in the cache folder, one line per cache
 * key after a header line:
 *
 * ```
 * rdma-run compiled-script index v2
 * KEY SCRIPT_SHA256 CLASSPATH_SHA256 JAR_SHA256 MAC
 * ```
 *
 * (the script text's digest, the digest of the DSL and runtime jars and Kotlin version that go
 * into the key with it, and the jar's). MAC is HmacSHA256 of the first four fields under [secret],
 * the user's key (the cache folder's `key`, see [PrivateCache]): the index cannot vouch for
 * itself, so a line written by anyone who cannot read the key (a v1 index, a forged line) is not
 * an entry. Readers read it without a lock: it is only ever replaced whole (temp file, then an
 * atomic rename), so they see one version or the next. Writers take `index.lock` (a file lock,
 * between processes) and a lock within the JVM, so that concurrent compiles of different scripts
 * keep each other's entries. An index that cannot be read or parsed is empty: every jar is then
 * compiled again and the index rewritten. [secret] defaults to the folder's own key (tests plant
 * entries so); the host passes the one [PrivateCache.open] checked.
 */
internal class CacheIndex(private val dir: File, private val secret: ByteArray = PrivateCache.loadKey(dir.toPath())) {
    class Entry(val scriptSha256: String, val classpathSha256: String, val jarSha256: String)

    private val file = File(dir, "index")

    /** The entries by key whose MAC is valid; empty if there is no index or it cannot be read. */
    fun read(): Map<String, Entry> = lines().mapNotNull { f -> if (signed(f)) f[0] to Entry(f[1], f[2], f[3]) else null }.toMap()

    /** Whether the index has a line for [key] whose MAC is not valid (written without the user's key). */
    fun forged(key: String): Boolean = lines().any { f -> f[0] == key && !signed(f) }

    /** The well-formed lines' fields. */
    private fun lines(): List<List<String>> {
        val lines = try {
            Files.newInputStream(file.toPath(), READ, NOFOLLOW_LINKS).bufferedReader().use { it.readLines() }
        } catch (_: IOException) {
            return emptyList()
        }
        if (lines.firstOrNull() != HEADER) return emptyList()
        return lines.drop(1).map { it.split(' ') }.filter { f -> f.size == 5 && f.all { HEX.matches(it) } }
    }

    /** Whether a line's [fields] end with the MAC of the others (compared in constant time). */
    private fun signed(fields: List<String>) = MessageDigest.isEqual(mac(fields).toByteArray(), fields[4].toByteArray())

    /** The MAC of an entry's first four [fields]. */
    private fun mac(fields: List<String>): String {
        val hmac = Mac.getInstance("HmacSHA256")
        hmac.init(SecretKeySpec(secret, "HmacSHA256"))
        return hmac.doFinal(fields.take(4).joinToString(" ").toByteArray()).joinToString("") { "%02x".format(it) }
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
                    for ((k, e) in entries.toSortedMap()) {
                        val fields = listOf(k, e.scriptSha256, e.classpathSha256, e.jarSha256)
                        append(fields.joinToString(" ")).append(' ').append(mac(fields)).append('\n')
                    }
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
        FileChannel.open(File(dir, "index.lock").toPath(), setOf(CREATE, WRITE, NOFOLLOW_LINKS), PRIVATE_FILE).use { channel ->
            channel.lock().use { block() }
        }
    }

    companion object {
        const val HEADER = "rdma-run compiled-script index v2"
        private val HEX = Regex("[0-9a-f]{40,64}")
        private const val STALE_TEMP_MS = 3_600_000L
        private val PRIVATE_FILE = PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------"))

        // FileChannel.lock is per process: threads of one JVM queue here first.
        private val JVM_LOCK = Any()
    }
}
