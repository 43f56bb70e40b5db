package dev.rdmarun.dsl

import java.nio.ByteBuffer
import java.nio.ByteOrder

/**
 * A received message: a copy of its payload ([bytes]; empty for a writeWithImm, whose data went
 * straight into this side's buffer, and for `receive(copyPayload = false)`), its [length] and its
 * [immediate] data.
 */
public class Message(
    /** The QP it arrived on. */
    public val qp: Int,
    public val length: Int,
    /** Immediate data of sendWithImm/writeWithImm (host order), else null. */
    public val immediate: Int?,
    public val bytes: ByteArray,
) {
    /** The payload as UTF-8 text. */
    public fun text(): String = bytes.toString(Charsets.UTF_8)

    /** The 32-bit integer at byte [offset] of the payload, in this machine's byte order (as `buffer().set(JAVA_INT, ...)` wrote it). */
    public fun intAt(offset: Int = 0): Int = ByteBuffer.wrap(bytes).order(ByteOrder.nativeOrder()).getInt(checked(offset, 4))

    /** The 64-bit integer at byte [offset] of the payload, in this machine's byte order. */
    public fun longAt(offset: Int = 0): Long = ByteBuffer.wrap(bytes).order(ByteOrder.nativeOrder()).getLong(checked(offset, 8))

    private fun checked(offset: Int, size: Int): Int {
        if (offset < 0 || offset + size > bytes.size) {
            throw ScenarioException("the message on QP $qp has ${bytes.size} bytes: no $size-byte value at offset $offset")
        }
        return offset
    }

    override fun toString(): String = "Message(qp=$qp, length=$length, immediate=$immediate)"
}

/**
 * A completed work request, as [QpScope.awaitCompletion] returns it: the QP, what it was, how many
 * bytes it moved, and for compareAndSwap/fetchAndAdd the peer's old value ([value]; 0 otherwise).
 */
public class Completion(public val qp: Int, public val opcode: OpKind, public val bytes: Int, public val value: Long) {
    override fun equals(other: Any?): Boolean =
        other is Completion && other.qp == qp && other.opcode == opcode && other.bytes == bytes && other.value == value

    override fun hashCode(): Int = ((qp * 31 + opcode.hashCode()) * 31 + bytes) * 31 + value.hashCode()
    override fun toString(): String = "Completion(qp=$qp, opcode=${opcode.label()}, bytes=$bytes, value=$value)"
}
