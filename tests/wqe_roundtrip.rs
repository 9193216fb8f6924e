//! Build -> write -> parse round trips of every WQE shape, at random ring sizes, indices and
//! queue numbers.
//!
//! Every case is checked four ways, each derived here independently of the encoder:
//! - the outcome (success, or exactly which typed error) follows from the description;
//! - the WQE's bytes equal a reference encoding written in this file from the layout tables
//!   of the mlx5 facts sheet (control segment, address vectors, remote address, atomic
//!   segments, data pointers, inline header and payload);
//! - the parser reads back what was built (`differs_from` is `None`) and the control
//!   segment's index, QPN and DS;
//! - the bytes outside the WQE's basic blocks are untouched (and a failed write touches
//!   nothing at all).
//!
//! A second property checks that the typed builders produce the same bytes (or the same
//! error) as the erased `AnyWqe` for the same description.

use ibgda::wqe::segment::{AddressVectorSegment, CompactAddressVectorSegment};
use ibgda::wqe::*;
use proptest::prelude::*;
use zerocopy::FromBytes;

// ---------------------------------------------------------------------------------------
// The description: owned data, so that a case can be shrunk and printed.

#[derive(Clone, Debug)]
enum TargetDesc {
    Rc,
    Compact(CompactAddressVector),
    Full(FullAddressVector),
    /// Raw segment bytes in the erased target (16 bytes: `AnyDcTarget::Compact`, 48:
    /// `AnyDcTarget::Full`), which may not be the form they claim.
    Raw(Vec<u8>),
}

#[derive(Clone, Debug)]
enum DataDesc {
    Empty,
    Sges(Vec<Sge>),
    Inline(Vec<u8>),
}

#[derive(Clone, Debug)]
enum OpDesc {
    Nop,
    Dump(Sge),
    Write {
        remote: RemoteAddress,
        imm: Option<u32>,
        data: DataDesc,
    },
    Read {
        remote: RemoteAddress,
        data: DataDesc,
    },
    Atomic {
        remote: RemoteAddress,
        result: LocalBuffer,
        op: AtomicOp,
    },
}

#[derive(Clone, Debug)]
struct Case {
    target: TargetDesc,
    flags: ControlFlags,
    stream_id: u16,
    op: OpDesc,
    ring_log2: u8,
    index: u16,
    qpn: u32,
    limits: WqeLimits,
    fill: u8,
}

// ---------------------------------------------------------------------------------------
// Strategies.

fn sge() -> impl Strategy<Value = Sge> {
    (
        any::<u64>(),
        prop_oneof![40 => 1u32..=65_536, 1 => 1u32..=0x7fff_ffff, 1 => Just(0x7fff_ffff)],
        any::<u32>(),
    )
        .prop_map(|(addr, len, lkey)| Sge::new(addr, len, LKey(lkey)).expect("valid length"))
}

fn remote() -> impl Strategy<Value = RemoteAddress> {
    (any::<u64>(), any::<u32>()).prop_map(|(addr, rkey)| RemoteAddress::new(addr, RKey(rkey)))
}

/// A value of a bit field: in range almost always, anything now and then.
fn field(max: u8) -> impl Strategy<Value = u8> {
    prop_oneof![30 => 0..=max, 1 => any::<u8>()]
}

fn queue_number() -> impl Strategy<Value = u32> {
    prop_oneof![40 => 0..=0xff_ffffu32, 1 => any::<u32>()]
}

fn compact_av() -> impl Strategy<Value = CompactAddressVector> {
    (
        queue_number(),
        any::<u64>(),
        any::<u16>(),
        field(0xf),
        field(0xf),
        field(0x7f),
        any::<bool>(),
    )
        .prop_map(
            |(dct, dc_key, lid, sl, static_rate, source_path_bits, force_loopback)| {
                CompactAddressVector {
                    dct,
                    dc_key,
                    lid,
                    sl,
                    static_rate,
                    source_path_bits,
                    force_loopback,
                }
            },
        )
}

fn grh() -> impl Strategy<Value = Grh> {
    (
        any::<u8>(),
        prop_oneof![30 => 0..=0xf_ffffu32, 1 => any::<u32>()],
        any::<u8>(),
        any::<u8>(),
        any::<[u8; 16]>(),
    )
        .prop_map(
            |(sgid_index, flow_label, traffic_class, hop_limit, dgid)| Grh {
                sgid_index,
                flow_label,
                traffic_class,
                hop_limit,
                dgid,
            },
        )
}

fn full_av() -> impl Strategy<Value = FullAddressVector> {
    let ib = (
        any::<u16>(),
        field(0xf),
        field(0xf),
        field(0x7f),
        any::<bool>(),
        proptest::option::of(grh()),
    )
        .prop_map(
            |(lid, sl, static_rate, source_path_bits, force_loopback, grh)| {
                LinkAddress::InfiniBand {
                    lid,
                    sl,
                    static_rate,
                    source_path_bits,
                    force_loopback,
                    grh,
                }
            },
        );
    let roce = (
        any::<u16>(),
        field(0x7),
        field(0xf),
        any::<[u8; 6]>(),
        grh(),
    )
        .prop_map(
            |(udp_source_port, sl, static_rate, mac, grh)| LinkAddress::Roce {
                udp_source_port,
                sl,
                static_rate,
                mac,
                grh,
            },
        );
    (queue_number(), any::<u64>(), prop_oneof![ib, roce])
        .prop_map(|(dct, dc_key, link)| FullAddressVector { dct, dc_key, link })
}

/// Raw segment bytes whose `dqp_dct` (bytes 8..12) is mostly the right form.
fn raw_target() -> impl Strategy<Value = TargetDesc> {
    (
        any::<bool>(),
        any::<[u8; 48]>(),
        prop_oneof![4 => Just(None), 1 => any::<u32>().prop_map(Some)],
    )
        .prop_map(|(full, bytes, dqp_dct)| {
            let mut raw = bytes[..if full { 48 } else { 16 }].to_vec();
            let form = if full { 0x8000_0000 } else { 0 };
            let dqp_dct =
                dqp_dct.unwrap_or(form | u32::from_be_bytes([0, raw[9], raw[10], raw[11]]));
            raw[8..12].copy_from_slice(&dqp_dct.to_be_bytes());
            TargetDesc::Raw(raw)
        })
}

fn target() -> impl Strategy<Value = TargetDesc> {
    prop_oneof![
        3 => Just(TargetDesc::Rc),
        3 => compact_av().prop_map(TargetDesc::Compact),
        3 => full_av().prop_map(TargetDesc::Full),
        1 => raw_target(),
    ]
}

fn flags() -> impl Strategy<Value = ControlFlags> {
    (0u8..=4, 0u8..=3, any::<bool>()).prop_map(|(fence, completion, solicited)| ControlFlags {
        fence: FenceMode::from_bits(fence).expect("0..=4 are fence modes"),
        completion: CompletionMode::from_bits(completion),
        solicited: if solicited {
            Solicited::Yes
        } else {
            Solicited::No
        },
    })
}

/// Data of a WRITE or READ: mostly 1..=MAX_GATHER entries or a short inline payload, with
/// the edges (no entries, too many, inline over the format's maximum) now and then.
fn data() -> impl Strategy<Value = DataDesc> {
    prop_oneof![
        2 => Just(DataDesc::Empty),
        8 => proptest::collection::vec(sge(), 1..=MAX_GATHER).prop_map(DataDesc::Sges),
        1 => proptest::collection::vec(sge(), 0..=MAX_GATHER + 4).prop_map(DataDesc::Sges),
        6 => proptest::collection::vec(any::<u8>(), 0..=64).prop_map(DataDesc::Inline),
        2 => proptest::collection::vec(any::<u8>(), 0..=1010).prop_map(DataDesc::Inline),
    ]
}

/// A remote address for an atomic: aligned to 8 almost always.
fn atomic_remote() -> impl Strategy<Value = RemoteAddress> {
    (
        prop_oneof![8 => any::<u64>().prop_map(|a| a & !7), 1 => any::<u64>()],
        any::<u32>(),
    )
        .prop_map(|(addr, rkey)| RemoteAddress::new(addr, RKey(rkey)))
}

/// An operand of a 4-byte masked atomic: fits in 32 bits almost always.
fn operand4() -> impl Strategy<Value = u64> {
    prop_oneof![12 => any::<u32>().prop_map(u64::from), 1 => any::<u64>()]
}

fn atomic_op() -> impl Strategy<Value = AtomicOp> {
    prop_oneof![
        (any::<u64>(), any::<u64>())
            .prop_map(|(compare, swap)| AtomicOp::CompareSwap { compare, swap }),
        any::<u64>().prop_map(|add| AtomicOp::FetchAdd { add }),
        (operand4(), operand4(), operand4(), operand4()).prop_map(
            |(swap, compare, swap_mask, compare_mask)| AtomicOp::MaskedCompareSwap {
                width: AtomicWidth::Four,
                swap,
                compare,
                swap_mask,
                compare_mask,
            }
        ),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(swap, compare, swap_mask, compare_mask)| AtomicOp::MaskedCompareSwap {
                width: AtomicWidth::Eight,
                swap,
                compare,
                swap_mask,
                compare_mask,
            }
        ),
        (operand4(), operand4()).prop_map(|(add, field_boundary)| AtomicOp::MaskedFetchAdd {
            width: AtomicWidth::Four,
            add,
            field_boundary,
        }),
        (any::<u64>(), any::<u64>()).prop_map(|(add, field_boundary)| {
            AtomicOp::MaskedFetchAdd {
                width: AtomicWidth::Eight,
                add,
                field_boundary,
            }
        }),
    ]
}

fn op() -> impl Strategy<Value = OpDesc> {
    prop_oneof![
        1 => Just(OpDesc::Nop),
        1 => sge().prop_map(OpDesc::Dump),
        4 => (remote(), proptest::option::of(any::<u32>()), data())
            .prop_map(|(remote, imm, data)| OpDesc::Write { remote, imm, data }),
        3 => (remote(), data()).prop_map(|(remote, data)| OpDesc::Read { remote, data }),
        4 => (atomic_remote(), any::<u64>(), any::<u32>(), atomic_op()).prop_map(
            |(remote, addr, lkey, op)| OpDesc::Atomic {
                remote,
                result: LocalBuffer::new(addr, LKey(lkey)),
                op,
            }
        ),
    ]
}

fn limits() -> impl Strategy<Value = WqeLimits> {
    prop_oneof![
        6 => Just(WqeLimits::FORMAT),
        1 => (0usize..=1010, 1u32..=16)
            .prop_map(|(max_inline, max_wqebbs)| WqeLimits { max_inline, max_wqebbs }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        target(),
        flags(),
        (any::<u16>(), 0u8..10),
        op(),
        0u8..=10,
        any::<u16>(),
        queue_number(),
        limits(),
        any::<u8>(),
    )
        .prop_map(
            |(target, flags, (stream, coin), op, ring_log2, index, qpn, limits, fill)| {
                // A stream id on half of the DC WQEs that address a target, and now and
                // then where it is an error.
                let addressed_dc = !matches!(target, TargetDesc::Rc)
                    && !matches!(op, OpDesc::Nop | OpDesc::Dump(_));
                let stream_id = match (addressed_dc, coin) {
                    (true, 0..=4) | (false, 0) => stream,
                    _ => 0,
                };
                Case {
                    target,
                    flags,
                    stream_id,
                    op,
                    ring_log2,
                    index,
                    qpn,
                    limits,
                    fill,
                }
            },
        )
}

// ---------------------------------------------------------------------------------------
// The expectation, derived from the description alone.

const FORMAT_MAX_INLINE: usize = 63 * 16 - 4;
const MAX_TRANSFER: u64 = 1 << 31;

impl Case {
    fn addressed(&self) -> bool {
        !matches!(self.op, OpDesc::Nop | OpDesc::Dump(_))
    }

    fn ring_wqebbs(&self) -> usize {
        1 << self.ring_log2
    }

    fn transport(&self) -> TransportKind {
        match self.target {
            TargetDesc::Rc => TransportKind::Rc,
            _ => TransportKind::Dc,
        }
    }

    /// (opcode byte, opcode modifier) from the opcode table (facts sheet 1.3).
    fn opcode(&self) -> (u8, u8) {
        match &self.op {
            OpDesc::Nop => (0x00, 0),
            OpDesc::Dump(_) => (0x23, 0),
            OpDesc::Write { imm: None, .. } => (0x08, 0),
            OpDesc::Write { imm: Some(_), .. } => (0x09, 0),
            OpDesc::Read { .. } => (0x10, 0),
            OpDesc::Atomic { op, .. } => match op {
                AtomicOp::CompareSwap { .. } => (0x11, 0),
                AtomicOp::FetchAdd { .. } => (0x12, 0),
                AtomicOp::MaskedCompareSwap { width, .. } => (0x14, width_opmod(*width)),
                AtomicOp::MaskedFetchAdd { width, .. } => (0x15, width_opmod(*width)),
            },
        }
    }

    fn inline_len(&self) -> usize {
        match &self.op {
            OpDesc::Write {
                data: DataDesc::Inline(p),
                ..
            } => p.len(),
            _ => 0,
        }
    }

    /// DS from the recipe table (facts sheet 1.10): control, target, remote address,
    /// operation segments, data.
    fn ds(&self) -> usize {
        let target = if self.addressed() {
            match &self.target {
                TargetDesc::Rc => 0,
                TargetDesc::Compact(_) => 1,
                TargetDesc::Full(_) => 3,
                TargetDesc::Raw(raw) => raw.len() / 16,
            }
        } else {
            0
        };
        let body = match &self.op {
            OpDesc::Nop => 0,
            OpDesc::Dump(_) => 1,
            OpDesc::Write { data, .. } | OpDesc::Read { data, .. } => 1 + data_ds(data),
            OpDesc::Atomic { op, .. } => {
                let atomic = match op {
                    AtomicOp::MaskedCompareSwap {
                        width: AtomicWidth::Eight,
                        ..
                    } => 2,
                    _ => 1,
                };
                1 + atomic + 1
            }
        };
        1 + target + body
    }

    /// The error of encoding the DC target, if any.
    fn target_error(&self) -> Option<WqeError> {
        match &self.target {
            TargetDesc::Rc | TargetDesc::Raw(_) => None,
            TargetDesc::Compact(av) => qpn_error(av.dct)
                .or_else(|| range_error("sl", av.sl.into(), 0xf))
                .or_else(|| range_error("static_rate", av.static_rate.into(), 0xf))
                .or_else(|| range_error("source_path_bits", av.source_path_bits.into(), 0x7f)),
            TargetDesc::Full(av) => qpn_error(av.dct).or_else(|| match &av.link {
                LinkAddress::InfiniBand {
                    sl,
                    static_rate,
                    source_path_bits,
                    grh,
                    ..
                } => range_error("sl", (*sl).into(), 0xf)
                    .or_else(|| range_error("static_rate", (*static_rate).into(), 0xf))
                    .or_else(|| range_error("source_path_bits", (*source_path_bits).into(), 0x7f))
                    .or_else(|| {
                        grh.and_then(|g| range_error("flow_label", g.flow_label.into(), 0xf_ffff))
                    }),
                LinkAddress::Roce {
                    sl,
                    static_rate,
                    grh,
                    ..
                } => range_error("sl", (*sl).into(), 0x7)
                    .or_else(|| range_error("static_rate", (*static_rate).into(), 0xf))
                    .or_else(|| range_error("flow_label", grh.flow_label.into(), 0xf_ffff)),
            }),
        }
    }

    /// The error `build()` must return, if any.
    fn build_error(&self) -> Option<WqeError> {
        let dc = !matches!(self.target, TargetDesc::Rc);
        if self.stream_id != 0 && !(dc && self.addressed()) {
            return Some(WqeError::InvalidCombination { what: "" });
        }
        let data_error = |data: &DataDesc| match data {
            DataDesc::Empty => None,
            DataDesc::Sges(s) if s.is_empty() => Some(WqeError::InvalidCombination { what: "" }),
            DataDesc::Sges(s) if s.len() > MAX_GATHER => Some(WqeError::FieldOutOfRange {
                field: "scatter/gather entries",
                value: s.len() as u64,
                max: MAX_GATHER as u64,
            }),
            DataDesc::Sges(s) => {
                let total: u64 = s.iter().map(|s| u64::from(s.len())).sum();
                (total > MAX_TRANSFER).then_some(WqeError::TransferTooLong {
                    len: total,
                    max: MAX_TRANSFER,
                })
            }
            DataDesc::Inline(p) => {
                (p.len() > FORMAT_MAX_INLINE).then_some(WqeError::InlineTooLong {
                    len: p.len(),
                    max: FORMAT_MAX_INLINE,
                })
            }
        };
        let op_error = match &self.op {
            OpDesc::Nop | OpDesc::Dump(_) => None,
            OpDesc::Write { data, .. } => data_error(data),
            OpDesc::Read {
                data: DataDesc::Inline(_),
                ..
            } => Some(WqeError::InvalidCombination { what: "" }),
            OpDesc::Read { data, .. } => data_error(data),
            OpDesc::Atomic { remote, op, .. } => atomic_error(remote, op),
        };
        if op_error.is_some() {
            return op_error;
        }
        // A raw target must be the form it claims: bit 31 of dqp_dct set exactly on the
        // full form, bits 30:24 clear.
        if let (TargetDesc::Raw(raw), true) = (&self.target, self.addressed()) {
            let dqp_dct = u32::from_be_bytes([raw[8], raw[9], raw[10], raw[11]]);
            if (dqp_dct >> 31 == 1) != (raw.len() == 48) {
                return Some(WqeError::InvalidCombination { what: "" });
            }
            if dqp_dct & 0x7f00_0000 != 0 {
                return Some(WqeError::FieldOutOfRange {
                    field: "dqp_dct bits 30:24",
                    value: (dqp_dct & 0x7f00_0000).into(),
                    max: 0,
                });
            }
        }
        let ds = self.ds();
        (ds > 63).then_some(WqeError::TooManyOctowords { ds, max: 63 })
    }

    /// The error `SendRing::write` must return for a built WQE, if any.
    fn write_error(&self) -> Option<WqeError> {
        if self.inline_len() > self.limits.max_inline {
            return Some(WqeError::InlineTooLong {
                len: self.inline_len(),
                max: self.limits.max_inline,
            });
        }
        let wqebbs = self.ds().div_ceil(4) as u32;
        if wqebbs > self.limits.max_wqebbs {
            return Some(WqeError::WqeTooLarge {
                wqebbs,
                max: self.limits.max_wqebbs,
            });
        }
        let ring = self.ring_wqebbs() as u32;
        (wqebbs > ring).then_some(WqeError::RingTooSmall {
            ring_wqebbs: ring,
            wqe_wqebbs: wqebbs,
        })
    }
}

fn width_opmod(width: AtomicWidth) -> u8 {
    match width {
        AtomicWidth::Four => 0x08,
        AtomicWidth::Eight => 0x09,
    }
}

fn data_ds(data: &DataDesc) -> usize {
    match data {
        DataDesc::Empty => 0,
        DataDesc::Sges(s) => s.len(),
        DataDesc::Inline(p) if p.is_empty() => 0,
        DataDesc::Inline(p) => (4 + p.len()).div_ceil(16),
    }
}

fn qpn_error(value: u32) -> Option<WqeError> {
    (value > 0xff_ffff).then_some(WqeError::QpnOutOfRange {
        value,
        max: 0xff_ffff,
    })
}

fn range_error(field: &'static str, value: u64, max: u64) -> Option<WqeError> {
    (value > max).then_some(WqeError::FieldOutOfRange { field, value, max })
}

fn atomic_error(remote: &RemoteAddress, op: &AtomicOp) -> Option<WqeError> {
    let (opcode, align) = match op {
        AtomicOp::CompareSwap { .. } => (Opcode::AtomicCompareSwap, 8),
        AtomicOp::FetchAdd { .. } => (Opcode::AtomicFetchAdd, 8),
        AtomicOp::MaskedCompareSwap { width, .. } => {
            (Opcode::AtomicMaskedCompareSwap, width_bytes(*width))
        }
        AtomicOp::MaskedFetchAdd { width, .. } => {
            (Opcode::AtomicMaskedFetchAdd, width_bytes(*width))
        }
    };
    if remote.addr % align != 0 {
        return Some(WqeError::MisalignedAtomic {
            opcode,
            addr: remote.addr,
            align,
        });
    }
    let operands: &[(&'static str, u64)] = match *op {
        AtomicOp::MaskedCompareSwap {
            width: AtomicWidth::Four,
            swap,
            compare,
            swap_mask,
            compare_mask,
        } => &[
            ("swap", swap),
            ("compare", compare),
            ("swap_mask", swap_mask),
            ("compare_mask", compare_mask),
        ],
        AtomicOp::MaskedFetchAdd {
            width: AtomicWidth::Four,
            add,
            field_boundary,
        } => &[("add", add), ("field_boundary", field_boundary)],
        _ => &[],
    };
    operands
        .iter()
        .find(|(_, v)| *v > u64::from(u32::MAX))
        .map(|&(what, value)| WqeError::OperandTooWide {
            what,
            value,
            max: u64::from(u32::MAX),
        })
}

fn width_bytes(width: AtomicWidth) -> u64 {
    match width {
        AtomicWidth::Four => 4,
        AtomicWidth::Eight => 8,
    }
}

/// Errors compare exactly, except the free-text reason of `InvalidCombination`.
fn same_error(actual: &WqeError, expected: &WqeError) -> bool {
    match (actual, expected) {
        (WqeError::InvalidCombination { .. }, WqeError::InvalidCombination { .. }) => true,
        _ => actual == expected,
    }
}

// ---------------------------------------------------------------------------------------
// The reference encoding (facts sheet sections 1.1 to 1.8), independent of src/.

fn flags_byte(flags: &ControlFlags) -> u8 {
    let fence = match flags.fence {
        FenceMode::None => 0,
        FenceMode::InitiatorSmall => 1,
        FenceMode::Fence => 2,
        FenceMode::StrongOrdering => 3,
        FenceMode::SmallAndFence => 4,
    };
    let completion = match flags.completion {
        CompletionMode::OnError => 0,
        CompletionMode::OnFirstError => 1,
        CompletionMode::Always => 2,
        CompletionMode::AlwaysWithEvent => 3,
    };
    let solicited = match flags.solicited {
        Solicited::No => 0,
        Solicited::Yes => 1,
    };
    fence << 5 | completion << 2 | solicited << 1
}

fn reference_target(target: &TargetDesc) -> Vec<u8> {
    let mut b = Vec::new();
    match target {
        TargetDesc::Rc => {}
        TargetDesc::Raw(raw) => b.extend(raw),
        TargetDesc::Compact(av) => {
            b.extend(av.dc_key.to_be_bytes());
            b.extend(av.dct.to_be_bytes());
            b.push(av.static_rate << 4 | av.sl);
            b.push(u8::from(av.force_loopback) << 7 | av.source_path_bits);
            b.extend(av.lid.to_be_bytes());
        }
        TargetDesc::Full(av) => {
            b.extend(av.dc_key.to_be_bytes());
            b.extend((0x8000_0000 | av.dct).to_be_bytes());
            let grh_part = |b: &mut Vec<u8>, g: &Grh, present: u32| {
                b.push(g.traffic_class);
                b.push(g.hop_limit);
                b.extend(
                    (present << 30 | u32::from(g.sgid_index) << 20 | g.flow_label).to_be_bytes(),
                );
                b.extend(g.dgid);
            };
            match &av.link {
                LinkAddress::InfiniBand {
                    lid,
                    sl,
                    static_rate,
                    source_path_bits,
                    force_loopback,
                    grh,
                } => {
                    b.push(static_rate << 4 | sl);
                    b.push(u8::from(*force_loopback) << 7 | source_path_bits);
                    b.extend(lid.to_be_bytes());
                    b.extend([0; 4]);
                    b.extend([0; 6]);
                    match grh {
                        Some(g) => grh_part(&mut b, g, 1),
                        None => b.extend([0; 2 + 4 + 16]),
                    }
                }
                LinkAddress::Roce {
                    udp_source_port,
                    sl,
                    static_rate,
                    mac,
                    grh,
                } => {
                    b.push(static_rate << 4 | sl << 1);
                    b.push(0);
                    b.extend(udp_source_port.to_be_bytes());
                    b.extend([0; 4]);
                    b.extend(mac);
                    grh_part(&mut b, grh, 0);
                }
            }
        }
    }
    b
}

fn data_pointer(b: &mut Vec<u8>, len: u32, lkey: u32, addr: u64) {
    b.extend(len.to_be_bytes());
    b.extend(lkey.to_be_bytes());
    b.extend(addr.to_be_bytes());
}

fn remote_segment(b: &mut Vec<u8>, remote: &RemoteAddress) {
    b.extend(remote.addr.to_be_bytes());
    b.extend(remote.rkey.0.to_be_bytes());
    b.extend([0; 4]);
}

fn reference_data(b: &mut Vec<u8>, data: &DataDesc) {
    match data {
        DataDesc::Empty => {}
        DataDesc::Sges(sges) => {
            for s in sges {
                data_pointer(b, s.len(), s.lkey().0, s.addr());
            }
        }
        DataDesc::Inline(p) if p.is_empty() => {}
        DataDesc::Inline(p) => {
            b.extend((p.len() as u32 | 0x8000_0000).to_be_bytes());
            b.extend(p);
            while b.len() % 16 != 0 {
                b.push(0);
            }
        }
    }
}

/// The exact `ds * 16` bytes of the case's WQE.
fn reference_wqe(c: &Case) -> Vec<u8> {
    let (opcode, opmod) = c.opcode();
    let mut b = Vec::new();
    b.push(opmod);
    b.extend(c.index.to_be_bytes());
    b.push(opcode);
    b.extend((c.qpn << 8 | c.ds() as u32).to_be_bytes());
    b.push(0);
    b.extend(c.stream_id.to_be_bytes());
    b.push(flags_byte(&c.flags));
    let imm = match c.op {
        OpDesc::Write { imm: Some(imm), .. } => imm,
        _ => 0,
    };
    b.extend(imm.to_be_bytes());
    if c.addressed() {
        b.extend(reference_target(&c.target));
    }
    match &c.op {
        OpDesc::Nop => {}
        OpDesc::Dump(s) => data_pointer(&mut b, s.len(), s.lkey().0, s.addr()),
        OpDesc::Write { remote, data, .. } | OpDesc::Read { remote, data } => {
            remote_segment(&mut b, remote);
            reference_data(&mut b, data);
        }
        OpDesc::Atomic { remote, result, op } => {
            remote_segment(&mut b, remote);
            let operand_bytes = match *op {
                AtomicOp::CompareSwap { compare, swap } => {
                    b.extend(swap.to_be_bytes());
                    b.extend(compare.to_be_bytes());
                    8
                }
                AtomicOp::FetchAdd { add } => {
                    b.extend(add.to_be_bytes());
                    b.extend([0; 8]);
                    8
                }
                AtomicOp::MaskedCompareSwap {
                    width: AtomicWidth::Four,
                    swap,
                    compare,
                    swap_mask,
                    compare_mask,
                } => {
                    for v in [swap, compare, swap_mask, compare_mask] {
                        b.extend((v as u32).to_be_bytes());
                    }
                    4
                }
                AtomicOp::MaskedCompareSwap {
                    width: AtomicWidth::Eight,
                    swap,
                    compare,
                    swap_mask,
                    compare_mask,
                } => {
                    for v in [swap, compare, swap_mask, compare_mask] {
                        b.extend(v.to_be_bytes());
                    }
                    8
                }
                AtomicOp::MaskedFetchAdd {
                    width: AtomicWidth::Four,
                    add,
                    field_boundary,
                } => {
                    b.extend((add as u32).to_be_bytes());
                    b.extend((field_boundary as u32).to_be_bytes());
                    b.extend([0; 8]);
                    4
                }
                AtomicOp::MaskedFetchAdd {
                    width: AtomicWidth::Eight,
                    add,
                    field_boundary,
                } => {
                    b.extend(add.to_be_bytes());
                    b.extend(field_boundary.to_be_bytes());
                    8
                }
            };
            data_pointer(&mut b, operand_bytes, result.lkey.0, result.addr);
        }
    }
    b
}

// ---------------------------------------------------------------------------------------
// Running a case.

fn any_target(c: &Case) -> Result<Option<AnyDcTarget>, WqeError> {
    Ok(match &c.target {
        TargetDesc::Rc => None,
        TargetDesc::Compact(av) => Some(av.encode()?.into()),
        TargetDesc::Full(av) => Some(av.encode()?.into()),
        TargetDesc::Raw(raw) if raw.len() == 16 => Some(AnyDcTarget::Compact(
            CompactAddressVectorSegment::read_from_bytes(raw).expect("16 bytes"),
        )),
        TargetDesc::Raw(raw) => Some(AnyDcTarget::Full(
            AddressVectorSegment::read_from_bytes(raw).expect("48 bytes"),
        )),
    })
}

fn any_data(data: &DataDesc) -> AnyData<'_> {
    match data {
        DataDesc::Empty => AnyData::Empty,
        DataDesc::Sges(s) => AnyData::Sges(s),
        DataDesc::Inline(p) => AnyData::Inline(p),
    }
}

fn any_wqe(c: &Case, target: Option<AnyDcTarget>) -> AnyWqe<'_> {
    let op = match &c.op {
        OpDesc::Nop => AnyOperation::Nop,
        OpDesc::Dump(s) => AnyOperation::Dump(*s),
        OpDesc::Write { remote, imm, data } => AnyOperation::Write {
            remote: *remote,
            imm: *imm,
            data: any_data(data),
        },
        OpDesc::Read { remote, data } => AnyOperation::Read {
            remote: *remote,
            data: any_data(data),
        },
        OpDesc::Atomic { remote, result, op } => AnyOperation::Atomic {
            remote: *remote,
            result: *result,
            op: *op,
        },
    };
    AnyWqe {
        target,
        flags: c.flags,
        stream_id: c.stream_id,
        op,
    }
}

/// Runs one case and checks everything; returns which outcome it had, for the tallies.
fn run_case(c: &Case) -> Result<&'static str, TestCaseError> {
    // The target.
    let target = any_target(c);
    match (&target, c.target_error()) {
        (Err(e), Some(x)) => {
            prop_assert_eq!(e, &x);
            return Ok("target error");
        }
        (Ok(_), None) => {}
        (got, expected) => {
            return Err(TestCaseError::fail(format!(
                "target: got {got:?}, expected {expected:?}"
            )))
        }
    }
    let target = target.expect("checked");

    // Build.
    let any = any_wqe(c, target);
    let built = any.build();
    let wqe = match (built, c.build_error()) {
        (Err(e), Some(x)) => {
            prop_assert!(same_error(&e, &x), "build: got {:?}, expected {:?}", e, x);
            return Ok("build error");
        }
        (Ok(w), None) => w,
        (got, expected) => {
            return Err(TestCaseError::fail(format!(
                "build: got {got:?}, expected {expected:?}"
            )))
        }
    };
    let ds = c.ds();
    let wqebbs = ds.div_ceil(4);
    prop_assert_eq!(usize::from(wqe.ds()), ds);
    prop_assert_eq!(wqe.wqebbs() as usize, wqebbs);
    prop_assert_eq!(wqe.opcode().byte(), c.opcode().0);
    prop_assert_eq!(wqe.inline_len(), c.inline_len());

    // The queue number.
    let qpn = match (Qpn::new(c.qpn), qpn_error(c.qpn)) {
        (Err(e), Some(x)) => {
            prop_assert_eq!(e, x);
            return Ok("qpn error");
        }
        (Ok(q), None) => q,
        (got, expected) => {
            return Err(TestCaseError::fail(format!(
                "qpn: got {got:?}, expected {expected:?}"
            )))
        }
    };

    // Write into a ring pre-filled with the case's byte.
    let ring_wqebbs = c.ring_wqebbs();
    let ring_len = ring_wqebbs * 64;
    let mut memory = vec![c.fill; ring_len];
    let mut ring = SendRing::new(&mut memory, c.limits).expect("valid ring");
    prop_assert_eq!(ring.size().wqebbs() as usize, ring_wqebbs);
    let written = ring.write(WqeIndex(c.index), qpn, &wqe);
    match (written, c.write_error()) {
        (Err(e), Some(x)) => {
            prop_assert_eq!(e, x);
            prop_assert!(
                memory.iter().all(|&b| b == c.fill),
                "a failed write changed the ring"
            );
            return Ok("write error");
        }
        (Ok(n), None) => prop_assert_eq!(n as usize, wqebbs),
        (got, expected) => {
            return Err(TestCaseError::fail(format!(
                "write: got {got:?}, expected {expected:?}"
            )))
        }
    }

    // The bytes: exactly the reference encoding, wrapping at the ring's end.
    let slot = usize::from(c.index) & (ring_wqebbs - 1);
    let start = slot * 64;
    let reference = reference_wqe(c);
    prop_assert_eq!(reference.len(), ds * 16);
    let wqe_bytes: Vec<u8> = (0..ds * 16)
        .map(|k| memory[(start + k) % ring_len])
        .collect();
    prop_assert_eq!(
        &wqe_bytes,
        &reference,
        "WQE bytes differ from the layout tables"
    );

    // Outside the WQE's blocks, nothing changed.
    for (offset, &byte) in memory.iter().enumerate() {
        let block = offset / 64;
        let inside = (block + ring_wqebbs - slot) % ring_wqebbs < wqebbs;
        if !inside {
            prop_assert_eq!(byte, c.fill, "byte {} outside the WQE changed", offset);
        }
    }

    // Parse it back.
    let parsed = parse_wqe(&memory, WqeIndex(c.index), c.transport());
    let parsed = match parsed {
        Ok(p) => p,
        Err(e) => return Err(TestCaseError::fail(format!("parse failed: {e:?}"))),
    };
    prop_assert_eq!(parsed.differs_from(&any), None);
    prop_assert_eq!(parsed.index, WqeIndex(c.index));
    prop_assert_eq!(parsed.qpn, c.qpn);
    prop_assert_eq!(usize::from(parsed.ds), ds);
    prop_assert_eq!(parsed.wqebbs() as usize, wqebbs);
    prop_assert_eq!(parsed.opcode.byte(), c.opcode().0);
    prop_assert_eq!(parsed.opmod, c.opcode().1);
    prop_assert_eq!(parsed.control.wqe_index(), c.index);
    prop_assert_eq!(parsed.control.qpn(), c.qpn);
    prop_assert_eq!(usize::from(parsed.control.ds()), ds);
    Ok(if slot + wqebbs > ring_wqebbs {
        "written, wrapping"
    } else {
        "written"
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 6000,
        max_shrink_iters: 4096,
        ..ProptestConfig::default()
    })]

    #[test]
    fn build_write_parse_round_trips(c in case()) {
        run_case(&c)?;
    }
}

/// The strategy reaches every outcome, including WQEs that wrap past the ring's end, in
/// a fixed-seed run (so a regression in the generator does not silently thin the test).
#[test]
fn the_generator_reaches_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    use std::collections::BTreeMap;

    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let strategy = case();
    let mut tally: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut shapes: BTreeMap<(u8, u8, &'static str), usize> = BTreeMap::new();
    for _ in 0..3000 {
        let c = strategy.new_tree(&mut runner).expect("a case").current();
        let outcome = run_case(&c).unwrap_or_else(|e| panic!("{e}: {c:?}"));
        *tally.entry(outcome).or_default() += 1;
        if outcome.starts_with("written") {
            let transport = match c.target {
                TargetDesc::Rc => "rc",
                TargetDesc::Compact(_) => "dc-compact",
                TargetDesc::Full(_) => "dc-full",
                TargetDesc::Raw(_) => "dc-raw",
            };
            *shapes
                .entry((c.opcode().0, c.opcode().1, transport))
                .or_default() += 1;
        }
    }
    println!("outcomes: {tally:?}");
    println!("written shapes: {}", shapes.len());
    for outcome in [
        "target error",
        "build error",
        "qpn error",
        "write error",
        "written",
        "written, wrapping",
    ] {
        assert!(
            tally.get(outcome).copied().unwrap_or(0) > 0,
            "no case ended in {outcome}: {tally:?}"
        );
    }
    // Every opcode/opmod on RC and on DC, each form of address vector.
    for transport in ["rc", "dc-compact", "dc-full"] {
        for (opcode, opmod) in [
            (0x08, 0),
            (0x09, 0),
            (0x10, 0),
            (0x11, 0),
            (0x12, 0),
            (0x14, 8),
            (0x14, 9),
            (0x15, 8),
            (0x15, 9),
            (0x00, 0),
            (0x23, 0),
        ] {
            assert!(
                shapes.contains_key(&(opcode, opmod, transport)),
                "never wrote opcode {opcode:#x}/{opmod} on {transport}: {shapes:?}"
            );
        }
    }
}

/// Every shape at every slot of a small ring and at indices around 0xffff: deterministic
/// coverage of each way a WQE can straddle the ring's end.
#[test]
fn every_shape_at_every_slot_around_the_index_wrap() {
    let sges: Vec<Sge> = (0..MAX_GATHER as u64)
        .map(|i| Sge::new(0x1000 * i + 3, 100 + i as u32, LKey(0x500 + i as u32)).unwrap())
        .collect();
    let payloads: Vec<Vec<u8>> = [0usize, 1, 12, 13, 28, 29, 44, 45, 60, 61, 200]
        .iter()
        .map(|&n| (0..n).map(|i| (i * 7 + 1) as u8).collect())
        .collect();
    let compact = CompactAddressVector {
        dct: 0xab_cdef,
        dc_key: 0x5623_ceaf,
        lid: 0x1234,
        sl: 5,
        static_rate: 3,
        source_path_bits: 0x11,
        force_loopback: true,
    };
    let full = FullAddressVector {
        dct: 0x12_3456,
        dc_key: 0x0102_0304_0506_0708,
        link: LinkAddress::Roce {
            udp_source_port: 0xc000,
            sl: 3,
            static_rate: 7,
            mac: [1, 2, 3, 4, 5, 6],
            grh: Grh {
                sgid_index: 3,
                flow_label: 0xa_bcde,
                traffic_class: 0x20,
                hop_limit: 64,
                dgid: [0xfe; 16],
            },
        },
    };
    let remote = RemoteAddress::new(0xdead_beef_0000_1000, RKey(0x77));
    let result = LocalBuffer::new(0x4000, LKey(0x88));
    let mut ops = vec![OpDesc::Nop, OpDesc::Dump(sges[0])];
    for imm in [None, Some(0xcafe_f00d)] {
        ops.push(OpDesc::Write {
            remote,
            imm,
            data: DataDesc::Empty,
        });
        for n in 1..=MAX_GATHER {
            ops.push(OpDesc::Write {
                remote,
                imm,
                data: DataDesc::Sges(sges[..n].to_vec()),
            });
        }
        for p in &payloads {
            ops.push(OpDesc::Write {
                remote,
                imm,
                data: DataDesc::Inline(p.clone()),
            });
        }
    }
    ops.push(OpDesc::Read {
        remote,
        data: DataDesc::Empty,
    });
    for n in 1..=MAX_GATHER {
        ops.push(OpDesc::Read {
            remote,
            data: DataDesc::Sges(sges[..n].to_vec()),
        });
    }
    for op in [
        AtomicOp::CompareSwap {
            compare: 1,
            swap: 2,
        },
        AtomicOp::FetchAdd { add: 3 },
        AtomicOp::MaskedCompareSwap {
            width: AtomicWidth::Four,
            swap: 4,
            compare: 5,
            swap_mask: 6,
            compare_mask: 7,
        },
        AtomicOp::MaskedCompareSwap {
            width: AtomicWidth::Eight,
            swap: 8,
            compare: 9,
            swap_mask: 10,
            compare_mask: 11,
        },
        AtomicOp::MaskedFetchAdd {
            width: AtomicWidth::Four,
            add: 12,
            field_boundary: 13,
        },
        AtomicOp::MaskedFetchAdd {
            width: AtomicWidth::Eight,
            add: 14,
            field_boundary: 15,
        },
    ] {
        ops.push(OpDesc::Atomic {
            remote: RemoteAddress::new(0x8000, RKey(0x99)),
            result,
            op,
        });
    }
    let targets = [
        TargetDesc::Rc,
        TargetDesc::Compact(compact),
        TargetDesc::Full(full),
    ];
    let mut written = 0;
    for target in &targets {
        for op in &ops {
            for ring_log2 in [0u8, 1, 2, 3] {
                let ring = 1u32 << ring_log2;
                let indices = (0..2 * ring).chain((0..2 * ring).map(|k| 0xffffu32 - k));
                for index in indices {
                    let c = Case {
                        target: target.clone(),
                        flags: ControlFlags {
                            fence: FenceMode::Fence,
                            completion: CompletionMode::Always,
                            solicited: Solicited::Yes,
                        },
                        stream_id: if matches!(target, TargetDesc::Rc)
                            || matches!(op, OpDesc::Nop | OpDesc::Dump(_))
                        {
                            0
                        } else {
                            0x0102
                        },
                        op: op.clone(),
                        ring_log2,
                        index: index as u16,
                        qpn: 0xfe_dcba,
                        limits: WqeLimits::FORMAT,
                        fill: 0xa5,
                    };
                    match run_case(&c) {
                        Ok(outcome) => written += usize::from(outcome.starts_with("written")),
                        Err(e) => panic!("{e}: {c:?}"),
                    }
                }
            }
        }
    }
    assert!(written > 3000, "only {written} WQEs written");
}

// ---------------------------------------------------------------------------------------
// Typed builders against the erased form.

fn write_spec<S: WqeSpec>(built: Result<Wqe<S>, WqeError>, c: &Case) -> Result<Vec<u8>, WqeError> {
    let wqe = built?;
    let mut memory = vec![c.fill; c.ring_wqebbs() * 64];
    let mut ring = SendRing::new(&mut memory, c.limits)?;
    ring.write(WqeIndex(c.index), Qpn::new(c.qpn)?, &wqe)?;
    Ok(memory)
}

/// Sets the case's flags through the builder's setters (`signaled()` for `Always` on odd
/// indices, to exercise both spellings).
macro_rules! with_flags {
    ($b:expr, $c:expr) => {{
        let b = $b.fence($c.flags.fence);
        let b = if $c.flags.completion == CompletionMode::Always && $c.index % 2 == 1 {
            b.signaled()
        } else {
            b.completion($c.flags.completion)
        };
        if $c.flags.solicited == Solicited::Yes {
            b.solicited()
        } else {
            b
        }
    }};
}

macro_rules! finish {
    ($b:expr, $c:expr, dc) => {{
        let b = with_flags!($b, $c);
        let b = if $c.stream_id != 0 {
            b.dci_stream($c.stream_id)
        } else {
            b
        };
        write_spec(b.build(), $c)
    }};
    ($b:expr, $c:expr, rc) => {{
        let b = with_flags!($b, $c);
        write_spec(b.build(), $c)
    }};
}

macro_rules! with_data {
    ($b:expr, $data:expr, $c:expr, $dc:tt, $allow_inline:tt, [$($n:literal)*]) => {
        match $data {
            DataDesc::Empty if $c.index % 3 == 0 => finish!($b.any_data(AnyData::Empty), $c, $dc),
            DataDesc::Empty => finish!($b.without_data(), $c, $dc),
            DataDesc::Sges(s) if $c.index % 3 == 0 => finish!($b.any_data(AnyData::Sges(s)), $c, $dc),
            DataDesc::Sges(s) if s.len() == 1 => finish!($b.sge(s[0]), $c, $dc),
            DataDesc::Sges(s) => match s.len() {
                $( $n => finish!($b.gather::<$n>(<[Sge; $n]>::try_from(&s[..]).unwrap()), $c, $dc), )*
                _ => finish!($b.any_data(AnyData::Sges(s)), $c, $dc),
            },
            DataDesc::Inline(p) => with_data!(@inline $b, p, $c, $dc, $allow_inline),
        }
    };
    (@inline $b:expr, $p:expr, $c:expr, $dc:tt, yes) => {
        if $c.index % 3 == 0 {
            finish!($b.any_data(AnyData::Inline($p)), $c, $dc)
        } else {
            finish!($b.inline($p), $c, $dc)
        }
    };
    (@inline $b:expr, $p:expr, $c:expr, $dc:tt, no) => {
        finish!($b.any_data(AnyData::Inline($p)), $c, $dc)
    };
}

/// The typed builders for destination `$to` of transport kind `$dc` (`dc` when the
/// builders take a DCI stream id, `rc` otherwise).
macro_rules! typed {
    ($to:expr, $c:expr, $dc:tt) => {{
        let to = $to;
        match &$c.op {
            OpDesc::Nop => finish!(nop_for(to), $c, rc),
            OpDesc::Dump(s) => finish!(dump_for(to, *s), $c, rc),
            OpDesc::Write { imm, data, .. } => {
                let b = RdmaWrite::new(to);
                let b = match imm {
                    Some(i) => b.immediate(*i),
                    None => b,
                };
                with_data!(b, data, $c, $dc, yes, [2 3 4 5 6 7 8 9 10 11 12 13 14 15 16])
            }
            OpDesc::Read { data, .. } => {
                let b = RdmaRead::new(to);
                with_data!(b, data, $c, $dc, no, [2 3 4 5 6 7 8 9 10 11 12 13 14 15 16])
            }
            OpDesc::Atomic { result, op, .. } => {
                let r = *result;
                let fits = |v: u64| u32::try_from(v).ok();
                match *op {
                    _ if $c.index % 5 == 0 => finish!(Atomic::any(to, r, *op), $c, $dc),
                    AtomicOp::CompareSwap { compare, swap } => {
                        finish!(Atomic::compare_swap(to, r, compare, swap), $c, $dc)
                    }
                    AtomicOp::FetchAdd { add } => finish!(Atomic::fetch_add(to, r, add), $c, $dc),
                    AtomicOp::MaskedCompareSwap {
                        width: AtomicWidth::Four,
                        swap,
                        compare,
                        swap_mask,
                        compare_mask,
                    } => match (fits(swap), fits(compare), fits(swap_mask), fits(compare_mask)) {
                        (Some(s), Some(c), Some(sm), Some(cm)) => finish!(
                            Atomic::masked_compare_swap_32(to, r, s, c, sm, cm),
                            $c,
                            $dc
                        ),
                        _ => finish!(Atomic::any(to, r, *op), $c, $dc),
                    },
                    AtomicOp::MaskedCompareSwap {
                        width: AtomicWidth::Eight,
                        swap,
                        compare,
                        swap_mask,
                        compare_mask,
                    } => finish!(
                        Atomic::masked_compare_swap_64(to, r, swap, compare, swap_mask, compare_mask),
                        $c,
                        $dc
                    ),
                    AtomicOp::MaskedFetchAdd {
                        width: AtomicWidth::Four,
                        add,
                        field_boundary,
                    } => match (fits(add), fits(field_boundary)) {
                        (Some(a), Some(f)) => {
                            finish!(Atomic::masked_fetch_add_32(to, r, a, f), $c, $dc)
                        }
                        _ => finish!(Atomic::any(to, r, *op), $c, $dc),
                    },
                    AtomicOp::MaskedFetchAdd {
                        width: AtomicWidth::Eight,
                        add,
                        field_boundary,
                    } => finish!(Atomic::masked_fetch_add_64(to, r, add, field_boundary), $c, $dc),
                }
            }
        }
    }};
}

/// `Nop::<T>::new()` with `T` inferred from a destination value.
fn nop_for<X: Destination>(_: X) -> Nop<X::Transport> {
    Nop::new()
}

/// `Dump::<T>::new()` with `T` inferred from a destination value.
fn dump_for<X: Destination>(_: X, sge: Sge) -> Dump<X::Transport> {
    Dump::new(sge)
}

fn remote_of(c: &Case) -> RemoteAddress {
    match &c.op {
        OpDesc::Write { remote, .. }
        | OpDesc::Read { remote, .. }
        | OpDesc::Atomic { remote, .. } => *remote,
        OpDesc::Nop | OpDesc::Dump(_) => RemoteAddress::new(0, RKey(0)),
    }
}

/// The bytes (or error) of the typed builders for the case.
fn typed_bytes(c: &Case, via_any_address: bool) -> Result<Vec<u8>, WqeError> {
    let remote = remote_of(c);
    if via_any_address {
        let to = AnyAddress {
            target: any_target(c)?,
            remote,
        };
        return typed!(to, c, rc);
    }
    match &c.target {
        TargetDesc::Rc => typed!(remote, c, rc),
        TargetDesc::Compact(av) => typed!(av.encode()?.at(remote), c, dc),
        TargetDesc::Full(av) => typed!(av.encode()?.at(remote), c, dc),
        // Raw segments exist only in the erased form.
        TargetDesc::Raw(_) => typed_bytes(c, true),
    }
}

fn erased_bytes(c: &Case) -> Result<Vec<u8>, WqeError> {
    let target = any_target(c)?;
    write_spec(any_wqe(c, target).build(), c)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn typed_builders_write_the_same_bytes_as_any_wqe(
        mut c in case(),
        via_any_address in any::<bool>(),
    ) {
        let via_any_address = via_any_address || matches!(c.target, TargetDesc::Raw(_));
        // What only the erased form can say: a stream id where there is no DC target (the
        // typed builders rule it out at compile time), or through an erased destination.
        let addressed_dc = c.addressed() && !matches!(c.target, TargetDesc::Rc);
        if !addressed_dc || via_any_address {
            c.stream_id = 0;
        }
        let typed = typed_bytes(&c, via_any_address);
        let erased = erased_bytes(&c);
        match (&typed, &erased) {
            (Ok(a), Ok(b)) => prop_assert!(a == b, "typed and erased bytes differ"),
            (Err(a), Err(b)) => prop_assert!(same_error(a, b), "typed {:?}, erased {:?}", a, b),
            _ => prop_assert!(false, "typed {:?}, erased {:?}", typed.as_ref().err(), erased.as_ref().err()),
        }
    }
}
