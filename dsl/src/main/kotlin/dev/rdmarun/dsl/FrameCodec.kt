package dev.rdmarun.dsl

import java.io.DataInputStream
import java.io.DataOutputStream
import java.io.EOFException
import java.io.IOException
import java.net.SocketTimeoutException
import kotlinx.serialization.SerializationException
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.intOrNull
import kotlinx.serialization.json.jsonPrimitive

/**
 * The control connection's wire format: the 4-byte magic "RDRN" once (each side writes it first
 * thing, so even a failure report is framed), then frames, each a
 * 4-byte big-endian length and that many bytes of UTF-8 JSON ([Frame], named by "type"),
 * decoded strictly (no unknown keys, no lenient syntax). A frame is at most [MAX_FRAME] bytes,
 * so garbage cannot make a peer allocate gigabytes or wait for them.
 */
internal object FrameCodec {
    const val MAGIC = 0x5244524E // "RDRN"
    const val MAX_FRAME = 4 shl 20

    /** The intro and the token proof are small: a stray that has not passed them gets no 4 MiB buffer. */
    const val MAX_INTRO_FRAME = 16 shl 10

    /** Frames whose version is judged before their fields: the first frame of a connection, and the hello. */
    private val VERSIONED = setOf("hello", "endpoints")

    internal val json = Json {
        classDiscriminator = "type"
        encodeDefaults = true
        ignoreUnknownKeys = false
        isLenient = false
    }

    fun encode(frame: Frame): ByteArray = json.encodeToString(Frame.serializer(), frame).toByteArray(Charsets.UTF_8)

    /**
     * Decodes one frame's JSON. A hello of another version is reported as such before its fields
     * are judged, since they may legitimately differ between versions.
     */
    fun decode(bytes: ByteArray): Frame {
        val text = bytes.toString(Charsets.UTF_8)
        try {
            val element = json.parseToJsonElement(text)
            if (element is JsonObject && element["type"]?.jsonPrimitive?.content in VERSIONED) {
                val version = element["version"]?.jsonPrimitive?.intOrNull
                if (version != CONTROL_PROTOCOL_VERSION) {
                    throw PeerException("remote speaks control protocol version ${version ?: "(none)"}, this side ${CONTROL_PROTOCOL_VERSION}: use the same rdma-run version on both sides")
                }
            }
            return json.decodeFromJsonElement(Frame.serializer(), element)
        } catch (e: SerializationException) {
            throw malformed(e)
        } catch (e: IllegalArgumentException) {
            throw malformed(e)
        }
    }

    /** The decoder's words quote the peer's text: escaped before they reach a terminal. */
    private fun malformed(e: Exception) =
        PeerException("the peer sent a malformed frame (${printable(e.message?.lineSequence()?.first().orEmpty())}): it is not a compatible rdma-run", e)

    fun writeMagic(out: DataOutputStream) {
        out.writeInt(MAGIC)
        out.flush()
    }

    fun write(out: DataOutputStream, frame: Frame) {
        val bytes = encode(frame)
        check(bytes.size <= MAX_FRAME) { "frame of ${bytes.size} bytes exceeds $MAX_FRAME" }
        out.writeInt(bytes.size)
        out.write(bytes)
        out.flush()
    }

    /** Reads the magic; [waitingFor] names what this side waits for, in error messages. */
    fun readMagic(input: DataInputStream, waitingFor: String) {
        val magic = io(waitingFor) { input.readInt() }
        if (magic != MAGIC) {
            throw PeerException("the peer is not an rdma-run scenario: its connection starts with 0x${"%08x".format(magic)} " +
                "(${printable(magic)}) instead of 'RDRN'")
        }
    }

    /** Reads one frame of at most [max] bytes, judging the length before anything is allocated. */
    fun read(input: DataInputStream, waitingFor: String, max: Int = MAX_FRAME): Frame {
        val length = io(waitingFor) { input.readInt() }
        if (length <= 0 || length > max) {
            throw PeerException("the peer sent a frame of $length bytes while this side waited for $waitingFor " +
                "(frames are 1..$max bytes): it is not a compatible rdma-run, or the stream is corrupt")
        }
        val bytes = ByteArray(length)
        io(waitingFor) { input.readFully(bytes) }
        return decode(bytes)
    }

    /** EOF, timeout and I/O errors as one sentence naming what this side waited for. */
    internal inline fun <T> io(waitingFor: String, body: () -> T): T = try {
        body()
    } catch (e: EOFException) {
        throw PeerException("the peer closed the control connection while this side waited for $waitingFor", e)
    } catch (e: SocketTimeoutException) {
        throw PeerException("no answer from the peer while this side waited for $waitingFor (the timeout passed)", e)
    } catch (e: IOException) {
        throw PeerException("the control connection failed while this side waited for $waitingFor: ${e.message}", e)
    }

    private fun printable(word: Int): String = (3 downTo 0).map { (word ushr (it * 8)) and 0xff }
        .joinToString("") { if (it in 0x20..0x7e) it.toChar().toString() else "\\x%02x".format(it) }
}
