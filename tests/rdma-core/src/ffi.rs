//! Raw bindings to `shim/oracle.h`. Every type mirrors the C declaration
//! field for field; `abi_sizes_match` (tested in `tests/smoke.rs`) compares
//! the sizes with what the C compiler laid out.

use std::ffi::{c_char, c_int};

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Field {
    pub name: *const c_char,
    pub offset: u32,
    pub size: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Layout {
    pub name: *const c_char,
    pub size: u32,
    pub align: u32,
    pub nfields: u32,
    pub fields: *const Field,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Constant {
    pub name: *const c_char,
    pub value: u64,
}

pub(crate) const TRANSPORT_RC: u32 = 0;
pub(crate) const TRANSPORT_DCI: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Config {
    pub transport: u32,
    pub qpn: u32,
    pub sq_wqebbs: u32,
    pub max_inline_data: u32,
    pub max_sge: u32,
    pub sq_sig_all: u32,
    pub rq_wqes: u32,
    pub cqes: u32,
    pub cqe_version: u32,
    pub bf_buf_size: u32,
    pub prefer_bf: u32,
    pub shut_up_bf: u32,
}

pub(crate) const OP_RDMA_WRITE: u32 = 0;
pub(crate) const OP_RDMA_WRITE_WITH_IMM: u32 = 1;
pub(crate) const OP_RDMA_READ: u32 = 2;
pub(crate) const OP_ATOMIC_CMP_AND_SWP: u32 = 3;
pub(crate) const OP_ATOMIC_FETCH_AND_ADD: u32 = 4;

pub(crate) const FLAG_SIGNALED: u32 = 1 << 0;
pub(crate) const FLAG_FENCE: u32 = 1 << 1;
pub(crate) const FLAG_SOLICITED: u32 = 1 << 2;

pub(crate) const AV_NONE: u32 = 0;
pub(crate) const AV_IB: u32 = 1;
pub(crate) const AV_RAW: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Buf {
    pub addr: *const u8,
    pub length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Dc {
    pub av_kind: u32,
    pub dctn: u32,
    pub dc_key: u64,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub pad0: [u8; 3],
    pub flow_label: u32,
    pub dgid: [u8; 16],
    pub raw: [u8; 48],
}

impl Default for Dc {
    fn default() -> Self {
        Dc {
            av_kind: AV_NONE,
            dctn: 0,
            dc_key: 0,
            dlid: 0,
            sl: 0,
            src_path_bits: 0,
            static_rate: 0,
            is_global: 0,
            sgid_index: 0,
            hop_limit: 0,
            traffic_class: 0,
            pad0: [0; 3],
            flow_label: 0,
            dgid: [0; 16],
            raw: [0; 48],
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Wr {
    pub wr_id: u64,
    pub opcode: u32,
    pub flags: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    pub imm: u32,
    pub compare_add: u64,
    pub swap: u64,
    pub sges: *const Sge,
    pub num_sge: u32,
    pub is_inline: u32,
    pub inl: *const Buf,
    pub num_inl: u32,
    pub pad0: u32,
    pub dc: Dc,
}

pub(crate) const PATH_CLASSIC: u32 = 0;
pub(crate) const PATH_EXTENDED: u32 = 1;

#[repr(C)]
pub(crate) struct Capture {
    pub ring: *mut u8,
    pub dbrec: *mut u8,
    pub bf: *mut u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct PostResult {
    pub err: i32,
    pub bad_wr: i32,
    pub cur_post: u32,
    pub sq_head: u32,
    pub bf_offset: u32,
    pub reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
    pub pad0: [u8; 10],
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct PollResult {
    pub ret: i32,
    pub cons_index: u32,
    pub sq_tail: u32,
    pub rq_tail: u32,
    pub cq_dbrec: [u8; 8],
}

/// Opaque `struct ibgda_oracle`.
#[repr(C)]
pub(crate) struct Oracle {
    _private: [u8; 0],
}

/// Sizes of the structs above, in the order `ibgda_oracle_abi_sizes` reports them.
pub(crate) const RUST_ABI_SIZES: [usize; 9] = [
    std::mem::size_of::<Config>(),
    std::mem::size_of::<Sge>(),
    std::mem::size_of::<Buf>(),
    std::mem::size_of::<Dc>(),
    std::mem::size_of::<Wr>(),
    std::mem::size_of::<Capture>(),
    std::mem::size_of::<PostResult>(),
    std::mem::size_of::<Wc>(),
    std::mem::size_of::<PollResult>(),
];

extern "C" {
    pub(crate) fn ibgda_oracle_layouts(out: *mut *const Layout) -> usize;
    pub(crate) fn ibgda_oracle_verbs_layouts(out: *mut *const Layout) -> usize;
    pub(crate) fn ibgda_oracle_constants(out: *mut *const Constant) -> usize;
    pub(crate) fn ibgda_oracle_abi_sizes(out: *mut u32, n: usize) -> usize;

    pub(crate) fn ibgda_oracle_set_ctrl_seg(
        seg: *mut u8,
        pi: u16,
        opcode: u8,
        opmod: u8,
        qp_num: u32,
        fm_ce_se: u8,
        ds: u8,
        signature: u8,
        imm: u32,
    );
    pub(crate) fn ibgda_oracle_set_data_seg(seg: *mut u8, length: u32, lkey: u32, address: u64);
    pub(crate) fn ibgda_oracle_set_dgram_seg(
        seg: *mut u8,
        key: u64,
        dqp_dct: u32,
        ext: u8,
        stat_rate_sl: u8,
        fl_mlid: u8,
        rlid: u16,
        rmac: *const u8,
        tclass: u8,
        hop_limit: u8,
        grh_gid_fl: u32,
        rgid: *const u8,
    );
    pub(crate) fn ibgda_oracle_cqe_owner(cqe: *const u8) -> u8;
    pub(crate) fn ibgda_oracle_cqe_se(cqe: *const u8) -> u8;
    pub(crate) fn ibgda_oracle_cqe_format(cqe: *const u8) -> u8;
    pub(crate) fn ibgda_oracle_cqe_opcode(cqe: *const u8) -> u8;

    pub(crate) fn ibgda_oracle_new(
        cfg: *const Config,
        err: *mut c_char,
        errlen: usize,
    ) -> *mut Oracle;
    pub(crate) fn ibgda_oracle_free(o: *mut Oracle);
    pub(crate) fn ibgda_oracle_user_index(o: *const Oracle) -> u32;
    pub(crate) fn ibgda_oracle_ring_bytes(o: *const Oracle) -> usize;
    pub(crate) fn ibgda_oracle_bf_bytes(o: *const Oracle) -> usize;
    pub(crate) fn ibgda_oracle_post(
        o: *mut Oracle,
        path: u32,
        cur_post: u32,
        wrs: *const Wr,
        nwr: u32,
        prefill: u8,
        bf_prefill: u8,
        cap: *const Capture,
        res: *mut PostResult,
    ) -> c_int;
    pub(crate) fn ibgda_oracle_post_loop(
        o: *mut Oracle,
        wr: *const Wr,
        count: u64,
        retire_every: u32,
        res: *mut PostResult,
    ) -> c_int;
    pub(crate) fn ibgda_oracle_poll(
        o: *mut Oracle,
        cons_index: u32,
        cqes: *const u8,
        ncqes: u32,
        sq_wrid_base: u64,
        rq_wrid_base: u64,
        prefill: u8,
        wcs: *mut Wc,
        max_wc: u32,
        res: *mut PollResult,
    ) -> c_int;
}
