//! Plain `#[repr(C)]` records the test and benchmark kernels exchange with the host. Their
//! C form is generated into `ibgda_layout.h` with the rest of the layouts, so the device
//! side never defines them itself.

use core::mem::{offset_of, size_of};

use static_assertions::const_assert_eq;

/// The WQE shapes the device library builds (one per typed builder of `ibgda::wqe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Shape {
    /// RDMA WRITE with one gather entry.
    Write = 0,
    /// RDMA WRITE with immediate and one gather entry.
    WriteImm = 1,
    /// RDMA WRITE with an inline payload.
    WriteInline = 2,
    /// RDMA READ with one scatter entry.
    Read = 3,
    /// Atomic compare-swap (8 bytes).
    CompareSwap = 4,
    /// Atomic fetch-add (8 bytes).
    FetchAdd = 5,
    /// Masked compare-swap on 4 bytes.
    MaskedCompareSwap4 = 6,
    /// Masked compare-swap on 8 bytes (two octowords).
    MaskedCompareSwap8 = 7,
    /// Masked fetch-add on 4 bytes.
    MaskedFetchAdd4 = 8,
    /// Masked fetch-add on 8 bytes.
    MaskedFetchAdd8 = 9,
    /// NOP.
    Nop = 10,
    /// DUMP of one local buffer.
    Dump = 11,
}

impl Shape {
    /// Every shape.
    pub const ALL: [Self; 12] = [
        Self::Write,
        Self::WriteImm,
        Self::WriteInline,
        Self::Read,
        Self::CompareSwap,
        Self::FetchAdd,
        Self::MaskedCompareSwap4,
        Self::MaskedCompareSwap8,
        Self::MaskedFetchAdd4,
        Self::MaskedFetchAdd8,
        Self::Nop,
        Self::Dump,
    ];

    /// The C name of the constant.
    pub const fn c_name(self) -> &'static str {
        match self {
            Self::Write => "WRITE",
            Self::WriteImm => "WRITE_IMM",
            Self::WriteInline => "WRITE_INLINE",
            Self::Read => "READ",
            Self::CompareSwap => "COMPARE_SWAP",
            Self::FetchAdd => "FETCH_ADD",
            Self::MaskedCompareSwap4 => "MASKED_COMPARE_SWAP_4",
            Self::MaskedCompareSwap8 => "MASKED_COMPARE_SWAP_8",
            Self::MaskedFetchAdd4 => "MASKED_FETCH_ADD_4",
            Self::MaskedFetchAdd8 => "MASKED_FETCH_ADD_8",
            Self::Nop => "NOP",
            Self::Dump => "DUMP",
        }
    }
}

/// The transport form of a request (the device library's transport tags).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum TransportForm {
    /// RC: no address vector.
    Rc = 0,
    /// DC with the compact 16-byte address vector.
    DcCompact = 1,
    /// DC with the full 48-byte address vector.
    DcFull = 2,
}

/// Most inline bytes a [`WqeRequest`] carries.
pub const REQUEST_INLINE_MAX: usize = 128;

/// One WQE for the device to build, with every field the host encoder takes. The
/// byte-equality test fills an array of these, has the device build each into its own
/// ring, and compares with the Rust encoder's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct WqeRequest {
    /// A [`Shape`].
    pub shape: u32,
    /// A [`TransportForm`].
    pub transport: u32,
    /// Free-running WQEBB counter of the WQE's first block (its 16-bit index is the low
    /// bits; its slot the low `log2(ring)` bits).
    pub index: u32,
    /// Queue pair number.
    pub qpn: u32,
    /// The control segment's `fm_ce_se` byte.
    pub fm_ce_se: u32,
    /// Immediate data (WRITE_IMM), as the host passes it to `immediate()`.
    pub imm: u32,
    /// Remote key.
    pub rkey: u32,
    /// Local key (gather/scatter entry, atomic result, DUMP).
    pub lkey: u32,
    /// Remote address.
    pub raddr: u64,
    /// Local address.
    pub laddr: u64,
    /// Gather/scatter length, or the inline payload's length.
    pub len: u32,
    /// DCI stream channel id (DC only).
    pub stream_id: u32,
    /// Atomic operands: swap or add.
    pub op0: u64,
    /// Atomic operands: compare or field boundary.
    pub op1: u64,
    /// Atomic operands: swap mask.
    pub op2: u64,
    /// Atomic operands: compare mask.
    pub op3: u64,
    /// The address vector segment's bytes (compact: the first 16).
    pub av: [u8; 48],
    /// The inline payload (the first `len` bytes).
    pub inline_data: [u8; REQUEST_INLINE_MAX],
}

const_assert_eq!(size_of::<WqeRequest>(), 264);
const_assert_eq!(offset_of!(WqeRequest, raddr), 32);
const_assert_eq!(offset_of!(WqeRequest, av), 88);

impl Default for WqeRequest {
    fn default() -> Self {
        Self {
            shape: 0,
            transport: 0,
            index: 0,
            qpn: 0,
            fm_ce_se: 0,
            imm: 0,
            rkey: 0,
            lkey: 0,
            raddr: 0,
            laddr: 0,
            len: 0,
            stream_id: 0,
            op0: 0,
            op1: 0,
            op2: 0,
            op3: 0,
            av: [0; 48],
            inline_data: [0; REQUEST_INLINE_MAX],
        }
    }
}

/// What the doorbell sink (a persistent kernel standing in for the NIC) counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct SinkStats {
    /// Doorbell values seen change.
    pub doorbells: u64,
    /// WQEs consumed.
    pub wqes: u64,
    /// CQEs written.
    pub cqes: u64,
    /// WQEs whose control segment was wrong (index, QPN or DS 0).
    pub bad_wqes: u64,
    /// Inline payload words that failed the producer-id check (publication test).
    pub bad_payloads: u64,
    /// Doorbell values whose QPN or index disagreed with the doorbell record.
    pub bad_doorbells: u64,
    /// Set by the host to stop the sink.
    pub stop: u32,
    /// Number of the sink's queues.
    pub queues: u32,
    /// Reserved; zero.
    pub reserved: [u64; 1],
}

const_assert_eq!(size_of::<SinkStats>(), 64);
