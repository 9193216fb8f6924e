//! Differential tests of the CUDA software NIC's engine (`cuda/softnic.cuh`, host build)
//! against the CPU software NIC (`ibgda::softnic::Fabric`, step mode), without a GPU.
//!
//! - Streams: each case is a random fabric and WQE stream ([`Scenario`]); the CPU NIC runs
//!   it to idle at every doorbell point while every host-written byte is traced, then the
//!   engine replays the trace over an arena copy of the same memory. After every doorbell
//!   point, every registered buffer byte for byte, every CQ ring byte for byte, every
//!   queue's state, counters and error cause, every responder's credits, every CQ's error
//!   state and all totals must be identical.
//! - Parser: the engine's parser accepts exactly what `parse_fetched_wqe` accepts, with
//!   the same fields, on random and on mutated valid WQEs.

use std::collections::BTreeMap;

use ibgda::wqe::{
    parse_fetched_wqe, ParsedData, ParsedOp, RKey, RdmaWrite, RemoteAddress, TransportKind,
    WqeIndex,
};
use ibgda_kernels::softnic::scenario::{compare, replay_on_host, run_on_fabric, Scenario};
use ibgda_kernels::softnic::{host_parse, transport};
use proptest::prelude::*;

fn check_seed(
    seed: u64,
) -> Result<(Scenario, ibgda_kernels::softnic::scenario::FabricRun), String> {
    let s = Scenario::generate(seed);
    let run = run_on_fabric(&s).map_err(|e| format!("seed {seed}: CPU NIC setup: {e}"))?;
    let replay = replay_on_host(&run).map_err(|e| format!("seed {seed}: engine: {e}"))?;
    compare(&run, &replay).map_err(|e| format!("seed {seed}: {e}\nscenario: {s:#?}"))?;
    Ok((s, run))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// 3,000 random scenarios: the engine and the CPU NIC leave identical memory, CQs,
    /// queue states and totals after every doorbell point.
    #[test]
    fn engine_matches_the_cpu_nic_on_random_streams(seed: u64) {
        if let Err(e) = check_seed(seed) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// A fixed batch (the one the GPU replays too): every fault of the CPU NIC's table, every
/// operation and every kind of completion occurs in it, so the comparison covers them.
#[test]
fn fixed_batch_matches_and_covers_every_fault() {
    let mut vendors: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    let mut totals = ibgda_kernels::softnic::NicStats::default();
    let (mut points, mut wqes, mut cq_overruns, mut unconnected, mut dc) = (0, 0, 0, 0, 0);
    for seed in 0..400u64 {
        let (s, run) = check_seed(seed).unwrap_or_else(|e| panic!("{e}"));
        let last = run.snapshots.last().expect("a point");
        for q in &last.queues {
            if q.error.0 == ibgda_kernels::softnic::error_kind::WQE {
                *vendors.entry((q.error.1, q.error.2)).or_default() += 1;
            }
            if q.error.0 == ibgda_kernels::softnic::error_kind::CQ {
                cq_overruns += 1;
            }
        }
        // Error CQEs name their cause too (every failed WQE writes one, if its CQ can).
        for ring in &last.cq_rings {
            for cqe in ring.chunks(64) {
                if cqe[63] >> 4 == 0xd {
                    *vendors
                        .entry((u32::from(cqe[55]), u32::from(cqe[54])))
                        .or_default() += 1;
                }
            }
        }
        let st = last.stats;
        totals.wqes_executed += st.wqes_executed;
        totals.wqes_failed += st.wqes_failed;
        totals.wqes_flushed += st.wqes_flushed;
        totals.atomics += st.atomics;
        totals.bytes_written += st.bytes_written;
        totals.bytes_read += st.bytes_read;
        totals.responder_cqes += st.responder_cqes;
        totals.cqes_written += st.cqes_written;
        totals.cqes_dropped += st.cqes_dropped;
        totals.async_events += st.async_events;
        totals.doorbells += st.doorbells;
        totals.foreign_doorbells += st.foreign_doorbells;
        points += run.snapshots.len();
        wqes += run.wqes_posted;
        unconnected += last
            .queues
            .iter()
            .filter(|q| q.state == ibgda_kernels::softnic::state::INIT)
            .count();
        dc += s.qps.iter().filter(|q| q.dc).count();
    }
    println!("400 scenarios, {points} doorbell points, {wqes} WQEs posted, {dc} DC initiators, {unconnected} unconnected RC QPs, {cq_overruns} queues failed by a CQ overrun");
    println!("totals: {totals:?}");
    println!("(syndrome, vendor syndrome) -> occurrences: {vendors:x?}");
    use ibgda::softnic::{Access, Fault};
    let parse = ibgda::wqe::ParseError::InvalidRing { len: 0 };
    for f in [
        Fault::MalformedWqe(parse),
        Fault::ForeignQpn { found: 0 },
        Fault::Unpublished {
            wqebbs: 0,
            published: 0,
        },
        Fault::MessageTooLong { len: 0, max: 0 },
        Fault::LocalKey { lkey: 0 },
        Fault::LocalBounds {
            lkey: 0,
            addr: 0,
            len: 0,
        },
        Fault::LocalWriteDenied { lkey: 0 },
        Fault::UnknownLid { lid: 0 },
        Fault::UnknownDct { dct: 0 },
        Fault::WrongDcKey { dct: 0 },
        Fault::ResponderUnavailable { responder: 0 },
        Fault::MisalignedAtomic { addr: 0, align: 0 },
        Fault::RemoteKey { rkey: 0 },
        Fault::RemoteBounds {
            rkey: 0,
            addr: 0,
            len: 0,
        },
        Fault::RemoteAccessDenied {
            rkey: 0,
            needed: Access::REMOTE_READ,
        },
        Fault::ReceiverNotReady { responder: 0 },
        Fault::ResponderCqOverrun { responder: 0 },
    ] {
        let key = (
            u32::from(f.syndrome() as u8),
            u32::from(f.vendor_syndrome()),
        );
        assert!(vendors.contains_key(&key), "no stream hit {f:?} ({key:x?})");
    }
    assert!(vendors.contains_key(&(0x05, 0x00)), "no flush");
    assert!(totals.atomics > 0 && totals.bytes_read > 0 && totals.bytes_written > 0);
    assert!(totals.responder_cqes > 0 && totals.async_events > 0 && totals.foreign_doorbells > 0);
    assert!(totals.cqes_dropped > 0 && cq_overruns > 0 && unconnected > 0 && dc > 0);
}

fn parser_agrees(bytes: &[u8], index: u16, kind: TransportKind) -> Result<(), String> {
    let t = match kind {
        TransportKind::Rc => transport::RC,
        TransportKind::Dc => transport::DC,
    };
    let engine = host_parse(bytes, index, t);
    let rust = parse_fetched_wqe(bytes, WqeIndex(index), kind);
    match (&rust, engine) {
        (Err(_), None) => Ok(()),
        (Ok(w), Some(f)) => {
            let (data_kind, count) = match w.op {
                ParsedOp::Write { data, .. } | ParsedOp::Read { data, .. } => match data {
                    ParsedData::Empty => (0, 0),
                    ParsedData::Pointers(s) => (1, s.len() as u32),
                    ParsedData::Inline(p) => (2, p.len() as u32),
                },
                _ => (0, 0),
            };
            let width = match w.op {
                ParsedOp::Atomic { op, .. } => op.operand_bytes(),
                _ => 0,
            };
            let want = [
                u32::from(w.opcode.byte()),
                w.qpn,
                w.ds.into(),
                w.control.fm_ce_se.into(),
            ];
            if f[..4] != want || f[5] != data_kind || f[6] != count || f[7] != width {
                return Err(format!("fields differ: engine {f:?}, Rust {w:?}"));
            }
            Ok(())
        }
        _ => Err(format!(
            "engine {} but Rust {rust:?}",
            if engine.is_some() {
                "accepts"
            } else {
                "refuses"
            }
        )),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Random bytes, and valid WQEs with a few bytes changed: the engine's parser accepts
    /// exactly what the Rust parser accepts.
    #[test]
    fn engine_parser_accepts_what_the_rust_parser_accepts(
        seed: u64,
        octowords in 1usize..64,
        index: u16,
        dc: bool,
        mutations in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
    ) {
        let mut r = ibgda_kernels::softnic::scenario::Rng::new(seed);
        let mut bytes: Vec<u8> = (0..octowords * 16).map(|_| r.next_u64() as u8).collect();
        let kind = if dc { TransportKind::Dc } else { TransportKind::Rc };
        if seed % 2 == 0 && octowords >= 4 {
            // A valid inline WRITE as the starting point.
            let len = (seed >> 8) as usize % 40 + 1;
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            if let Ok(w) = RdmaWrite::new(RemoteAddress::new(seed, RKey(7))).inline(&payload).build() {
                let mut ring = vec![0u8; 64 * 16];
                let mut sr = ibgda::wqe::SendRing::new(&mut ring, ibgda::wqe::WqeLimits::FORMAT).unwrap();
                if sr.write(WqeIndex(0), ibgda::wqe::Qpn::new(0x1234).unwrap(), &w).is_ok() {
                    let n = bytes.len().min(ring.len());
                    bytes[..n].copy_from_slice(&ring[..n]);
                }
            }
        }
        for (at, v) in mutations {
            let n = bytes.len();
            bytes[at % n] = v;
        }
        let idx = if seed % 2 == 0 { 0 } else { index };
        if let Err(e) = parser_agrees(&bytes, idx, kind) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// A fault injected on a queue pair's WQE (the emulated ConnectX's `fault.first_wqe` and
/// `fault.transport_retry_exceeded_at` on GPU-placed queues): the engine fails that WQE
/// with the injected syndromes and flushes the rest exactly as the CPU NIC does.
#[test]
fn injected_faults_match_the_cpu_nic() {
    use ibgda::cq::Syndrome;
    let mut hit = 0;
    for seed in 0..300u64 {
        let mut s = Scenario::generate(seed);
        if s.qps.is_empty() {
            continue;
        }
        let (at, syndrome, vendor) = match seed % 3 {
            0 => (0, Syndrome::LocalQpOperation, 0x68),
            1 => (1, Syndrome::TransportRetryExceeded, 0x81),
            _ => (3, Syndrome::TransportRetryExceeded, 0x81),
        };
        let queue = (seed as usize) % s.qps.len();
        s.injected.push((queue, at, syndrome, vendor));
        let run = run_on_fabric(&s).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let replay = replay_on_host(&run).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        compare(&run, &replay).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let last = run.snapshots.last().expect("a point");
        let q = &last.queues[queue];
        let wqe = ibgda_kernels::softnic::error_kind::WQE;
        if (q.error.0, q.error.1, q.error.2) == (wqe, syndrome as u32, vendor.into()) {
            hit += 1;
        }
    }
    assert!(hit > 50, "only {hit} scenarios reached their injected WQE");
}

/// A completion dropped on a queue pair's WQE (the WQE executes, its CQE is never
/// written): the engine loses exactly the CQE the CPU NIC loses, and nothing else.
#[test]
fn dropped_completions_match_the_cpu_nic() {
    let mut hit = 0;
    for seed in 0..300u64 {
        let base = Scenario::generate(seed);
        if base.qps.is_empty() {
            continue;
        }
        let mut s = base.clone();
        let queue = (seed as usize) % s.qps.len();
        s.dropped.push((queue, seed % 4));
        let run = run_on_fabric(&s).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let replay = replay_on_host(&run).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        compare(&run, &replay).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let without = run_on_fabric(&base).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let (a, b) = (
            &without.snapshots.last().expect("a point").stats,
            &run.snapshots.last().expect("a point").stats,
        );
        // The same WQEs executed, one CQE fewer: the dropped WQE was signaled and ran.
        if a.wqes_executed == b.wqes_executed && b.cqes_written + 1 == a.cqes_written {
            hit += 1;
        }
    }
    // 44 of the 300 at recording: most drawn WQEs are unsignaled, or not reached.
    assert!(
        hit > 30,
        "only {hit} scenarios lost their dropped completion"
    );
}
