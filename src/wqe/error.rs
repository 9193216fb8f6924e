//! Typed errors of WQE construction and of writing WQEs into a ring.

use core::fmt;

use super::opcode::Opcode;

/// Why a WQE could not be built or written. Every variant names the offending value and
/// the limit it broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WqeError {
    /// A queue pair or DCT number does not fit in 24 bits.
    QpnOutOfRange {
        /// The number given.
        value: u32,
        /// The largest valid number, `0xff_ffff`.
        max: u32,
    },
    /// An inline payload is longer than the queue's (or the format's) maximum.
    InlineTooLong {
        /// Payload length in bytes.
        len: usize,
        /// The maximum in bytes.
        max: usize,
    },
    /// The WQE needs more octowords (DS) than the 6-bit DS field can express.
    TooManyOctowords {
        /// The DS the WQE would need.
        ds: usize,
        /// The largest DS, 63.
        max: usize,
    },
    /// The WQE spans more basic blocks than the queue allows.
    WqeTooLarge {
        /// The WQE's size in WQEBBs.
        wqebbs: u32,
        /// The queue's maximum WQE size in WQEBBs.
        max: u32,
    },
    /// A ring size (in WQEBBs) is not a power of two.
    RingSizeNotPowerOfTwo {
        /// The size given, in WQEBBs.
        wqebbs: usize,
    },
    /// A ring size (in WQEBBs) is outside the supported range.
    RingSizeOutOfRange {
        /// The size given, in WQEBBs.
        wqebbs: usize,
        /// The smallest valid size.
        min: usize,
        /// The largest valid size.
        max: usize,
    },
    /// A ring's memory is not a whole number of WQEBBs, or does not match its size.
    RingBytesMismatch {
        /// The length of the memory given.
        len: usize,
        /// The length expected.
        expected: usize,
    },
    /// A ring has fewer WQEBBs than the WQE needs.
    RingTooSmall {
        /// The ring's size in WQEBBs.
        ring_wqebbs: u32,
        /// The WQE's size in WQEBBs.
        wqe_wqebbs: u32,
    },
    /// A length is zero where the operation needs at least one byte.
    ZeroLength {
        /// What was empty.
        what: &'static str,
    },
    /// A length is over the per-segment or per-WQE limit (2 GiB per WQE; a data segment's
    /// byte count has 31 bits).
    TransferTooLong {
        /// The length in bytes.
        len: u64,
        /// The limit in bytes.
        max: u64,
    },
    /// An atomic's remote address is not aligned to its operand size.
    MisalignedAtomic {
        /// The opcode.
        opcode: Opcode,
        /// The remote address.
        addr: u64,
        /// The required alignment in bytes.
        align: u64,
    },
    /// A 4-byte atomic was given a value that does not fit in 32 bits.
    OperandTooWide {
        /// Which operand.
        what: &'static str,
        /// The value given.
        value: u64,
        /// The largest value, `u32::MAX`.
        max: u64,
    },
    /// A field of an address vector or control segment is out of its bit range.
    FieldOutOfRange {
        /// The field.
        field: &'static str,
        /// The value given.
        value: u64,
        /// The largest valid value.
        max: u64,
    },
    /// A queue limit below its minimum.
    FieldBelowMinimum {
        /// The field.
        field: &'static str,
        /// The value given.
        value: u64,
        /// The smallest valid value.
        min: u64,
    },
    /// An erased WQE description combines things the typed builders rule out.
    InvalidCombination {
        /// What is wrong.
        what: &'static str,
    },
}

impl fmt::Display for WqeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::QpnOutOfRange { value, max } => {
                write!(
                    f,
                    "queue number {value:#x} does not fit in 24 bits (max {max:#x})"
                )
            }
            Self::InlineTooLong { len, max } => {
                write!(
                    f,
                    "inline payload of {len} bytes exceeds the maximum of {max} bytes"
                )
            }
            Self::TooManyOctowords { ds, max } => {
                write!(f, "WQE needs {ds} octowords but DS holds at most {max}")
            }
            Self::WqeTooLarge { wqebbs, max } => {
                write!(
                    f,
                    "WQE of {wqebbs} WQEBBs exceeds the queue's maximum of {max}"
                )
            }
            Self::RingSizeNotPowerOfTwo { wqebbs } => {
                write!(f, "ring size of {wqebbs} WQEBBs is not a power of two")
            }
            Self::RingSizeOutOfRange { wqebbs, min, max } => {
                write!(f, "ring size of {wqebbs} WQEBBs is outside {min}..={max}")
            }
            Self::RingBytesMismatch { len, expected } => {
                write!(f, "ring memory of {len} bytes, expected {expected}")
            }
            Self::RingTooSmall {
                ring_wqebbs,
                wqe_wqebbs,
            } => {
                write!(
                    f,
                    "WQE of {wqe_wqebbs} WQEBBs does not fit in a ring of {ring_wqebbs}"
                )
            }
            Self::ZeroLength { what } => write!(f, "{what} has length zero"),
            Self::TransferTooLong { len, max } => {
                write!(f, "length {len} exceeds the limit of {max} bytes")
            }
            Self::MisalignedAtomic {
                opcode,
                addr,
                align,
            } => {
                write!(
                    f,
                    "{opcode} remote address {addr:#x} is not {align}-byte aligned"
                )
            }
            Self::OperandTooWide { what, value, max } => {
                write!(f, "4-byte atomic {what} {value:#x} exceeds {max:#x}")
            }
            Self::FieldOutOfRange { field, value, max } => {
                write!(f, "{field} = {value:#x} exceeds its maximum {max:#x}")
            }
            Self::FieldBelowMinimum { field, value, min } => {
                write!(f, "{field} = {value} is below its minimum {min}")
            }
            Self::InvalidCombination { what } => write!(f, "invalid WQE description: {what}"),
        }
    }
}

impl std::error::Error for WqeError {}
