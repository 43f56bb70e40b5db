package dev.rdmarun.dsl

import java.io.File
import java.io.IOException
import java.nio.ByteBuffer
import java.nio.channels.SeekableByteChannel
import java.nio.file.FileAlreadyExistsException
import java.nio.file.Files
import java.nio.file.LinkOption.NOFOLLOW_LINKS
import java.nio.file.Path
import java.nio.file.StandardOpenOption.READ
import java.nio.file.attribute.PosixFilePermission
import java.nio.file.attribute.PosixFilePermissions
import java.security.SecureRandom
import java.util.HexFormat

/**
 * The secret both sides of a scenario share: with it, each side proves it knows the secret and the
 * scenario (HMACs over both sides' fresh nonces, [Handshake]) before the other sends anything
 * about its QPs or memory, and soft0's fabric key is derived from it, never sent. The secret
 * never crosses the wire and is never printed.
 *
 * Three kinds:
 * - a token given by the user ([of]: the launcher's `--token` or `RDMA_RUN_TOKEN`): both sides
 *   give the same text;
 * - the **per-user secret** ([userSecret], the default when no token is given): 32 random bytes
 *   in `$XDG_CONFIG_HOME/rdma-run/secret` (by default `~/.config/rdma-run/secret`), created on
 *   first use with mode 0600. Two processes of one user, and hosts that share the home directory,
 *   hold the same one with nothing to type; another host needs a copy of that file (same path,
 *   mode 0600), or both sides a `--token`;
 * - [none], the explicit opt-out (`--no-token`): then whoever knows the scenario (the script and
 *   its parameters) can be the peer, and an observer of the control connection can derive soft0's
 *   fabric key, as with perftest's and ibv_rc_pingpong's exchanges.
 */
public class ControlToken private constructor(
    private val bytes: ByteArray?,
    internal val kind: SecretKind,
    /** Where a per-user secret was read from, for sentences (never its content). */
    internal val source: Path? = null,
) {
    /** The secret's bytes (a copy), or null for [none]. */
    internal fun key(): ByteArray? = bytes?.clone()

    /**
     * soft0's fabric key for one connection, derived from this secret with HKDF-SHA256
     * ([FabricKey.derive]): [salt] holds fresh values both peers saw (their nonces), [purpose]
     * says what the key is for. Both peers derive the same key; the secret never leaves this
     * object and the key never travels. With [none], anyone who saw the salt can derive it too.
     */
    public fun fabricKey(salt: ByteArray, purpose: String): dev.rdmarun.runtime.FabricKey {
        val secret = bytes ?: NO_SECRET
        return dev.rdmarun.runtime.FabricKey.derive(secret, salt, purpose.toByteArray(Charsets.UTF_8))
    }

    override fun toString(): String = when (kind) {
        SecretKind.NONE -> "ControlToken[none]"
        SecretKind.USER -> "ControlToken[per-user secret $source]"
        SecretKind.TOKEN -> "ControlToken[redacted]"
    }

    public companion object {
        /** The environment variable that gives the shared secret, as `--token` does. */
        public const val ENV: String = "RDMA_RUN_TOKEN"

        /**
         * The secret of a run without `--token`: `$RDMA_RUN_TOKEN` when set and not empty, else the
         * per-user secret ([userSecret], which may throw its [ScenarioException]).
         */
        @JvmStatic
        public fun fromEnvironment(): ControlToken =
            System.getenv(ENV)?.takeIf { it.isNotEmpty() }?.let(::of) ?: userSecret()

        /** The token this text (UTF-8) makes; it must not be empty. */
        @JvmStatic
        public fun of(text: String): ControlToken {
            require(text.isNotEmpty()) { "the token is empty" }
            return ControlToken(text.toByteArray(Charsets.UTF_8), SecretKind.TOKEN)
        }

        /**
         * No secret (`--no-token`): the handshake still proves the scenario, but anyone who knows
         * the script and its parameters can pose as the peer, and soft0's traffic can be read and
         * written by an observer of the control connection. For closed test networks only.
         */
        @JvmStatic
        public fun none(): ControlToken = NONE

        private val NONE = ControlToken(null, SecretKind.NONE)

        /** What keys proofs and derivations when there is no secret (`--no-token`): public, so they prove only what else they cover. */
        internal val NO_SECRET = "rdma-run without a secret".toByteArray(Charsets.UTF_8)

        /**
         * A fresh random secret, for peers of one process (the launcher's `--loopback`): nobody
         * else can know it.
         */
        @JvmStatic
        public fun random(): ControlToken = ControlToken(ByteArray(UserSecret.BYTES).also { SecureRandom().nextBytes(it) }, SecretKind.TOKEN)

        /**
         * The per-user secret at [file] (default [UserSecret.defaultFile]), created (mode 0600, in a
         * folder made 0700) when it does not exist. Throws a [ScenarioException] with one sentence
         * when it cannot be used: a symlink, another owner, readable by group or others, not a
         * secret rdma-run wrote, or a folder where it cannot be created.
         */
        @JvmStatic
        @JvmOverloads
        public fun userSecret(file: Path = UserSecret.defaultFile()): ControlToken =
            ControlToken(UserSecret.loadOrCreate(file), SecretKind.USER, file)
    }
}

/** What a side's secret is, as its intro says (never the secret itself): the sentences on a mismatch depend on it. */
@kotlinx.serialization.Serializable
internal enum class SecretKind {
    @kotlinx.serialization.SerialName("token") TOKEN,
    @kotlinx.serialization.SerialName("user") USER,
    @kotlinx.serialization.SerialName("none") NONE,
}

/** The per-user secret file: where it lives, how it is created and checked. */
internal object UserSecret {
    const val BYTES = 32
    private const val MAX_FILE = 1024
    private const val HEADER = "rdma-run per-user secret v1"

    /** `$XDG_CONFIG_HOME/rdma-run/secret`, else `~/.config/rdma-run/secret`. */
    fun defaultFile(): Path {
        val config = System.getenv("XDG_CONFIG_HOME")?.takeIf { it.startsWith("/") }
            ?: (System.getProperty("user.home") + "/.config")
        return File(config, "rdma-run/secret").toPath()
    }

    /** How the sentences name the file: with ~ for the home directory. */
    fun display(file: Path): String {
        val home = System.getProperty("user.home")
        val text = file.toString()
        return if (home != null && text.startsWith("$home/")) "~" + text.substring(home.length) else text
    }

    private fun unusable(file: Path, why: String): Nothing = throw ScenarioException(
        "cannot use the per-user secret ${display(file)}: $why; fix that, or give both sides the same --token (or RDMA_RUN_TOKEN), or --no-token")

    fun loadOrCreate(file: Path): ByteArray {
        repeat(3) {
            read(file)?.let { return it }
            if (create(file)) return read(file) ?: unusable(file, "it vanished right after it was created")
            // Another process created it between the two steps: read what it wrote.
        }
        unusable(file, "it keeps appearing and disappearing")
    }

    /** The secret, or null when there is no file; checks it is ours, private and well-formed. */
    private fun read(file: Path): ByteArray? {
        if (!Files.exists(file, NOFOLLOW_LINKS)) return null
        if (Files.isSymbolicLink(file)) unusable(file, "it is a symbolic link")
        if (!Files.isRegularFile(file, NOFOLLOW_LINKS)) unusable(file, "it is not a regular file")
        checkPrivate(file, folder = false)
        val text = try {
            // NOFOLLOW: a link swapped in since the checks above is refused, not followed.
            Files.newByteChannel(file, setOf<java.nio.file.OpenOption>(READ, NOFOLLOW_LINKS)).use { readBounded(it) }
        } catch (e: IOException) {
            unusable(file, "it cannot be read (${e.message})")
        } ?: unusable(file, "it is larger than $MAX_FILE bytes")
        val lines = text.lines()
        val hex = lines.getOrNull(1)?.trim()
        if (lines.firstOrNull() != HEADER || hex == null || hex.length != 2 * BYTES || !hex.all { it in '0'..'9' || it in 'a'..'f' }) {
            unusable(file, "it is not a secret rdma-run wrote (delete it to have a new one made)")
        }
        return HexFormat.of().parseHex(hex)
    }

    private fun readBounded(channel: SeekableByteChannel): String? {
        val buffer = ByteBuffer.allocate(MAX_FILE + 1)
        while (buffer.hasRemaining() && channel.read(buffer) >= 0) Unit
        if (!buffer.hasRemaining()) return null
        return String(buffer.array(), 0, buffer.position(), Charsets.US_ASCII)
    }

    /** The file (or its folder) must be this user's, and not readable or writable by anyone else. */
    private fun checkPrivate(path: Path, folder: Boolean) {
        val what = if (folder) "its folder ${display(path)}" else "it"
        val owner = try {
            Files.getOwner(path, NOFOLLOW_LINKS).name
        } catch (e: IOException) {
            unusable(path, "the owner of $what cannot be read (${e.message})")
        } catch (_: UnsupportedOperationException) {
            return // no owners on this file system: nothing to check
        }
        val me = System.getProperty("user.name")
        if (owner != me) unusable(path, "$what belongs to $owner, not to $me")
        val mode = try {
            Files.getPosixFilePermissions(path, NOFOLLOW_LINKS)
        } catch (_: UnsupportedOperationException) {
            return
        }
        val open = mode.filter { it.name.startsWith("GROUP") || it.name.startsWith("OTHERS") }
        val exposed = if (folder) open.filter { it == PosixFilePermission.GROUP_WRITE || it == PosixFilePermission.OTHERS_WRITE } else open
        if (exposed.isNotEmpty()) {
            unusable(path, "$what has mode ${PosixFilePermissions.toString(mode)}, open to other users (chmod ${if (folder) "700" else "600"} ${display(path)})")
        }
    }

    /** Creates the secret; false when another process created it first. */
    private fun create(file: Path): Boolean {
        val dir = file.parent
        try {
            if (!Files.exists(dir, NOFOLLOW_LINKS)) {
                Files.createDirectories(dir.parent)
                try {
                    Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")))
                } catch (_: FileAlreadyExistsException) {
                    // made by another process: checked below like any folder
                }
            }
        } catch (e: IOException) {
            unusable(file, "its folder cannot be created (${e.message})")
        }
        if (Files.isSymbolicLink(dir)) unusable(file, "its folder ${display(dir)} is a symbolic link")
        checkPrivate(dir, folder = true)
        val bytes = ByteArray(BYTES).also { SecureRandom().nextBytes(it) }
        val text = "$HEADER\n${HexFormat.of().formatHex(bytes)}\n"
        // Written whole under a temporary name, then linked into place: a reader never sees half a secret,
        // and of two processes creating it at once, one wins and the other reads the winner's.
        val temp = try {
            Files.createTempFile(dir, ".secret.", ".tmp", PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))
        } catch (e: IOException) {
            unusable(file, "it cannot be created (${e.message})")
        }
        try {
            Files.writeString(temp, text)
            Files.createLink(file, temp)
            return true
        } catch (_: FileAlreadyExistsException) {
            return false
        } catch (e: IOException) {
            unusable(file, "it cannot be created (${e.message})")
        } finally {
            runCatching { Files.deleteIfExists(temp) }
        }
    }
}
