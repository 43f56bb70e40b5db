package dev.rdmarun.runtime;

import static dev.rdmarun.runtime.os.CStruct.offset;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.rdmarun.runtime.os.CStruct;
import java.lang.foreign.StructLayout;

/**
 * The completion record of the CQ SPI: {@code struct ibv_wc} of {@code <infiniband/verbs.h>}
 * (rdma-core, LP64), the array {@link CompletionQueue#pollInto} fills and {@link WorkCompletions}
 * reads in place. It is an ABI, not a choice: libibverbs's {@code ibv_poll_cq} writes it for a
 * native CQ, so every other provider (soft0) writes the same bytes, and one reader serves both.
 *
 * <p>A provider sets {@link #WR_ID}, {@link #STATUS}, {@link #OPCODE}, {@link #BYTE_LEN},
 * {@link #QP_NUM} and {@link #SRC_QP} of each record; {@link #IMM_DATA} in network byte order
 * with {@link #WITH_IMM} in {@link #WC_FLAGS} when the message carried immediate data; and
 * zeroes the rest. {@code LayoutConformanceTest} checks every offset against the C compiler.
 */
public final class WcLayout {
    private WcLayout() {}

    /** {@code struct ibv_wc}; its array stride is its size. */
    public static final StructLayout IBV_WC = CStruct.of("ibv_wc",
            JAVA_LONG.withName("wr_id"), JAVA_INT.withName("status"), JAVA_INT.withName("opcode"),
            JAVA_INT.withName("vendor_err"), JAVA_INT.withName("byte_len"), JAVA_INT.withName("imm_data"),
            JAVA_INT.withName("qp_num"), JAVA_INT.withName("src_qp"), JAVA_INT.withName("wc_flags"),
            JAVA_SHORT.withName("pkey_index"), JAVA_SHORT.withName("slid"), JAVA_BYTE.withName("sl"),
            JAVA_BYTE.withName("dlid_path_bits"));

    public static final long SIZE = IBV_WC.byteSize();
    public static final long WR_ID = offset(IBV_WC, "wr_id");
    /** A {@link WcStatus} code. */
    public static final long STATUS = offset(IBV_WC, "status");
    /** A {@link WcOpcode} code. */
    public static final long OPCODE = offset(IBV_WC, "opcode");
    public static final long VENDOR_ERR = offset(IBV_WC, "vendor_err");
    public static final long BYTE_LEN = offset(IBV_WC, "byte_len");
    /** Big-endian, as on the wire (verbs.h's {@code __be32}). */
    public static final long IMM_DATA = offset(IBV_WC, "imm_data");
    public static final long QP_NUM = offset(IBV_WC, "qp_num");
    public static final long SRC_QP = offset(IBV_WC, "src_qp");
    public static final long WC_FLAGS = offset(IBV_WC, "wc_flags");

    /** {@code IBV_WC_WITH_IMM}: the flag in {@link #WC_FLAGS} that says {@link #IMM_DATA} is set. */
    public static final int WITH_IMM = 2;
}
