package dev.rdmarun.runtime;

import java.util.Objects;

/**
 * One send work request, the Java twin of {@code struct ibv_send_wr} with at most one scatter-gather
 * entry: what {@link QueuePair#postSend(SendWorkRequest)} hands a provider in one piece, instead of a
 * dozen arguments that every layer copies again. It is mutable and meant to be reused: keep one per
 * QP on the data path, fill what the operation needs, post it; the post copies it (into the
 * provider's own work queue entry or the native {@code ibv_send_wr}), so it may be refilled at once.
 * Setters return {@code this}; nothing here allocates.
 *
 * <p>What each opcode reads (the rest is ignored): every opcode the {@link #wrId}, the local
 * {@link #local region}, which every post needs, an empty SEND included (length 0: no SGE is posted), and the {@link #flags}; {@code SEND_WITH_IMM} and
 * {@code RDMA_WRITE_WITH_IMM} the {@link #imm immediate}; RDMA and atomic opcodes the
 * {@link #remote remote address and rkey}; atomics the {@link #atomic compare-or-add and swap}
 * operands, and their local region is the 8-byte word the old value lands in.
 *
 * <p>Not thread-safe, like the data path it serves (one thread at a time per QP).
 */
public final class SendWorkRequest {
    private long wrId;
    private WrOpcode opcode = WrOpcode.SEND;
    private MemoryRegion mr;
    private long offset;
    private int length;
    private int flags;
    private int imm;
    private long remoteAddress;
    private int rkey;
    private long compareAdd;
    private long swap;

    /** Back to an unsignaled SEND with every field zero and no region: give it one ({@link #local}) before posting. */
    public SendWorkRequest clear() {
        wrId = 0;
        opcode = WrOpcode.SEND;
        mr = null;
        offset = 0;
        length = 0;
        flags = 0;
        imm = 0;
        remoteAddress = 0;
        rkey = 0;
        compareAdd = 0;
        swap = 0;
        return this;
    }

    /** ibv_send_wr.wr_id: comes back in this request's completion, if it is signaled. */
    public SendWorkRequest wrId(long wrId) {
        this.wrId = wrId;
        return this;
    }

    public SendWorkRequest opcode(WrOpcode opcode) {
        this.opcode = Objects.requireNonNull(opcode, "opcode");
        return this;
    }

    /** The SGE: [offset, offset+length) of mr; length 0 posts no SGE (an empty message). */
    public SendWorkRequest local(MemoryRegion mr, long offset, int length) {
        this.mr = Objects.requireNonNull(mr, "mr");
        this.offset = offset;
        this.length = length;
        return this;
    }

    /** {@link SendFlags} bits: SIGNALED, INLINE, FENCE, SOLICITED. */
    public SendWorkRequest flags(int flags) {
        this.flags = flags;
        return this;
    }

    /** 32-bit immediate data in host order (carried big-endian, as ibv_send_wr.imm_data is). */
    public SendWorkRequest imm(int imm) {
        this.imm = imm;
        return this;
    }

    /** The peer's address (a virtual address in its region) and the rkey of its region. */
    public SendWorkRequest remote(long address, int rkey) {
        this.remoteAddress = address;
        this.rkey = rkey;
        return this;
    }

    /** Compare-and-swap: the compare value and the swap value; fetch-and-add: the addend and 0. */
    public SendWorkRequest atomic(long compareAdd, long swap) {
        this.compareAdd = compareAdd;
        this.swap = swap;
        return this;
    }

    public long wrId() {
        return wrId;
    }

    public WrOpcode opcode() {
        return opcode;
    }

    public MemoryRegion mr() {
        return mr;
    }

    public long offset() {
        return offset;
    }

    public int length() {
        return length;
    }

    public int flags() {
        return flags;
    }

    public int imm() {
        return imm;
    }

    public long remoteAddress() {
        return remoteAddress;
    }

    public int rkey() {
        return rkey;
    }

    public long compareAdd() {
        return compareAdd;
    }

    public long swap() {
        return swap;
    }
}
