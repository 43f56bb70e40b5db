package dev.rdmarun.scripts

import dev.rdmarun.runtime.FabricKey
import dev.rdmarun.runtime.Gid
import io.kotest.assertions.throwables.shouldThrow
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe
import io.kotest.matchers.string.shouldContain

class PingpongWireSpec : FunSpec({
    val roceGid = Gid.parseHex("00000000000000000000ffff0a4d0001") // ::ffff:10.77.0.1
    val dest = PingpongDest(0, 0x11, 0x6f7b2a, roceGid)

    fun bytes(text: String) = text.toByteArray(Charsets.US_ASCII)

    test("encodes as ibv_rc_pingpong's %04x:%06x:%06x:<wire gid> with the NUL: 52 bytes") {
        val wire = PingpongWire.encode(dest)
        wire.size shouldBe 52
        String(wire, Charsets.US_ASCII) shouldBe "0000:000011:6f7b2a:00000000000000000000ffff0a4d0001\u0000"
    }

    test("decodes what it encodes, and an InfiniBand address without GID") {
        PingpongWire.decode(PingpongWire.encode(dest)) shouldBe dest
        val ib = PingpongDest(0x1a, 0xabcdef, 0, Gid.ZERO)
        PingpongWire.decode(bytes("001a:abcdef:000000:00000000000000000000000000000000\u0000")) shouldBe ib
    }

    test("accepts upper-case hex as sscanf's %x does") {
        PingpongWire.decode(bytes("0000:00001A:6F7B2A:00000000000000000000FFFF0A4D0001\u0000")) shouldBe
            PingpongDest(0, 0x1a, 0x6f7b2a, roceGid)
    }

    test("rejects garbage with a message that shows what came") {
        val bad = listOf(
            "", // nothing
            "0000:000011:6f7b2a:00000000000000000000ffff0a4d0001", // no NUL (51 bytes)
            "0000:000011:6f7b2a:00000000000000000000ffff0a4d0001\u0000\u0000", // 53 bytes
            "0000:000011:6f7b2a:00000000000000000000ffff0a4d000\u0000\u0000", // GID short, NUL inside
            "0000-000011-6f7b2a-00000000000000000000ffff0a4d0001\u0000", // wrong separators
            "000g:000011:6f7b2a:00000000000000000000ffff0a4d0001\u0000", // not hex
            "0000:000011:6f7b2a:00000000000000000000ffff0a4d00x1\u0000", // not hex in GID
            " 000:000011:6f7b2a:00000000000000000000ffff0a4d0001\u0000", // space
            "0000:000000:6f7b2a:00000000000000000000ffff0a4d0001\u0000", // QPN 0
            "GET / HTTP/1.1\r\nHost: x\r\n\r\n0000000000000000000000000\u0000", // another protocol
        )
        for (text in bad) {
            val e = shouldThrow<WireFormatException> { PingpongWire.decode(bytes(text)) }
            e.message shouldContain "the peer's address message"
        }
        val high = PingpongWire.encode(dest).also { it[3] = 0xb0.toByte() }
        shouldThrow<WireFormatException> { PingpongWire.decode(high) }.message shouldContain "\\xb0"
    }

    test("soft0's nonce: 64 lowercase hex digits and a NUL, read back strictly; the key derived from it is the same on both sides and never on the wire") {
        val nonce = PingpongWire.nonce()
        val bytes = PingpongWire.encodeNonce(nonce)
        bytes.size shouldBe PingpongWire.NONCE_SIZE
        PingpongWire.decodeNonce(bytes).toList() shouldBe nonce.toList()
        val hex = java.util.HexFormat.of().formatHex(nonce)
        for (bad in listOf(hex.uppercase() + "\u0000", hex + "0", hex.drop(1) + "\u0000\u0000", "g" + hex.drop(1) + "\u0000")) {
            shouldThrow<WireFormatException> { PingpongWire.decodeNonce(bad.toByteArray(Charsets.US_ASCII)) }
                .message shouldContain "64 lowercase hex digits"
        }
        val secret = dev.rdmarun.dsl.ControlToken.of("shared")
        val key = PingpongWire.fabricKey(secret, PingpongWire.decodeNonce(bytes))
        key shouldBe PingpongWire.fabricKey(dev.rdmarun.dsl.ControlToken.of("shared"), nonce)
        (key == PingpongWire.fabricKey(dev.rdmarun.dsl.ControlToken.of("other"), nonce)) shouldBe false
        String(bytes, Charsets.US_ASCII).contains(java.util.HexFormat.of().formatHex(key.toBytes())) shouldBe false
    }

    test("the client's done is \"done\" and its NUL, nothing else") {
        PingpongWire.done().size shouldBe 5
        PingpongWire.checkDone(bytes("done\u0000"))
        shouldThrow<WireFormatException> { PingpongWire.checkDone(bytes("done!")) }.message shouldContain "\"done!\""
        shouldThrow<WireFormatException> { PingpongWire.checkDone(bytes("DONE\u0000")) }
    }

    test("describes an address as ibv_rc_pingpong prints it") {
        dest.describe() shouldBe "LID 0x0000, QPN 0x000011, PSN 0x6f7b2a, GID ::ffff:10.77.0.1"
    }

    test("formats GIDs as glibc's inet_ntop(AF_INET6)") {
        fun ntop(hex: String) = inetNtop6(Gid.parseHex(hex).raw())
        ntop("00000000000000000000000000000000") shouldBe "::"
        ntop("00000000000000000000000000000001") shouldBe "::1"
        ntop("00000000000000000000ffff0a4d0001") shouldBe "::ffff:10.77.0.1"
        ntop("000000000000000000000000c0a80001") shouldBe "::192.168.0.1"
        ntop("fe800000000000005054fffe12345678") shouldBe "fe80::5054:fffe:1234:5678"
        ntop("fe80000000000000020c29fffe3a4b5c") shouldBe "fe80::20c:29ff:fe3a:4b5c"
        ntop("20010db8000000010000000000000001") shouldBe "2001:db8:0:1::1" // longest run wins
        ntop("20010db8000000000001000000000001") shouldBe "2001:db8::1:0:0:1" // first of equal runs
        ntop("20010db8000100010001000100010001") shouldBe "2001:db8:1:1:1:1:1:1" // no run
        ntop("20010db8000000010001000100010000") shouldBe "2001:db8:0:1:1:1:1:0" // single zeros stay
        ntop("fe800000000000000000000000000000") shouldBe "fe80::"
    }

    test("PingpongDest keeps to the field widths") {
        shouldThrow<IllegalArgumentException> { PingpongDest(0x10000, 1, 0, Gid.ZERO) }
        shouldThrow<IllegalArgumentException> { PingpongDest(0, 0x1000000, 0, Gid.ZERO) }
        shouldThrow<IllegalArgumentException> { PingpongDest(0, 1, 0x1000000, Gid.ZERO) }
    }
})
