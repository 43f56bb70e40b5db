package dev.rdmarun.scripts

import com.code_intelligence.jazzer.junit.FuzzTest
import dev.rdmarun.runtime.Gid
import java.nio.file.Files
import java.nio.file.Path
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.condition.EnabledIfSystemProperty

/**
 * ibv_rc_pingpong's address message against whatever a peer may send: [PingpongWire.decode]
 * returns an address, which encodes back to the same message (hex case aside), or throws a
 * [WireFormatException], and nothing else. In a normal build this runs the seed corpus in
 * PingpongWireFuzzTestInputs/; e2e/fuzz.sh fuzzes it.
 */
class PingpongWireFuzzTest {
    @FuzzTest(maxDuration = "60s")
    fun addressMessage(input: ByteArray) {
        val dest = try {
            PingpongWire.decode(input)
        } catch (_: WireFormatException) {
            return
        }
        assertEquals(input.toString(Charsets.US_ASCII).lowercase(), PingpongWire.encode(dest).toString(Charsets.US_ASCII))
    }

    /** Rewrites the generated seeds; run with -Drdmarun.fuzz.writeSeeds=true after changing the format. */
    @Test
    @EnabledIfSystemProperty(named = "rdmarun.fuzz.writeSeeds", matches = "true")
    fun writeSeeds() {
        val dir = Path.of("src/test/resources/dev/rdmarun/scripts/PingpongWireFuzzTestInputs/addressMessage")
        Files.createDirectories(dir)
        val roce = PingpongWire.encode(PingpongDest(0, 0x000123, 0xabcdef, Gid.parseHex("00000000000000000000ffff0a4d0001")))
        Files.write(dir.resolve("roce"), roce)
        Files.write(dir.resolve("ib-no-gid"), PingpongWire.encode(PingpongDest(0x0007, 0xffffff, 0, Gid.parseHex("0".repeat(32)))))
        Files.write(dir.resolve("upper-case"), roce.toString(Charsets.US_ASCII).uppercase().toByteArray(Charsets.US_ASCII))
        Files.write(dir.resolve("qp-zero"), PingpongWire.encode(PingpongDest(0, 1, 0, Gid.parseHex("0".repeat(32))))
            .toString(Charsets.US_ASCII).replace(":000001:", ":000000:").toByteArray(Charsets.US_ASCII))
        Files.write(dir.resolve("no-nul"), roce.copyOf(roce.size - 1) + ' '.code.toByte())
        Files.write(dir.resolve("done"), PingpongWire.done())
        Files.write(dir.resolve("high-bytes"), roce.copyOf().also { it[5] = 0xe9.toByte() })
    }
}
