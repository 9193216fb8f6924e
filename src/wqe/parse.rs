//! The WQE parser: the bytes of a ring at an index become a typed WQE or a typed error.
//!
//! It never panics and never reads outside the ring, whatever the bytes: every octoword
//! offset is reduced modulo the ring (a whole number of octowords), the DS is checked
//! against the ring before any segment past the control segment is read, and every length
//! a WQE claims is checked against its DS. The software NIC executes what this returns.

use core::fmt;

use zerocopy::{transmute, FromBytes};

use super::address::{LKey, LocalBuffer, RKey, RemoteAddress, WqeIndex};
use super::builder::{inline_octowords, AnyData, AnyOperation, AnyWqe, AtomicOp};
use super::opcode::{AtomicWidth, ControlFlags, Opcode};
use super::ring::{wqebbs_for_ds, RingSize, WqeReader};
use super::segment::{
    AddressVectorSegment, AtomicSegment, CompactAddressVectorSegment, ControlSegment, DataSegment,
    MaskedCompareSwap4Segment, MaskedCompareSwap8Segment, MaskedFetchAdd4Segment,
    MaskedFetchAdd8Segment, RemoteAddressSegment, EXTENDED_AV_FLAG, INLINE_SEGMENT_FLAG,
    OCTOWORD_BYTES,
};
use super::transport::{AnyDcTarget, TransportKind};

/// Why bytes in a ring are not a WQE this crate can execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// The ring's length is not a power-of-two number of WQEBBs (1 to 2^15).
    InvalidRing {
        /// The ring's length in bytes.
        len: usize,
    },
    /// The opcode byte names no mlx5 send opcode.
    UnknownOpcode {
        /// The byte.
        opcode: u8,
    },
    /// An mlx5 opcode this crate does not build or execute.
    UnsupportedOpcode {
        /// The opcode.
        opcode: Opcode,
    },
    /// The control segment's WQE index is not the index it was read at (a stale slot).
    IndexMismatch {
        /// The index asked for.
        expected: u16,
        /// The index in the control segment.
        found: u16,
    },
    /// The WQE claims more octowords than the ring holds.
    LargerThanRing {
        /// The DS.
        ds: u8,
        /// Octowords in the ring.
        ring_octowords: usize,
    },
    /// The DS is smaller than the opcode's segments need.
    TooShort {
        /// The opcode.
        opcode: Opcode,
        /// The DS.
        ds: u8,
        /// The smallest DS for it.
        min: u8,
    },
    /// The DS is not what the opcode's segments add up to.
    SizeMismatch {
        /// The opcode.
        opcode: Opcode,
        /// The DS.
        ds: u8,
        /// The DS its segments need.
        expected: u8,
    },
    /// Reserved bits are set.
    ReservedBits {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u32,
    },
    /// The opcode modifier is not valid for the opcode.
    BadOpmod {
        /// The opcode.
        opcode: Opcode,
        /// The modifier.
        opmod: u8,
    },
    /// A segment's content is invalid.
    MalformedSegment {
        /// The octoword it starts at, counted from the control segment.
        octoword: u8,
        /// What is wrong.
        what: &'static str,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::InvalidRing { len } => {
                write!(f, "ring of {len} bytes is not a power-of-two number of 64-byte blocks (1..=32768)")
            }
            Self::UnknownOpcode { opcode } => write!(f, "unknown opcode {opcode:#04x}"),
            Self::UnsupportedOpcode { opcode } => write!(f, "opcode {opcode} is not supported"),
            Self::IndexMismatch { expected, found } => {
                write!(f, "WQE index {found:#06x} read at index {expected:#06x}")
            }
            Self::LargerThanRing { ds, ring_octowords } => {
                write!(f, "DS {ds} exceeds the ring's {ring_octowords} octowords")
            }
            Self::TooShort { opcode, ds, min } => {
                write!(f, "{opcode} with DS {ds}, needs at least {min}")
            }
            Self::SizeMismatch {
                opcode,
                ds,
                expected,
            } => {
                write!(f, "{opcode} with DS {ds}, its segments need {expected}")
            }
            Self::ReservedBits { field, value } => {
                write!(f, "reserved bits set in {field}: {value:#x}")
            }
            Self::BadOpmod { opcode, opmod } => {
                write!(f, "opcode modifier {opmod:#04x} invalid for {opcode}")
            }
            Self::MalformedSegment { octoword, what } => write!(f, "octoword {octoword}: {what}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Pointer data segments of a parsed WQE, borrowed from the ring (split where it wraps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataSegments<'r> {
    head: &'r [DataSegment],
    tail: &'r [DataSegment],
}

impl<'r> DataSegments<'r> {
    /// The segments in order.
    pub fn iter(&self) -> impl Iterator<Item = &'r DataSegment> + 'r {
        self.head.iter().chain(self.tail.iter())
    }
    /// How many segments.
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }
    /// Whether there are none (never, for a parsed WQE).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The total length the NIC transfers.
    pub fn total_len(&self) -> u64 {
        // Each run summed on its own: a chained iterator costs more than the sum.
        let sum = |run: &[DataSegment]| run.iter().map(DataSegment::transfer_len).sum::<u64>();
        sum(self.head) + sum(self.tail)
    }
}

/// An inline payload of a parsed WQE, borrowed from the ring (split where it wraps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InlinePayload<'r> {
    head: &'r [u8],
    tail: &'r [u8],
}

impl<'r> InlinePayload<'r> {
    /// The payload's two contiguous parts (the second is empty unless it wraps).
    pub fn parts(&self) -> (&'r [u8], &'r [u8]) {
        (self.head, self.tail)
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }
    /// Whether the payload is empty (never, for a parsed WQE).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The payload copied out.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        v.extend_from_slice(self.head);
        v.extend_from_slice(self.tail);
        v
    }
    /// Whether the payload equals `bytes`.
    pub fn eq_bytes(&self, bytes: &[u8]) -> bool {
        bytes.len() == self.len()
            && &bytes[..self.head.len()] == self.head
            && &bytes[self.head.len()..] == self.tail
    }
}

/// The data of a parsed WRITE or READ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParsedData<'r> {
    /// No data segment.
    Empty,
    /// Pointer segments.
    Pointers(DataSegments<'r>),
    /// An inline payload (WRITE only).
    Inline(InlinePayload<'r>),
}

/// The operation of a parsed WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParsedOp<'r> {
    /// NOP.
    Nop,
    /// DUMP of a local buffer.
    Dump {
        /// The buffer the NIC reads.
        local: DataSegment,
    },
    /// WRITE or WRITE_WITH_IMM (the immediate is in [`ParsedWqe::imm`]).
    Write {
        /// Remote memory.
        remote: RemoteAddress,
        /// Local data.
        data: ParsedData<'r>,
    },
    /// READ.
    Read {
        /// Remote memory.
        remote: RemoteAddress,
        /// Local destination.
        data: ParsedData<'r>,
    },
    /// An atomic.
    Atomic {
        /// Remote operand.
        remote: RemoteAddress,
        /// The operation and its operands.
        op: AtomicOp,
        /// The data segment for the original value (its byte count is the operand size).
        result: DataSegment,
    },
}

/// A WQE read back from a ring: every control field and the typed operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedWqe<'r> {
    /// The raw control segment.
    pub control: ControlSegment,
    /// The WQE index.
    pub index: WqeIndex,
    /// The opcode.
    pub opcode: Opcode,
    /// The opcode modifier.
    pub opmod: u8,
    /// The queue number.
    pub qpn: u32,
    /// Octowords, control segment included.
    pub ds: u8,
    /// The signature byte.
    pub signature: u8,
    /// The DCI stream id.
    pub stream_id: u16,
    /// Fence, completion and solicited flags.
    pub flags: ControlFlags,
    /// The immediate field (meaningful for WRITE_WITH_IMM).
    pub imm: u32,
    /// The DC target, for DC WQEs that address one.
    pub target: Option<AnyDcTarget>,
    /// The operation.
    pub op: ParsedOp<'r>,
}

impl ParsedWqe<'_> {
    /// Basic blocks the WQE occupies.
    pub fn wqebbs(&self) -> u32 {
        wqebbs_for_ds(self.ds.into())
    }
}

/// Parses the WQE at `index` of `ring`, a queue of transport `transport`.
///
/// ```
/// use ibgda::wqe::{parse_wqe, ParseError, TransportKind, WqeIndex};
/// let ring = [0xffu8; 128];
/// assert_eq!(
///     parse_wqe(&ring, WqeIndex(0), TransportKind::Rc),
///     Err(ParseError::UnknownOpcode { opcode: 0xff })
/// );
/// assert_eq!(
///     parse_wqe(&ring[..96], WqeIndex(0), TransportKind::Rc),
///     Err(ParseError::InvalidRing { len: 96 })
/// );
/// ```
pub fn parse_wqe(
    ring: &[u8],
    index: WqeIndex,
    transport: TransportKind,
) -> Result<ParsedWqe<'_>, ParseError> {
    let size =
        RingSize::for_bytes(ring.len()).map_err(|_| ParseError::InvalidRing { len: ring.len() })?;
    parse_from(
        WqeReader::new(ring, size, index),
        ring.len(),
        index,
        transport,
    )
}

/// Parses a WQE already fetched out of its ring: `wqe` holds its blocks in order, starting
/// with the control segment (as a NIC's fetch engine has them), and `index` is the index
/// it was fetched from. `wqe.len()` must be a non-zero multiple of 16; a DS beyond it is
/// [`ParseError::LargerThanRing`].
#[inline]
pub fn parse_fetched_wqe(
    wqe: &[u8],
    index: WqeIndex,
    transport: TransportKind,
) -> Result<ParsedWqe<'_>, ParseError> {
    if wqe.is_empty() || wqe.len() % OCTOWORD_BYTES != 0 {
        return Err(ParseError::InvalidRing { len: wqe.len() });
    }
    parse_from(WqeReader::fetched(wqe), wqe.len(), index, transport)
}

#[inline]
fn parse_from(
    reader: WqeReader<'_>,
    ring_len: usize,
    index: WqeIndex,
    transport: TransportKind,
) -> Result<ParsedWqe<'_>, ParseError> {
    let control: ControlSegment = transmute!(*reader.octoword(0));

    let opcode_byte = control.opcode_byte();
    let opcode = Opcode::from_byte(opcode_byte).ok_or(ParseError::UnknownOpcode {
        opcode: opcode_byte,
    })?;
    if !opcode.is_built_here() {
        return Err(ParseError::UnsupportedOpcode { opcode });
    }
    if control.wqe_index() != index.0 {
        return Err(ParseError::IndexMismatch {
            expected: index.0,
            found: control.wqe_index(),
        });
    }
    let qpn_ds = control.qpn_ds.get();
    if qpn_ds & 0xc0 != 0 {
        return Err(ParseError::ReservedBits {
            field: "qpn_ds bits 7:6",
            value: qpn_ds & 0xc0,
        });
    }
    let ds = control.ds();
    if ds == 0 {
        return Err(ParseError::TooShort { opcode, ds, min: 1 });
    }
    let ring_octowords = ring_len / OCTOWORD_BYTES;
    if usize::from(ds) > ring_octowords {
        return Err(ParseError::LargerThanRing { ds, ring_octowords });
    }
    let flags = ControlFlags::from_byte(control.fm_ce_se).ok_or(ParseError::ReservedBits {
        field: "fm_ce_se",
        value: control.fm_ce_se.into(),
    })?;
    let opmod = control.opmod();
    let width = match opcode {
        Opcode::AtomicMaskedCompareSwap | Opcode::AtomicMaskedFetchAdd => {
            Some(AtomicWidth::from_opmod(opmod).ok_or(ParseError::BadOpmod { opcode, opmod })?)
        }
        _ if opmod != 0 => return Err(ParseError::BadOpmod { opcode, opmod }),
        _ => None,
    };

    let mut cursor = Cursor {
        reader,
        ds,
        opcode,
        next: 1,
    };
    let addressed = !matches!(opcode, Opcode::Nop | Opcode::Dump);
    let target = if addressed && transport == TransportKind::Dc {
        Some(cursor.target()?)
    } else {
        None
    };

    let op = match opcode {
        Opcode::Nop => ParsedOp::Nop,
        Opcode::Dump => {
            cursor.expect_remaining(1)?;
            ParsedOp::Dump {
                local: cursor.pointer()?,
            }
        }
        Opcode::RdmaWrite | Opcode::RdmaWriteImm => {
            let remote = cursor.remote()?;
            ParsedOp::Write {
                remote,
                data: cursor.data(true)?,
            }
        }
        Opcode::RdmaRead => {
            let remote = cursor.remote()?;
            ParsedOp::Read {
                remote,
                data: cursor.data(false)?,
            }
        }
        _ => {
            let remote = cursor.remote()?;
            let op = cursor.atomic(opcode, width)?;
            cursor.expect_remaining(1)?;
            let at = cursor.next;
            let result = cursor.pointer()?;
            if result.byte_count.get() != op.operand_bytes() {
                return Err(ParseError::MalformedSegment {
                    octoword: at,
                    what: "atomic result segment length is not the operand size",
                });
            }
            ParsedOp::Atomic { remote, op, result }
        }
    };

    Ok(ParsedWqe {
        control,
        index,
        opcode,
        opmod,
        qpn: control.qpn(),
        ds,
        signature: control.signature,
        stream_id: control.dci_stream_channel_id.get(),
        flags,
        imm: control.imm.get(),
        target,
        op,
    })
}

/// Reads the segments after the control segment, checking each against the DS.
struct Cursor<'r> {
    reader: WqeReader<'r>,
    ds: u8,
    opcode: Opcode,
    next: u8,
}

impl<'r> Cursor<'r> {
    #[inline(always)]
    fn remaining(&self) -> u8 {
        self.ds.saturating_sub(self.next)
    }

    #[inline(always)]
    fn need(&self, octowords: u8) -> Result<(), ParseError> {
        if self.remaining() < octowords {
            return Err(ParseError::TooShort {
                opcode: self.opcode,
                ds: self.ds,
                min: self.next + octowords,
            });
        }
        Ok(())
    }

    #[inline(always)]
    fn expect_remaining(&self, octowords: u8) -> Result<(), ParseError> {
        self.need(octowords)?;
        if self.remaining() != octowords {
            return Err(ParseError::SizeMismatch {
                opcode: self.opcode,
                ds: self.ds,
                expected: self.next + octowords,
            });
        }
        Ok(())
    }

    /// The next octoword, consumed.
    #[inline(always)]
    fn take(&mut self) -> [u8; OCTOWORD_BYTES] {
        let octoword = *self.reader.octoword(self.next.into());
        self.next += 1;
        octoword
    }

    #[inline]
    fn target(&mut self) -> Result<AnyDcTarget, ParseError> {
        self.need(1)?;
        let first: CompactAddressVectorSegment =
            transmute!(*self.reader.octoword(self.next.into()));
        if first.dqp_dct.get() & EXTENDED_AV_FLAG == 0 {
            self.next += 1;
            let reserved = first.dqp_dct.get() & 0x7f00_0000;
            if reserved != 0 {
                return Err(ParseError::ReservedBits {
                    field: "dqp_dct bits 30:24",
                    value: reserved,
                });
            }
            return Ok(AnyDcTarget::Compact(first));
        }
        self.need(3)?;
        let (head, tail) = self.reader.octowords(self.next.into(), 3);
        let mut bytes = [0u8; 48];
        bytes[..head.len()].copy_from_slice(head);
        bytes[head.len()..].copy_from_slice(tail);
        let full: AddressVectorSegment = transmute!(bytes);
        let reserved = full.dqp_dct.get() & 0x7f00_0000;
        if reserved != 0 {
            return Err(ParseError::ReservedBits {
                field: "dqp_dct bits 30:24",
                value: reserved,
            });
        }
        self.next += 3;
        Ok(AnyDcTarget::Full(full))
    }

    #[inline(always)]
    fn remote(&mut self) -> Result<RemoteAddress, ParseError> {
        self.need(1)?;
        let at = self.next;
        let seg: RemoteAddressSegment = transmute!(self.take());
        if seg.reserved.get() != 0 {
            return Err(ParseError::MalformedSegment {
                octoword: at,
                what: "remote address reserved word is not zero",
            });
        }
        Ok(RemoteAddress::new(seg.raddr.get(), RKey(seg.rkey.get())))
    }

    #[inline(always)]
    fn pointer(&mut self) -> Result<DataSegment, ParseError> {
        self.need(1)?;
        let at = self.next;
        let seg: DataSegment = transmute!(self.take());
        if seg.is_inline_header() {
            return Err(ParseError::MalformedSegment {
                octoword: at,
                what: "inline header where a data pointer belongs",
            });
        }
        Ok(seg)
    }

    #[inline(always)]
    fn data(&mut self, inline_allowed: bool) -> Result<ParsedData<'r>, ParseError> {
        let remaining = self.remaining();
        if remaining == 0 {
            return Ok(ParsedData::Empty);
        }
        let at = self.next;
        let first: DataSegment = transmute!(*self.reader.octoword(at.into()));
        if first.is_inline_header() {
            if !inline_allowed {
                return Err(ParseError::MalformedSegment {
                    octoword: at,
                    what: "inline data on an RDMA READ",
                });
            }
            let len = (first.byte_count.get() & !INLINE_SEGMENT_FLAG) as usize;
            if len == 0 {
                return Err(ParseError::MalformedSegment {
                    octoword: at,
                    what: "inline header of zero bytes",
                });
            }
            let needed = inline_octowords(len);
            if needed != usize::from(remaining) {
                return Err(ParseError::SizeMismatch {
                    opcode: self.opcode,
                    ds: self.ds,
                    // `needed` may be huge for a hostile length; clamp to what DS can say.
                    expected: (usize::from(at) + needed).min(usize::from(u8::MAX)) as u8,
                });
            }
            // `len` < remaining * 16 <= ring length, so the two runs stay inside the ring.
            let (head, tail) = self.reader.bytes(usize::from(at) * OCTOWORD_BYTES + 4, len);
            self.next = self.ds;
            return Ok(ParsedData::Inline(InlinePayload { head, tail }));
        }
        let (head, tail) = self.reader.octowords(at.into(), remaining.into());
        // Both runs are whole octowords, so these views cannot fail; if they did, the bytes
        // would be reported malformed rather than silently dropped.
        let malformed = |_| ParseError::MalformedSegment {
            octoword: at,
            what: "data segments not octoword-sized",
        };
        let head = <[DataSegment]>::ref_from_bytes(head).map_err(malformed)?;
        let tail = <[DataSegment]>::ref_from_bytes(tail).map_err(malformed)?;
        if let Some(k) = head
            .iter()
            .chain(tail)
            .position(DataSegment::is_inline_header)
        {
            return Err(ParseError::MalformedSegment {
                octoword: at + k as u8,
                what: "inline header after a data pointer",
            });
        }
        self.next = self.ds;
        Ok(ParsedData::Pointers(DataSegments { head, tail }))
    }

    #[inline]
    fn atomic(
        &mut self,
        opcode: Opcode,
        width: Option<AtomicWidth>,
    ) -> Result<AtomicOp, ParseError> {
        self.need(1)?;
        let at = self.next;
        Ok(match (opcode, width) {
            (Opcode::AtomicCompareSwap, _) => {
                let seg: AtomicSegment = transmute!(self.take());
                AtomicOp::CompareSwap {
                    compare: seg.compare.get(),
                    swap: seg.swap_add.get(),
                }
            }
            (Opcode::AtomicFetchAdd, _) => {
                // The compare word is unused by fetch-add: rdma-core leaves it unwritten and
                // the NIC ignores it, so any value is accepted (builders write zero).
                let seg: AtomicSegment = transmute!(self.take());
                AtomicOp::FetchAdd {
                    add: seg.swap_add.get(),
                }
            }
            (Opcode::AtomicMaskedCompareSwap, Some(AtomicWidth::Four)) => {
                let seg: MaskedCompareSwap4Segment = transmute!(self.take());
                AtomicOp::MaskedCompareSwap {
                    width: AtomicWidth::Four,
                    swap: seg.swap.get().into(),
                    compare: seg.compare.get().into(),
                    swap_mask: seg.swap_mask.get().into(),
                    compare_mask: seg.compare_mask.get().into(),
                }
            }
            (Opcode::AtomicMaskedCompareSwap, _) => {
                self.need(2)?;
                let (head, tail) = self.reader.octowords(at.into(), 2);
                let mut bytes = [0u8; 32];
                bytes[..head.len()].copy_from_slice(head);
                bytes[head.len()..].copy_from_slice(tail);
                self.next += 2;
                let seg: MaskedCompareSwap8Segment = transmute!(bytes);
                AtomicOp::MaskedCompareSwap {
                    width: AtomicWidth::Eight,
                    swap: seg.swap.get(),
                    compare: seg.compare.get(),
                    swap_mask: seg.swap_mask.get(),
                    compare_mask: seg.compare_mask.get(),
                }
            }
            (_, Some(AtomicWidth::Four)) => {
                let seg: MaskedFetchAdd4Segment = transmute!(self.take());
                if seg.reserved != [0; 8] {
                    return Err(ParseError::MalformedSegment {
                        octoword: at,
                        what: "4-byte masked fetch-add reserved bytes are not zero",
                    });
                }
                AtomicOp::MaskedFetchAdd {
                    width: AtomicWidth::Four,
                    add: seg.add.get().into(),
                    field_boundary: seg.field_boundary.get().into(),
                }
            }
            _ => {
                let seg: MaskedFetchAdd8Segment = transmute!(self.take());
                AtomicOp::MaskedFetchAdd {
                    width: AtomicWidth::Eight,
                    add: seg.add.get(),
                    field_boundary: seg.field_boundary.get(),
                }
            }
        })
    }
}

impl ParsedWqe<'_> {
    /// The first field in which this parsed WQE differs from the erased description it was
    /// built from, or `None` if it says exactly what was built. Used by round-trip tests
    /// and fuzzers.
    pub fn differs_from(&self, built: &AnyWqe<'_>) -> Option<&'static str> {
        let expected_target = match built.op {
            AnyOperation::Nop | AnyOperation::Dump(_) => None,
            _ => built.target,
        };
        if self.target != expected_target {
            return Some("target");
        }
        if self.flags != built.flags {
            return Some("flags");
        }
        if self.stream_id != built.stream_id {
            return Some("stream_id");
        }
        let sge_matches = |seg: &DataSegment, sge: &super::address::Sge| {
            seg.byte_count.get() == sge.len()
                && seg.lkey.get() == sge.lkey().0
                && seg.addr.get() == sge.addr()
        };
        let data_matches = |parsed: &ParsedData<'_>, data: &AnyData<'_>| match (parsed, data) {
            (ParsedData::Empty, AnyData::Empty) => true,
            (ParsedData::Empty, AnyData::Inline(p)) => p.is_empty(),
            (ParsedData::Pointers(segs), AnyData::Sges(sges)) => {
                segs.len() == sges.len()
                    && segs.iter().zip(sges.iter()).all(|(a, b)| sge_matches(a, b))
            }
            (ParsedData::Inline(payload), AnyData::Inline(p)) => payload.eq_bytes(p),
            _ => false,
        };
        match (&self.op, &built.op) {
            (ParsedOp::Nop, AnyOperation::Nop) => None,
            (ParsedOp::Dump { local }, AnyOperation::Dump(sge)) => {
                (!sge_matches(local, sge)).then_some("dump buffer")
            }
            (
                ParsedOp::Write { remote, data },
                AnyOperation::Write {
                    remote: r,
                    imm,
                    data: d,
                },
            ) => {
                if remote != r {
                    Some("remote address")
                } else if imm.is_some() != (self.opcode == Opcode::RdmaWriteImm)
                    || self.imm != imm.unwrap_or(0)
                {
                    Some("immediate")
                } else if !data_matches(data, d) {
                    Some("data")
                } else {
                    None
                }
            }
            (ParsedOp::Read { remote, data }, AnyOperation::Read { remote: r, data: d }) => {
                if remote != r {
                    Some("remote address")
                } else if !data_matches(data, d) {
                    Some("data")
                } else {
                    None
                }
            }
            (
                ParsedOp::Atomic { remote, op, result },
                AnyOperation::Atomic {
                    remote: r,
                    op: o,
                    result: res,
                },
            ) => {
                let expected_result = LocalBuffer::new(result.addr.get(), LKey(result.lkey.get()));
                if remote != r {
                    Some("remote address")
                } else if op != o {
                    Some("atomic operands")
                } else if expected_result != *res {
                    Some("atomic result buffer")
                } else {
                    None
                }
            }
            _ => Some("operation"),
        }
    }
}
