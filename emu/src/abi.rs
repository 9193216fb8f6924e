//! The C structures of rdma-core's public headers (`infiniband/verbs.h` and
//! `infiniband/mlx5dv.h`, rdma-core 56.1, x86-64 Linux) that the emulated libraries hand
//! out or fill: the fields in declaration order with C's layout. The layout test in
//! `tests/rdma-core/tests/emu_abi.rs` (which compiles this file on its own) compares every
//! size and offset with the real headers.

#![allow(non_camel_case_types, missing_docs)]

use core::ffi::{c_char, c_int, c_void};

/// `pthread_mutex_t` and `pthread_cond_t` of glibc on x86-64: opaque words (all zero is
/// their static initialiser, `PTHREAD_MUTEX_INITIALIZER` / `PTHREAD_COND_INITIALIZER`).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct pthread_mutex_t(pub [u8; 40]);
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct pthread_cond_t(pub [u8; 48]);

impl Default for pthread_mutex_t {
    fn default() -> Self {
        Self([0; 40])
    }
}
impl Default for pthread_cond_t {
    fn default() -> Self {
        Self([0; 48])
    }
}

pub const IBV_SYSFS_NAME_MAX: usize = 64;
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `IBV_NODE_CA`.
pub const IBV_NODE_CA: c_int = 1;
/// `IBV_TRANSPORT_IB`.
pub const IBV_TRANSPORT_IB: c_int = 0;
/// `IBV_LINK_LAYER_INFINIBAND`, `IBV_LINK_LAYER_ETHERNET`.
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
/// `IBV_GID_TYPE_SYSFS_IB_ROCE_V1`, `IBV_GID_TYPE_SYSFS_ROCE_V2` (ibv_query_gid_type) and
/// `IBV_GID_TYPE_IB`, `IBV_GID_TYPE_ROCE_V2` (ibv_gid_entry).
pub const IBV_GID_TYPE_SYSFS_IB_ROCE_V1: u32 = 0;
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: u32 = 1;
pub const IBV_GID_TYPE_IB: u32 = 0;
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;
/// `__VERBS_ABI_IS_EXTENDED`: `ibv_context.abi_compat` of a context inside a
/// `verbs_context`.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

#[repr(C)]
pub struct _ibv_device_ops {
    pub _dummy1: Option<unsafe extern "C" fn(*mut ibv_device, c_int) -> *mut ibv_context>,
    pub _dummy2: Option<unsafe extern "C" fn(*mut ibv_context)>,
}

#[repr(C)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// A slot of `ibv_context_ops` or `verbs_context` this emulator leaves empty: callers see
/// NULL, which the header's static-inline wrappers treat as "not supported".
pub type OpaqueOp = Option<unsafe extern "C" fn()>;

pub type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut c_void) -> c_int;
pub type ReqNotifyCq = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
pub type PostSrqRecv =
    unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut c_void, *mut *mut c_void) -> c_int;
pub type PostRecv =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;

#[repr(C)]
pub struct ibv_context_ops {
    pub _compat_query_device: OpaqueOp,
    pub _compat_query_port: OpaqueOp,
    pub _compat_alloc_pd: OpaqueOp,
    pub _compat_dealloc_pd: OpaqueOp,
    pub _compat_reg_mr: OpaqueOp,
    pub _compat_rereg_mr: OpaqueOp,
    pub _compat_dereg_mr: OpaqueOp,
    pub alloc_mw: OpaqueOp,
    pub bind_mw: OpaqueOp,
    pub dealloc_mw: OpaqueOp,
    pub _compat_create_cq: OpaqueOp,
    pub poll_cq: Option<PollCq>,
    pub req_notify_cq: Option<ReqNotifyCq>,
    pub _compat_cq_event: OpaqueOp,
    pub _compat_resize_cq: OpaqueOp,
    pub _compat_destroy_cq: OpaqueOp,
    pub _compat_create_srq: OpaqueOp,
    pub _compat_modify_srq: OpaqueOp,
    pub _compat_query_srq: OpaqueOp,
    pub _compat_destroy_srq: OpaqueOp,
    pub post_srq_recv: Option<PostSrqRecv>,
    pub _compat_create_qp: OpaqueOp,
    pub _compat_query_qp: OpaqueOp,
    pub _compat_modify_qp: OpaqueOp,
    pub _compat_destroy_qp: OpaqueOp,
    pub post_send: Option<PostSend>,
    pub post_recv: Option<PostRecv>,
    pub _compat_create_ah: OpaqueOp,
    pub _compat_destroy_ah: OpaqueOp,
    pub _compat_attach_mcast: OpaqueOp,
    pub _compat_detach_mcast: OpaqueOp,
    pub _compat_async_event: OpaqueOp,
}

#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

pub type AllocParentDomainOp =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_parent_domain_init_attr) -> *mut ibv_pd;
pub type QueryPortOp =
    unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int;
pub type QueryDeviceExOp =
    unsafe extern "C" fn(*mut ibv_context, *const c_void, *mut ibv_device_attr_ex, usize) -> c_int;

/// `struct verbs_context`: new operations are added at the top, so the fields a caller
/// compiled against an older header knows keep their offsets from `context`.
#[repr(C)]
pub struct verbs_context {
    pub query_port: Option<QueryPortOp>,
    pub advise_mr: OpaqueOp,
    pub alloc_null_mr: OpaqueOp,
    pub read_counters: OpaqueOp,
    pub attach_counters_point_flow: OpaqueOp,
    pub create_counters: OpaqueOp,
    pub destroy_counters: OpaqueOp,
    pub reg_dm_mr: OpaqueOp,
    pub alloc_dm: OpaqueOp,
    pub free_dm: OpaqueOp,
    pub modify_flow_action_esp: OpaqueOp,
    pub destroy_flow_action: OpaqueOp,
    pub create_flow_action_esp: OpaqueOp,
    pub modify_qp_rate_limit: OpaqueOp,
    pub alloc_parent_domain: Option<AllocParentDomainOp>,
    pub dealloc_td: OpaqueOp,
    pub alloc_td: OpaqueOp,
    pub modify_cq: OpaqueOp,
    pub post_srq_ops: OpaqueOp,
    pub destroy_rwq_ind_table: OpaqueOp,
    pub create_rwq_ind_table: OpaqueOp,
    pub destroy_wq: OpaqueOp,
    pub modify_wq: OpaqueOp,
    pub create_wq: OpaqueOp,
    pub query_rt_values: OpaqueOp,
    pub create_cq_ex: OpaqueOp,
    pub priv_: *mut c_void,
    pub query_device_ex: Option<QueryDeviceExOp>,
    pub ibv_destroy_flow: OpaqueOp,
    pub abi_placeholder2: OpaqueOp,
    pub ibv_create_flow: OpaqueOp,
    pub abi_placeholder1: OpaqueOp,
    pub open_qp: OpaqueOp,
    pub create_qp_ex: OpaqueOp,
    pub get_srq_num: OpaqueOp,
    pub create_srq_ex: OpaqueOp,
    pub open_xrcd: OpaqueOp,
    pub close_xrcd: OpaqueOp,
    pub _abi_placeholder3: u64,
    pub sz: usize,
    pub context: ibv_context,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: u32,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_odp_caps {
    pub general_caps: u64,
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_tso_caps {
    pub max_tso: u32,
    pub supported_qpts: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_rss_caps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_packet_pacing_caps {
    pub qp_rate_limit_min: u32,
    pub qp_rate_limit_max: u32,
    pub supported_qpts: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_tm_caps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_cq_moderation_caps {
    pub max_cq_count: u16,
    pub max_cq_period: u16,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_pci_atomic_caps {
    pub fetch_add: u16,
    pub swap: u16,
    pub compare_swap: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub tso_caps: ibv_tso_caps,
    pub rss_caps: ibv_rss_caps,
    pub max_wq_type_rq: u32,
    pub packet_pacing_caps: ibv_packet_pacing_caps,
    pub raw_packet_caps: u32,
    pub tm_caps: ibv_tm_caps,
    pub cq_mod_caps: ibv_cq_moderation_caps,
    pub max_dm_size: u64,
    pub pci_atomic_caps: ibv_pci_atomic_caps,
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_port_attr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
    pub active_speed_ex: u32,
}

/// The prefix of `ibv_port_attr` that the exported `ibv_query_port` fills (rdma-core's
/// `_compat_ibv_port_attr`: up to `flags`).
pub const COMPAT_PORT_ATTR_BYTES: usize = core::mem::offset_of!(ibv_port_attr, flags) + 1;

/// `union ibv_gid`: 16 bytes, aligned as its `global` view (two 64-bit words).
#[repr(C, align(8))]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct ibv_gid(pub [u8; 16]);

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut c_void,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
pub struct ibv_parent_domain_init_attr {
    pub pd: *mut ibv_pd,
    pub td: *mut c_void,
    pub comp_mask: u32,
    pub alloc: OpaqueOp,
    pub free: OpaqueOp,
    pub pd_context: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

#[repr(C)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

#[repr(C)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// `IBV_QPT_DRIVER`: the QP type of mlx5dv's DC queues.
pub const IBV_QPT_DRIVER: u32 = 0xff;
/// `IBV_QP_INIT_ATTR_PD`.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
/// `ibv_qp_attr_mask` bits.
pub const IBV_QP_STATE: c_int = 1 << 0;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
/// `IBV_QPS_RESET`, `IBV_QPS_INIT`, `IBV_QPS_RTR`.
pub const IBV_QPS_RESET: u32 = 0;
pub const IBV_QPS_INIT: u32 = 1;
pub const IBV_QPS_RTR: u32 = 2;

#[repr(C)]
pub struct ibv_qp_attr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

#[repr(C)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[repr(C)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

// mlx5dv.h

/// `MLX5DV_CONTEXT_FLAGS_DEVX` (mlx5dv_context_attr.flags).
pub const MLX5DV_CONTEXT_FLAGS_DEVX: u32 = 1 << 0;
/// `MLX5DV_CONTEXT_FLAGS_CQE_V1` (mlx5dv_context.flags).
pub const MLX5DV_CONTEXT_FLAGS_CQE_V1: u64 = 1 << 0;
/// `MLX5DV_CONTEXT_FLAGS_BLUEFLAME`.
pub const MLX5DV_CONTEXT_FLAGS_BLUEFLAME: u64 = 1 << 7;
/// `MLX5DV_OBJ_*`: what `mlx5dv_init_obj` is asked for.
pub const MLX5DV_OBJ_AH: u64 = 1 << 5;
pub const MLX5DV_OBJ_PD: u64 = 1 << 6;
/// `MLX5DV_UMEM_MASK_DMABUF`.
pub const MLX5DV_UMEM_MASK_DMABUF: u64 = 1 << 0;
/// `MLX5DV_UAR_ALLOC_TYPE_BF`, `_NC`, `_NC_DEDICATED`.
pub const MLX5DV_UAR_ALLOC_TYPE_BF: u32 = 0;
pub const MLX5DV_UAR_ALLOC_TYPE_NC: u32 = 1;
pub const MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED: u32 = 1 << 31;

#[repr(C)]
pub struct mlx5dv_context_attr {
    pub flags: u32,
    pub comp_mask: u64,
}

#[repr(C)]
pub struct mlx5dv_obj_pair {
    pub in_: *mut c_void,
    pub out: *mut c_void,
}

#[repr(C)]
pub struct mlx5dv_obj {
    pub qp: mlx5dv_obj_pair,
    pub cq: mlx5dv_obj_pair,
    pub srq: mlx5dv_obj_pair,
    pub rwq: mlx5dv_obj_pair,
    pub dm: mlx5dv_obj_pair,
    pub ah: mlx5dv_obj_pair,
    pub pd: mlx5dv_obj_pair,
    pub devx: mlx5dv_obj_pair,
}

/// `MLX5DV_QP_INIT_ATTR_MASK_DC`, `MLX5DV_DCTYPE_DCT`, `MLX5DV_SRQ_MASK_SRQN`.
pub const MLX5DV_QP_INIT_ATTR_MASK_DC: u64 = 1 << 1;
pub const MLX5DV_DCTYPE_DCT: u32 = 1;
pub const MLX5DV_SRQ_MASK_SRQN: u64 = 1 << 0;
pub const MLX5DV_OBJ_CQ: u64 = 1 << 1;
pub const MLX5DV_OBJ_SRQ: u64 = 1 << 2;

#[repr(C)]
pub struct mlx5dv_dc_init_attr {
    pub dc_type: u32,
    /// `dct_access_key`, or the DCI streams (two bytes) in the union's first bytes.
    pub dct_access_key: u64,
}

#[repr(C)]
pub struct mlx5dv_qp_init_attr {
    pub comp_mask: u64,
    pub create_flags: u32,
    pub dc_init_attr: mlx5dv_dc_init_attr,
    pub send_ops_flags: u64,
}

#[repr(C)]
pub struct mlx5dv_cq {
    pub buf: *mut c_void,
    pub dbrec: *mut u32,
    pub cqe_cnt: u32,
    pub cqe_size: u32,
    pub cq_uar: *mut c_void,
    pub cqn: u32,
    pub comp_mask: u64,
}

#[repr(C)]
pub struct mlx5dv_srq {
    pub buf: *mut c_void,
    pub dbrec: *mut u32,
    pub stride: u32,
    pub head: u32,
    pub tail: u32,
    pub comp_mask: u64,
    pub srqn: u32,
}

#[repr(C)]
pub struct mlx5dv_pd {
    pub pdn: u32,
    pub comp_mask: u64,
}

#[repr(C)]
pub struct mlx5dv_ah {
    pub av: *mut c_void,
    pub comp_mask: u64,
}

/// The first fields of `struct mlx5dv_context` (`mlx5dv_query_device` fills these and
/// reports no optional field in `comp_mask`).
#[repr(C)]
pub struct mlx5dv_context_head {
    pub version: u8,
    pub flags: u64,
    pub comp_mask: u64,
}

#[repr(C)]
pub struct mlx5dv_devx_umem {
    pub umem_id: u32,
}

#[repr(C)]
pub struct mlx5dv_devx_umem_in {
    pub addr: *mut c_void,
    pub size: usize,
    pub access: u32,
    pub pgsz_bitmap: u64,
    pub comp_mask: u64,
    pub dmabuf_fd: c_int,
}

#[repr(C)]
pub struct mlx5dv_devx_uar {
    pub reg_addr: *mut c_void,
    pub base_addr: *mut c_void,
    pub page_id: u32,
    pub mmap_off: i64,
    pub comp_mask: u64,
}
