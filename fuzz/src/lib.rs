//! What the fuzz targets share with the seed-corpus generator: the input formats, the
//! `Arbitrary` mirror of a WQE description, and the checks each target makes. A failed
//! check panics: that is the fuzzer's finding.
//!
//! Input formats:
//! - `parse_wqe`: byte 0 bit 0 = transport (0 RC, 1 DC), bytes 1..3 = WQE index
//!   (little-endian), the rest = the ring. The ring is the largest power-of-two number of
//!   64-byte blocks the rest holds (at least one block: short input is zero-padded).
//! - `roundtrip`: a [`WqeCase`] decoded with `arbitrary` (as `fuzz_target!` does, with
//!   `arbitrary_take_rest`).
//! - `parse_cqe`: the first 64 bytes (zero-padded).

use arbitrary::Arbitrary;
use ibgda::cq::{parse_cqe, Completion, CompletionStatus, CQE_BYTES};
use ibgda::wqe::segment::{AddressVectorSegment, CompactAddressVectorSegment};
use ibgda::wqe::*;
use zerocopy::FromBytes;

// ---------------------------------------------------------------------------------------
// parse_wqe

/// Bytes of the header before the ring in a `parse_wqe` input.
pub const WQE_INPUT_HEADER: usize = 3;

/// A `parse_wqe` input: transport, index, ring.
pub fn wqe_input(transport: TransportKind, index: u16, ring: &[u8]) -> Vec<u8> {
    let mut v = vec![u8::from(transport == TransportKind::Dc)];
    v.extend(index.to_le_bytes());
    v.extend(ring);
    v
}

/// Splits a `parse_wqe` input into transport, index and ring (`None` if shorter than the
/// header).
pub fn split_wqe_input(data: &[u8]) -> Option<(TransportKind, WqeIndex, Vec<u8>)> {
    if data.len() < WQE_INPUT_HEADER {
        return None;
    }
    let transport = if data[0] & 1 == 0 {
        TransportKind::Rc
    } else {
        TransportKind::Dc
    };
    let index = WqeIndex(u16::from_le_bytes([data[1], data[2]]));
    let rest = &data[WQE_INPUT_HEADER..];
    let blocks = (rest.len() / WQEBB_BYTES).clamp(1, RingSize::MAX_WQEBBS);
    let blocks = 1usize << blocks.ilog2();
    let mut ring = vec![0u8; blocks * WQEBB_BYTES];
    let n = rest.len().min(ring.len());
    ring[..n].copy_from_slice(&rest[..n]);
    Some((transport, index, ring))
}

/// Whether `inner` lies within `outer` in memory.
fn within(outer: &[u8], inner: &[u8]) -> bool {
    let start = outer.as_ptr() as usize;
    let p = inner.as_ptr() as usize;
    inner.is_empty() || (p >= start && p + inner.len() <= start + outer.len())
}

/// Checks a successful parse against the ring it came from: the control segment is the
/// slot's bytes, DS fits the ring, the segments add up to DS, and every borrowed view
/// (inline payload, data segments) lies in the ring at its octoword.
pub fn check_parsed(ring: &[u8], index: WqeIndex, transport: TransportKind, p: &ParsedWqe<'_>) {
    let len = ring.len();
    let blocks = len / WQEBB_BYTES;
    let slot = usize::from(index.0) & (blocks - 1);
    let at = |octoword: usize, byte: usize| (slot * WQEBB_BYTES + octoword * 16 + byte) % len;
    let ctrl = &ring[slot * WQEBB_BYTES..slot * WQEBB_BYTES + 16];
    assert_eq!(p.index, index);
    assert_eq!(u16::from_be_bytes([ctrl[1], ctrl[2]]), index.0, "index");
    assert_eq!(p.opcode.byte(), ctrl[3], "opcode");
    assert!(p.opcode.is_built_here(), "{:?} parsed", p.opcode);
    assert_eq!(
        p.qpn,
        u32::from_be_bytes([0, ctrl[4], ctrl[5], ctrl[6]]),
        "qpn"
    );
    assert_eq!(p.ds, ctrl[7] & 0x3f, "ds");
    assert_eq!(p.flags.byte(), ctrl[11], "fm_ce_se");

    let ds = usize::from(p.ds);
    assert!(
        ds >= 1 && ds <= len / 16,
        "DS {ds} in a ring of {} octowords",
        len / 16
    );
    assert_eq!(p.wqebbs() as usize, ds.div_ceil(4));
    assert!(p.wqebbs() as usize <= blocks);

    let addressed = !matches!(p.op, ParsedOp::Nop | ParsedOp::Dump { .. });
    assert_eq!(
        p.target.is_some(),
        addressed && transport == TransportKind::Dc,
        "target presence"
    );
    let target_ds = p.target.as_ref().map_or(0, AnyDcTarget::ds);
    match p.op {
        ParsedOp::Nop => {}
        ParsedOp::Dump { .. } => assert_eq!(ds, 2),
        ParsedOp::Write { data, .. } | ParsedOp::Read { data, .. } => {
            let first = 1 + target_ds + 1;
            match data {
                ParsedData::Empty => assert_eq!(ds, first),
                ParsedData::Pointers(segs) => {
                    assert_eq!(ds, first + segs.len());
                    for (k, seg) in segs.iter().enumerate() {
                        let addr = seg as *const _ as usize;
                        assert_eq!(addr, ring.as_ptr() as usize + at(first + k, 0));
                        assert_eq!(seg.byte_count.get() >> 31, 0);
                    }
                }
                ParsedData::Inline(payload) => {
                    assert!(matches!(p.op, ParsedOp::Write { .. }), "inline READ");
                    let n = payload.len();
                    assert!(n >= 1);
                    assert_eq!(ds, first + (4 + n).div_ceil(16), "inline length vs DS");
                    let (head, tail) = payload.parts();
                    assert!(
                        within(ring, head) && within(ring, tail),
                        "inline view outside"
                    );
                    if !head.is_empty() {
                        assert_eq!(
                            head.as_ptr() as usize,
                            ring.as_ptr() as usize + at(first, 4)
                        );
                    }
                    for (k, b) in head.iter().chain(tail).enumerate() {
                        assert_eq!(*b, ring[at(first, 4 + k)]);
                    }
                }
            }
        }
        ParsedOp::Atomic { op, result, .. } => {
            let atomic_ds = op.octowords();
            assert_eq!(ds, 1 + target_ds + 1 + atomic_ds + 1, "atomic DS");
            assert_eq!(result.byte_count.get(), op.operand_bytes());
            assert_eq!(op.opcode(), p.opcode);
            assert_eq!(op.opmod(), p.opmod);
        }
    }
}

/// The `parse_wqe` target: never panics; on `Ok`, [`check_parsed`].
pub fn fuzz_parse_wqe(data: &[u8]) {
    let Some((transport, index, ring)) = split_wqe_input(data) else {
        return;
    };
    match parse_wqe(&ring, index, transport) {
        Ok(p) => {
            let _ = p.to_string();
            check_parsed(&ring, index, transport, &p);
        }
        Err(e) => {
            assert!(!matches!(e, ParseError::InvalidRing { .. }), "{e:?}");
            let _ = e.to_string();
        }
    }
}

// ---------------------------------------------------------------------------------------
// roundtrip: the Arbitrary mirror of an erased WQE description.

/// A WQE description, a ring and where to write it.
#[derive(Arbitrary, Clone, Debug)]
pub struct WqeCase {
    /// The DC target (or none).
    pub target: TargetDesc,
    /// Control flags.
    pub flags: FlagsDesc,
    /// DCI stream id.
    pub stream_id: u16,
    /// The operation.
    pub op: OpDesc,
    /// log2 of the ring's WQEBBs, modulo 11 (1 to 1024 blocks).
    pub ring_log2: u8,
    /// The WQE index.
    pub index: u16,
    /// The queue number (anything: over 24 bits is a typed error).
    pub qpn: u32,
    /// Queue limits, or the format's.
    pub limits: Option<LimitsDesc>,
    /// The byte the ring is filled with before writing.
    pub fill: u8,
}

/// `fm_ce_se` fields.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct FlagsDesc {
    /// Fence mode, modulo 5.
    pub fence: u8,
    /// Completion mode (2 bits).
    pub completion: u8,
    /// Solicited event.
    pub solicited: bool,
}

/// Queue limits.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct LimitsDesc {
    /// Largest inline payload.
    pub max_inline: u16,
    /// Largest WQE in WQEBBs.
    pub max_wqebbs: u8,
}

/// A DC target: from the validated encoders, from a hardware AV, or raw segment bytes
/// (what the erased `AnyDcTarget` lets a caller say).
#[derive(Arbitrary, Clone, Debug)]
pub enum TargetDesc {
    /// RC: no target.
    Rc,
    /// `CompactAddressVector::encode`.
    Compact {
        /// DCT number.
        dct: u32,
        /// Access key.
        dc_key: u64,
        /// LID.
        lid: u16,
        /// Service level.
        sl: u8,
        /// Static rate.
        static_rate: u8,
        /// Path bits.
        source_path_bits: u8,
        /// Loopback.
        force_loopback: bool,
    },
    /// `FullAddressVector::encode`, InfiniBand.
    InfiniBand {
        /// DCT number.
        dct: u32,
        /// Access key.
        dc_key: u64,
        /// LID.
        lid: u16,
        /// Service level.
        sl: u8,
        /// Static rate.
        static_rate: u8,
        /// Path bits.
        source_path_bits: u8,
        /// Loopback.
        force_loopback: bool,
        /// GRH.
        grh: Option<GrhDesc>,
    },
    /// `FullAddressVector::encode`, RoCE.
    Roce {
        /// DCT number.
        dct: u32,
        /// Access key.
        dc_key: u64,
        /// UDP source port.
        udp_source_port: u16,
        /// Service level.
        sl: u8,
        /// Static rate.
        static_rate: u8,
        /// MAC.
        mac: [u8; 6],
        /// GRH.
        grh: GrhDesc,
    },
    /// `DcTarget::from_hardware_av` of 48 arbitrary bytes.
    Hardware {
        /// The AV bytes.
        av: [u8; 48],
        /// DCT number.
        dct: u32,
        /// Access key.
        dc_key: u64,
    },
    /// `AnyDcTarget::Compact` of raw bytes.
    RawCompact([u8; 16]),
    /// `AnyDcTarget::Full` of raw bytes.
    RawFull([u8; 48]),
}

/// GRH fields.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct GrhDesc {
    /// SGID index.
    pub sgid_index: u8,
    /// Flow label.
    pub flow_label: u32,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Destination GID.
    pub dgid: [u8; 16],
}

/// A scatter/gather entry (any length: 0 and 2^31 and up are typed errors).
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct SgeDesc {
    /// Address.
    pub addr: u64,
    /// Length.
    pub len: u32,
    /// Key.
    pub lkey: u32,
}

/// Remote memory.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct RemoteDesc {
    /// Address.
    pub addr: u64,
    /// Key.
    pub rkey: u32,
}

/// WRITE and READ data.
#[derive(Arbitrary, Clone, Debug)]
pub enum DataDesc {
    /// None.
    Empty,
    /// Entries.
    Sges(Vec<SgeDesc>),
    /// Inline bytes.
    Inline(Vec<u8>),
}

/// The operation.
#[derive(Arbitrary, Clone, Debug)]
pub enum OpDesc {
    /// NOP.
    Nop,
    /// DUMP.
    Dump(SgeDesc),
    /// WRITE (with immediate).
    Write {
        /// Remote memory.
        remote: RemoteDesc,
        /// Immediate.
        imm: Option<u32>,
        /// Data.
        data: DataDesc,
    },
    /// READ.
    Read {
        /// Remote memory.
        remote: RemoteDesc,
        /// Data.
        data: DataDesc,
    },
    /// An atomic.
    Atomic {
        /// Remote operand.
        remote: RemoteDesc,
        /// Result buffer address.
        result_addr: u64,
        /// Result buffer key.
        result_lkey: u32,
        /// The operation.
        op: AtomicDesc,
    },
}

/// An atomic operation.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum AtomicDesc {
    /// 8-byte compare-swap.
    CompareSwap {
        /// Compare.
        compare: u64,
        /// Swap.
        swap: u64,
    },
    /// 8-byte fetch-add.
    FetchAdd {
        /// Addend.
        add: u64,
    },
    /// Masked compare-swap.
    MaskedCompareSwap {
        /// 8 bytes (else 4).
        eight: bool,
        /// Swap.
        swap: u64,
        /// Compare.
        compare: u64,
        /// Swap mask.
        swap_mask: u64,
        /// Compare mask.
        compare_mask: u64,
    },
    /// Masked fetch-add.
    MaskedFetchAdd {
        /// 8 bytes (else 4).
        eight: bool,
        /// Addend.
        add: u64,
        /// Carry boundaries.
        field_boundary: u64,
    },
}

fn width(eight: bool) -> AtomicWidth {
    if eight {
        AtomicWidth::Eight
    } else {
        AtomicWidth::Four
    }
}

impl AtomicDesc {
    /// The erased operation.
    pub fn op(&self) -> AtomicOp {
        match *self {
            Self::CompareSwap { compare, swap } => AtomicOp::CompareSwap { compare, swap },
            Self::FetchAdd { add } => AtomicOp::FetchAdd { add },
            Self::MaskedCompareSwap {
                eight,
                swap,
                compare,
                swap_mask,
                compare_mask,
            } => AtomicOp::MaskedCompareSwap {
                width: width(eight),
                swap,
                compare,
                swap_mask,
                compare_mask,
            },
            Self::MaskedFetchAdd {
                eight,
                add,
                field_boundary,
            } => AtomicOp::MaskedFetchAdd {
                width: width(eight),
                add,
                field_boundary,
            },
        }
    }
}

impl FlagsDesc {
    /// The control flags.
    pub fn flags(&self) -> ControlFlags {
        ControlFlags {
            fence: FenceMode::from_bits(self.fence % 5).expect("0..=4"),
            completion: CompletionMode::from_bits(self.completion),
            solicited: if self.solicited {
                Solicited::Yes
            } else {
                Solicited::No
            },
        }
    }
}

fn grh(g: &GrhDesc) -> Grh {
    Grh {
        sgid_index: g.sgid_index,
        flow_label: g.flow_label,
        traffic_class: g.traffic_class,
        hop_limit: g.hop_limit,
        dgid: g.dgid,
    }
}

impl TargetDesc {
    /// The erased target, or the typed error of encoding it.
    pub fn target(&self) -> Result<Option<AnyDcTarget>, WqeError> {
        Ok(Some(match *self {
            Self::Rc => return Ok(None),
            Self::Compact {
                dct,
                dc_key,
                lid,
                sl,
                static_rate,
                source_path_bits,
                force_loopback,
            } => CompactAddressVector {
                dct,
                dc_key,
                lid,
                sl,
                static_rate,
                source_path_bits,
                force_loopback,
            }
            .encode()?
            .into(),
            Self::InfiniBand {
                dct,
                dc_key,
                lid,
                sl,
                static_rate,
                source_path_bits,
                force_loopback,
                grh: ref g,
            } => FullAddressVector {
                dct,
                dc_key,
                link: LinkAddress::InfiniBand {
                    lid,
                    sl,
                    static_rate,
                    source_path_bits,
                    force_loopback,
                    grh: g.as_ref().map(grh),
                },
            }
            .encode()?
            .into(),
            Self::Roce {
                dct,
                dc_key,
                udp_source_port,
                sl,
                static_rate,
                mac,
                grh: ref g,
            } => FullAddressVector {
                dct,
                dc_key,
                link: LinkAddress::Roce {
                    udp_source_port,
                    sl,
                    static_rate,
                    mac,
                    grh: grh(g),
                },
            }
            .encode()?
            .into(),
            Self::Hardware { av, dct, dc_key } => {
                let av = AddressVectorSegment::read_from_bytes(&av).expect("48 bytes");
                DcTarget::from_hardware_av(av, Qpn::new(dct)?, dc_key).into()
            }
            Self::RawCompact(bytes) => AnyDcTarget::Compact(
                CompactAddressVectorSegment::read_from_bytes(&bytes).expect("16 bytes"),
            ),
            Self::RawFull(bytes) => {
                AnyDcTarget::Full(AddressVectorSegment::read_from_bytes(&bytes).expect("48 bytes"))
            }
        }))
    }
}

fn sge(s: &SgeDesc) -> Result<Sge, WqeError> {
    Sge::new(s.addr, s.len, LKey(s.lkey))
}

fn remote(r: &RemoteDesc) -> RemoteAddress {
    RemoteAddress::new(r.addr, RKey(r.rkey))
}

/// The owned parts an [`AnyWqe`] borrows.
pub struct Materialized {
    target: Option<AnyDcTarget>,
    sges: Vec<Sge>,
}

impl WqeCase {
    /// The ring's size in WQEBBs.
    pub fn ring_wqebbs(&self) -> usize {
        1 << (self.ring_log2 % 11)
    }

    /// The queue limits.
    pub fn limits(&self) -> WqeLimits {
        self.limits.map_or(WqeLimits::FORMAT, |l| WqeLimits {
            max_inline: l.max_inline.into(),
            max_wqebbs: l.max_wqebbs.into(),
        })
    }

    /// The target and entries, or the typed error of making them.
    pub fn materialize(&self) -> Result<Materialized, WqeError> {
        let target = self.target.target()?;
        let sges = match &self.op {
            OpDesc::Dump(s) => vec![sge(s)?],
            OpDesc::Write {
                data: DataDesc::Sges(s),
                ..
            }
            | OpDesc::Read {
                data: DataDesc::Sges(s),
                ..
            } => s.iter().map(sge).collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        Ok(Materialized { target, sges })
    }

    /// The erased description.
    pub fn any<'a>(&'a self, m: &'a Materialized) -> AnyWqe<'a> {
        let data = |d: &'a DataDesc| match d {
            DataDesc::Empty => AnyData::Empty,
            DataDesc::Sges(_) => AnyData::Sges(&m.sges),
            DataDesc::Inline(p) => AnyData::Inline(p),
        };
        let op = match &self.op {
            OpDesc::Nop => AnyOperation::Nop,
            OpDesc::Dump(_) => AnyOperation::Dump(m.sges[0]),
            OpDesc::Write {
                remote: r,
                imm,
                data: d,
            } => AnyOperation::Write {
                remote: remote(r),
                imm: *imm,
                data: data(d),
            },
            OpDesc::Read { remote: r, data: d } => AnyOperation::Read {
                remote: remote(r),
                data: data(d),
            },
            OpDesc::Atomic {
                remote: r,
                result_addr,
                result_lkey,
                op,
            } => AnyOperation::Atomic {
                remote: remote(r),
                result: LocalBuffer::new(*result_addr, LKey(*result_lkey)),
                op: op.op(),
            },
        };
        AnyWqe {
            target: m.target,
            flags: self.flags.flags(),
            stream_id: self.stream_id,
            op,
        }
    }
}

/// What happened to a round-trip case (for the corpus generator's naming).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The description, the queue number or the write was refused with a typed error.
    Refused,
    /// Written and parsed back: the opcode, DS and whether it wrapped past the ring's end.
    RoundTripped {
        /// The opcode.
        opcode: Opcode,
        /// The DS.
        ds: u8,
        /// Whether the WQE's blocks wrap past the ring's end.
        wraps: bool,
    },
}

/// The `roundtrip` target: build, write, parse; the parse must say what was built.
pub fn fuzz_roundtrip(case: &WqeCase) -> Outcome {
    let Ok(m) = case.materialize() else {
        return Outcome::Refused;
    };
    let any = case.any(&m);
    let Ok(wqe) = any.build() else {
        return Outcome::Refused;
    };
    let Ok(qpn) = Qpn::new(case.qpn) else {
        return Outcome::Refused;
    };
    let blocks = case.ring_wqebbs();
    let mut memory = vec![case.fill; blocks * WQEBB_BYTES];
    let mut ring = SendRing::new(&mut memory, case.limits()).expect("valid ring");
    let index = WqeIndex(case.index);
    let written = ring.write(index, qpn, &wqe);
    let Ok(used) = written else {
        assert!(
            memory.iter().all(|&b| b == case.fill),
            "a failed write changed the ring"
        );
        return Outcome::Refused;
    };
    let ds = usize::from(wqe.ds());
    assert_eq!(used as usize, ds.div_ceil(4), "WQEBBs of DS {ds}");
    assert_eq!(wqe.wqebbs(), used);

    let slot = usize::from(case.index) & (blocks - 1);
    // The bytes outside the WQE's blocks (which may wrap past the ring's end) are one or
    // two slices; comparing them whole is what keeps this target fast on large rings.
    let (start, end) = (slot * WQEBB_BYTES, (slot + used as usize) * WQEBB_BYTES);
    let outside: [&[u8]; 2] = if end <= memory.len() {
        [&memory[..start], &memory[end..]]
    } else {
        [&memory[end - memory.len()..start], &[]]
    };
    for part in outside {
        assert!(
            part.iter().all(|&b| b == case.fill),
            "a byte outside the WQE changed"
        );
    }

    let transport = if m.target.is_some() {
        TransportKind::Dc
    } else {
        TransportKind::Rc
    };
    let parsed = parse_wqe(&memory, index, transport)
        .unwrap_or_else(|e| panic!("a written WQE does not parse: {e}\n{case:?}"));
    check_parsed(&memory, index, transport, &parsed);
    assert_eq!(
        parsed.differs_from(&any),
        None,
        "parsed WQE differs from what was built\n{parsed}\n{case:?}"
    );
    assert_eq!(parsed.qpn, case.qpn);
    assert_eq!(usize::from(parsed.ds), ds);
    Outcome::RoundTripped {
        opcode: parsed.opcode,
        ds: parsed.ds,
        wraps: slot + used as usize > blocks,
    }
}

// ---------------------------------------------------------------------------------------
// parse_cqe

/// The first 64 bytes of `data`, zero-padded.
pub fn cqe_input(data: &[u8]) -> [u8; CQE_BYTES] {
    let mut raw = [0u8; CQE_BYTES];
    let n = data.len().min(CQE_BYTES);
    raw[..n].copy_from_slice(&data[..n]);
    raw
}

/// The `parse_cqe` target: never panics; an `Ok` completion's verbs view is consistent
/// (status `Success` iff not an error completion; errors on opcodes 13 and 14 only).
pub fn fuzz_parse_cqe(data: &[u8]) {
    let raw = cqe_input(data);
    let opcode = raw[63] >> 4;
    match parse_cqe(&raw) {
        Ok(c) => {
            let wc = c.work_completion();
            let is_error = matches!(c, Completion::Error(_));
            assert_eq!(
                is_error,
                opcode == 13 || opcode == 14,
                "opcode {opcode}: {c:?}"
            );
            assert_eq!(wc.status == CompletionStatus::Success, !is_error, "{c:?}");
            assert_eq!(wc.status, c.status());
            assert_eq!(wc.qp_num, c.qpn());
            assert_eq!(c.qpn(), u32::from_be_bytes([0, raw[57], raw[58], raw[59]]));
            assert_eq!(c.wqe_counter(), u16::from_be_bytes([raw[60], raw[61]]));
            if let Completion::Error(e) = c {
                assert_eq!(e.syndrome_byte, raw[55]);
                assert_eq!(wc.vendor_err, raw[54]);
                let _ = e.to_string();
            }
        }
        Err(e) => {
            assert!(opcode != 13 && opcode != 14, "error CQE refused: {e:?}");
            let _ = e.to_string();
        }
    }
}

// ---------------------------------------------------------------------------------------
// softnic

pub mod softnic;
pub use softnic::fuzz_softnic;
