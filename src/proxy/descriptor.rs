//! The 16-byte request descriptor a GPU thread hands a CPU proxy worker.
//!
//! Two little-endian 64-bit words. Each word carries the ring epoch in its low byte, so a
//! consumer that finds the expected epoch in both words holds a complete descriptor even
//! when the producer's 16-byte store reaches host memory as two 8-byte halves (PCIe does
//! not promise a 16-byte write is seen whole; 8-byte aligned halves are). An all-zero
//! slot is never valid (epochs are 1..=255).
//!
//! ```text
//! control (word 0)                        operand (word 1)
//! bits  0..8   epoch                      bits 0..8   epoch
//! bits  8..12  opcode                     bits 8..64  operand (56 bits, per opcode)
//! bits 12..16  peer (connection index)
//! bits 16..24  remote window index
//! bits 24..32  extra (per opcode)
//! bits 32..64  offset in the remote window
//! ```
//!
//! | opcode | request | operand | extra |
//! |---|---|---|---|
//! | 1 | 8-byte inline WRITE of `value` | value bits 0..56 | value bits 56..64 |
//! | 2 | WRITE from a local window | local window 8, local offset 32, length bits 0..16 | length bits 16..24 |
//! | 3 | READ into a local window | as WRITE | as WRITE |
//! | 4 | fetch-add (result to the ring's result slot) | addend (< 2^56) | 0 |
//! | 5 | compare-swap (result to the ring's result slot) | compare bits 0..28, swap bits 28..56 | 0 |
//! | 6 | signal: fetch-add on a remote counter, result discarded | addend (< 2^56) | 0 |
//!
//! Addresses never travel in a descriptor: a window index names a registered region
//! from a table the worker owns, and the offset and length are checked against it
//! ([`crate::proxy::Windows::resolve`]).

use core::fmt;
use core::mem::{align_of, offset_of, size_of};
use core::num::NonZeroU8;

use static_assertions::const_assert_eq;
use zerocopy::byteorder::little_endian::U64;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The descriptor as it lies in a ring slot.
#[derive(Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(16))]
pub struct RequestDescriptor {
    /// Epoch, opcode, peer, remote window, extra byte, remote offset.
    pub control: U64,
    /// Epoch and the 56-bit operand.
    pub operand: U64,
}

const_assert_eq!(size_of::<RequestDescriptor>(), 16);
const_assert_eq!(align_of::<RequestDescriptor>(), 16);
const_assert_eq!(offset_of!(RequestDescriptor, control), 0);
const_assert_eq!(offset_of!(RequestDescriptor, operand), 8);

impl fmt::Debug for RequestDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RequestDescriptor({:#018x}, {:#018x})",
            self.control.get(),
            self.operand.get()
        )
    }
}

/// Bits of the operand word after the epoch byte.
pub const OPERAND_BITS: u32 = 56;
/// The largest operand (addend of a fetch-add or signal).
pub const MAX_OPERAND: u64 = (1 << OPERAND_BITS) - 1;
/// The largest WRITE or READ length (24 bits).
pub const MAX_LENGTH: u32 = (1 << 24) - 1;
/// The largest compare or swap value of a compare-swap request (28 bits each).
pub const MAX_CAS_VALUE: u32 = (1 << 28) - 1;
/// Peers a descriptor can name (4 bits).
pub const MAX_PEERS: usize = 16;
/// Windows a descriptor can name (8 bits).
pub const MAX_WINDOWS: usize = 256;

/// Descriptor opcodes (bits 8..12 of the control word).
pub mod opcode {
    /// 8-byte inline WRITE.
    pub const WRITE_INLINE8: u8 = 1;
    /// WRITE gathering from a local window.
    pub const WRITE: u8 = 2;
    /// READ scattering into a local window.
    pub const READ: u8 = 3;
    /// Fetch-add returning the old value.
    pub const FETCH_ADD: u8 = 4;
    /// Compare-swap returning the old value.
    pub const COMPARE_SWAP: u8 = 5;
    /// Fetch-add on a remote counter, result discarded.
    pub const SIGNAL: u8 = 6;
}

/// The epoch of a ring lap: `lap % 255 + 1`, never zero, so a zeroed slot and a slot of
/// the previous lap never pass for the current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Epoch(NonZeroU8);

impl Epoch {
    /// The epoch of descriptors written on lap `lap` (slot index / ring size).
    pub const fn of_lap(lap: u64) -> Self {
        match NonZeroU8::new((lap % 255) as u8 + 1) {
            Some(e) => Self(e),
            None => unreachable!(),
        }
    }
    /// Its byte.
    pub const fn get(self) -> u8 {
        self.0.get()
    }
}

/// Where a request lands on a peer: a remote window and an offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteRef {
    /// The peer (the worker's connection to it).
    pub peer: u8,
    /// The peer's window.
    pub window: u8,
    /// Byte offset in the window.
    pub offset: u32,
}

/// A local buffer: a local window and an offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalRef {
    /// The local window.
    pub window: u8,
    /// Byte offset in the window.
    pub offset: u32,
}

/// A request, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    /// Write the 8 bytes of `value` (little-endian, as a GPU stores a `u64`) to `dst`.
    WriteInline8 {
        /// Destination.
        dst: RemoteRef,
        /// The value.
        value: u64,
    },
    /// Write `len` bytes from `src` to `dst`.
    Write {
        /// Destination.
        dst: RemoteRef,
        /// Source.
        src: LocalRef,
        /// Bytes (1..=[`MAX_LENGTH`]).
        len: u32,
    },
    /// Read `len` bytes from `src` into `dst`.
    Read {
        /// Remote source.
        src: RemoteRef,
        /// Local destination.
        dst: LocalRef,
        /// Bytes (1..=[`MAX_LENGTH`]).
        len: u32,
    },
    /// Add `add` to the big-endian 8-byte counter at `dst`; the old value lands in the
    /// ring's result slot of this descriptor.
    FetchAdd {
        /// The counter.
        dst: RemoteRef,
        /// The addend (at most [`MAX_OPERAND`]).
        add: u64,
    },
    /// Compare-swap the big-endian 8-byte word at `dst`; the old value lands in the ring's
    /// result slot of this descriptor.
    CompareSwap {
        /// The word.
        dst: RemoteRef,
        /// Compare value (at most [`MAX_CAS_VALUE`]).
        compare: u32,
        /// Swap value (at most [`MAX_CAS_VALUE`]).
        swap: u32,
    },
    /// Add `add` to the big-endian 8-byte signal counter at `dst`.
    Signal {
        /// The counter.
        dst: RemoteRef,
        /// The addend (at most [`MAX_OPERAND`]).
        add: u64,
    },
}

impl Request {
    /// The remote side of the request.
    pub fn remote(&self) -> RemoteRef {
        match *self {
            Self::WriteInline8 { dst, .. }
            | Self::Write { dst, .. }
            | Self::FetchAdd { dst, .. }
            | Self::CompareSwap { dst, .. }
            | Self::Signal { dst, .. } => dst,
            Self::Read { src, .. } => src,
        }
    }
}

/// Why a request cannot be encoded, or a descriptor is not a valid request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DescriptorError {
    /// An opcode the format does not define.
    UnknownOpcode {
        /// The opcode.
        opcode: u8,
    },
    /// The two words carry different epochs (a torn or stale descriptor).
    EpochMismatch {
        /// The control word's epoch.
        control: u8,
        /// The operand word's epoch.
        operand: u8,
    },
    /// A field the opcode does not use is not zero.
    ReservedBits {
        /// The opcode.
        opcode: u8,
        /// The offending bits, as they lie in their word.
        bits: u64,
    },
    /// A peer index at or past [`MAX_PEERS`].
    PeerTooLarge {
        /// The peer.
        peer: u8,
    },
    /// A WRITE or READ of zero bytes.
    ZeroLength,
    /// A length past [`MAX_LENGTH`].
    LengthTooLarge {
        /// The length.
        len: u32,
    },
    /// An operand past [`MAX_OPERAND`].
    OperandTooLarge {
        /// The operand.
        operand: u64,
    },
    /// A compare-swap value past [`MAX_CAS_VALUE`].
    CasValueTooLarge {
        /// The value.
        value: u32,
    },
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownOpcode { opcode } => write!(f, "unknown request opcode {opcode}"),
            Self::EpochMismatch { control, operand } => write!(
                f,
                "descriptor words carry epochs {control} and {operand}: torn or stale"
            ),
            Self::ReservedBits { opcode, bits } => {
                write!(
                    f,
                    "opcode {opcode} leaves bits {bits:#x} unused but they are set"
                )
            }
            Self::PeerTooLarge { peer } => {
                write!(f, "peer {peer} is past the format's {MAX_PEERS} peers")
            }
            Self::ZeroLength => f.write_str("a WRITE or READ of zero bytes"),
            Self::LengthTooLarge { len } => {
                write!(f, "length {len} exceeds the format's {MAX_LENGTH} bytes")
            }
            Self::OperandTooLarge { operand } => {
                write!(
                    f,
                    "operand {operand:#x} exceeds the format's {MAX_OPERAND:#x}"
                )
            }
            Self::CasValueTooLarge { value } => {
                write!(
                    f,
                    "compare-swap value {value:#x} exceeds {MAX_CAS_VALUE:#x}"
                )
            }
        }
    }
}

impl std::error::Error for DescriptorError {}

const EPOCH_MASK: u64 = 0xff;

fn control_word(op: u8, dst: RemoteRef, extra: u8) -> Result<u64, DescriptorError> {
    if usize::from(dst.peer) >= MAX_PEERS {
        return Err(DescriptorError::PeerTooLarge { peer: dst.peer });
    }
    Ok(u64::from(op) << 8
        | u64::from(dst.peer) << 12
        | u64::from(dst.window) << 16
        | u64::from(extra) << 24
        | u64::from(dst.offset) << 32)
}

fn check_len(len: u32) -> Result<(), DescriptorError> {
    match len {
        0 => Err(DescriptorError::ZeroLength),
        l if l > MAX_LENGTH => Err(DescriptorError::LengthTooLarge { len }),
        _ => Ok(()),
    }
}

fn local_operand(local: LocalRef, len: u32) -> (u64, u8) {
    let operand =
        u64::from(local.window) | u64::from(local.offset) << 8 | u64::from(len & 0xffff) << 40;
    (operand, (len >> 16) as u8)
}

impl RequestDescriptor {
    /// Encodes `request` for lap epoch `epoch`, or says which field does not fit.
    pub fn encode(request: &Request, epoch: Epoch) -> Result<Self, DescriptorError> {
        let (control, operand) = match *request {
            Request::WriteInline8 { dst, value } => (
                control_word(opcode::WRITE_INLINE8, dst, (value >> 56) as u8)?,
                value & MAX_OPERAND,
            ),
            Request::Write { dst, src, len } => {
                check_len(len)?;
                let (operand, extra) = local_operand(src, len);
                (control_word(opcode::WRITE, dst, extra)?, operand)
            }
            Request::Read { src, dst, len } => {
                check_len(len)?;
                let (operand, extra) = local_operand(dst, len);
                (control_word(opcode::READ, src, extra)?, operand)
            }
            Request::FetchAdd { dst, add } | Request::Signal { dst, add } => {
                if add > MAX_OPERAND {
                    return Err(DescriptorError::OperandTooLarge { operand: add });
                }
                let op = if matches!(request, Request::Signal { .. }) {
                    opcode::SIGNAL
                } else {
                    opcode::FETCH_ADD
                };
                (control_word(op, dst, 0)?, add)
            }
            Request::CompareSwap { dst, compare, swap } => {
                for value in [compare, swap] {
                    if value > MAX_CAS_VALUE {
                        return Err(DescriptorError::CasValueTooLarge { value });
                    }
                }
                (
                    control_word(opcode::COMPARE_SWAP, dst, 0)?,
                    u64::from(compare) | u64::from(swap) << 28,
                )
            }
        };
        let e = u64::from(epoch.get());
        Ok(Self {
            control: U64::new(control | e),
            operand: U64::new(operand << 8 | e),
        })
    }

    /// The descriptor from the two words as they lie in memory (checked conversion from
    /// the bytes a producer wrote; every bit pattern is a `RequestDescriptor`).
    pub fn from_words(words: [u64; 2]) -> Self {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&words[0].to_ne_bytes());
        bytes[8..].copy_from_slice(&words[1].to_ne_bytes());
        Self::read_from_bytes(&bytes).unwrap_or_else(|_| unreachable!("16 bytes"))
    }

    /// The two words to store (native-endian values whose memory bytes are the descriptor).
    pub fn to_words(&self) -> [u64; 2] {
        let bytes = self.as_bytes();
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            u64::from_ne_bytes(w)
        };
        [word(0), word(1)]
    }

    /// The control word's epoch byte.
    pub fn control_epoch(&self) -> u8 {
        (self.control.get() & EPOCH_MASK) as u8
    }

    /// The operand word's epoch byte.
    pub fn operand_epoch(&self) -> u8 {
        (self.operand.get() & EPOCH_MASK) as u8
    }

    /// Decodes the request, checking that both words carry one epoch and that every
    /// field is one the format defines. Windows are checked later, against the worker's
    /// tables.
    pub fn decode(&self) -> Result<Request, DescriptorError> {
        let (control, operand_word) = (self.control.get(), self.operand.get());
        let (ce, oe) = (self.control_epoch(), self.operand_epoch());
        if ce != oe {
            return Err(DescriptorError::EpochMismatch {
                control: ce,
                operand: oe,
            });
        }
        let op = ((control >> 8) & 0xf) as u8;
        let dst = RemoteRef {
            peer: ((control >> 12) & 0xf) as u8,
            window: (control >> 16) as u8,
            offset: (control >> 32) as u32,
        };
        let extra = (control >> 24) as u8;
        let operand = operand_word >> 8;
        let local = LocalRef {
            window: operand as u8,
            offset: (operand >> 8) as u32,
        };
        let len = ((operand >> 40) & 0xffff) as u32 | u32::from(extra) << 16;
        let no_extra = |op: u8| {
            if extra == 0 {
                Ok(())
            } else {
                Err(DescriptorError::ReservedBits {
                    opcode: op,
                    bits: u64::from(extra) << 24,
                })
            }
        };
        match op {
            opcode::WRITE_INLINE8 => Ok(Request::WriteInline8 {
                dst,
                value: operand | u64::from(extra) << 56,
            }),
            opcode::WRITE | opcode::READ => {
                check_len(len)?;
                Ok(if op == opcode::WRITE {
                    Request::Write {
                        dst,
                        src: local,
                        len,
                    }
                } else {
                    Request::Read {
                        src: dst,
                        dst: local,
                        len,
                    }
                })
            }
            opcode::FETCH_ADD => {
                no_extra(op)?;
                Ok(Request::FetchAdd { dst, add: operand })
            }
            opcode::SIGNAL => {
                no_extra(op)?;
                Ok(Request::Signal { dst, add: operand })
            }
            opcode::COMPARE_SWAP => {
                no_extra(op)?;
                Ok(Request::CompareSwap {
                    dst,
                    compare: (operand & u64::from(MAX_CAS_VALUE)) as u32,
                    swap: (operand >> 28) as u32,
                })
            }
            opcode => Err(DescriptorError::UnknownOpcode { opcode }),
        }
    }
}

/// Whether both words of a slot carry `epoch`: the slot holds a complete descriptor of
/// the current lap.
pub fn words_valid(words: [u64; 2], epoch: Epoch) -> bool {
    let e = u64::from(epoch.get());
    let le = |w: u64| u64::from_le_bytes(w.to_ne_bytes());
    le(words[0]) & EPOCH_MASK == e && le(words[1]) & EPOCH_MASK == e
}
