//! Writes the committed seed corpus: real WQEs and CQEs, one file per shape, named by
//! shape, under `fuzz/corpus/<target>/`.
//!
//! - `parse_wqe`: rings holding WQEs written by the builders (every opcode, RC and both DC
//!   address-vector forms, WQEs that wrap past the ring's end and indices near 0xffff), in
//!   the target's input format (transport, index, ring).
//! - `roundtrip`: inputs that decode (as `fuzz_target!` decodes them) to descriptions that
//!   build, write and parse back, one per shape. `arbitrary` has no encoder, so they are
//!   found by a deterministic search over biased random bytes and checked by decoding.
//! - `parse_cqe`: requester, responder and error CQEs (every syndrome), and the entries a
//!   CQ holds before the NIC writes it.
//!
//! Run: `cargo run --release --example make_corpus` in `fuzz/`. The output is deterministic.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};
use ibgda::wqe::*;
use ibgda_fuzz::softnic::{Op, Place, Recipe, SoftNicCase};
use ibgda_fuzz::{
    fuzz_parse_cqe, fuzz_parse_wqe, fuzz_roundtrip, fuzz_softnic, wqe_input, Outcome, WqeCase,
};

fn corpus_dir(target: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    if dir.exists() {
        fs::remove_dir_all(&dir).expect("clear the old seeds");
    }
    fs::create_dir_all(&dir).expect("create the corpus directory");
    dir
}

fn save(dir: &Path, name: &str, bytes: &[u8]) {
    fs::write(dir.join(name), bytes).expect("write a seed");
}

// ---------------------------------------------------------------------------------------
// parse_wqe

fn sge(addr: u64, len: u32, lkey: u32) -> Sge {
    Sge::new(addr, len, LKey(lkey)).expect("valid entry")
}

/// Writes each WQE at consecutive indices from `first` into a ring of `blocks` blocks and
/// saves one seed per WQE (the ring read at that WQE's index).
fn save_ring<F>(
    dir: &Path,
    name: &str,
    transport: TransportKind,
    blocks: usize,
    first: u16,
    fill: F,
) where
    F: FnOnce(&mut SendRing<'_>, WqeIndex, Qpn) -> Vec<WqeIndex>,
{
    let mut memory = vec![0u8; blocks * WQEBB_BYTES];
    let indices = {
        let mut ring = SendRing::new(&mut memory, WqeLimits::default()).expect("ring");
        fill(
            &mut ring,
            WqeIndex(first),
            Qpn::new(0xab_cdef).expect("qpn"),
        )
    };
    for (k, index) in indices.iter().enumerate() {
        let input = wqe_input(transport, index.0, &memory);
        fuzz_parse_wqe(&input);
        parse_wqe(&memory, *index, transport).expect("a seed must parse");
        let name = if indices.len() == 1 {
            name.to_string()
        } else {
            format!("{name}-{k}")
        };
        save(dir, &name, &input);
    }
}

/// One WQE at `index` in a ring of `blocks` blocks.
fn one<S: WqeSpec>(
    dir: &Path,
    name: &str,
    transport: TransportKind,
    blocks: usize,
    index: u16,
    wqe: Result<Wqe<S>, WqeError>,
) {
    let wqe = wqe.unwrap_or_else(|e| panic!("{name}: {e}"));
    save_ring(dir, name, transport, blocks, index, |ring, at, qpn| {
        ring.write(at, qpn, &wqe).expect("fits");
        vec![at]
    });
}

fn parse_wqe_seeds() -> usize {
    use TransportKind::{Dc as DcKind, Rc as RcKind};
    let dir = corpus_dir("parse_wqe");
    let remote = RemoteAddress::new(0x7f00_0000_1000, RKey(0x1122_3344));
    let result = LocalBuffer::new(0x5000, LKey(0x55));
    let aligned = RemoteAddress::new(0x7f00_0000_2000, RKey(0x66));
    let sges: Vec<Sge> = (0..MAX_GATHER as u64)
        .map(|i| sge(0x10_0000 + i * 0x1000, 0x100 + i as u32, 0x20 + i as u32))
        .collect();
    let payload: Vec<u8> = (0..64u8).collect();
    let compact = CompactAddressVector {
        dct: 0x12_3456,
        dc_key: 0x5623_ceaf,
        lid: 0x17,
        sl: 3,
        static_rate: 0,
        source_path_bits: 0,
        force_loopback: false,
    }
    .encode()
    .expect("av");
    let full_ib = FullAddressVector {
        dct: 0x12_3456,
        dc_key: 0x5623_ceaf,
        link: LinkAddress::InfiniBand {
            lid: 0x17,
            sl: 3,
            static_rate: 2,
            source_path_bits: 1,
            force_loopback: false,
            grh: Some(Grh {
                sgid_index: 1,
                flow_label: 0x1_2345,
                traffic_class: 0,
                hop_limit: 64,
                dgid: [0xfe; 16],
            }),
        },
    }
    .encode()
    .expect("av");
    let full_roce = FullAddressVector {
        dct: 0x65_4321,
        dc_key: 0x5623_ceaf,
        link: LinkAddress::Roce {
            udp_source_port: 0xc000,
            sl: 2,
            static_rate: 0,
            mac: [2, 0, 0, 0, 0, 1],
            grh: Grh {
                sgid_index: 3,
                flow_label: 0,
                traffic_class: 0x60,
                hop_limit: 64,
                dgid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1],
            },
        },
    }
    .encode()
    .expect("av");

    // RC.
    one(
        &dir,
        "rc-nop",
        RcKind,
        1,
        0,
        Nop::<Rc>::new().signaled().build(),
    );
    one(
        &dir,
        "rc-dump-fenced",
        RcKind,
        1,
        0,
        Dump::<Rc>::new(sges[0])
            .fence(FenceMode::Fence)
            .signaled()
            .build(),
    );
    one(
        &dir,
        "rc-write-sge",
        RcKind,
        2,
        1,
        RdmaWrite::new(remote).sge(sges[0]).signaled().build(),
    );
    one(
        &dir,
        "rc-write-gather-2",
        RcKind,
        1,
        0,
        RdmaWrite::new(remote).gather([sges[0], sges[1]]).build(),
    );
    one(
        &dir,
        "rc-write-gather-16-wraps",
        RcKind,
        8,
        0xfffe,
        RdmaWrite::new(remote)
            .any_data(AnyData::Sges(&sges))
            .build(),
    );
    one(
        &dir,
        "rc-write-empty",
        RcKind,
        1,
        0xffff,
        RdmaWrite::new(remote).without_data().build(),
    );
    one(
        &dir,
        "rc-write-imm-sge",
        RcKind,
        1,
        0x1234,
        RdmaWrite::new(remote)
            .immediate(0xcafe_f00d)
            .sge(sges[2])
            .signaled()
            .build(),
    );
    one(
        &dir,
        "rc-write-inline-4",
        RcKind,
        1,
        7,
        RdmaWrite::new(remote).inline(&payload[..4]).build(),
    );
    one(
        &dir,
        "rc-write-inline-13",
        RcKind,
        1,
        0,
        RdmaWrite::new(remote).inline(&payload[..13]).build(),
    );
    one(
        &dir,
        "rc-write-inline-45-wraps",
        RcKind,
        4,
        3,
        RdmaWrite::new(remote).inline(&payload[..45]).build(),
    );
    one(
        &dir,
        "rc-write-imm-inline-28",
        RcKind,
        2,
        0x8001,
        RdmaWrite::new(remote)
            .immediate(7)
            .inline(&payload[..28])
            .solicited()
            .build(),
    );
    one(
        &dir,
        "rc-read-sge",
        RcKind,
        1,
        0,
        RdmaRead::new(remote).sge(sges[3]).signaled().build(),
    );
    one(
        &dir,
        "rc-read-gather-3",
        RcKind,
        2,
        1,
        RdmaRead::new(remote)
            .gather([sges[0], sges[1], sges[2]])
            .build(),
    );
    one(
        &dir,
        "rc-read-empty",
        RcKind,
        1,
        0,
        RdmaRead::new(remote).without_data().build(),
    );
    one(
        &dir,
        "rc-atomic-cs",
        RcKind,
        1,
        0,
        Atomic::compare_swap(aligned, result, 1, 2)
            .signaled()
            .build(),
    );
    one(
        &dir,
        "rc-atomic-fa",
        RcKind,
        1,
        0,
        Atomic::fetch_add(aligned, result, 1).build(),
    );
    one(
        &dir,
        "rc-masked-cs-4",
        RcKind,
        1,
        0,
        Atomic::masked_compare_swap_32(aligned, result, 1, 0, !0, 0).build(),
    );
    one(
        &dir,
        "rc-masked-cs-8-wraps",
        RcKind,
        2,
        1,
        Atomic::masked_compare_swap_64(aligned, result, 1, 2, 3, 4).build(),
    );
    one(
        &dir,
        "rc-masked-fa-4",
        RcKind,
        1,
        0,
        Atomic::masked_fetch_add_32(aligned, result, 1, 0).build(),
    );
    one(
        &dir,
        "rc-masked-fa-8",
        RcKind,
        1,
        0,
        Atomic::masked_fetch_add_64(aligned, result, 1, 0x8000_0000).build(),
    );

    // DC, compact AV.
    let c = |r| compact.at(r);
    one(
        &dir,
        "dc-nop",
        DcKind,
        1,
        0,
        Nop::<Dc<Compact>>::new().signaled().build(),
    );
    one(
        &dir,
        "dc-compact-write-sge",
        DcKind,
        1,
        0,
        RdmaWrite::new(c(remote)).sge(sges[0]).dci_stream(3).build(),
    );
    one(
        &dir,
        "dc-compact-write-inline-12",
        DcKind,
        1,
        0,
        RdmaWrite::new(c(remote)).inline(&payload[..12]).build(),
    );
    one(
        &dir,
        "dc-compact-write-inline-13-wraps",
        DcKind,
        2,
        1,
        RdmaWrite::new(c(remote)).inline(&payload[..13]).build(),
    );
    one(
        &dir,
        "dc-compact-read-sge",
        DcKind,
        1,
        0,
        RdmaRead::new(c(remote)).sge(sges[0]).build(),
    );
    one(
        &dir,
        "dc-compact-atomic-fa-wraps",
        DcKind,
        2,
        0xffff,
        Atomic::fetch_add(c(aligned), result, 1).build(),
    );
    one(
        &dir,
        "dc-compact-masked-cs-8-wraps",
        DcKind,
        2,
        1,
        Atomic::masked_compare_swap_64(c(aligned), result, 1, 2, 3, 4)
            .signaled()
            .build(),
    );

    // DC, full AV.
    let f = |r| full_ib.at(r);
    one(
        &dir,
        "dc-full-ib-write-sge-wraps",
        DcKind,
        4,
        7,
        RdmaWrite::new(f(remote))
            .sge(sges[0])
            .signaled()
            .fence(FenceMode::SmallAndFence)
            .build(),
    );
    one(
        &dir,
        "dc-full-ib-write-imm-inline-30",
        DcKind,
        2,
        0,
        RdmaWrite::new(f(remote))
            .immediate(1)
            .inline(&payload[..30])
            .build(),
    );
    one(
        &dir,
        "dc-full-ib-read-gather-4",
        DcKind,
        4,
        2,
        RdmaRead::new(f(remote))
            .gather([sges[0], sges[1], sges[2], sges[3]])
            .build(),
    );
    one(
        &dir,
        "dc-full-ib-atomic-cs",
        DcKind,
        2,
        0,
        Atomic::compare_swap(f(aligned), result, 1, 2).build(),
    );
    one(
        &dir,
        "dc-full-ib-masked-fa-4",
        DcKind,
        2,
        0,
        Atomic::masked_fetch_add_32(f(aligned), result, 1, 2).build(),
    );
    one(
        &dir,
        "dc-full-roce-write-empty",
        DcKind,
        2,
        0,
        RdmaWrite::new(full_roce.at(remote)).without_data().build(),
    );
    one(
        &dir,
        "dc-full-roce-masked-cs-8",
        DcKind,
        2,
        0,
        Atomic::masked_compare_swap_64(full_roce.at(aligned), result, 1, 2, 3, 4).build(),
    );

    // Several WQEs in one ring, each read at its own index (the producer index wraps
    // past 0xffff in the middle).
    save_ring(&dir, "rc-stream", RcKind, 8, 0xfffc, |ring, mut at, qpn| {
        let mut indices = Vec::new();
        let wqes = [
            AnyWqe {
                target: None,
                flags: ControlFlags::default(),
                stream_id: 0,
                op: AnyOperation::Write {
                    remote,
                    imm: None,
                    data: AnyData::Inline(&payload[..40]),
                },
            },
            AnyWqe {
                target: None,
                flags: ControlFlags::default(),
                stream_id: 0,
                op: AnyOperation::Read {
                    remote,
                    data: AnyData::Sges(&sges[..2]),
                },
            },
            AnyWqe {
                target: None,
                flags: ControlFlags::default(),
                stream_id: 0,
                op: AnyOperation::Atomic {
                    remote: aligned,
                    result,
                    op: AtomicOp::FetchAdd { add: 1 },
                },
            },
            AnyWqe {
                target: None,
                flags: ControlFlags::from_byte(0x08).expect("flags"),
                stream_id: 0,
                op: AnyOperation::Nop,
            },
        ];
        for wqe in wqes {
            let used = ring
                .write(at, qpn, &wqe.build().expect("builds"))
                .expect("fits");
            indices.push(at);
            at = at.advance(used);
        }
        indices
    });
    fs::read_dir(&dir).expect("corpus").count()
}

// ---------------------------------------------------------------------------------------
// roundtrip

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn shape_name(case: &WqeCase, opcode: Opcode, wraps: bool) -> String {
    use ibgda_fuzz::{DataDesc, OpDesc, TargetDesc};
    let transport = match case.target {
        TargetDesc::Rc => "rc",
        TargetDesc::Compact { .. } | TargetDesc::RawCompact(_) => "dc-compact",
        _ => "dc-full",
    };
    let data = match &case.op {
        OpDesc::Write { data, .. } | OpDesc::Read { data, .. } => match data {
            DataDesc::Empty => "-empty",
            DataDesc::Sges(_) => "-sges",
            DataDesc::Inline(p) if p.is_empty() => "-empty",
            DataDesc::Inline(_) => "-inline",
        },
        _ => "",
    };
    let op = match opcode {
        Opcode::AtomicMaskedCompareSwap | Opcode::AtomicMaskedFetchAdd => {
            let ParsedWidth(w) = ParsedWidth::of(case);
            format!("{}-{w}", opcode.name().to_lowercase())
        }
        _ => opcode.name().to_lowercase(),
    };
    format!(
        "{transport}-{op}{data}{}",
        if wraps { "-wraps" } else { "" }
    )
    .replace('_', "-")
}

struct ParsedWidth(u8);

impl ParsedWidth {
    fn of(case: &WqeCase) -> Self {
        use ibgda_fuzz::{AtomicDesc, OpDesc};
        match &case.op {
            OpDesc::Atomic {
                op:
                    AtomicDesc::MaskedCompareSwap { eight, .. }
                    | AtomicDesc::MaskedFetchAdd { eight, .. },
                ..
            } => Self(if *eight { 8 } else { 4 }),
            _ => Self(8),
        }
    }
}

/// Inputs the `roundtrip` fuzzer found.
const REGRESSIONS: &[(&str, &[u8])] = &[(
    // An erased compact target whose raw dqp_dct (0xb500_0000) has the extended flag: it
    // built with DS 3 and the parser read a 48-byte address vector.
    "regression-raw-compact-av-with-extended-flag",
    &[
        0x00, 0x00, 0x0b, 0xb8, 0xfe, 0xff, 0xff, 0xff, 0x00, 0x00, 0x3d, 0x00, 0xb5, 0x00, 0x00,
        0x00, 0x00, 0x71, 0x00, 0x00, 0xb0, 0x00, 0xe4, 0x00, 0xfe, 0xf8, 0x1e, 0x00, 0x8e,
    ],
)];

fn roundtrip_seeds() -> usize {
    let dir = corpus_dir("roundtrip");
    let mut rng = Rng(0x1bd6_a5ee_d00d_f00d);
    let mut found: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut bytes = Vec::new();
    for iteration in 0..8_000_000u32 {
        // A half, three quarters or seven eighths of the bytes zero (so sizes, queue
        // numbers, 4-byte operands and AV fields are often valid), the rest random;
        // lengths up to a few hundred bytes.
        let zero_mask = [1, 3, 7][iteration as usize % 3];
        let len = 16 + (rng.next() % 300) as usize;
        bytes.clear();
        for _ in 0..len {
            let r = rng.next();
            bytes.push(if r & zero_mask != 0 {
                0
            } else {
                (r >> 8) as u8
            });
        }
        let Ok(case) = WqeCase::arbitrary_take_rest(Unstructured::new(&bytes)) else {
            continue;
        };
        if let Outcome::RoundTripped { opcode, wraps, .. } = fuzz_roundtrip(&case) {
            let name = shape_name(&case, opcode, wraps);
            let shorter = found.get(&name).is_none_or(|b| b.len() > bytes.len());
            if shorter {
                found.insert(name, bytes.clone());
            }
        }
    }
    // Regression seeds: inputs the fuzzer found, kept under their finding's name. Each
    // now builds to a typed error instead of a WQE that does not parse back.
    for (name, input) in REGRESSIONS {
        let case = WqeCase::arbitrary_take_rest(Unstructured::new(input)).expect("decodes");
        assert_eq!(fuzz_roundtrip(&case), Outcome::Refused, "{name}");
        save(&dir, name, input);
    }
    for (name, input) in &found {
        // Decoding the saved bytes gives a case that round-trips as named.
        let case = WqeCase::arbitrary_take_rest(Unstructured::new(input)).expect("decodes");
        let Outcome::RoundTripped { opcode, wraps, .. } = fuzz_roundtrip(&case) else {
            panic!("{name} no longer round-trips");
        };
        assert_eq!(&shape_name(&case, opcode, wraps), name);
        save(&dir, name, input);
    }
    found.len() + REGRESSIONS.len()
}

// ---------------------------------------------------------------------------------------
// parse_cqe

/// A 64-byte CQE with the requester/responder fields the facts sheet (5.1, 5.2) places.
struct Cqe([u8; 64]);

impl Cqe {
    fn new(opcode: u8, owner: bool) -> Self {
        let mut raw = [0u8; 64];
        raw[63] = opcode << 4 | u8::from(owner);
        Self(raw)
    }
    fn send(mut self, send_opcode: u8, qpn: u32, wqe_counter: u16) -> Self {
        self.0[56..60].copy_from_slice(&(u32::from(send_opcode) << 24 | qpn).to_be_bytes());
        self.0[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
        self
    }
    fn byte_count(mut self, n: u32) -> Self {
        self.0[44..48].copy_from_slice(&n.to_be_bytes());
        self
    }
    fn imm(mut self, imm: u32) -> Self {
        self.0[36..40].copy_from_slice(&imm.to_be_bytes());
        self
    }
    fn remote_qpn(mut self, qpn: u32) -> Self {
        self.0[24..28].copy_from_slice(&qpn.to_be_bytes());
        self
    }
    fn syndrome(mut self, vendor: u8, syndrome: u8) -> Self {
        self.0[54] = vendor;
        self.0[55] = syndrome;
        self
    }
    fn format(mut self, format: u8) -> Self {
        self.0[63] |= format << 2;
        self
    }
}

fn parse_cqe_seeds() -> usize {
    let dir = corpus_dir("parse_cqe");
    let mut seeds: Vec<(String, [u8; 64])> = vec![
        ("req-write".into(), Cqe::new(0, true).send(0x08, 0x123, 7).0),
        (
            "req-write-imm".into(),
            Cqe::new(0, false).send(0x09, 0x123, 8).0,
        ),
        (
            "req-read".into(),
            Cqe::new(0, true).send(0x10, 0x123, 9).byte_count(4096).0,
        ),
        (
            "req-atomic-cs".into(),
            Cqe::new(0, true).send(0x11, 0x123, 10).byte_count(8).0,
        ),
        (
            "req-atomic-fa".into(),
            Cqe::new(0, true).send(0x12, 0x123, 11).byte_count(8).0,
        ),
        (
            "req-masked-cs".into(),
            Cqe::new(0, true).send(0x14, 0x123, 12).byte_count(4).0,
        ),
        (
            "req-masked-fa".into(),
            Cqe::new(0, true).send(0x15, 0x123, 13).byte_count(8).0,
        ),
        (
            "req-nop".into(),
            Cqe::new(0, true).send(0x00, 0xff_ffff, 0xffff).0,
        ),
        ("req-dump".into(), Cqe::new(0, true).send(0x23, 1, 0).0),
        (
            "resp-write-imm".into(),
            Cqe::new(1, true)
                .send(0, 0x42, 3)
                .imm(0xdead_beef)
                .byte_count(64)
                .remote_qpn(0x99)
                .0,
        ),
        (
            "resp-send".into(),
            Cqe::new(2, true).send(0, 0x42, 4).byte_count(100).0,
        ),
        (
            "resp-send-imm".into(),
            Cqe::new(3, false).send(0, 0x42, 5).imm(1).0,
        ),
        (
            "resp-send-inv".into(),
            Cqe::new(4, true).send(0, 0x42, 6).imm(0x77).0,
        ),
        ("resize".into(), Cqe::new(5, true).0),
        ("invalid-initial-0xff".into(), [0xff; 64]),
        ("invalid-initial-0xf1".into(), Cqe::new(15, true).0),
        (
            "req-scatter-32".into(),
            Cqe::new(0, true).send(0x10, 0x123, 9).format(1).0,
        ),
        (
            "req-scatter-64".into(),
            Cqe::new(0, true).send(0x10, 0x123, 9).format(2).0,
        ),
        ("compressed".into(), Cqe::new(0, true).format(3).0),
        (
            "req-err-odp-fault".into(),
            Cqe::new(13, true)
                .send(0x10, 0x123, 9)
                .syndrome(0x93, 0x04)
                .0,
        ),
        (
            "req-err-unknown-syndrome".into(),
            Cqe::new(13, true).send(0x08, 0x123, 9).syndrome(0, 0x7e).0,
        ),
    ];
    for syndrome in [
        0x01, 0x02, 0x04, 0x05, 0x06, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x22,
    ] {
        seeds.push((
            format!("req-err-syndrome-{syndrome:02x}"),
            Cqe::new(13, true)
                .send(0x08, 0x123, 0x40)
                .syndrome(0, syndrome)
                .0,
        ));
    }
    seeds.push((
        "resp-err-remote-access".into(),
        Cqe::new(14, false).send(0, 0x456, 2).syndrome(0, 0x13).0,
    ));
    for (name, raw) in &seeds {
        fuzz_parse_cqe(raw);
        save(&dir, name, raw);
    }
    seeds.len()
}

// ---------------------------------------------------------------------------------------
// softnic

/// A signaled recipe of `kind` from `local` places to `remote`.
fn recipe(kind: u8, remote: Place, local: &[(Place, u8)], payload: &[u8]) -> Op {
    Op::Recipe(Recipe {
        kind,
        flags: 0x08,
        remote,
        local: local.to_vec(),
        payload: payload.to_vec(),
        words: [
            0x1122_3344_5566_7788,
            0x0102_0304_0506_0708,
            0xffff_0000_ffff_0000,
            0x0000_ffff_0000_fffe,
        ],
        av: [0; 4],
    })
}

fn at(area: u8, offset: i8) -> Place {
    Place {
        area,
        offset,
        key: 0,
    }
}

fn softnic_case(flags: u8, ring_log2: u8, ops: Vec<Op>) -> SoftNicCase {
    SoftNicCase {
        flags,
        ring_log2,
        cq_log2: 4,
        delay: 0,
        record_offset: 0,
        doorbell: 0,
        cq_record: 0,
        ops,
    }
}

/// Real WQE streams for the software NIC: every operation between the requester's and the
/// responder's regions on both transports, faults (keys, bounds, rights), raw blocks with
/// real addresses patched in, and the doorbell, record and CQ variants. Each is run once
/// here to check that it executes as intended (`(wqes, cqes, errors)`).
fn softnic_seeds() -> usize {
    use ibgda_fuzz::softnic::flag;
    let dir = corpus_dir("softnic");
    // Areas: 0 requester read-only, 1 responder read-only, 2 responder all, 3 requester
    // local-write, 4 responder all, 5 requester all; 6 and 7 the unregistered buffer.
    let all_ops = || {
        vec![
            recipe(0, at(4, 0), &[], &[]),
            recipe(2, at(4, 8), &[(at(5, 0), 16), (at(3, 4), 8)], &[]),
            recipe(3, at(2, 0), &[], b"inline payload"),
            recipe(4, at(4, 32), &[(at(5, 16), 8)], &[]),
            recipe(5, at(1, 8), &[(at(5, 32), 24)], &[]),
            recipe(6, at(4, 40), &[(at(5, 56), 8)], &[]),
            recipe(7, at(2, 16), &[(at(3, 0), 8)], &[]),
            recipe(8, at(4, 48), &[(at(3, 8), 8)], &[]),
            recipe(1, at(5, 0), &[(at(5, 0), 32)], &[]),
        ]
    };
    let mut dc_ops = all_ops();
    for (k, op) in dc_ops.iter_mut().enumerate() {
        if let Op::Recipe(r) = op {
            r.av[0] = (k % 2) as u8; // compact and full address vectors
        }
    }
    let faults = vec![
        recipe(2, Place { key: 7, ..at(4, 0) }, &[(at(5, 0), 8)], &[]),
        recipe(2, at(4, 60), &[(at(5, 0), 16)], &[]),
        recipe(3, at(1, 0), &[], b"to a read-only region"),
        recipe(5, at(4, 0), &[(at(0, 0), 8)], &[]),
        recipe(6, at(4, 3), &[(at(5, 0), 8)], &[]), // refused by the builder: misaligned
        recipe(2, at(6, 0), &[(at(5, 0), 8)], &[]),
        recipe(0, at(4, 0), &[], &[]),
    ];
    // A raw copy of an inline WRITE's blocks whose remote address and key are patched in
    // (the remote-address segment is octoword 1: address at byte 16, rkey at byte 24).
    let mut raw = [0u8; 64];
    {
        let payload = [0x5au8; 8];
        let wqe = RdmaWrite::<Rc, _>::new(RemoteAddress::new(0, RKey(0)))
            .inline(&payload)
            .signaled()
            .build()
            .expect("inline write");
        let mut ring = [0u8; 64];
        let qpn = Qpn::new(0x100).expect("qpn");
        SendRing::new(&mut ring, WqeLimits::default())
            .expect("ring")
            .write(WqeIndex(0), qpn, &wqe)
            .expect("write");
        raw.copy_from_slice(&ring);
    }
    let patched = vec![
        Op::Raw(raw),
        Op::Address {
            at: 16,
            place: at(4, 8),
        },
        Op::Key {
            at: 24,
            pick: 5,
            remote: true,
        },
    ];
    let mut collapsed = softnic_case(flag::COLLAPSED, 4, all_ops());
    collapsed.cq_log2 = 0;
    let mut delayed = softnic_case(0, 4, all_ops());
    delayed.delay = 2;
    let mut short_record = softnic_case(0, 4, all_ops());
    short_record.record_offset = 0xfffd;
    let mut overrun = softnic_case(0, 4, all_ops());
    overrun.cq_log2 = 1;
    let mut raw_doorbell = softnic_case(flag::DOORBELL_ONLY | flag::RAW_DOORBELL, 4, all_ops());
    raw_doorbell.doorbell = 0x0001_0000_0100_0000;
    // Expected (WQEs consumed, CQEs, error CQEs). `all_ops` is nine signaled WQEs of ten
    // WQEBBs (the 8-byte masked compare-swap takes two); in `rc-faults` the misaligned
    // atomic is refused by the builder, the first WQE fails and the rest are flushed; the
    // short record ends inside the two-block WQE (its fault flushes nothing more); two CQ
    // entries overrun at the third CQE; a doorbell naming another queue starts nothing.
    let seeds: Vec<(&str, SoftNicCase, (u64, u32, u32))> = vec![
        ("rc-every-op", softnic_case(0, 4, all_ops()), (9, 9, 0)),
        ("dc-every-op", softnic_case(flag::DC, 4, dc_ops), (9, 9, 0)),
        ("rc-faults", softnic_case(0, 3, faults), (6, 6, 6)),
        ("rc-raw-patched", softnic_case(0, 0, patched), (1, 1, 0)),
        (
            "rc-doorbell-only",
            softnic_case(flag::DOORBELL_ONLY, 4, all_ops()),
            (9, 9, 0),
        ),
        (
            "rc-unconnected",
            softnic_case(flag::UNCONNECTED, 4, all_ops()),
            (0, 0, 0),
        ),
        ("rc-collapsed", collapsed, (9, 1, 0)),
        ("rc-delayed", delayed, (9, 9, 0)),
        ("rc-short-record", short_record, (7, 7, 1)),
        ("rc-cq-overrun", overrun, (9, 2, 0)),
        ("rc-foreign-doorbell", raw_doorbell, (0, 0, 0)),
    ];
    for (name, case, expected) in &seeds {
        let bytes = case.to_bytes();
        assert_eq!(&SoftNicCase::from_bytes(&bytes), case, "{name}: encoding");
        let outcome = fuzz_softnic(&bytes);
        assert_eq!(
            (outcome.wqes, outcome.cqes, outcome.errors),
            *expected,
            "{name}: {outcome:?}"
        );
        save(&dir, name, &bytes);
    }
    seeds.len()
}

fn main() {
    let wqes = parse_wqe_seeds();
    let cqes = parse_cqe_seeds();
    let cases = roundtrip_seeds();
    let nic = softnic_seeds();
    println!("seeds: parse_wqe {wqes}, parse_cqe {cqes}, roundtrip {cases}, softnic {nic}");
}
