package dev.rdmarun.dsl

import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain
import io.kotest.matchers.string.shouldStartWith
import java.nio.file.Files
import java.nio.file.LinkOption.NOFOLLOW_LINKS
import java.nio.file.Path
import java.nio.file.attribute.PosixFilePermissions
import java.util.concurrent.Callable
import java.util.concurrent.Executors

/**
 * The per-user secret, the default of the control connection: made on first use (0600 in a 0700
 * folder), the same for every later use and for processes racing to make it, and refused with one
 * sentence when anyone else could read, write or have planted it.
 */
class UserSecretSpec : FunSpec({
    val root = Files.createTempDirectory("user-secret")
    var n = 0
    fun fresh(): Path = root.resolve("home${n++}/rdma-run/secret")
    fun mode(p: Path) = PosixFilePermissions.toString(Files.getPosixFilePermissions(p, NOFOLLOW_LINKS))
    fun refused(file: Path): String = shouldThrow<ScenarioException> { ControlToken.userSecret(file) }.message!!

    test("made on first use, mode 0600 in a folder of mode 0700, and the same secret every time after") {
        val file = fresh()
        val first = ControlToken.userSecret(file)
        mode(file) shouldBe "rw-------"
        mode(file.parent) shouldBe "rwx------"
        first.key()!!.size shouldBe UserSecret.BYTES
        ControlToken.userSecret(file).key()!!.toList() shouldBe first.key()!!.toList()
        ControlToken.userSecret(fresh()).key()!!.toList() shouldNotBeSameAs first.key()!!.toList()
        first.toString() shouldContain "per-user secret"
        first.toString().contains(first.key()!!.joinToString("") { "%02x".format(it) }) shouldBe false
    }

    test("processes racing to make it all get the one that was made") {
        val file = fresh()
        val pool = Executors.newFixedThreadPool(8)
        try {
            val keys = pool.invokeAll(List(16) { Callable { ControlToken.userSecret(file).key()!!.toList() } }).map { it.get() }
            keys.toSet().size shouldBe 1
        } finally {
            pool.shutdown()
        }
        Files.list(file.parent).use { it.map { p -> p.fileName.toString() }.toList() } shouldBe listOf("secret") // no temp file left
    }

    test("readable by others: refused with the chmod that fixes it") {
        val file = fresh()
        ControlToken.userSecret(file)
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"))
        refused(file) shouldBe "cannot use the per-user secret $file: it has mode rw-r--r--, open to other users (chmod 600 $file); " +
            "fix that, or give both sides the same --token (or RDMA_RUN_TOKEN), or --no-token"
    }

    test("a folder others can write to: refused, nothing made in it") {
        val file = fresh()
        Files.createDirectories(file.parent)
        Files.setPosixFilePermissions(file.parent, PosixFilePermissions.fromString("rwxrwxrwx"))
        refused(file) shouldContain "its folder ${file.parent} has mode rwxrwxrwx, open to other users (chmod 700 ${file.parent})"
        Files.exists(file, NOFOLLOW_LINKS) shouldBe false
    }

    test("a symbolic link in its place is refused, not followed") {
        val file = fresh()
        Files.createDirectories(file.parent, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")))
        val elsewhere = Files.createTempFile(root, "planted", "")
        Files.writeString(elsewhere, "rdma-run per-user secret v1\n" + "ab".repeat(32) + "\n")
        Files.setPosixFilePermissions(elsewhere, PosixFilePermissions.fromString("rw-------"))
        Files.createSymbolicLink(file, elsewhere)
        refused(file) shouldContain "it is a symbolic link"
    }

    test("a file rdma-run did not write is refused; so is a huge one") {
        val file = fresh()
        ControlToken.userSecret(file)
        Files.writeString(file, "hunter2\n")
        refused(file) shouldContain "it is not a secret rdma-run wrote (delete it to have a new one made)"
        Files.write(file, ByteArray(4096) { 'a'.code.toByte() })
        refused(file) shouldContain "it is larger than 1024 bytes"
    }

    test("owned by another user: refused (as root, a file handed to nobody)") {
        if (System.getProperty("user.name") == "root") {
            val file = fresh()
            ControlToken.userSecret(file)
            Files.setOwner(file, root.fileSystem.userPrincipalLookupService.lookupPrincipalByName("nobody"))
            refused(file) shouldContain "it belongs to nobody, not to root"
        }
    }

    test("the default file is under XDG_CONFIG_HOME or ~/.config") {
        UserSecret.defaultFile().toString() shouldStartWith (System.getenv("XDG_CONFIG_HOME")?.takeIf { it.startsWith("/") }
            ?: (System.getProperty("user.home") + "/.config"))
        UserSecret.defaultFile().toString().endsWith("/rdma-run/secret") shouldBe true
    }
})

private infix fun <T> T.shouldNotBeSameAs(other: T) {
    (this == other) shouldBe false
}
