package dev.rdmarun.dsl

import com.code_intelligence.jazzer.junit.FuzzTest
import java.io.ByteArrayInputStream
import java.io.ByteArrayOutputStream
import java.io.DataInputStream
import java.io.DataOutputStream
import java.nio.file.Files
import java.nio.file.Path
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.condition.EnabledIfSystemProperty

/**
 * The control connection's decoder against whatever a peer may send, as the handshake meets it:
 * [FrameCodec.read] returns a frame or throws a [PeerException] whose sentence shows no raw
 * control characters, and nothing else; an intro it returns is then judged by
 * [Handshake.introMismatch], a proof must not hold without the secret ([Handshake.secretProof],
 * [Handshake.sectionProofs]: neither a forged nor an echoed one), a plan is compared by
 * [Handshake.planDifference], and a hello by [Handshake.validate] and [Handshake.mismatch], which
 * answer without throwing. The frame buffer is at most
 * [FrameCodec.MAX_FRAME] bytes: read checks the length before it allocates. In a normal build this
 * runs the seed corpus in FrameCodecFuzzTestInputs/; e2e/fuzz.sh fuzzes it.
 */
class FrameCodecFuzzTest {
    @FuzzTest(maxDuration = "60s")
    fun helloFrame(input: ByteArray) {
        val frame = try {
            FrameCodec.read(DataInputStream(ByteArrayInputStream(input)), "the client's hello")
        } catch (e: PeerException) {
            val sentence = e.message.orEmpty()
            assertFalse(sentence.any { it.isISOControl() }, "unescaped control character in: $sentence")
            return
        }
        when (frame) {
            is Intro -> Handshake.introMismatch(INTRO, frame, "the client")
            // Without the secret no input proves it, nor any part of the plan: the server would refuse it.
            is Proof -> {
                assertFalse(Handshake.proofMatches(Handshake.secretProof(SECRET, Role.CLIENT, CLIENT_NONCE, INTRO.nonce), frame.secret), "a forged secret proof held")
                val differing = Handshake.differingSections(Handshake.sectionProofs(SECRET, SECTIONS, Role.CLIENT, CLIENT_NONCE, INTRO.nonce), frame.sections)
                assertFalse(differing.isEmpty(), "a forged plan proof held")
            }
            is PlanLines -> Handshake.planDifference(LOCAL.plan, frame.lines, Role.CLIENT)
            is Hello -> if (Handshake.validate(frame, EXPECTED, "the client") == null) Handshake.mismatch(LOCAL, frame)
            else -> {}
        }
    }

    /** Rewrites the generated seeds; run with -Drdmarun.fuzz.writeSeeds=true after changing the frames. */
    @Test
    @EnabledIfSystemProperty(named = "rdmarun.fuzz.writeSeeds", matches = "true")
    fun writeSeeds() {
        val dir = Path.of("src/test/resources/dev/rdmarun/dsl/FrameCodecFuzzTestInputs/helloFrame")
        Files.createDirectories(dir)
        val hello = LOCAL.copy(role = Role.CLIENT, qps = LOCAL.qps.map { it.copy(qpn = it.qpn + 0x100) })
        Files.write(dir.resolve("intro"), frame(FrameCodec.encode(INTRO.copy(role = Role.CLIENT, nonce = "c".repeat(64)))))
        Files.write(dir.resolve("intro-token"), frame(FrameCodec.encode(INTRO.copy(role = Role.CLIENT, secret = SecretKind.TOKEN))))
        Files.write(dir.resolve("proof"), frame(FrameCodec.encode(Proof("d".repeat(64), Handshake.SECTIONS.associateWith { "e".repeat(64) }))))
        // The server's own proof for this connection, echoed back: bound to the server's role, it fails.
        Files.write(dir.resolve("proof-echoed"), frame(FrameCodec.encode(Proof(Handshake.secretProof(SECRET, Role.SERVER, CLIENT_NONCE, INTRO.nonce),
            Handshake.sectionProofs(SECRET, SECTIONS, Role.SERVER, CLIENT_NONCE, INTRO.nonce)))))
        Files.write(dir.resolve("plan"), frame(FrameCodec.encode(PlanLines(LOCAL.plan + "parameter count=\u001b[2J"))))
        Files.write(dir.resolve("hello"), frame(FrameCodec.encode(hello)))
        Files.write(dir.resolve("hello-lying-lengths"), frame(FrameCodec.encode(hello.copy(qps = hello.qps.map {
            it.copy(buffer = BufferInfo(Long.MAX_VALUE, 1, Long.MAX_VALUE), credit = BufferInfo(0, 1, -5))
        }))))
        Files.write(dir.resolve("hello-other-plan"), frame(FrameCodec.encode(hello.copy(fingerprint = "b".repeat(64),
            plan = LOCAL.plan + "setting inline=64", parameters = mapOf("size" to "4096")))))
        Files.write(dir.resolve("hello-version-1"), frame(FrameCodec.encode(hello.copy(version = 1))))
        Files.write(dir.resolve("failure"), frame(FrameCodec.encode(Failure("bad \u001b[31m plan"))))
        Files.write(dir.resolve("heartbeat"), frame(FrameCodec.encode(Heartbeat(7, "receive() on QP 0", listOf(0, 2), listOf(1)))))
        Files.write(dir.resolve("hello-truncated"), frame(FrameCodec.encode(hello)).let { it.copyOf(it.size / 2) })
        Files.write(dir.resolve("hello-unknown-key"), frame(FrameCodec.encode(hello).toString(Charsets.UTF_8)
            .replaceFirst("{", "{\"extra\":1,").toByteArray()))
        Files.write(dir.resolve("length-too-big"), byteArrayOf(0x7f, -1, -1, -1, '{'.code.toByte()))
        Files.write(dir.resolve("not-json"), frame("RDRN\u0000\u00ff hello".toByteArray()))
    }

    private fun frame(bytes: ByteArray): ByteArray {
        val out = ByteArrayOutputStream()
        DataOutputStream(out).apply { writeInt(bytes.size); write(bytes) }
        return out.toByteArray()
    }

    companion object {
        private const val GID = "00000000000000000000ffff0a4d0001"

        private val INTRO = Intro(CONTROL_PROTOCOL_VERSION, Role.SERVER, "b".repeat(64), SecretKind.TOKEN)

        /** The server's secret, plan parts and the client's nonce the proofs are checked against. */
        private val SECRET = "fuzz-secret".toByteArray()
        private val SECTIONS = mapOf("settings" to "1".repeat(64), "parameters" to "2".repeat(64), "script" to "3".repeat(64))
        private val CLIENT_NONCE = "c".repeat(64)

        private val EXPECTED = Handshake.Expected(qpCount = 2, recvDepth = 64, dataBytes = 4096)

        /** This side: a server's hello of 2 QPs (the seeds' client hello fits it). */
        private val LOCAL = Hello(
            version = CONTROL_PROTOCOL_VERSION,
            role = Role.SERVER,
            qpCount = 2,
            recvDepth = 64,
            maxDestRdAtomic = 1,
            fingerprint = "a".repeat(64),
            parameters = emptyMap(),
            plan = listOf("rdma-run-plan-2", "setting qps=2", "setting bufferSize=4096"),
            access = setOf(RemoteAccess.WRITE),
            qps = List(2) { QpInfo(0x11 + it, 0x1234 + it, 0, GID, 1024, BufferInfo(0x7f00_0000_1000L + it * 4096L, 0x100 + it, 4096), BufferInfo(0x7f00_0010_0000L, 7, 8)) },
        )
    }
}
