package dev.rdmarun.runtime.ibverbs.ffi;

import static dev.rdmarun.runtime.os.CStruct.offset;
import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.rdmarun.runtime.os.CStruct;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.UnionLayout;
import java.util.Arrays;

/**
 * The libibverbs structs the runtime reads or writes, as FFM layouts that mirror
 * {@code <infiniband/verbs.h>} (rdma-core, LP64). Only fields the runtime touches carry names;
 * the rest is padding of the right size. {@code LayoutConformanceTest} checks every named
 * offset and every size against the C compiler's answer.
 */
public final class Structs {
    private Structs() {}

    private static MemoryLayout u8(String n) { return JAVA_BYTE.withName(n); }
    private static MemoryLayout u16(String n) { return JAVA_SHORT.withName(n); }
    private static MemoryLayout u32(String n) { return JAVA_INT.withName(n); }
    private static MemoryLayout u64(String n) { return JAVA_LONG.withName(n); }
    private static MemoryLayout ptr(String n) { return ADDRESS.withName(n); }
    private static MemoryLayout bytes(String n, long count) { return MemoryLayout.sequenceLayout(count, JAVA_BYTE).withName(n); }

    /** pthread_mutex_t / pthread_cond_t on glibc LP64: opaque, 8-byte aligned. */
    private static MemoryLayout opaque(String n, long size) {
        return MemoryLayout.sequenceLayout(size / 8, JAVA_LONG).withName(n);
    }

    public static final long PTHREAD_MUTEX_SIZE = 40;
    public static final long PTHREAD_COND_SIZE = 48;

    /**
     * union ibv_gid: 16 raw bytes (network order). Its other member, struct { __be64 x2 } global, makes the
     * union 8-byte aligned, which pads ibv_qp_attr (via ah_attr.grh.dgid) to 144 bytes, not 140.
     */
    public static final MemoryLayout IBV_GID = bytes("raw", 16).withByteAlignment(8).withName("ibv_gid");

    public static final StructLayout IBV_DEVICE_ATTR = CStruct.of("ibv_device_attr",
            bytes("fw_ver", 64), u64("node_guid"), u64("sys_image_guid"), u64("max_mr_size"), u64("page_size_cap"),
            u32("vendor_id"), u32("vendor_part_id"), u32("hw_ver"), u32("max_qp"), u32("max_qp_wr"),
            u32("device_cap_flags"), u32("max_sge"), u32("max_sge_rd"), u32("max_cq"), u32("max_cqe"),
            u32("max_mr"), u32("max_pd"), u32("max_qp_rd_atom"), u32("max_ee_rd_atom"), u32("max_res_rd_atom"),
            u32("max_qp_init_rd_atom"), u32("max_ee_init_rd_atom"), u32("atomic_cap"), u32("max_ee"), u32("max_rdd"),
            u32("max_mw"), u32("max_raw_ipv6_qp"), u32("max_raw_ethy_qp"), u32("max_mcast_grp"),
            u32("max_mcast_qp_attach"), u32("max_total_mcast_qp_attach"), u32("max_ah"), u32("max_fmr"),
            u32("max_map_per_fmr"), u32("max_srq"), u32("max_srq_wr"), u32("max_srq_sge"), u16("max_pkeys"),
            u8("local_ca_ack_delay"), u8("phys_port_cnt"));

    public static final StructLayout IBV_PORT_ATTR = CStruct.of("ibv_port_attr",
            u32("state"), u32("max_mtu"), u32("active_mtu"), u32("gid_tbl_len"), u32("port_cap_flags"),
            u32("max_msg_sz"), u32("bad_pkey_cntr"), u32("qkey_viol_cntr"), u16("pkey_tbl_len"), u16("lid"),
            u16("sm_lid"), u8("lmc"), u8("max_vl_num"), u8("sm_sl"), u8("subnet_timeout"), u8("init_type_reply"),
            u8("active_width"), u8("active_speed"), u8("phys_state"), u8("link_layer"), u8("flags"),
            u16("port_cap_flags2"));

    public static final StructLayout IBV_GID_ENTRY = CStruct.of("ibv_gid_entry",
            IBV_GID.withName("gid"), u32("gid_index"), u32("port_num"), u32("gid_type"), u32("ndev_ifindex"));

    public static final StructLayout IBV_QP_CAP = CStruct.of("ibv_qp_cap",
            u32("max_send_wr"), u32("max_recv_wr"), u32("max_send_sge"), u32("max_recv_sge"), u32("max_inline_data"));

    public static final StructLayout IBV_QP_INIT_ATTR = CStruct.of("ibv_qp_init_attr",
            ptr("qp_context"), ptr("send_cq"), ptr("recv_cq"), ptr("srq"), IBV_QP_CAP.withName("cap"),
            u32("qp_type"), u32("sq_sig_all"));

    public static final StructLayout IBV_GLOBAL_ROUTE = CStruct.of("ibv_global_route",
            IBV_GID.withName("dgid"), u32("flow_label"), u8("sgid_index"), u8("hop_limit"), u8("traffic_class"));

    public static final StructLayout IBV_AH_ATTR = CStruct.of("ibv_ah_attr",
            IBV_GLOBAL_ROUTE.withName("grh"), u16("dlid"), u8("sl"), u8("src_path_bits"), u8("static_rate"),
            u8("is_global"), u8("port_num"));

    public static final StructLayout IBV_QP_ATTR = CStruct.of("ibv_qp_attr",
            u32("qp_state"), u32("cur_qp_state"), u32("path_mtu"), u32("path_mig_state"), u32("qkey"),
            u32("rq_psn"), u32("sq_psn"), u32("dest_qp_num"), u32("qp_access_flags"), IBV_QP_CAP.withName("cap"),
            IBV_AH_ATTR.withName("ah_attr"), IBV_AH_ATTR.withName("alt_ah_attr"), u16("pkey_index"),
            u16("alt_pkey_index"), u8("en_sqd_async_notify"), u8("sq_draining"), u8("max_rd_atomic"),
            u8("max_dest_rd_atomic"), u8("min_rnr_timer"), u8("port_num"), u8("timeout"), u8("retry_cnt"),
            u8("rnr_retry"), u8("alt_port_num"), u8("alt_timeout"), u32("rate_limit"));

    public static final StructLayout IBV_SGE = CStruct.of("ibv_sge", u64("addr"), u32("length"), u32("lkey"));

    private static final StructLayout WR_RDMA = CStruct.of("rdma", u64("remote_addr"), u32("rkey"));
    private static final StructLayout WR_ATOMIC = CStruct.of("atomic",
            u64("remote_addr"), u64("compare_add"), u64("swap"), u32("rkey"));
    private static final StructLayout WR_UD = CStruct.of("ud", ptr("ah"), u32("remote_qpn"), u32("remote_qkey"));
    private static final UnionLayout WR_UNION = MemoryLayout.unionLayout(WR_RDMA, WR_ATOMIC, WR_UD).withName("wr");
    /** bind_mw {mw*, rkey, ibv_mw_bind_info {mr*, addr, length, flags}} is the largest member; never used here. */
    private static final MemoryLayout WR_TAIL = opaque("bind_mw_or_tso", 48);

    public static final StructLayout IBV_SEND_WR = CStruct.of("ibv_send_wr",
            u64("wr_id"), ptr("next"), ptr("sg_list"), u32("num_sge"), u32("opcode"), u32("send_flags"),
            u32("imm_data"), WR_UNION, MemoryLayout.unionLayout(u32("remote_srqn")).withName("qp_type"), WR_TAIL);

    public static final StructLayout IBV_RECV_WR = CStruct.of("ibv_recv_wr",
            u64("wr_id"), ptr("next"), ptr("sg_list"), u32("num_sge"));

    private static final String[] CONTEXT_OPS = {
        "_compat_query_device", "_compat_query_port", "_compat_alloc_pd", "_compat_dealloc_pd", "_compat_reg_mr",
        "_compat_rereg_mr", "_compat_dereg_mr", "alloc_mw", "bind_mw", "dealloc_mw", "_compat_create_cq",
        "poll_cq", "req_notify_cq", "_compat_cq_event", "_compat_resize_cq", "_compat_destroy_cq",
        "_compat_create_srq", "_compat_modify_srq", "_compat_query_srq", "_compat_destroy_srq", "post_srq_recv",
        "_compat_create_qp", "_compat_query_qp", "_compat_modify_qp", "_compat_destroy_qp", "post_send",
        "post_recv", "_compat_create_ah", "_compat_destroy_ah", "_compat_attach_mcast", "_compat_detach_mcast",
        "_compat_async_event",
    };

    public static final StructLayout IBV_CONTEXT_OPS = CStruct.of("ibv_context_ops",
            Arrays.stream(CONTEXT_OPS).map(Structs::ptr).toArray(MemoryLayout[]::new));

    public static final StructLayout IBV_CONTEXT = CStruct.of("ibv_context",
            ptr("device"), IBV_CONTEXT_OPS.withName("ops"), u32("cmd_fd"), u32("async_fd"), u32("num_comp_vectors"),
            opaque("mutex", PTHREAD_MUTEX_SIZE), ptr("abi_compat"));

    /**
     * struct verbs_context sits in memory right before its ibv_context and "grows up": query_port is
     * its first member. The 37 other op pointers and a u64 placeholder between them are not used here.
     */
    public static final StructLayout VERBS_CONTEXT = CStruct.of("verbs_context",
            ptr("query_port"), opaque("unused_ops", 38 * 8), u64("sz"), IBV_CONTEXT.withName("context"));

    public static final StructLayout IBV_COMP_CHANNEL = CStruct.of("ibv_comp_channel",
            ptr("context"), u32("fd"), u32("refcnt"));

    public static final StructLayout IBV_CQ = CStruct.of("ibv_cq",
            ptr("context"), ptr("channel"), ptr("cq_context"), u32("handle"), u32("cqe"),
            opaque("mutex", PTHREAD_MUTEX_SIZE), opaque("cond", PTHREAD_COND_SIZE),
            u32("comp_events_completed"), u32("async_events_completed"));

    public static final StructLayout IBV_MR = CStruct.of("ibv_mr",
            ptr("context"), ptr("pd"), ptr("addr"), u64("length"), u32("handle"), u32("lkey"), u32("rkey"));

    public static final StructLayout IBV_QP = CStruct.of("ibv_qp",
            ptr("context"), ptr("qp_context"), ptr("pd"), ptr("send_cq"), ptr("recv_cq"), ptr("srq"), u32("handle"),
            u32("qp_num"), u32("state"), u32("qp_type"), opaque("mutex", PTHREAD_MUTEX_SIZE),
            opaque("cond", PTHREAD_COND_SIZE), u32("events_completed"));

    // Offsets the runtime uses, resolved once by name so a layout change cannot leave a stale number behind.
    public static final long DEVICE_ATTR_FW_VER = offset(IBV_DEVICE_ATTR, "fw_ver");

    public static final long GID_ENTRY_GID = offset(IBV_GID_ENTRY, "gid");
    public static final long GID_ENTRY_INDEX = offset(IBV_GID_ENTRY, "gid_index");
    public static final long GID_ENTRY_PORT = offset(IBV_GID_ENTRY, "port_num");
    public static final long GID_ENTRY_TYPE = offset(IBV_GID_ENTRY, "gid_type");
    public static final long GID_ENTRY_IFINDEX = offset(IBV_GID_ENTRY, "ndev_ifindex");

    public static final long CONTEXT_OPS_POLL_CQ = offset(IBV_CONTEXT, "ops", "poll_cq");
    public static final long CONTEXT_OPS_REQ_NOTIFY_CQ = offset(IBV_CONTEXT, "ops", "req_notify_cq");
    public static final long CONTEXT_OPS_POST_SEND = offset(IBV_CONTEXT, "ops", "post_send");
    public static final long CONTEXT_OPS_POST_RECV = offset(IBV_CONTEXT, "ops", "post_recv");
    public static final long CONTEXT_ABI_COMPAT = offset(IBV_CONTEXT, "abi_compat");
    /** Where verbs_context starts, relative to its ibv_context (negative). */
    public static final long VERBS_CONTEXT_FROM_CONTEXT = -offset(VERBS_CONTEXT, "context");
    public static final long VERBS_CONTEXT_QUERY_PORT = offset(VERBS_CONTEXT, "query_port");
    public static final long VERBS_CONTEXT_SZ = offset(VERBS_CONTEXT, "sz");

    public static final long COMP_CHANNEL_FD = offset(IBV_COMP_CHANNEL, "fd");
    public static final long CQ_CQE = offset(IBV_CQ, "cqe");
    public static final long MR_LKEY = offset(IBV_MR, "lkey");
    public static final long MR_RKEY = offset(IBV_MR, "rkey");
    public static final long QP_QP_NUM = offset(IBV_QP, "qp_num");

    public static final long QP_INIT_SEND_CQ = offset(IBV_QP_INIT_ATTR, "send_cq");
    public static final long QP_INIT_RECV_CQ = offset(IBV_QP_INIT_ATTR, "recv_cq");
    public static final long QP_INIT_CAP_MAX_SEND_WR = offset(IBV_QP_INIT_ATTR, "cap", "max_send_wr");
    public static final long QP_INIT_CAP_MAX_RECV_WR = offset(IBV_QP_INIT_ATTR, "cap", "max_recv_wr");
    public static final long QP_INIT_CAP_MAX_SEND_SGE = offset(IBV_QP_INIT_ATTR, "cap", "max_send_sge");
    public static final long QP_INIT_CAP_MAX_RECV_SGE = offset(IBV_QP_INIT_ATTR, "cap", "max_recv_sge");
    public static final long QP_INIT_CAP_MAX_INLINE = offset(IBV_QP_INIT_ATTR, "cap", "max_inline_data");
    public static final long QP_INIT_QP_TYPE = offset(IBV_QP_INIT_ATTR, "qp_type");
    public static final long QP_INIT_SQ_SIG_ALL = offset(IBV_QP_INIT_ATTR, "sq_sig_all");

    public static final long QP_ATTR_STATE = offset(IBV_QP_ATTR, "qp_state");
    public static final long QP_ATTR_CUR_STATE = offset(IBV_QP_ATTR, "cur_qp_state");
    public static final long QP_ATTR_PATH_MTU = offset(IBV_QP_ATTR, "path_mtu");
    public static final long QP_ATTR_QKEY = offset(IBV_QP_ATTR, "qkey");
    public static final long QP_ATTR_RQ_PSN = offset(IBV_QP_ATTR, "rq_psn");
    public static final long QP_ATTR_SQ_PSN = offset(IBV_QP_ATTR, "sq_psn");
    public static final long QP_ATTR_DEST_QP_NUM = offset(IBV_QP_ATTR, "dest_qp_num");
    public static final long QP_ATTR_ACCESS_FLAGS = offset(IBV_QP_ATTR, "qp_access_flags");
    public static final long QP_ATTR_CAP_MAX_SEND_WR = offset(IBV_QP_ATTR, "cap", "max_send_wr");
    public static final long QP_ATTR_CAP_MAX_RECV_WR = offset(IBV_QP_ATTR, "cap", "max_recv_wr");
    public static final long QP_ATTR_CAP_MAX_INLINE = offset(IBV_QP_ATTR, "cap", "max_inline_data");
    public static final long QP_ATTR_AH_DGID = offset(IBV_QP_ATTR, "ah_attr", "grh", "dgid");
    public static final long QP_ATTR_AH_FLOW_LABEL = offset(IBV_QP_ATTR, "ah_attr", "grh", "flow_label");
    public static final long QP_ATTR_AH_SGID_INDEX = offset(IBV_QP_ATTR, "ah_attr", "grh", "sgid_index");
    public static final long QP_ATTR_AH_HOP_LIMIT = offset(IBV_QP_ATTR, "ah_attr", "grh", "hop_limit");
    public static final long QP_ATTR_AH_TRAFFIC_CLASS = offset(IBV_QP_ATTR, "ah_attr", "grh", "traffic_class");
    public static final long QP_ATTR_AH_DLID = offset(IBV_QP_ATTR, "ah_attr", "dlid");
    public static final long QP_ATTR_AH_SL = offset(IBV_QP_ATTR, "ah_attr", "sl");
    public static final long QP_ATTR_AH_IS_GLOBAL = offset(IBV_QP_ATTR, "ah_attr", "is_global");
    public static final long QP_ATTR_AH_PORT_NUM = offset(IBV_QP_ATTR, "ah_attr", "port_num");
    public static final long QP_ATTR_PKEY_INDEX = offset(IBV_QP_ATTR, "pkey_index");
    public static final long QP_ATTR_MAX_RD_ATOMIC = offset(IBV_QP_ATTR, "max_rd_atomic");
    public static final long QP_ATTR_MAX_DEST_RD_ATOMIC = offset(IBV_QP_ATTR, "max_dest_rd_atomic");
    public static final long QP_ATTR_MIN_RNR_TIMER = offset(IBV_QP_ATTR, "min_rnr_timer");
    public static final long QP_ATTR_PORT_NUM = offset(IBV_QP_ATTR, "port_num");
    public static final long QP_ATTR_TIMEOUT = offset(IBV_QP_ATTR, "timeout");
    public static final long QP_ATTR_RETRY_CNT = offset(IBV_QP_ATTR, "retry_cnt");
    public static final long QP_ATTR_RNR_RETRY = offset(IBV_QP_ATTR, "rnr_retry");

    public static final long SGE_ADDR = offset(IBV_SGE, "addr");
    public static final long SGE_LENGTH = offset(IBV_SGE, "length");
    public static final long SGE_LKEY = offset(IBV_SGE, "lkey");

    public static final long SEND_WR_WR_ID = offset(IBV_SEND_WR, "wr_id");
    public static final long SEND_WR_NEXT = offset(IBV_SEND_WR, "next");
    public static final long SEND_WR_SG_LIST = offset(IBV_SEND_WR, "sg_list");
    public static final long SEND_WR_NUM_SGE = offset(IBV_SEND_WR, "num_sge");
    public static final long SEND_WR_OPCODE = offset(IBV_SEND_WR, "opcode");
    public static final long SEND_WR_SEND_FLAGS = offset(IBV_SEND_WR, "send_flags");
    public static final long SEND_WR_IMM_DATA = offset(IBV_SEND_WR, "imm_data");
    public static final long SEND_WR_RDMA_REMOTE_ADDR = offset(IBV_SEND_WR, "wr", "rdma", "remote_addr");
    public static final long SEND_WR_RDMA_RKEY = offset(IBV_SEND_WR, "wr", "rdma", "rkey");
    public static final long SEND_WR_ATOMIC_REMOTE_ADDR = offset(IBV_SEND_WR, "wr", "atomic", "remote_addr");
    public static final long SEND_WR_ATOMIC_COMPARE_ADD = offset(IBV_SEND_WR, "wr", "atomic", "compare_add");
    public static final long SEND_WR_ATOMIC_SWAP = offset(IBV_SEND_WR, "wr", "atomic", "swap");
    public static final long SEND_WR_ATOMIC_RKEY = offset(IBV_SEND_WR, "wr", "atomic", "rkey");

    public static final long RECV_WR_WR_ID = offset(IBV_RECV_WR, "wr_id");
    public static final long RECV_WR_NEXT = offset(IBV_RECV_WR, "next");
    public static final long RECV_WR_SG_LIST = offset(IBV_RECV_WR, "sg_list");
    public static final long RECV_WR_NUM_SGE = offset(IBV_RECV_WR, "num_sge");
}
