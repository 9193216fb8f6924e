//! Every PRM structure we read or write, each field declared once.
//!
//! Offsets are relative to the structure named, in bits from its most significant bit, as in
//! the PRM and rdma-core's `mlx5_ifc.h`. A structure embedded in another (the `qpc` in
//! `create_qp_in`, the `ads` in the `qpc`) is placed with [`Field::within`]. Only the fields
//! the control plane sets or reads are declared; everything else in a command stays zero.
//!
//! Sources (facts only): rdma-core 56.1 `providers/mlx5/mlx5_ifc.h` (`qpc`, `ads`,
//! `create_qp_in`, the modify commands, `query_hca_cap`, `cmd_hca_cap`, `atomic_caps`,
//! `alloc_uar`, `dealloc_uar`, `destroy_*`, `mbox_out`), rdma-core 56.1
//! `tests/mlx5_prm_structs.py` (`SwCqc`, `CreateCqIn`, `SwQpc`'s `wq_umem_offset`), and the
//! Linux kernel's `include/linux/mlx5/mlx5_ifc.h` (`dctc`, `create_dct_in`, which neither
//! rdma-core file defines).

use super::bits::{Field, Layout};

macro_rules! layout {
    (
        $(#[$meta:meta])*
        $module:ident = $prm:literal, $bits:expr;
        $( $field:ident = $name:literal @ $offset:expr, $width:expr; )*
    ) => {
        $(#[$meta])*
        pub mod $module {
            use super::{Field, Layout};
            $(
                #[doc = concat!("`", $prm, ".", $name, "`")]
                pub const $field: Field = Field::new($prm, $name, $offset, $width);
            )*
            /// The structure: its size and every declared field.
            pub const LAYOUT: Layout = Layout {
                name: $prm,
                bits: $bits,
                fields: &[$($field),*],
            };
            const _: () = assert!(LAYOUT.is_well_formed(), concat!($prm, " is malformed"));
        }
    };
}

layout! {
    /// The command input header every command starts with (`mbox_in`).
    mbox_in = "mbox_in", 0x80;
    OPCODE = "opcode" @ 0x00, 16;
    UID = "uid" @ 0x10, 16;
    OP_MOD = "op_mod" @ 0x30, 16;
}

layout! {
    /// The command output header every output starts with (`mbox_out`).
    mbox_out = "mbox_out", 0x80;
    STATUS = "status" @ 0x00, 8;
    SYNDROME = "syndrome" @ 0x20, 32;
}

layout! {
    /// `destroy_cq_in` (DESTROY_CQ's input).
    destroy_cq_in = "destroy_cq_in", 0x80;
    OPCODE = "opcode" @ 0x00, 16;
    UID = "uid" @ 0x10, 16;
    OBJECT = "cqn" @ 0x48, 24;
}

layout! {
    /// `destroy_qp_in` (DESTROY_QP's input).
    destroy_qp_in = "destroy_qp_in", 0x80;
    OPCODE = "opcode" @ 0x00, 16;
    UID = "uid" @ 0x10, 16;
    OBJECT = "qpn" @ 0x48, 24;
}

layout! {
    /// `destroy_dct_in` (DESTROY_DCT's input).
    destroy_dct_in = "destroy_dct_in", 0x80;
    OPCODE = "opcode" @ 0x00, 16;
    UID = "uid" @ 0x10, 16;
    OBJECT = "dctn" @ 0x48, 24;
}

layout! {
    /// `qp_2err_in` (2ERR_QP's input): the common command header and the queue pair.
    /// rdma-core 56.1's `mlx5_ifc.h` has only the opcode; the layout is the kernel's and
    /// DOCA's, the first 16 bytes of every QP modify command's header.
    qp_2err_in = "qp_2err_in", 0x80;
    OPCODE = "opcode" @ 0x00, 16;
    UID = "uid" @ 0x10, 16;
    OBJECT = "qpn" @ 0x48, 24;
}

layout! {
    /// `qp_2rst_in` (2RST_QP's input), laid out as [`qp_2err_in`].
    qp_2rst_in = "qp_2rst_in", 0x80;
    OPCODE = "opcode" @ 0x00, 16;
    UID = "uid" @ 0x10, 16;
    OBJECT = "qpn" @ 0x48, 24;
}

layout! {
    /// `dealloc_uar_in` (no `uid` in this input).
    dealloc_uar_in = "dealloc_uar_in", 0x80;
    OPCODE = "opcode" @ 0x00, 16;
    OP_MOD = "op_mod" @ 0x30, 16;
    OBJECT = "uar" @ 0x48, 24;
}

layout! {
    /// `create_cq_out` (CREATE_CQ's output).
    create_cq_out = "create_cq_out", 0x80;
    STATUS = "status" @ 0x00, 8;
    SYNDROME = "syndrome" @ 0x20, 32;
    OBJECT = "cqn" @ 0x48, 24;
}

layout! {
    /// `create_qp_out` (CREATE_QP's output).
    create_qp_out = "create_qp_out", 0x80;
    STATUS = "status" @ 0x00, 8;
    SYNDROME = "syndrome" @ 0x20, 32;
    OBJECT = "qpn" @ 0x48, 24;
}

layout! {
    /// `create_dct_out` (CREATE_DCT's output).
    create_dct_out = "create_dct_out", 0x80;
    STATUS = "status" @ 0x00, 8;
    SYNDROME = "syndrome" @ 0x20, 32;
    OBJECT = "dctn" @ 0x48, 24;
}

layout! {
    /// `alloc_uar_out` (ALLOC_UAR's output).
    alloc_uar_out = "alloc_uar_out", 0x80;
    STATUS = "status" @ 0x00, 8;
    SYNDROME = "syndrome" @ 0x20, 32;
    OBJECT = "uar" @ 0x48, 24;
}

layout! {
    /// `query_hca_cap_in`.
    query_hca_cap_in = "query_hca_cap_in", 0x80;
    OPCODE = "opcode" @ 0x00, 16;
    OP_MOD = "op_mod" @ 0x30, 16;
    OTHER_FUNCTION = "other_function" @ 0x40, 1;
    FUNCTION_ID = "function_id" @ 0x50, 16;
}

/// Bit offset of the capability union in `query_hca_cap_out`.
pub const QUERY_HCA_CAP_OUT_CAPABILITY: u32 = 0x80;
/// Size of `query_hca_cap_out` in bits: the header and the 4 KiB capability union.
pub const QUERY_HCA_CAP_OUT_BITS: u32 = 0x80 + 0x8000;

layout! {
    /// `cmd_hca_cap`: the general device capabilities (the fields that matter here).
    cmd_hca_cap = "cmd_hca_cap", 0x800;
    QP_DATA_IN_ORDER = "qp_data_in_order" @ 0x62, 1;
    LOG_MAX_SRQ_SZ = "log_max_srq_sz" @ 0x80, 8;
    LOG_MAX_QP_SZ = "log_max_qp_sz" @ 0x88, 8;
    LOG_MAX_QP = "log_max_qp" @ 0x9b, 5;
    LOG_MAX_CQ_SZ = "log_max_cq_sz" @ 0xc8, 8;
    LOG_MAX_CQ = "log_max_cq" @ 0xdb, 5;
    LOG_MAX_RA_REQ_DC = "log_max_ra_req_dc" @ 0x12a, 6;
    LOG_MAX_RA_RES_DC = "log_max_ra_res_dc" @ 0x13a, 6;
    LOG_MAX_RA_REQ_QP = "log_max_ra_req_qp" @ 0x14a, 6;
    LOG_MAX_RA_RES_QP = "log_max_ra_res_qp" @ 0x15a, 6;
    END_PAD = "end_pad" @ 0x160, 1;
    PORT_TYPE = "port_type" @ 0x1b6, 2;
    NUM_PORTS = "num_ports" @ 0x1b8, 8;
    LOG_MAX_MSG = "log_max_msg" @ 0x1c3, 5;
    CQE_VERSION = "cqe_version" @ 0x1fc, 4;
    COMPACT_ADDRESS_VECTOR = "compact_address_vector" @ 0x200, 1;
    DCT = "dct" @ 0x21a, 1;
    ATOMIC = "atomic" @ 0x21e, 1;
    RC = "rc" @ 0x23f, 1;
    UAR_4K = "uar_4k" @ 0x240, 1;
    UMEM_UID_0 = "umem_uid_0" @ 0x252, 1;
    LOG_BF_REG_SIZE = "log_bf_reg_size" @ 0x26b, 5;
    MAX_WQE_SZ_SQ = "max_wqe_sz_sq" @ 0x290, 16;
    MAX_WQE_SZ_SQ_DC = "max_wqe_sz_sq_dc" @ 0x2d0, 16;
    LOG_MAX_PD = "log_max_pd" @ 0x32b, 5;
}

layout! {
    /// `atomic_caps`: the atomic capabilities (QUERY_HCA_CAP with the atomic op_mod).
    atomic_caps = "atomic_caps", 0x800;
    ATOMIC_REQ_8B_ENDIANNESS_MODE = "atomic_req_8B_endianness_mode" @ 0x40, 2;
    SUPPORTED_ATOMIC_REQ_8B_ENDIANNESS_MODE_1 = "supported_atomic_req_8B_endianness_mode_1" @ 0x46, 1;
    ATOMIC_OPERATIONS = "atomic_operations" @ 0x90, 16;
    ATOMIC_SIZE_QP = "atomic_size_qp" @ 0xb0, 16;
    ATOMIC_SIZE_DC = "atomic_size_dc" @ 0xd0, 16;
}

layout! {
    /// `alloc_uar_in`.
    alloc_uar_in = "alloc_uar_in", 0x80;
    OPCODE = "opcode" @ 0x00, 16;
    OP_MOD = "op_mod" @ 0x30, 16;
}

layout! {
    /// `ads`: an address path (primary or secondary) inside the `qpc`.
    ads = "ads", 0x160;
    FL = "fl" @ 0x00, 1;
    PKEY_INDEX = "pkey_index" @ 0x10, 16;
    GRH = "grh" @ 0x28, 1;
    RLID = "rlid" @ 0x30, 16;
    ACK_TIMEOUT = "ack_timeout" @ 0x40, 5;
    SRC_ADDR_INDEX = "src_addr_index" @ 0x48, 8;
    STAT_RATE = "stat_rate" @ 0x54, 4;
    HOP_LIMIT = "hop_limit" @ 0x58, 8;
    TCLASS = "tclass" @ 0x64, 8;
    FLOW_LABEL = "flow_label" @ 0x6c, 20;
    RGID_RIP = "rgid_rip" @ 0x80, 128;
    DSCP = "dscp" @ 0x10a, 6;
    UDP_SPORT = "udp_sport" @ 0x110, 16;
    ETH_PRIO = "eth_prio" @ 0x121, 3;
    SL = "sl" @ 0x124, 4;
    VHCA_PORT_NUM = "vhca_port_num" @ 0x128, 8;
    // The MAC is one 6-byte string from rmac_47_32 through rmac_31_0 (as rdma-core copies it).
    RMAC_47_32 = "rmac_47_32" @ 0x130, 16;
    RMAC_31_0 = "rmac_31_0" @ 0x140, 32;
}

layout! {
    /// `qpc`: the QP context carried by CREATE_QP and the modify commands.
    qpc = "qpc", 0x740;
    ST = "st" @ 0x008, 8;
    ISOLATE_VL_TC = "isolate_vl_tc" @ 0x012, 1;
    PM_STATE = "pm_state" @ 0x013, 2;
    PD = "pd" @ 0x028, 24;
    MTU = "mtu" @ 0x040, 3;
    LOG_MSG_MAX = "log_msg_max" @ 0x043, 5;
    LOG_RQ_SIZE = "log_rq_size" @ 0x049, 4;
    LOG_RQ_STRIDE = "log_rq_stride" @ 0x04d, 3;
    NO_SQ = "no_sq" @ 0x050, 1;
    LOG_SQ_SIZE = "log_sq_size" @ 0x051, 4;
    TS_FORMAT = "ts_format" @ 0x058, 2;
    UAR_PAGE = "uar_page" @ 0x068, 24;
    USER_INDEX = "user_index" @ 0x088, 24;
    LOG_PAGE_SIZE = "log_page_size" @ 0x0a3, 5;
    REMOTE_QPN = "remote_qpn" @ 0x0a8, 24;
    LOG_ACK_REQ_FREQ = "log_ack_req_freq" @ 0x380, 4;
    LOG_SRA_MAX = "log_sra_max" @ 0x388, 3;
    RETRY_COUNT = "retry_count" @ 0x38d, 3;
    RNR_RETRY = "rnr_retry" @ 0x390, 3;
    NEXT_SEND_PSN = "next_send_psn" @ 0x3c8, 24;
    CQN_SND = "cqn_snd" @ 0x3e8, 24;
    LOG_RRA_MAX = "log_rra_max" @ 0x488, 3;
    ATOMIC_MODE = "atomic_mode" @ 0x48c, 4;
    RRE = "rre" @ 0x490, 1;
    RWE = "rwe" @ 0x491, 1;
    RAE = "rae" @ 0x492, 1;
    PAGE_OFFSET = "page_offset" @ 0x494, 6;
    MIN_RNR_NAK = "min_rnr_nak" @ 0x4a3, 5;
    NEXT_RCV_PSN = "next_rcv_psn" @ 0x4a8, 24;
    CQN_RCV = "cqn_rcv" @ 0x4e8, 24;
    DBR_ADDR = "dbr_addr" @ 0x500, 64;
    RQ_TYPE = "rq_type" @ 0x565, 3;
    SRQN_RMPN_XRQN = "srqn_rmpn_xrqn" @ 0x568, 24;
    DC_ACCESS_KEY = "dc_access_key" @ 0x640, 64;
    DBR_UMEM_VALID = "dbr_umem_valid" @ 0x683, 1;
    DBR_UMEM_ID = "dbr_umem_id" @ 0x720, 32;
}

/// Bit offset of `primary_address_path` (an `ads`) in the `qpc`.
pub const QPC_PRIMARY_ADDRESS_PATH: u32 = 0x0c0;

layout! {
    /// `create_qp_in` without its embedded `qpc` (at [`QP_COMMAND_QPC`]).
    create_qp_in = "create_qp_in", 0x880;
    OPCODE = "opcode" @ 0x00, 16;
    UID = "uid" @ 0x10, 16;
    OP_MOD = "op_mod" @ 0x30, 16;
    OPT_PARAM_MASK = "opt_param_mask" @ 0x80, 32;
    WQ_UMEM_OFFSET = "wq_umem_offset" @ 0x800, 64;
    WQ_UMEM_ID = "wq_umem_id" @ 0x840, 32;
    WQ_UMEM_VALID = "wq_umem_valid" @ 0x860, 1;
}

layout! {
    /// The QP state-transition commands' input without its `qpc` (`rst2init_qp_in`,
    /// `init2rtr_qp_in` and `rtr2rts_qp_in` share this layout).
    modify_qp_in = "rst2init_qp_in", 0x880;
    OPCODE = "opcode" @ 0x00, 16;
    UID = "uid" @ 0x10, 16;
    OP_MOD = "op_mod" @ 0x30, 16;
    QPN = "qpn" @ 0x48, 24;
    OPT_PARAM_MASK = "opt_param_mask" @ 0x80, 32;
}

/// Bit offset of the `qpc` in `create_qp_in` and the modify commands.
pub const QP_COMMAND_QPC: u32 = 0x0c0;

layout! {
    /// `cqc`: the CQ context (absent from rdma-core 56.1's `mlx5_ifc.h`; rdma-core's
    /// `tests/mlx5_prm_structs.py` `SwCqc` defines it; `dbr_addr` is that file's
    /// `db_record_addr_63_32` and `db_record_addr_31_3` with the three low bits reserved).
    cqc = "cqc", 0x200;
    DBR_UMEM_VALID = "dbr_umem_valid" @ 0x006, 1;
    CQE_SZ = "cqe_sz" @ 0x008, 3;
    CC = "cc" @ 0x00b, 1;
    OI = "oi" @ 0x00e, 1;
    DBR_UMEM_ID = "dbr_umem_id" @ 0x020, 32;
    PAGE_OFFSET = "page_offset" @ 0x054, 6;
    LOG_CQ_SIZE = "log_cq_size" @ 0x063, 5;
    UAR_PAGE = "uar_page" @ 0x068, 24;
    C_EQN = "c_eqn" @ 0x0b8, 8;
    LOG_PAGE_SIZE = "log_page_size" @ 0x0c3, 5;
    DBR_ADDR = "dbr_addr" @ 0x1c0, 64;
}

layout! {
    /// `create_cq_in` without its embedded `cqc` (at [`CREATE_CQ_CQC`]).
    create_cq_in = "create_cq_in", 0x880;
    OPCODE = "opcode" @ 0x00, 16;
    UID = "uid" @ 0x10, 16;
    OP_MOD = "op_mod" @ 0x30, 16;
    CQ_UMEM_OFFSET = "cq_umem_offset" @ 0x280, 64;
    CQ_UMEM_ID = "cq_umem_id" @ 0x2c0, 32;
    CQ_UMEM_VALID = "cq_umem_valid" @ 0x2e0, 1;
}

/// Bit offset of the `cqc` in `create_cq_in`.
pub const CREATE_CQ_CQC: u32 = 0x080;

layout! {
    /// `dctc`: the DC target context (the kernel's `mlx5_ifc.h`; rdma-core 56.1 declares
    /// only its `data_in_order` bit).
    dctc = "dctc", 0x200;
    USER_INDEX = "user_index" @ 0x028, 24;
    CQN = "cqn" @ 0x048, 24;
    ATOMIC_MODE = "atomic_mode" @ 0x068, 4;
    RRE = "rre" @ 0x06c, 1;
    RWE = "rwe" @ 0x06d, 1;
    RAE = "rae" @ 0x06e, 1;
    MIN_RNR_NAK = "min_rnr_nak" @ 0x093, 5;
    SRQN_XRQN = "srqn_xrqn" @ 0x0a8, 24;
    PD = "pd" @ 0x0c8, 24;
    TCLASS = "tclass" @ 0x0e0, 8;
    FLOW_LABEL = "flow_label" @ 0x0ec, 20;
    DC_ACCESS_KEY = "dc_access_key" @ 0x100, 64;
    MTU = "mtu" @ 0x145, 3;
    PORT = "port" @ 0x148, 8;
    PKEY_INDEX = "pkey_index" @ 0x150, 16;
    MY_ADDR_INDEX = "my_addr_index" @ 0x168, 8;
    HOP_LIMIT = "hop_limit" @ 0x178, 8;
    ETH_PRIO = "eth_prio" @ 0x1b5, 3;
    DSCP = "dscp" @ 0x1ba, 6;
}

layout! {
    /// `create_dct_in` without its embedded `dctc` (at [`CREATE_DCT_DCTC`]).
    create_dct_in = "create_dct_in", 0x400;
    OPCODE = "opcode" @ 0x00, 16;
    UID = "uid" @ 0x10, 16;
    OP_MOD = "op_mod" @ 0x30, 16;
}

/// Bit offset of the `dctc` in `create_dct_in`.
pub const CREATE_DCT_DCTC: u32 = 0x080;

// ---------------------------------------------------------------------------------------
// Fields the control plane leaves zero, named so that a command log of another program (the
// command diff, [`super::diff`]) reads them by name: rdma-core 56.1 `mlx5_ifc.h` (`qpc`,
// `ads`) and `tests/mlx5_prm_structs.py` (`SwCqc`). None overlaps a field of the layout of
// the same structure above (checked in `super::diff`'s tests).

layout! {
    /// The `qpc` fields [`qpc`] does not declare.
    qpc_other = "qpc", 0x740;
    STATE = "state" @ 0x000, 4;
    LAG_TX_PORT_AFFINITY = "lag_tx_port_affinity" @ 0x004, 4;
    REQ_E2E_CREDIT_MODE = "req_e2e_credit_mode" @ 0x016, 2;
    OFFLOAD_TYPE = "offload_type" @ 0x018, 4;
    END_PADDING_MODE = "end_padding_mode" @ 0x01c, 2;
    WQ_SIGNATURE = "wq_signature" @ 0x020, 1;
    BLOCK_LB_MC = "block_lb_mc" @ 0x021, 1;
    ATOMIC_LIKE_WRITE_EN = "atomic_like_write_en" @ 0x022, 1;
    LATENCY_SENSITIVE = "latency_sensitive" @ 0x023, 1;
    DRAIN_SIGERR = "drain_sigerr" @ 0x025, 1;
    DATA_IN_ORDER = "data_in_order" @ 0x05a, 1;
    RLKY = "rlky" @ 0x05b, 1;
    ULP_STATELESS_OFFLOAD_MODE = "ulp_stateless_offload_mode" @ 0x05c, 4;
    COUNTER_SET_ID = "counter_set_id" @ 0x060, 8;
    FRE = "fre" @ 0x394, 1;
    CUR_RNR_RETRY = "cur_rnr_retry" @ 0x395, 3;
    CUR_RETRY_COUNT = "cur_retry_count" @ 0x398, 3;
    DETH_SQPN = "deth_sqpn" @ 0x408, 24;
    LAST_ACKED_PSN = "last_acked_psn" @ 0x448, 24;
    SSN = "ssn" @ 0x468, 24;
    CD_SLAVE_RECEIVE = "cd_slave_receive" @ 0x49d, 1;
    CD_SLAVE_SEND = "cd_slave_send" @ 0x49e, 1;
    CD_MASTER = "cd_master" @ 0x49f, 1;
    XRCD = "xrcd" @ 0x4c8, 24;
    Q_KEY = "q_key" @ 0x540, 32;
    RMSN = "rmsn" @ 0x588, 24;
    HW_SQ_WQEBB_COUNTER = "hw_sq_wqebb_counter" @ 0x5a0, 16;
    SW_SQ_WQEBB_COUNTER = "sw_sq_wqebb_counter" @ 0x5b0, 16;
    HW_RQ_COUNTER = "hw_rq_counter" @ 0x5c0, 32;
    SW_RQ_COUNTER = "sw_rq_counter" @ 0x5e0, 32;
    CGS = "cgs" @ 0x62f, 1;
    CS_REQ = "cs_req" @ 0x630, 8;
    CS_RES = "cs_res" @ 0x638, 8;
}

/// Bit offset of `secondary_address_path` (an `ads`) in the `qpc`.
pub const QPC_SECONDARY_ADDRESS_PATH: u32 = 0x220;

layout! {
    /// The `ads` fields [`ads`] does not declare.
    ads_other = "ads", 0x160;
    FREE_AR = "free_ar" @ 0x001, 1;
    MLID = "mlid" @ 0x029, 7;
    F_DSCP = "f_dscp" @ 0x104, 1;
    F_ECN = "f_ecn" @ 0x105, 1;
    F_ETH_PRIO = "f_eth_prio" @ 0x107, 1;
    ECN = "ecn" @ 0x108, 2;
    DEI_CFI = "dei_cfi" @ 0x120, 1;
}

layout! {
    /// The `cqc` fields [`cqc`] does not declare.
    cqc_other = "cqc", 0x200;
    STATUS = "status" @ 0x000, 4;
    AS_NOTIFY = "as_notify" @ 0x004, 1;
    INITIATOR_SRC_DCT = "initiator_src_dct" @ 0x005, 1;
    SCQE_BREAK_MODERATION_EN = "scqe_break_moderation_en" @ 0x00d, 1;
    CQ_PERIOD_MODE = "cq_period_mode" @ 0x00f, 2;
    CQE_COMPRESSION_EN = "cqe_compression_en" @ 0x011, 1;
    MINI_CQE_RES_FORMAT = "mini_cqe_res_format" @ 0x012, 2;
    ST = "st" @ 0x014, 4;
    CQ_PERIOD = "cq_period" @ 0x084, 12;
    CQ_MAX_COUNT = "cq_max_count" @ 0x090, 16;
}

// Offsets measured on rdma-core 56.1's header by hand, pinned independently of the tables.
const _: () = {
    assert!(qpc::LAYOUT.has("st", 0x008, 8));
    assert!(qpc::LAYOUT.has("pm_state", 0x013, 2));
    assert!(qpc::LAYOUT.has("pd", 0x028, 24));
    assert!(qpc::LAYOUT.has("log_sq_size", 0x051, 4));
    assert!(qpc::LAYOUT.has("uar_page", 0x068, 24));
    assert!(qpc::LAYOUT.has("user_index", 0x088, 24));
    assert!(QPC_PRIMARY_ADDRESS_PATH == 0x0c0);
    assert!(qpc::LAYOUT.has("cqn_snd", 0x3e8, 24));
    assert!(qpc::LAYOUT.has("atomic_mode", 0x48c, 4));
    assert!(qpc::LAYOUT.has("rre", 0x490, 1));
    assert!(qpc::LAYOUT.has("rwe", 0x491, 1));
    assert!(qpc::LAYOUT.has("rae", 0x492, 1));
    assert!(qpc::LAYOUT.has("cqn_rcv", 0x4e8, 24));
    assert!(qpc::LAYOUT.has("dbr_addr", 0x500, 64));
    assert!(qpc::LAYOUT.has("rq_type", 0x565, 3));
    assert!(qpc::LAYOUT.has("srqn_rmpn_xrqn", 0x568, 24));
    assert!(qpc::LAYOUT.has("dc_access_key", 0x640, 64));
    assert!(qpc::LAYOUT.has("dbr_umem_valid", 0x683, 1));
    assert!(qpc::LAYOUT.has("dbr_umem_id", 0x720, 32));
    assert!(qpc::LAYOUT.bits == 0x740);
    assert!(QP_COMMAND_QPC == 0x0c0);
    assert!(create_qp_in::LAYOUT.has("wq_umem_id", 0x840, 32));
    assert!(create_qp_in::LAYOUT.has("wq_umem_valid", 0x860, 1));
    assert!(create_qp_in::LAYOUT.bits == 272 * 8);
    // The embedded structures fit between the headers and the trailing fields.
    assert!(QP_COMMAND_QPC + qpc::LAYOUT.bits <= create_qp_in::WQ_UMEM_OFFSET.bit_offset);
    assert!(QP_COMMAND_QPC + qpc::LAYOUT.bits <= modify_qp_in::LAYOUT.bits);
    assert!(QPC_PRIMARY_ADDRESS_PATH + ads::LAYOUT.bits <= qpc::LOG_ACK_REQ_FREQ.bit_offset);
    assert!(CREATE_CQ_CQC + cqc::LAYOUT.bits <= create_cq_in::CQ_UMEM_OFFSET.bit_offset);
    assert!(CREATE_DCT_DCTC + dctc::LAYOUT.bits <= create_dct_in::LAYOUT.bits);
    assert!(QUERY_HCA_CAP_OUT_CAPABILITY == mbox_out::LAYOUT.bits);
    // 2ERR_QP and 2RST_QP carry the header of the other modify commands, and nothing else.
    assert!(qp_2err_in::OBJECT.bit_offset == modify_qp_in::QPN.bit_offset);
    assert!(qp_2rst_in::OBJECT.bit_offset == modify_qp_in::QPN.bit_offset);
    assert!(qp_2err_in::OBJECT.bit_width == modify_qp_in::QPN.bit_width);
    assert!(qp_2rst_in::OBJECT.bit_width == modify_qp_in::QPN.bit_width);
    assert!(qp_2err_in::LAYOUT.bits == 0x80 && qp_2rst_in::LAYOUT.bits == 0x80);
};
