//! Level 1: the provider headers' layouts and constants, and the `static inline`
//! encoders of `mlx5dv.h`, as the C compiler sees them.

use std::ffi::CStr;

use crate::ffi;

/// One member of a C struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    /// Member name; nested members are dotted (`key.dc_key`).
    pub name: &'static str,
    /// `offsetof`.
    pub offset: usize,
    /// `sizeof` the member.
    pub size: usize,
}

/// One C struct of `mlx5dv.h` / `wqe.h`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// The struct's C name (`struct mlx5_wqe_ctrl_seg`, ...).
    pub name: &'static str,
    /// `sizeof`.
    pub size: usize,
    /// `_Alignof`.
    pub align: usize,
    /// Every member, in declaration order.
    pub fields: Vec<Field>,
}

impl Layout {
    /// The member called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Reads a name from the shim's static tables.
///
/// # Safety
/// `p` must point to a NUL-terminated string with static storage duration.
unsafe fn static_str(p: *const std::ffi::c_char) -> &'static str {
    // SAFETY: the caller guarantees a NUL-terminated string that lives for the whole
    // program (a C string literal in the shim's static tables).
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().expect("the shim's names are ASCII")
}

/// Every struct layout the shim exports: `mlx5_wqe_ctrl_seg`, `mlx5_wqe_raddr_seg`,
/// `mlx5_wqe_data_seg`, `mlx5_wqe_inl_data_seg`, `mlx5_wqe_inline_seg` (wqe.h),
/// `mlx5_wqe_atomic_seg`, `mlx5_wqe_masked_atomic_seg` (wqe.h), `mlx5_wqe_av`,
/// `mlx5_wqe_datagram_seg`, `mlx5_cqe64`, `mlx5_err_cqe` (names without `struct `).
pub fn layouts() -> Vec<Layout> {
    let mut table: *const ffi::Layout = std::ptr::null();
    // SAFETY: the shim stores a pointer to its static array in `table` and returns its
    // length; it has no other effect.
    let n = unsafe { ffi::ibgda_oracle_layouts(&mut table) };
    // SAFETY: `table` points to `n` initialized, immutable entries in static storage.
    unsafe { read_layouts(table, n) }
}

/// The layouts of the public verbs and mlx5dv structures (`verbs.h`, `mlx5dv.h`) that the
/// emulated ConnectX hands to C or fills: `ibv_device`, `ibv_context_ops`, `ibv_context`,
/// `verbs_context`, the device, port and GID attributes, `ibv_pd`, `ibv_mr`, the AH
/// attributes, `ibv_ah`, `ibv_cq`, `ibv_srq`, `ibv_qp`, `ibv_sge`, `ibv_recv_wr`, and
/// `mlx5dv_context_attr`, `mlx5dv_obj`, `mlx5dv_pd`, `mlx5dv_ah`, `mlx5dv_context` (its
/// first fields), `mlx5dv_devx_umem`, `mlx5dv_devx_umem_in`, `mlx5dv_devx_uar`.
pub fn verbs_layouts() -> Vec<Layout> {
    let mut table: *const ffi::Layout = std::ptr::null();
    // SAFETY: as for `layouts`.
    let n = unsafe { ffi::ibgda_oracle_verbs_layouts(&mut table) };
    // SAFETY: `table` points to `n` initialized, immutable entries in static storage.
    unsafe { read_layouts(table, n) }
}

/// Copies a layout table of the shim.
///
/// # Safety
///
/// `table` must point to `n` initialized layouts in static storage, whose names and field
/// tables are static too.
unsafe fn read_layouts(table: *const ffi::Layout, n: usize) -> Vec<Layout> {
    // SAFETY: the caller's contract.
    let raw = unsafe { std::slice::from_raw_parts(table, n) };
    raw.iter()
        .map(|l| {
            // SAFETY: each layout's `fields` points to `nfields` static, immutable entries.
            let fields = unsafe { std::slice::from_raw_parts(l.fields, l.nfields as usize) };
            Layout {
                // SAFETY: names in the tables are static C string literals.
                name: unsafe { static_str(l.name) }.trim_start_matches("struct "),
                size: l.size as usize,
                align: l.align as usize,
                fields: fields
                    .iter()
                    .map(|f| Field {
                        // SAFETY: as above, a static C string literal.
                        name: unsafe { static_str(f.name) },
                        offset: f.offset as usize,
                        size: f.size as usize,
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The layout of the struct called `name` (without `struct `).
pub fn layout(name: &str) -> Option<Layout> {
    layouts().into_iter().find(|l| l.name == name)
}

/// Every constant the shim exports, with its C name: the `MLX5_OPCODE_*` send
/// opcodes, `MLX5_WQE_CTRL_*` flags, `MLX5_INLINE_SEG`, `MLX5_EXTENDED_UD_AV`,
/// `MLX5_INVALID_LKEY`, `MLX5_SEND_WQE_BB/SHIFT`, the doorbell indices and offsets
/// (`MLX5_SND_DBR`, `MLX5_CQ_SET_CI`, `MLX5_BF_OFFSET`, ...), CQE opcodes, owner mask,
/// inline-scatter bits, syndromes, `MLX5DV_DCTYPE_*`, and the verbs `IBV_SEND_*`,
/// `IBV_WC_*` status, opcode and flag values.
pub fn constants() -> Vec<(&'static str, u64)> {
    let mut table: *const ffi::Constant = std::ptr::null();
    // SAFETY: the shim stores a pointer to its static array and returns its length.
    let n = unsafe { ffi::ibgda_oracle_constants(&mut table) };
    // SAFETY: `table` points to `n` initialized, immutable entries in static storage.
    let raw = unsafe { std::slice::from_raw_parts(table, n) };
    raw.iter()
        // SAFETY: names are static C string literals.
        .map(|c| (unsafe { static_str(c.name) }, c.value))
        .collect()
}

/// The constant with C name `name`.
pub fn constant(name: &str) -> Option<u64> {
    constants()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// Whether the `#[repr(C)]` mirrors in this crate have the sizes the C compiler gave
/// the shim's structs.
pub fn abi_sizes_match() -> bool {
    let mut sizes = [0u32; ffi::RUST_ABI_SIZES.len()];
    // SAFETY: `sizes` has room for `sizes.len()` entries; the shim writes at most that.
    let n = unsafe { ffi::ibgda_oracle_abi_sizes(sizes.as_mut_ptr(), sizes.len()) };
    n == sizes.len()
        && sizes
            .iter()
            .zip(ffi::RUST_ABI_SIZES)
            .all(|(&c, r)| c as usize == r)
}

/// Arguments of `mlx5dv_set_ctrl_seg`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CtrlSegArgs {
    /// Producer index (WQE index, 16 bits).
    pub pi: u16,
    /// Send opcode.
    pub opcode: u8,
    /// Opcode modifier.
    pub opmod: u8,
    /// QP number (24 bits).
    pub qp_num: u32,
    /// Fence / completion / solicited byte.
    pub fm_ce_se: u8,
    /// WQE size in 16-byte units.
    pub ds: u8,
    /// Signature byte.
    pub signature: u8,
    /// Stored as given, not byte-swapped: pass the big-endian value's native form.
    pub imm: u32,
}

/// `mlx5dv_set_ctrl_seg` on `seg`. It does not store bytes 9..11
/// (`dci_stream_channel_id`): they keep their previous values.
pub fn set_ctrl_seg(seg: &mut [u8; 16], a: &CtrlSegArgs) {
    // SAFETY: `seg` is 16 writable bytes, which the shim reads and writes back.
    unsafe {
        ffi::ibgda_oracle_set_ctrl_seg(
            seg.as_mut_ptr(),
            a.pi,
            a.opcode,
            a.opmod,
            a.qp_num,
            a.fm_ce_se,
            a.ds,
            a.signature,
            a.imm,
        )
    }
}

/// `mlx5dv_set_data_seg` on `seg`.
pub fn set_data_seg(seg: &mut [u8; 16], length: u32, lkey: u32, addr: u64) {
    // SAFETY: `seg` is 16 writable bytes, which the shim reads and writes back.
    unsafe { ffi::ibgda_oracle_set_data_seg(seg.as_mut_ptr(), length, lkey, addr) }
}

/// Arguments of `mlx5dv_set_dgram_seg`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DgramSegArgs {
    /// Q_Key / DC access key (stored as a 64-bit big-endian value).
    pub key: u64,
    /// Destination QPN / DCT number.
    pub dqp_dct: u32,
    /// Extended-AV bit (bit 31 of `dqp_dct`).
    pub ext: u8,
    /// Static rate and SL.
    pub stat_rate_sl: u8,
    /// Force-loopback and source path bits.
    pub fl_mlid: u8,
    /// Remote LID.
    pub rlid: u16,
    /// Remote MAC.
    pub rmac: [u8; 6],
    /// Traffic class.
    pub tclass: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// GRH flag, SGID index, flow label.
    pub grh_gid_fl: u32,
    /// Remote GID.
    pub rgid: [u8; 16],
}

/// `mlx5dv_set_dgram_seg` on `seg`. It does not store bytes 16..20 (`reserved0`).
pub fn set_dgram_seg(seg: &mut [u8; 48], a: &DgramSegArgs) {
    // SAFETY: `seg` is 48 writable bytes; `rmac` and `rgid` are 6 and 16 readable
    // bytes; the shim copies them before the helper runs.
    unsafe {
        ffi::ibgda_oracle_set_dgram_seg(
            seg.as_mut_ptr(),
            a.key,
            a.dqp_dct,
            a.ext,
            a.stat_rate_sl,
            a.fl_mlid,
            a.rlid,
            a.rmac.as_ptr(),
            a.tclass,
            a.hop_limit,
            a.grh_gid_fl,
            a.rgid.as_ptr(),
        )
    }
}

/// `mlx5dv_get_cqe_owner`.
pub fn cqe_owner(cqe: &[u8; 64]) -> u8 {
    // SAFETY: `cqe` is 64 readable bytes; the shim copies them.
    unsafe { ffi::ibgda_oracle_cqe_owner(cqe.as_ptr()) }
}

/// `mlx5dv_get_cqe_se`.
pub fn cqe_se(cqe: &[u8; 64]) -> u8 {
    // SAFETY: `cqe` is 64 readable bytes; the shim copies them.
    unsafe { ffi::ibgda_oracle_cqe_se(cqe.as_ptr()) }
}

/// `mlx5dv_get_cqe_format`.
pub fn cqe_format(cqe: &[u8; 64]) -> u8 {
    // SAFETY: `cqe` is 64 readable bytes; the shim copies them.
    unsafe { ffi::ibgda_oracle_cqe_format(cqe.as_ptr()) }
}

/// `mlx5dv_get_cqe_opcode`.
pub fn cqe_opcode(cqe: &[u8; 64]) -> u8 {
    // SAFETY: `cqe` is 64 readable bytes; the shim copies them.
    unsafe { ffi::ibgda_oracle_cqe_opcode(cqe.as_ptr()) }
}
