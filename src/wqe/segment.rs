//! The 16-byte segments a send WQE is made of, as zerocopy layouts.
//!
//! Every multi-byte field is big-endian on the wire, so every field type here has
//! alignment 1 and every segment can be viewed at any offset of a ring. Sizes and field
//! offsets are pinned at compile time against the C layouts of rdma-core's `mlx5dv.h`
//! (`mlx5_wqe_ctrl_seg`, `mlx5_wqe_raddr_seg`, `mlx5_wqe_data_seg`,
//! `mlx5_wqe_inl_data_seg`, `mlx5_wqe_atomic_seg`, `mlx5_wqe_av`); the oracle tests check
//! the same numbers against the header itself.

use core::mem::{offset_of, size_of};

use static_assertions::const_assert_eq;
use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Size of one WQE data segment ("octoword"): every segment is a multiple of it.
pub const OCTOWORD_BYTES: usize = 16;
/// Size of one WQE basic block (WQEBB): the ring's slot and the NIC's fetch unit.
pub const WQEBB_BYTES: usize = 64;
/// Octowords per WQE basic block.
pub const OCTOWORDS_PER_WQEBB: usize = WQEBB_BYTES / OCTOWORD_BYTES;
/// The largest DS a control segment can carry (6 bits): 63 octowords, 1008 bytes.
pub const MAX_DS: u8 = 0x3f;
/// Bit 31 of a data segment's byte count marks an inline data header.
pub const INLINE_SEGMENT_FLAG: u32 = 0x8000_0000;
/// Bit 31 of an address vector's `dqp_dct`: the extended (48-byte) form follows.
pub const EXTENDED_AV_FLAG: u32 = 0x8000_0000;
/// The lkey rdma-core writes to terminate a scatter list early.
pub const INVALID_LKEY: u32 = 0x100;

/// The control segment that starts every WQE (`mlx5_wqe_ctrl_seg`).
///
/// Bytes 0..8 of it are also the 8-byte doorbell value.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct ControlSegment {
    /// `opmod << 24 | wqe_index << 8 | opcode`.
    pub opmod_idx_opcode: U32,
    /// `qpn << 8 | ds` (DS in bits 5:0).
    pub qpn_ds: U32,
    /// WQE signature; only meaningful on queues created with WQE signatures.
    pub signature: u8,
    /// DCI stream channel id (DC only; 0 otherwise).
    pub dci_stream_channel_id: U16,
    /// Fence mode (bits 7:5), completion mode (bits 3:2), solicited event (bit 1).
    pub fm_ce_se: u8,
    /// Immediate data (big-endian on the wire) for WRITE_WITH_IMM; 0 otherwise.
    pub imm: U32,
}

/// The remote address segment of RDMA and atomic WQEs (`mlx5_wqe_raddr_seg`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct RemoteAddressSegment {
    /// Remote virtual address.
    pub raddr: U64,
    /// Remote key.
    pub rkey: U32,
    /// Must be zero.
    pub reserved: U32,
}

/// A data pointer segment: one gather or scatter entry (`mlx5_wqe_data_seg`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct DataSegment {
    /// Length in bytes; bit 31 must be clear (it marks an inline header).
    pub byte_count: U32,
    /// Local key of the memory region.
    pub lkey: U32,
    /// Local virtual address.
    pub addr: U64,
}

/// The 4-byte header of an inline data segment (`mlx5_wqe_inl_data_seg`); the payload
/// follows it directly.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct InlineHeader {
    /// `len | INLINE_SEGMENT_FLAG`.
    pub byte_count: U32,
}

/// The standard 8-byte atomic segment (`mlx5_wqe_atomic_seg`) for ATOMIC_CS and ATOMIC_FA.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct AtomicSegment {
    /// The swap value (compare-swap) or the addend (fetch-add).
    pub swap_add: U64,
    /// The compare value (compare-swap); zero for fetch-add.
    pub compare: U64,
}

/// Masked fetch-add on a 4-byte operand (one octoword).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct MaskedFetchAdd4Segment {
    /// The addend.
    pub add: U32,
    /// Carry boundary mask: a set bit stops the carry out of that bit position.
    pub field_boundary: U32,
    /// Must be zero.
    pub reserved: [u8; 8],
}

/// Masked compare-swap on a 4-byte operand (one octoword).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct MaskedCompareSwap4Segment {
    /// Value whose `swap_mask` bits are written on a match.
    pub swap: U32,
    /// Value compared under `compare_mask`.
    pub compare: U32,
    /// Bits of `swap` that are written.
    pub swap_mask: U32,
    /// Bits that take part in the comparison.
    pub compare_mask: U32,
}

/// Masked fetch-add on an 8-byte operand (one octoword).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct MaskedFetchAdd8Segment {
    /// The addend.
    pub add: U64,
    /// Carry boundary mask: a set bit stops the carry out of that bit position.
    pub field_boundary: U64,
}

/// Masked compare-swap on an 8-byte operand: two octowords, which may be split by a WQEBB
/// boundary (and so by the ring's end).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct MaskedCompareSwap8Segment {
    /// Value whose `swap_mask` bits are written on a match.
    pub swap: U64,
    /// Value compared under `compare_mask`.
    pub compare: U64,
    /// Bits of `swap` that are written.
    pub swap_mask: U64,
    /// Bits that take part in the comparison.
    pub compare_mask: U64,
}

/// The compact 16-byte DC address vector (the first 16 bytes of [`AddressVectorSegment`],
/// with the extended flag clear). Only HCAs that report `compact_address_vector` accept it.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct CompactAddressVectorSegment {
    /// The DC access key.
    pub dc_key: U64,
    /// `ext << 31 | dct_number` (ext clear here).
    pub dqp_dct: U32,
    /// `static_rate << 4 | sl` (InfiniBand).
    pub stat_rate_sl: u8,
    /// `force_loopback << 7 | source_path_bits`.
    pub fl_mlid: u8,
    /// Destination LID (InfiniBand) or UDP source port (RoCE v2).
    pub rlid: U16,
}

/// The full 48-byte address vector (`mlx5_wqe_av`, the datagram segment) of DC and UD WQEs.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct AddressVectorSegment {
    /// The DC access key (DC) or Q_Key in the first 4 bytes (UD).
    pub dc_key: U64,
    /// `ext << 31 | dct_number` (ext set here).
    pub dqp_dct: U32,
    /// `static_rate << 4 | sl` (InfiniBand) or `static_rate << 4 | (sl & 7) << 1` (RoCE).
    pub stat_rate_sl: u8,
    /// `force_loopback << 7 | source_path_bits`.
    pub fl_mlid: u8,
    /// Destination LID (InfiniBand) or UDP source port (RoCE v2).
    pub rlid: U16,
    /// Reserved.
    pub reserved0: [u8; 4],
    /// Destination MAC (RoCE).
    pub rmac: [u8; 6],
    /// GRH traffic class.
    pub tclass: u8,
    /// GRH hop limit.
    pub hop_limit: u8,
    /// `grh << 30 | sgid_index << 20 | flow_label`.
    pub grh_gid_fl: U32,
    /// Destination GID.
    pub rgid: [u8; 16],
}

macro_rules! pin_layout {
    ($ty:ty, $size:expr, { $($field:ident : $off:expr),* $(,)? }) => {
        const_assert_eq!(size_of::<$ty>(), $size);
        const_assert_eq!(core::mem::align_of::<$ty>(), 1);
        $( const_assert_eq!(offset_of!($ty, $field), $off); )*
    };
}

pin_layout!(ControlSegment, 16, {
    opmod_idx_opcode: 0, qpn_ds: 4, signature: 8, dci_stream_channel_id: 9, fm_ce_se: 11, imm: 12,
});
pin_layout!(RemoteAddressSegment, 16, { raddr: 0, rkey: 8, reserved: 12 });
pin_layout!(DataSegment, 16, { byte_count: 0, lkey: 4, addr: 8 });
pin_layout!(InlineHeader, 4, { byte_count: 0 });
pin_layout!(AtomicSegment, 16, { swap_add: 0, compare: 8 });
pin_layout!(MaskedFetchAdd4Segment, 16, { add: 0, field_boundary: 4, reserved: 8 });
pin_layout!(MaskedCompareSwap4Segment, 16, { swap: 0, compare: 4, swap_mask: 8, compare_mask: 12 });
pin_layout!(MaskedFetchAdd8Segment, 16, { add: 0, field_boundary: 8 });
pin_layout!(MaskedCompareSwap8Segment, 32, { swap: 0, compare: 8, swap_mask: 16, compare_mask: 24 });
pin_layout!(CompactAddressVectorSegment, 16, {
    dc_key: 0, dqp_dct: 8, stat_rate_sl: 12, fl_mlid: 13, rlid: 14,
});
pin_layout!(AddressVectorSegment, 48, {
    dc_key: 0, dqp_dct: 8, stat_rate_sl: 12, fl_mlid: 13, rlid: 14, reserved0: 16, rmac: 20,
    tclass: 26, hop_limit: 27, grh_gid_fl: 28, rgid: 32,
});
const_assert_eq!(WQEBB_BYTES % OCTOWORD_BYTES, 0);

impl ControlSegment {
    /// The opcode byte (bits 7:0 of the first word).
    pub fn opcode_byte(&self) -> u8 {
        self.opmod_idx_opcode.get() as u8
    }
    /// The 16-bit WQE index (bits 23:8 of the first word).
    pub fn wqe_index(&self) -> u16 {
        (self.opmod_idx_opcode.get() >> 8) as u16
    }
    /// The opcode modifier (bits 31:24 of the first word).
    pub fn opmod(&self) -> u8 {
        (self.opmod_idx_opcode.get() >> 24) as u8
    }
    /// The queue pair number (bits 31:8 of the second word).
    pub fn qpn(&self) -> u32 {
        self.qpn_ds.get() >> 8
    }
    /// The WQE size in octowords, control segment included (bits 5:0 of the second word).
    pub fn ds(&self) -> u8 {
        (self.qpn_ds.get() & u32::from(MAX_DS)) as u8
    }
    /// The 8-byte doorbell value this control segment announces: its first 8 bytes.
    pub fn doorbell_bytes(&self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out.copy_from_slice(&self.as_bytes()[..8]);
        out
    }
}

impl CompactAddressVectorSegment {
    /// The compact form of a full address vector: its first 16 bytes, with the extended
    /// flag cleared.
    pub fn from_full(full: &AddressVectorSegment) -> Self {
        Self {
            dc_key: full.dc_key,
            dqp_dct: U32::new(full.dqp_dct.get() & !EXTENDED_AV_FLAG),
            stat_rate_sl: full.stat_rate_sl,
            fl_mlid: full.fl_mlid,
            rlid: full.rlid,
        }
    }
}

impl DataSegment {
    /// Whether bit 31 of the byte count is set: this octoword starts an inline payload.
    pub fn is_inline_header(&self) -> bool {
        self.byte_count.get() & INLINE_SEGMENT_FLAG != 0
    }
    /// The length the NIC reads from a pointer segment: a byte count of 0 means 2 GiB.
    pub fn transfer_len(&self) -> u64 {
        match self.byte_count.get() {
            0 => 1 << 31,
            n => u64::from(n),
        }
    }
}
