//! Validated numbers that go into WQEs: queue numbers, keys, indices, local and remote
//! buffers.

use core::fmt;

use super::error::WqeError;

/// A 24-bit queue pair (or DCT) number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Qpn(u32);

impl Qpn {
    /// The largest queue number: 24 bits.
    pub const MAX: u32 = 0xff_ffff;

    /// A queue number, or [`WqeError::QpnOutOfRange`] if it does not fit in 24 bits.
    ///
    /// ```
    /// use ibgda::wqe::{Qpn, WqeError};
    /// assert_eq!(Qpn::new(0x12_3456).unwrap().get(), 0x12_3456);
    /// assert_eq!(
    ///     Qpn::new(0x100_0000),
    ///     Err(WqeError::QpnOutOfRange { value: 0x100_0000, max: 0xff_ffff })
    /// );
    /// ```
    pub const fn new(value: u32) -> Result<Self, WqeError> {
        if value > Self::MAX {
            Err(WqeError::QpnOutOfRange {
                value,
                max: Self::MAX,
            })
        } else {
            Ok(Self(value))
        }
    }

    /// The number.
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

/// A local memory key: names a registered region for the NIC's local accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LKey(pub u32);

/// A remote memory key: names a registered region at the responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RKey(pub u32);

/// The 16-bit WQE index of a control segment: the low 16 bits of the free-running
/// producer counter (in WQEBBs) at the WQE's first basic block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WqeIndex(pub u16);

impl WqeIndex {
    /// The index `wqebbs` basic blocks later, wrapping at 16 bits.
    pub const fn advance(self, wqebbs: u32) -> Self {
        Self(self.0.wrapping_add(wqebbs as u16))
    }
    /// The low 16 bits of a free-running producer counter.
    pub const fn from_counter(counter: u64) -> Self {
        Self(counter as u16)
    }
}

impl fmt::Display for WqeIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06x}", self.0)
    }
}

/// Largest byte count of one data segment: bit 31 marks an inline header instead.
pub const MAX_SEGMENT_BYTES: u64 = 0x7fff_ffff;
/// Largest transfer of one WQE: 2 GiB.
pub const MAX_TRANSFER_BYTES: u64 = 0x8000_0000;

/// One gather (WRITE source) or scatter (READ destination) entry: local memory named by
/// address, length and lkey.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sge {
    addr: u64,
    len: u32,
    lkey: LKey,
}

impl Sge {
    /// A scatter/gather entry of `len` bytes at `addr`.
    ///
    /// Fails with [`WqeError::ZeroLength`] for `len == 0` (mlx5 reads a zero byte count as
    /// 2 GiB; an empty transfer is a WQE without data) and with
    /// [`WqeError::TransferTooLong`] above 2^31 - 1 bytes.
    pub const fn new(addr: u64, len: u32, lkey: LKey) -> Result<Self, WqeError> {
        if len == 0 {
            return Err(WqeError::ZeroLength {
                what: "scatter/gather entry",
            });
        }
        if len as u64 > MAX_SEGMENT_BYTES {
            return Err(WqeError::TransferTooLong {
                len: len as u64,
                max: MAX_SEGMENT_BYTES,
            });
        }
        Ok(Self { addr, len, lkey })
    }

    /// Local virtual address.
    pub const fn addr(&self) -> u64 {
        self.addr
    }
    /// Length in bytes (at least 1).
    pub const fn len(&self) -> u32 {
        self.len
    }
    /// Always false: an entry holds at least one byte.
    pub const fn is_empty(&self) -> bool {
        false
    }
    /// Local key.
    pub const fn lkey(&self) -> LKey {
        self.lkey
    }
}

/// Remote memory of an RDMA or atomic operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteAddress {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key.
    pub rkey: RKey,
}

impl RemoteAddress {
    /// Remote memory at `addr` under `rkey`.
    pub const fn new(addr: u64, rkey: RKey) -> Self {
        Self { addr, rkey }
    }
}

/// The local buffer an atomic writes the remote operand's original value into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalBuffer {
    /// Local virtual address.
    pub addr: u64,
    /// Local key.
    pub lkey: LKey,
}

impl LocalBuffer {
    /// Local memory at `addr` under `lkey`.
    pub const fn new(addr: u64, lkey: LKey) -> Self {
        Self { addr, lkey }
    }
}
