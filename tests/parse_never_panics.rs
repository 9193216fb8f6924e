//! The parsers never panic, whatever the bytes, and what they return is consistent with the
//! bytes they were given.
//!
//! `parse_wqe`: arbitrary rings (valid power-of-two sizes and invalid lengths) at arbitrary
//! indices for both transports, with three kinds of content: random bytes, random bytes
//! under a plausible control segment (so the segment parsers are reached), and real WQEs
//! with a few bytes changed. On `Ok`, the parsed WQE must describe bytes inside the ring:
//! DS within the ring, segment accounting equal to DS, inline payloads and data segments
//! that are views into the ring at the right offsets.
//!
//! `parse_cqe`: arbitrary 64-byte entries. Every requester or responder error CQE (opcode
//! 13 or 14) is a `Completion::Error` whose verbs status is rdma-core's
//! `mlx5_handle_error_cqe` mapping, written out here from the facts sheet (section 5.2)
//! and the `ibv_wc_status` numbering.

use ibgda::cq::*;
use ibgda::wqe::segment::DataSegment;
use ibgda::wqe::*;
use proptest::prelude::*;

/// A small deterministic generator (xorshift64*), so that large rings cost one `u64` of
/// proptest input rather than one value tree per byte.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
    fn fill(&mut self, bytes: &mut [u8]) {
        for b in bytes {
            *b = self.byte();
        }
    }
}

const BUILT_HERE: [u8; 9] = [0x00, 0x08, 0x09, 0x10, 0x11, 0x12, 0x14, 0x15, 0x23];

#[derive(Clone, Copy, Debug)]
enum Content {
    Random,
    PlausibleControl,
    MutatedWqe,
}

#[derive(Clone, Debug)]
struct RingCase {
    /// `Ok(log2 of WQEBBs)` for a valid ring, `Err(length in bytes)` for any length.
    size: Result<u8, usize>,
    seed: u64,
    index: u16,
    dc: bool,
    content: Content,
}

fn ring_case() -> impl Strategy<Value = RingCase> {
    (
        prop_oneof![
            12 => (0u8..=6).prop_map(Ok),
            1 => (7u8..=9).prop_map(Ok),
            1 => (0usize..=2100).prop_map(Err),
            1 => (0usize..=40).prop_map(|k| Err(k * 64)),
        ],
        any::<u64>(),
        any::<u16>(),
        any::<bool>(),
        prop_oneof![
            Just(Content::Random),
            Just(Content::PlausibleControl),
            Just(Content::MutatedWqe),
        ],
    )
        .prop_map(|(size, seed, index, dc, content)| RingCase {
            size,
            seed,
            index,
            dc,
            content,
        })
}

fn is_valid_ring(len: usize) -> bool {
    len % 64 == 0 && (1..=1 << 15).contains(&(len / 64)) && (len / 64).is_power_of_two()
}

/// A random valid-looking WQE description for the mutation mode, written with the
/// builders at `index` into `ring`.
fn write_random_wqe(rng: &mut Rng, ring: &mut [u8], index: u16, dc: bool) {
    let sges: Vec<Sge> = (0..1 + rng.below(MAX_GATHER as u64))
        .map(|_| {
            Sge::new(
                rng.next(),
                1 + rng.below(1 << 20) as u32,
                LKey(rng.next() as u32),
            )
            .unwrap()
        })
        .collect();
    let payload: Vec<u8> = (0..rng.below(80)).map(|_| rng.byte()).collect();
    let target: Option<AnyDcTarget> = match (dc, rng.below(2)) {
        (false, _) => None,
        (true, 0) => Some(
            CompactAddressVector {
                dct: rng.next() as u32 & 0xff_ffff,
                dc_key: rng.next(),
                lid: rng.next() as u16,
                ..Default::default()
            }
            .encode()
            .unwrap()
            .into(),
        ),
        (true, _) => Some(
            FullAddressVector {
                dct: rng.next() as u32 & 0xff_ffff,
                dc_key: rng.next(),
                link: LinkAddress::InfiniBand {
                    lid: rng.next() as u16,
                    sl: rng.below(16) as u8,
                    static_rate: 0,
                    source_path_bits: 0,
                    force_loopback: false,
                    grh: None,
                },
            }
            .encode()
            .unwrap()
            .into(),
        ),
    };
    let remote = RemoteAddress::new(rng.next() & !7, RKey(rng.next() as u32));
    let result = LocalBuffer::new(rng.next(), LKey(rng.next() as u32));
    let width = if rng.below(2) == 0 {
        AtomicWidth::Four
    } else {
        AtomicWidth::Eight
    };
    let small = |rng: &mut Rng| match width {
        AtomicWidth::Four => u64::from(rng.next() as u32),
        AtomicWidth::Eight => rng.next(),
    };
    let op = match rng.below(8) {
        0 => AnyOperation::Nop,
        1 => AnyOperation::Dump(sges[0]),
        2 => AnyOperation::Write {
            remote,
            imm: (rng.below(2) == 0).then(|| rng.next() as u32),
            data: if rng.below(4) == 0 {
                AnyData::Empty
            } else {
                AnyData::Sges(&sges)
            },
        },
        3 => AnyOperation::Write {
            remote,
            imm: (rng.below(2) == 0).then(|| rng.next() as u32),
            data: AnyData::Inline(&payload),
        },
        4 => AnyOperation::Read {
            remote,
            data: if rng.below(4) == 0 {
                AnyData::Empty
            } else {
                AnyData::Sges(&sges)
            },
        },
        5 => AnyOperation::Atomic {
            remote,
            result,
            op: if rng.below(2) == 0 {
                AtomicOp::CompareSwap {
                    compare: rng.next(),
                    swap: rng.next(),
                }
            } else {
                AtomicOp::FetchAdd { add: rng.next() }
            },
        },
        6 => AnyOperation::Atomic {
            remote,
            result,
            op: AtomicOp::MaskedCompareSwap {
                width,
                swap: small(rng),
                compare: small(rng),
                swap_mask: small(rng),
                compare_mask: small(rng),
            },
        },
        _ => AnyOperation::Atomic {
            remote,
            result,
            op: AtomicOp::MaskedFetchAdd {
                width,
                add: small(rng),
                field_boundary: small(rng),
            },
        },
    };
    let wqe = AnyWqe {
        target,
        flags: ControlFlags::from_byte(0x48).unwrap(),
        stream_id: 0,
        op,
    }
    .build()
    .expect("valid description");
    let mut sq = SendRing::new(ring, WqeLimits::default()).expect("valid ring");
    // Too large for a small ring: the random bytes stay.
    let _ = sq.write(
        WqeIndex(index),
        Qpn::new(rng.next() as u32 & 0xff_ffff).unwrap(),
        &wqe,
    );
}

fn make_ring(c: &RingCase) -> Vec<u8> {
    let len = match c.size {
        Ok(log2) => 64usize << log2,
        Err(len) => len,
    };
    let mut rng = Rng::new(c.seed);
    let mut ring = vec![0u8; len];
    rng.fill(&mut ring);
    if !is_valid_ring(len) {
        return ring;
    }
    let slot = (usize::from(c.index) & (len / 64 - 1)) * 64;
    match c.content {
        Content::Random => {}
        Content::PlausibleControl => {
            let opcode = BUILT_HERE[rng.below(BUILT_HERE.len() as u64) as usize];
            let opmod = match (opcode, rng.below(8)) {
                (_, 0) => rng.byte(),
                (0x14 | 0x15, k) => 8 + (k as u8 & 1),
                _ => 0,
            };
            let max_ds = (len / 16).min(63) as u64;
            let ds = if rng.below(8) == 0 {
                rng.byte() & 0x3f
            } else {
                1 + rng.below(max_ds) as u8
            };
            let fm_ce_se = [0x00u8, 0x08, 0x48, 0x82, 0x2c][rng.below(5) as usize];
            ring[slot] = opmod;
            ring[slot + 1..slot + 3].copy_from_slice(&c.index.to_be_bytes());
            ring[slot + 3] = opcode;
            ring[slot + 7] = ds;
            ring[slot + 11] = fm_ce_se;
            // Data-segment headers with bit 31 clear (pointers) half of the time, and the
            // remote address reserved word zero, so later segment checks are reached.
            for k in 1..usize::from(ds) {
                let off = (slot + 16 * k) % len;
                if rng.below(2) == 0 {
                    ring[off] &= 0x7f;
                }
                if rng.below(2) == 0 {
                    ring[off + 12..off + 16].fill(0);
                }
                if rng.below(4) == 0 {
                    // An inline header whose length matches the remaining DS.
                    let remaining = usize::from(ds) - k;
                    let max_len = remaining * 16 - 4;
                    let min_len = max_len.saturating_sub(15).max(1);
                    let inline_len = min_len + rng.below((max_len - min_len + 1) as u64) as usize;
                    ring[off..off + 4]
                        .copy_from_slice(&(0x8000_0000 | inline_len as u32).to_be_bytes());
                }
            }
        }
        Content::MutatedWqe => {
            write_random_wqe(&mut rng, &mut ring, c.index, c.dc);
            for _ in 0..rng.below(4) {
                let off = (slot + rng.below(4 * 64) as usize) % len;
                ring[off] ^= 1 << rng.below(8);
            }
        }
    }
    ring
}

/// Whether `inner` lies within `outer` in memory.
fn within(outer: &[u8], inner: &[u8]) -> bool {
    let start = outer.as_ptr() as usize;
    let p = inner.as_ptr() as usize;
    inner.is_empty() || (p >= start && p + inner.len() <= start + outer.len())
}

fn check_ring_case(c: &RingCase) -> Result<bool, TestCaseError> {
    let ring = make_ring(c);
    let transport = if c.dc {
        TransportKind::Dc
    } else {
        TransportKind::Rc
    };
    let parsed = parse_wqe(&ring, WqeIndex(c.index), transport);
    if !is_valid_ring(ring.len()) {
        prop_assert_eq!(parsed, Err(ParseError::InvalidRing { len: ring.len() }));
        return Ok(false);
    }
    let p = match parsed {
        Err(e) => {
            let invalid = matches!(e, ParseError::InvalidRing { .. });
            prop_assert!(!invalid, "valid ring refused as invalid");
            let _ = e.to_string();
            return Ok(false);
        }
        Ok(p) => p,
    };
    let _ = p.to_string();
    let len = ring.len();
    let wqebbs = len / 64;
    let slot = usize::from(c.index) & (wqebbs - 1);
    let at = |octoword: usize, byte: usize| (slot * 64 + octoword * 16 + byte) % len;

    // The control segment is the ring's bytes at the slot.
    let ctrl = &ring[slot * 64..slot * 64 + 16];
    prop_assert_eq!(p.index, WqeIndex(c.index));
    prop_assert_eq!(u16::from_be_bytes([ctrl[1], ctrl[2]]), c.index);
    prop_assert_eq!(p.opcode.byte(), ctrl[3]);
    prop_assert!(BUILT_HERE.contains(&ctrl[3]));
    prop_assert_eq!(p.opmod, ctrl[0]);
    prop_assert_eq!(p.qpn, u32::from_be_bytes([0, ctrl[4], ctrl[5], ctrl[6]]));
    prop_assert_eq!(p.ds, ctrl[7] & 0x3f);
    prop_assert_eq!(ctrl[7] & 0xc0, 0);
    prop_assert_eq!(p.signature, ctrl[8]);
    prop_assert_eq!(p.stream_id, u16::from_be_bytes([ctrl[9], ctrl[10]]));
    prop_assert_eq!(p.flags.byte(), ctrl[11]);
    prop_assert_eq!(
        p.imm,
        u32::from_be_bytes([ctrl[12], ctrl[13], ctrl[14], ctrl[15]])
    );

    // DS within the ring.
    let ds = usize::from(p.ds);
    prop_assert!(
        ds >= 1 && ds <= len / 16,
        "DS {} in a ring of {} octowords",
        ds,
        len / 16
    );
    prop_assert_eq!(p.wqebbs() as usize, ds.div_ceil(4));
    prop_assert!(p.wqebbs() as usize <= wqebbs);

    // Opcode modifiers.
    match p.opcode {
        Opcode::AtomicMaskedCompareSwap | Opcode::AtomicMaskedFetchAdd => {
            prop_assert!(p.opmod == 8 || p.opmod == 9)
        }
        _ => prop_assert_eq!(p.opmod, 0),
    }

    // The target, and the octowords it takes.
    let addressed = !matches!(p.op, ParsedOp::Nop | ParsedOp::Dump { .. });
    prop_assert_eq!(p.target.is_some(), addressed && c.dc);
    let target_ds = match p.target {
        None => 0,
        Some(AnyDcTarget::Compact(av)) => {
            prop_assert_eq!(av.dqp_dct.get() >> 24, 0);
            1
        }
        Some(AnyDcTarget::Full(av)) => {
            prop_assert_eq!(av.dqp_dct.get() >> 24, 0x80);
            3
        }
    };

    // Segment accounting equals DS, and every view lies in the ring where it should.
    match p.op {
        ParsedOp::Nop => {}
        ParsedOp::Dump { local } => {
            prop_assert_eq!(ds, 2);
            prop_assert_eq!(local.byte_count.get() >> 31, 0);
        }
        ParsedOp::Write { data, .. } | ParsedOp::Read { data, .. } => {
            let first = 1 + target_ds + 1;
            match data {
                ParsedData::Empty => prop_assert_eq!(ds, first),
                ParsedData::Pointers(segs) => {
                    prop_assert_eq!(ds, first + segs.len());
                    prop_assert!(!segs.is_empty());
                    for (k, seg) in segs.iter().enumerate() {
                        let addr = seg as *const DataSegment as usize;
                        prop_assert_eq!(addr, ring.as_ptr() as usize + at(first + k, 0));
                        prop_assert_eq!(seg.byte_count.get() >> 31, 0);
                    }
                }
                ParsedData::Inline(payload) => {
                    let write = matches!(p.op, ParsedOp::Write { .. });
                    prop_assert!(write, "inline data on a READ");
                    let n = payload.len();
                    prop_assert!(n >= 1);
                    prop_assert_eq!(ds, first + (4 + n).div_ceil(16));
                    let header = at(first, 0);
                    let header = u32::from_be_bytes(ring[header..header + 4].try_into().unwrap());
                    prop_assert_eq!(header, 0x8000_0000 | n as u32);
                    let (head, tail) = payload.parts();
                    prop_assert!(within(&ring, head) && within(&ring, tail));
                    prop_assert_eq!(head.len() + tail.len(), n);
                    if !head.is_empty() {
                        prop_assert_eq!(
                            head.as_ptr() as usize,
                            ring.as_ptr() as usize + at(first, 4)
                        );
                    }
                    if !tail.is_empty() {
                        prop_assert_eq!(tail.as_ptr(), ring.as_ptr());
                    }
                    let bytes = payload.to_vec();
                    for (k, &b) in bytes.iter().enumerate() {
                        prop_assert_eq!(b, ring[at(first, 4 + k)]);
                    }
                    prop_assert!(payload.eq_bytes(&bytes));
                }
            }
        }
        ParsedOp::Atomic { op, result, .. } => {
            let atomic_ds = match op {
                AtomicOp::MaskedCompareSwap {
                    width: AtomicWidth::Eight,
                    ..
                } => 2,
                _ => 1,
            };
            prop_assert_eq!(ds, 1 + target_ds + 1 + atomic_ds + 1);
            prop_assert_eq!(result.byte_count.get(), op.operand_bytes());
            prop_assert_eq!(op.opcode(), p.opcode);
            prop_assert_eq!(op.opmod(), p.opmod);
        }
    }
    Ok(true)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24_000,
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    })]

    #[test]
    fn parse_wqe_never_panics_and_stays_in_the_ring(c in ring_case()) {
        check_ring_case(&c)?;
    }
}

/// Each kind of content reaches successful parses of every operation, so the property
/// above checks more than the early exits (fixed seed).
#[test]
fn the_ring_generator_reaches_deep_parses() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[3; 32]),
    );
    let strategy = ring_case();
    let mut ok = 0;
    let mut opcodes = std::collections::BTreeSet::new();
    for _ in 0..6000 {
        let c = strategy.new_tree(&mut runner).unwrap().current();
        if check_ring_case(&c).unwrap_or_else(|e| panic!("{e}: {c:?}")) {
            ok += 1;
            let ring = make_ring(&c);
            let kind = if c.dc {
                TransportKind::Dc
            } else {
                TransportKind::Rc
            };
            let p = parse_wqe(&ring, WqeIndex(c.index), kind).unwrap();
            let data = match p.op {
                ParsedOp::Write { data, .. } | ParsedOp::Read { data, .. } => match data {
                    ParsedData::Empty => 1,
                    ParsedData::Pointers(_) => 2,
                    ParsedData::Inline(_) => 3,
                },
                _ => 0,
            };
            opcodes.insert((p.opcode.byte(), data, c.dc));
        }
    }
    println!("{ok} of 6000 parsed; shapes {opcodes:?}");
    assert!(ok > 1000, "only {ok} parsed");
    for opcode in BUILT_HERE {
        assert!(
            opcodes.iter().any(|&(o, _, _)| o == opcode),
            "{opcode:#x} never parsed"
        );
    }
    for (opcode, data) in [(0x08, 2), (0x08, 3), (0x09, 3), (0x10, 2), (0x08, 1)] {
        for dc in [false, true] {
            assert!(
                opcodes.contains(&(opcode, data, dc)),
                "never parsed {opcode:#x} with data kind {data} (dc {dc})"
            );
        }
    }
}

/// Rings at the limits of the valid sizes, at indices around the wrap.
#[test]
fn parse_wqe_on_edge_sized_rings() {
    for len in [(1usize << 15) * 64, (1 << 16) * 64, (1 << 15) * 64 + 64] {
        let mut ring = vec![0u8; len];
        Rng::new(len as u64).fill(&mut ring);
        for index in [0u16, 1, 0x7fff, 0x8000, 0xffff] {
            for dc in [false, true] {
                let c = RingCase {
                    size: Err(len),
                    seed: 0,
                    index,
                    dc,
                    content: Content::Random,
                };
                let kind = if dc {
                    TransportKind::Dc
                } else {
                    TransportKind::Rc
                };
                let got = parse_wqe(&ring, WqeIndex(index), kind);
                if is_valid_ring(len) {
                    assert!(!matches!(got, Err(ParseError::InvalidRing { .. })), "{c:?}");
                } else {
                    assert_eq!(got, Err(ParseError::InvalidRing { len }));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// CQEs.

/// rdma-core's `mlx5_handle_error_cqe`: syndrome byte (facts sheet 5.2) to the numeric
/// `ibv_wc_status`; anything else is `IBV_WC_GENERAL_ERR` (21).
fn verbs_status_of_syndrome(syndrome: u8) -> u32 {
    match syndrome {
        0x01 => 1,  // LOCAL_LENGTH_ERR -> IBV_WC_LOC_LEN_ERR
        0x02 => 2,  // LOCAL_QP_OP_ERR -> IBV_WC_LOC_QP_OP_ERR
        0x04 => 4,  // LOCAL_PROT_ERR -> IBV_WC_LOC_PROT_ERR
        0x05 => 5,  // WR_FLUSH_ERR -> IBV_WC_WR_FLUSH_ERR
        0x06 => 6,  // MW_BIND_ERR -> IBV_WC_MW_BIND_ERR
        0x10 => 7,  // BAD_RESP_ERR -> IBV_WC_BAD_RESP_ERR
        0x11 => 8,  // LOCAL_ACCESS_ERR -> IBV_WC_LOC_ACCESS_ERR
        0x12 => 9,  // REMOTE_INVAL_REQ_ERR -> IBV_WC_REM_INV_REQ_ERR
        0x13 => 10, // REMOTE_ACCESS_ERR -> IBV_WC_REM_ACCESS_ERR
        0x14 => 11, // REMOTE_OP_ERR -> IBV_WC_REM_OP_ERR
        0x15 => 12, // TRANSPORT_RETRY_EXC_ERR -> IBV_WC_RETRY_EXC_ERR
        0x16 => 13, // RNR_RETRY_EXC_ERR -> IBV_WC_RNR_RETRY_EXC_ERR
        0x22 => 16, // REMOTE_ABORTED_ERR -> IBV_WC_REM_ABORT_ERR
        _ => 21,    // IBV_WC_GENERAL_ERR
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}

fn check_cqe(raw: &[u8; 64]) -> Result<(), TestCaseError> {
    let parsed = parse_cqe(raw);
    let opcode = raw[63] >> 4;
    let format = (raw[63] >> 2) & 3;
    let qpn = be32(&raw[56..]) & 0xff_ffff;
    let counter = u16::from_be_bytes([raw[60], raw[61]]);
    match opcode {
        13 | 14 => {
            let Ok(Completion::Error(e)) = parsed else {
                return Err(TestCaseError::fail(format!(
                    "opcode {opcode} gave {parsed:?}"
                )));
            };
            prop_assert_eq!(e.requester, opcode == 13);
            prop_assert_eq!(e.syndrome_byte, raw[55]);
            prop_assert_eq!(e.vendor_syndrome, raw[54]);
            prop_assert_eq!(e.hw_syndrome, raw[52]);
            prop_assert_eq!(e.hw_syndrome_type, raw[53]);
            prop_assert_eq!(e.send_opcode, raw[56]);
            prop_assert_eq!(e.qpn, qpn);
            prop_assert_eq!(e.wqe_counter, counter);
            prop_assert_eq!(e.status() as u32, verbs_status_of_syndrome(raw[55]));
            prop_assert_eq!(
                e.syndrome.is_some(),
                verbs_status_of_syndrome(raw[55]) != 21
            );
            let _ = e.to_string();
        }
        15 => prop_assert_eq!(parsed, Err(CqeError::Empty)),
        7..=11 => prop_assert_eq!(parsed, Err(CqeError::UnknownOpcode { opcode })),
        5 | 6 | 12 => {
            let unsupported = matches!(parsed, Err(CqeError::Unsupported { .. }));
            prop_assert!(unsupported, "opcode {} gave {:?}", opcode, parsed);
        }
        _ => match format {
            0 => match parsed {
                Ok(Completion::Requester(r)) => {
                    prop_assert_eq!(opcode, 0);
                    prop_assert_eq!(r.qpn, qpn);
                    prop_assert_eq!(r.wqe_counter, counter);
                    prop_assert_eq!(r.send_opcode, raw[56]);
                    prop_assert_eq!(r.byte_count, be32(&raw[44..]));
                }
                Ok(Completion::Responder(r)) => {
                    prop_assert!((1..=4).contains(&opcode));
                    prop_assert_eq!(r.qpn, qpn);
                    prop_assert_eq!(r.imm, be32(&raw[36..]));
                    prop_assert_eq!(r.byte_count, be32(&raw[44..]));
                }
                other => {
                    return Err(TestCaseError::fail(format!(
                        "opcode {opcode} format 0 gave {other:?}"
                    )))
                }
            },
            3 => prop_assert_eq!(parsed, Err(CqeError::Compressed)),
            f => prop_assert_eq!(parsed, Err(CqeError::ScatterToCqe { format: f })),
        },
    }
    if let Err(e) = parsed {
        let _ = e.to_string();
    }
    // The verbs view: success iff not an error completion.
    if let Ok(completion) = parsed {
        let wc = completion.work_completion();
        let is_error = matches!(completion, Completion::Error(_));
        prop_assert_eq!(wc.status == CompletionStatus::Success, !is_error);
        prop_assert_eq!(wc.status, completion.status());
        prop_assert_eq!(wc.qp_num, qpn);
        if is_error {
            prop_assert_eq!(wc.status as u32, verbs_status_of_syndrome(raw[55]));
            prop_assert_eq!(wc.vendor_err, raw[54]);
        } else {
            prop_assert_eq!(wc.vendor_err, 0);
        }
    }
    Ok(())
}

fn cqe_bytes() -> impl Strategy<Value = [u8; 64]> {
    (
        any::<[u8; 32]>(),
        any::<[u8; 32]>(),
        prop_oneof![3 => Just(None), 2 => (0u8..16).prop_map(Some)],
    )
        .prop_map(|(a, b, opcode)| {
            let mut raw = [0u8; 64];
            raw[..32].copy_from_slice(&a);
            raw[32..].copy_from_slice(&b);
            if let Some(op) = opcode {
                raw[63] = op << 4 | (raw[63] & 0x0f);
            }
            raw
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24_000, ..ProptestConfig::default() })]

    #[test]
    fn parse_cqe_never_panics_and_maps_errors_like_rdma_core(raw in cqe_bytes()) {
        check_cqe(&raw)?;
    }
}

/// Every syndrome byte on both error opcodes, with any format and owner bits.
#[test]
fn every_error_syndrome_maps_like_rdma_core() {
    let mut rng = Rng::new(0x5eed);
    for opcode in [13u8, 14] {
        for syndrome in 0..=u8::MAX {
            for low in [0u8, 0x01, 0x0c, 0x0f] {
                let mut raw = [0u8; 64];
                rng.fill(&mut raw);
                raw[55] = syndrome;
                raw[63] = opcode << 4 | low;
                check_cqe(&raw).unwrap_or_else(|e| panic!("{e}"));
                let Ok(Completion::Error(e)) = parse_cqe(&raw) else {
                    unreachable!()
                };
                assert_eq!(e.status() as u32, verbs_status_of_syndrome(syndrome));
            }
        }
    }
}
