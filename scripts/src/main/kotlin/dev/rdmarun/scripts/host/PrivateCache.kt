package dev.rdmarun.scripts.host

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.file.FileAlreadyExistsException
import java.nio.file.FileVisitResult
import java.nio.file.Files
import java.nio.file.LinkOption.NOFOLLOW_LINKS
import java.nio.file.NoSuchFileException
import java.nio.file.Path
import java.nio.file.SimpleFileVisitor
import java.nio.file.StandardCopyOption.ATOMIC_MOVE
import java.nio.file.StandardOpenOption.READ
import java.nio.file.attribute.BasicFileAttributes
import java.nio.file.attribute.PosixFilePermissions
import java.security.SecureRandom

/**
 * The compiled-script cache folder [dir], checked before anything in it is trusted, and [secret],
 * the per-user key that [CacheIndex] signs its entries with (the file `key` in [dir], 0600).
 *
 * Nothing under the cache root (the folder's parent) is followed through a symbolic link or
 * chmod-ed: the folder and each file in it must be the user's own, a real folder or file, and
 * writable by no one else. A folder that fails this but is the user's is moved aside, emptied and
 * made again (it may hold someone else's code); one that is not the user's (another owner, a
 * symbolic link) is not used at all.
 */
internal class PrivateCache private constructor(val dir: Path, val secret: ByteArray) {
    companion object {
        private const val S_IFMT = 0xF000
        private const val S_IFDIR = 0x4000
        private const val S_IFREG = 0x8000
        private const val S_IFLNK = 0xA000
        private const val S_ISVTX = 0x200
        private const val GROUP_OTHER_WRITE = 0x12 // 0022
        private const val GROUP_OTHER_ANY = 0x3F // 0077
        private const val KEY = "key"
        private const val KEY_BYTES = 32
        private val PRIVATE = PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------"))

        /** This process's uid. */
        private val me: Int by lazy { Files.getAttribute(Path.of("/proc/self"), "unix:uid") as Int }

        /** The mode and owner of [path] itself (a symbolic link is not followed); null if there is nothing. */
        private class Stat(val mode: Int, val uid: Int, val size: Long) {
            val type get() = mode and S_IFMT
            val modeText: String get() = "%04o".format(mode and 0xFFF)
        }

        private fun stat(path: Path, follow: Boolean = false): Stat? = try {
            val a = if (follow) Files.readAttributes(path, "unix:mode,uid,size") else Files.readAttributes(path, "unix:mode,uid,size", NOFOLLOW_LINKS)
            Stat(a["mode"] as Int, a["uid"] as Int, a["size"] as Long)
        } catch (_: NoSuchFileException) {
            null
        }

        /**
         * [dir] ready for use, made (0700, with the parents this makes) if missing; null, after
         * one [note], when it is not the user's. Throws [IOException] when it cannot be made or
         * rebuilt (a read-only place: no cache, which only costs the compile).
         */
        fun open(dir: Path, note: (String) -> Unit): PrivateCache? {
            val path = dir.toAbsolutePath()
            val root = path.parent ?: throw IOException("$path cannot be a cache folder")
            createMissing(root)
            fun refuse(why: String): PrivateCache? {
                note("not using the compiled-script cache $path: $why; the script is compiled every time")
                return null
            }
            // The root may be a link the user made (~/.cache elsewhere); what it leads to must not let
            // others swap the folder: the user's or root's, and writable by others only if sticky (/tmp).
            val r = stat(root, follow = true) ?: throw NoSuchFileException(root.toString())
            if (r.uid != me && r.uid != 0) return refuse("$root belongs to another user (uid ${r.uid})")
            if (r.mode and GROUP_OTHER_WRITE != 0 && r.mode and S_ISVTX == 0) return refuse("$root is writable by others (mode ${r.modeText})")
            repeat(3) { // another rdma-run may be making or rebuilding it at the same time
                val s = stat(path) ?: try {
                    Files.createDirectory(path, PRIVATE)
                    return PrivateCache(path, loadKey(path))
                } catch (_: FileAlreadyExistsException) {
                    return@repeat
                }
                when {
                    s.type == S_IFLNK -> return refuse("it is a symbolic link")
                    s.type != S_IFDIR -> throw IOException("$path is not a folder")
                    s.uid != me -> return refuse("it belongs to another user (uid ${s.uid})")
                }
                val problem = if (s.mode and GROUP_OTHER_WRITE != 0) "it is writable by others (mode ${s.modeText})" else untrustedEntry(path)
                if (problem == null) return PrivateCache(path, loadKey(path))
                rebuild(root, path, problem, note)
            }
            throw IOException("$path keeps changing under this rdma-run")
        }

        private fun createMissing(root: Path) {
            val missing = generateSequence(root) { it.parent }.takeWhile { !Files.exists(it, NOFOLLOW_LINKS) }.toList().asReversed()
            for (p in missing) {
                try {
                    Files.createDirectory(p, PRIVATE) // 0700 from the start (a umask only takes bits away)
                } catch (_: FileAlreadyExistsException) {
                    // another rdma-run made it meanwhile: checked like any existing folder
                }
            }
        }

        /** Why an entry of [dir] cannot be trusted (not a file of the user's that only the user can write), or null. */
        private fun untrustedEntry(dir: Path): String? = Files.newDirectoryStream(dir).use { entries ->
            entries.firstNotNullOfOrNull { entry ->
                val s = stat(entry) ?: return@firstNotNullOfOrNull null // deleted meanwhile (a stale temp file)
                untrustedFile(entry, s)
            }
        }

        private fun untrustedFile(entry: Path, s: Stat): String? {
            val name = entry.fileName
            return when {
                s.type != S_IFREG -> "$name is not a plain file"
                s.uid != me -> "$name belongs to another user (uid ${s.uid})"
                s.mode and GROUP_OTHER_WRITE != 0 -> "$name is writable by others (mode ${s.modeText})"
                name.toString() == KEY && (s.mode and GROUP_OTHER_ANY != 0 || s.size != KEY_BYTES.toLong()) ->
                    "$name is not a private $KEY_BYTES-byte key (mode ${s.modeText}, ${s.size} bytes)"
                else -> null
            }
        }

        /**
         * Moves [path] aside, makes it again empty and private, and deletes what was moved aside
         * as far as that is the user's: nothing in it is run, and no one else's file is changed.
         */
        private fun rebuild(root: Path, path: Path, problem: String, note: (String) -> Unit) {
            val aside = root.resolve("${path.fileName}.untrusted-%016x".format(SecureRandom().nextLong()))
            try {
                Files.move(path, aside, ATOMIC_MOVE)
            } catch (_: NoSuchFileException) {
                return // another rdma-run moved it first
            }
            val left = deleteOwnTree(aside)
            note("emptied the compiled-script cache $path, which cannot be trusted: $problem" +
                if (left) "; what could not be deleted is left in $aside" else "")
        }

        /** Deletes [top] without following links or entering folders of others; true if something is left. */
        private fun deleteOwnTree(top: Path): Boolean {
            var left = false
            Files.walkFileTree(top, object : SimpleFileVisitor<Path>() {
                override fun preVisitDirectory(dir: Path, attrs: BasicFileAttributes): FileVisitResult =
                    if (stat(dir)?.uid == me) FileVisitResult.CONTINUE else FileVisitResult.SKIP_SUBTREE.also { left = true }

                override fun visitFile(file: Path, attrs: BasicFileAttributes): FileVisitResult {
                    if (!Files.deleteIfExists(file)) left = true
                    return FileVisitResult.CONTINUE
                }

                override fun visitFileFailed(file: Path, exc: IOException): FileVisitResult = FileVisitResult.CONTINUE.also { left = true }

                override fun postVisitDirectory(dir: Path, exc: IOException?): FileVisitResult {
                    try {
                        Files.delete(dir)
                    } catch (_: IOException) {
                        left = true
                    }
                    return FileVisitResult.CONTINUE
                }
            })
            return left
        }

        /**
         * The key of [dir]'s index: read from `key` (the user's own file, mode 0600, not a link),
         * or made. It is written to a temp file (created 0600 with O_EXCL) and linked into place,
         * which fails if the name exists: a concurrent rdma-run never reads half a key.
         */
        fun loadKey(dir: Path): ByteArray {
            val key = dir.resolve(KEY)
            readKey(key)?.let { return it }
            val temp = Files.createTempFile(dir, "$KEY.", ".tmp")
            try {
                Files.write(temp, ByteArray(KEY_BYTES).also(SecureRandom()::nextBytes))
                try {
                    Files.createLink(key, temp)
                } catch (_: FileAlreadyExistsException) {
                    // another rdma-run linked its key first: that one is read below
                }
            } finally {
                Files.deleteIfExists(temp)
            }
            return readKey(key) ?: throw NoSuchFileException(key.toString())
        }

        private fun readKey(key: Path): ByteArray? {
            val s = stat(key) ?: return null
            untrustedFile(key, s)?.let { throw IOException("the compiled-script cache's $it") }
            Files.newByteChannel(key, READ, NOFOLLOW_LINKS).use { channel ->
                val bytes = ByteBuffer.allocate(KEY_BYTES + 1)
                while (channel.read(bytes) > 0 && bytes.hasRemaining()) Unit
                if (bytes.position() != KEY_BYTES) throw IOException("the compiled-script cache's $key is not a $KEY_BYTES-byte key")
                return bytes.array().copyOf(KEY_BYTES)
            }
        }
    }
}
