//! The device API without a GPU: its planning and the device library's builders compiled
//! for the host (`cuda/api_host.cpp`) build every operation's WQEs over windows made by
//! the control plane (two software NICs), and
//!
//! - the bytes equal the Rust builders' for the same request, the addresses and keys
//!   resolved independently through [`Window::remote`] and [`Window::local`] (thousands
//!   of random calls, every operation, offsets at and past the windows' ends, every start
//!   counter including ring and 16-bit wraps, several signal intervals); a refused call is
//!   the status the Rust side derives and leaves the ring untouched;
//! - executed on the CPU software NIC, every operation has exactly its memory effect;
//! - `put_with_signal`'s signal is never seen before its data: after every single WQE the
//!   NIC executes, and by a thread watching the signal word while the NIC copies a large
//!   payload; the same check fails when the data and the signal go to two queue pairs.

#[path = "../../tests/softnic_support/mod.rs"]
mod softnic_support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use proptest::prelude::*;

use ibgda::memory::DmaBuffer;
use ibgda::nic::{Device, MemoryAccess, MemoryRegion, SoftNic, Window};
use ibgda::queue::{CompletionQueueMemory, SendQueueMemory};
use ibgda::softnic::{Fabric, QpConfig};
use ibgda::wqe::{LocalBuffer, Qpn, RingSize, TransportKind};
use ibgda_kernels::api::host::{
    builder_wqes, check_effects, effect_calls, host_build, BuilderRing, HostComm, HostRing,
    EFFECT_WORDS,
};
use ibgda_kernels::api::{ApiCall, ApiOp, DeviceStatus, NO_COUNTER, PUT_INLINE_MAX};

use softnic_support::{Consumer, Producer};

const DATA_LEN: usize = 4096;
const SIGNAL_LEN: usize = 256;
const DATA: u32 = 0;
const SIGNALS: u32 = 1;

/// One process of the world: a software NIC on the fabric, its registrations and its
/// windows (data and signals) over every peer's registration.
struct Rank {
    _device: Device<SoftNic>,
    data: Arc<DmaBuffer>,
    signals: Arc<DmaBuffer>,
    scratch: Arc<DmaBuffer>,
    scratch_mr: MemoryRegion<SoftNic>,
    windows: Vec<Window>,
    node: ibgda::softnic::NodeId,
}

fn world(fabric: &Fabric, ranks: usize, data_len: usize) -> Vec<Rank> {
    let rw = MemoryAccess::LOCAL_WRITE
        | MemoryAccess::REMOTE_WRITE
        | MemoryAccess::REMOTE_READ
        | MemoryAccess::REMOTE_ATOMIC;
    let mut made = Vec::new();
    for r in 0..ranks {
        let nic = SoftNic::open(fabric, 1 + r as u16).expect("software NIC");
        let node = nic.node();
        let device = Device::open(nic).expect("device");
        let pd = device.alloc_pd().expect("pd");
        let data = Arc::new(DmaBuffer::zeroed(data_len, 64).expect("data"));
        data.write(
            0,
            &(0..data_len)
                .map(|i| (i * 7 + r * 31 + 1) as u8)
                .collect::<Vec<_>>(),
        )
        .expect("fill");
        let signals = Arc::new(DmaBuffer::zeroed(SIGNAL_LEN, 64).expect("signals"));
        let scratch = Arc::new(DmaBuffer::zeroed(64, 64).expect("scratch"));
        let data_mr = pd.register(data.clone(), 0, data_len, rw).expect("data mr");
        let signal_mr = pd
            .register(signals.clone(), 0, SIGNAL_LEN, rw)
            .expect("signal mr");
        let scratch_mr = pd
            .register(scratch.clone(), 0, 64, MemoryAccess::LOCAL_WRITE)
            .expect("scratch mr");
        made.push((
            device, pd, data, signals, scratch, data_mr, signal_mr, scratch_mr, node,
        ));
    }
    // The bootstrap: every rank's endpoints to every rank.
    let data_eps: Vec<_> = made.iter().map(|m| m.5.window_endpoint(DATA)).collect();
    let signal_eps: Vec<_> = made.iter().map(|m| m.6.window_endpoint(SIGNALS)).collect();
    made.into_iter()
        .map(
            |(device, _pd, data, signals, scratch, data_mr, signal_mr, scratch_mr, node)| {
                let windows = vec![
                    Window::new(&data_mr, DATA, data_eps.clone()).expect("data window"),
                    Window::new(&signal_mr, SIGNALS, signal_eps.clone()).expect("signal window"),
                ];
                Rank {
                    _device: device,
                    data,
                    signals,
                    scratch,
                    scratch_mr,
                    windows,
                    node,
                }
            },
        )
        .collect()
}

fn call(op: ApiOp) -> ApiCall {
    ApiCall {
        op: op as u32,
        dst_window: DATA,
        src_window: DATA,
        signal_window: SIGNALS,
        counter: NO_COUNTER,
        ..Default::default()
    }
}

/// The ring the Rust builders leave for `call` at `start` (over `poison`), and its WQEBBs,
/// or the status the device must return.
struct Expected {
    ring: Vec<u8>,
    wqebbs: u32,
}

/// The ring a call is built into: its queue pair, size, signal interval, the WQEBB
/// counter the call starts at, and the byte the ring held before.
#[derive(Clone, Copy)]
struct RingSpec {
    qpn: Qpn,
    size: RingSize,
    interval: u32,
    start: u64,
    poison: u8,
}

fn expected(
    rank: &Rank,
    c: &ApiCall,
    inline_max: u32,
    spec: RingSpec,
) -> Result<Expected, DeviceStatus> {
    let mut ring = vec![spec.poison; spec.size.wqebbs() as usize * 64];
    let windows: Vec<&Window> = rank.windows.iter().collect();
    let scratch = LocalBuffer::new(rank.scratch_mr.addr(), rank.scratch_mr.lkey());
    let payload = |w: u32, off: u64, len: usize| {
        let source = if w == DATA { &rank.data } else { &rank.signals };
        source.to_vec()[off as usize..off as usize + len].to_vec()
    };
    let at = BuilderRing {
        ring: &mut ring,
        qpn: spec.qpn,
        interval: spec.interval,
        start: spec.start,
    };
    let wqebbs = builder_wqes(at, &windows, scratch, inline_max, c, &payload)?;
    Ok(Expected { ring, wqebbs })
}

/// Host-builds `c` and compares with the Rust side.
fn compare_one(rank: &Rank, c: &ApiCall, inline_max: u32, interval: u32, start: u64) {
    let qpn = Qpn::new(0x1234).expect("qpn");
    let size = RingSize::new(16).expect("ring");
    let poison = 0xa5;
    let comm = HostComm::new(2, 0, &rank.scratch_mr, inline_max);
    let mut ring = HostRing::new(qpn, size, interval, poison);
    let windows: Vec<&Window> = rank.windows.iter().collect();
    // SAFETY: the windows' local sides are host buffers (`DmaBuffer`s) of this process,
    // alive in `rank`, and nothing writes them during the call.
    let got = unsafe { host_build(&comm, &windows, c, &mut ring, start) };
    let spec = RingSpec {
        qpn,
        size,
        interval,
        start,
        poison,
    };
    let want = expected(rank, c, inline_max, spec);
    match (got, want) {
        (Ok(n), Ok(e)) => {
            assert_eq!(n, e.wqebbs, "{c:?} at {start}: WQEBBs");
            assert_eq!(ring.bytes(), e.ring, "{c:?} at {start}: bytes differ");
        }
        (Err(s), Err(e)) => {
            assert_eq!(s, e, "{c:?}: status");
            assert!(
                ring.bytes().iter().all(|&b| b == poison),
                "{c:?}: a refused call changed the ring"
            );
        }
        (got, want) => panic!(
            "{c:?} at {start}: device {got:?}, Rust side {:?}",
            want.map(|e| e.wqebbs)
        ),
    }
}

fn op_strategy() -> impl Strategy<Value = ApiOp> {
    prop::sample::select(ApiOp::ALL.iter().map(|(_, o)| *o).collect::<Vec<_>>())
}

fn offset_strategy(window: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        (0..window / 8).prop_map(|w| w * 8),
        (0..window + 16),
        Just(window - 8),
        Just(window),
        Just(u64::MAX - 3),
    ]
}

fn len_strategy() -> impl Strategy<Value = u32> {
    prop_oneof![
        0u32..=(PUT_INLINE_MAX as u32 + 4),
        Just(64u32),
        1u32..=DATA_LEN as u32,
        Just(DATA_LEN as u32 + 1),
        Just(u32::MAX),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]
    #[test]
    fn every_operation_builds_the_rust_builders_bytes(
        op in op_strategy(),
        peer in 0u32..3,
        windows in (0u32..3, 0u32..2, 1u32..2),
        dst_offset in offset_strategy(DATA_LEN as u64),
        src_offset in offset_strategy(DATA_LEN as u64),
        signal_offset in offset_strategy(SIGNAL_LEN as u64),
        len in len_strategy(),
        value in any::<u64>(),
        compare in any::<u64>(),
        inline_max in prop_oneof![Just(PUT_INLINE_MAX as u32), 0u32..=PUT_INLINE_MAX as u32],
        interval in prop::sample::select(vec![1u32, 2, 3, 4, 8]),
        start in prop_oneof![0u64..64, (0xfff0u64..0x1_0010), any::<u64>().prop_map(|s| s >> 8)],
    ) {
        static WORLD: std::sync::OnceLock<(Fabric, Vec<Rank>)> = std::sync::OnceLock::new();
        let (_, ranks) = WORLD.get_or_init(|| {
            let fabric = Fabric::new();
            let ranks = world(&fabric, 2, DATA_LEN);
            (fabric, ranks)
        });
        let c = ApiCall {
            op: op as u32,
            peer,
            dst_window: windows.0,
            src_window: windows.1,
            signal_window: windows.2,
            len,
            dst_offset,
            src_offset,
            signal_offset,
            value,
            compare,
            counter: NO_COUNTER,
            reserved: 0,
        };
        compare_one(&ranks[0], &c, inline_max, interval, start);
    }
}

/// Every case of the random test at least once, by hand: each operation builds, and each
/// refusal is the status it should be.
#[test]
fn each_operation_and_each_refusal() {
    let fabric = Fabric::new();
    let ranks = world(&fabric, 2, DATA_LEN);
    let r = &ranks[0];
    let d = DATA_LEN as u64;
    let mut cases = Vec::new();
    for len in [0, 1, 8, 27, 28, 29, 64, 4096] {
        cases.push(ApiCall {
            len,
            peer: 1,
            dst_offset: 0,
            src_offset: 0,
            ..call(ApiOp::Put)
        });
        cases.push(ApiCall {
            len,
            peer: 1,
            value: 3,
            signal_offset: 16,
            ..call(ApiOp::PutWithSignal)
        });
    }
    cases.push(ApiCall {
        peer: 1,
        dst_offset: 8,
        value: 0x0102_0304_0506_0708,
        ..call(ApiOp::PutValue)
    });
    cases.push(ApiCall {
        peer: 0,
        len: 100,
        dst_offset: 200,
        src_offset: 1000,
        ..call(ApiOp::Get)
    });
    for op in [
        ApiOp::AtomicAdd,
        ApiOp::FetchAdd,
        ApiOp::CompareSwap,
        ApiOp::Signal,
    ] {
        cases.push(ApiCall {
            peer: 1,
            dst_offset: 64,
            src_offset: 128,
            signal_offset: 8,
            value: 5,
            compare: 7,
            ..call(op)
        });
    }
    // Refusals.
    cases.push(ApiCall {
        peer: 1,
        len: 8,
        dst_offset: d - 7,
        ..call(ApiOp::Put)
    });
    cases.push(ApiCall {
        peer: 1,
        len: 8,
        src_offset: d - 7,
        ..call(ApiOp::Put)
    });
    cases.push(ApiCall {
        peer: 2,
        len: 8,
        ..call(ApiOp::Put)
    });
    cases.push(ApiCall {
        peer: 1,
        len: 0,
        ..call(ApiOp::Get)
    });
    cases.push(ApiCall {
        peer: 1,
        len: u32::MAX,
        ..call(ApiOp::Get)
    });
    cases.push(ApiCall {
        peer: 1,
        dst_offset: 4,
        ..call(ApiOp::AtomicAdd)
    });
    cases.push(ApiCall {
        peer: 1,
        src_offset: 4,
        ..call(ApiOp::FetchAdd)
    });
    cases.push(ApiCall {
        peer: 1,
        signal_offset: SIGNAL_LEN as u64,
        ..call(ApiOp::Signal)
    });
    cases.push(ApiCall {
        peer: 1,
        dst_window: 5,
        ..call(ApiOp::PutValue)
    });
    for c in &cases {
        for start in [0u64, 15, 0xffff, 1 << 40] {
            compare_one(r, c, PUT_INLINE_MAX as u32, 2, start);
        }
    }
}

/// RC queue pairs on the CPU software NIC over raw memory: rank 0's queue to each peer,
/// with the host-built WQEs posted by hand.
struct Queues {
    producers: Vec<Producer>,
    consumers: Vec<Consumer>,
    rings: Vec<HostRing>,
    _remote: Vec<(SendQueueMemory, CompletionQueueMemory)>,
}

/// Rank 0's queue pairs to every peer (to itself: a second queue pair on its node), in
/// the order of `peers` (the fabric numbers them in creation order).
fn queues(fabric: &Fabric, ranks: &[Rank], peers: &[usize]) -> Queues {
    let size = RingSize::new(64).expect("ring");
    let mut out = Queues {
        producers: Vec::new(),
        consumers: Vec::new(),
        rings: Vec::new(),
        _remote: Vec::new(),
    };
    for &p in peers {
        let sq = SendQueueMemory::allocate(size).expect("sq");
        let cq = CompletionQueueMemory::allocate(64).expect("cq");
        let qpn = fabric
            .create_qp(ranks[0].node, QpConfig::new(TransportKind::Rc, &sq, &cq))
            .expect("qp");
        let rsq = SendQueueMemory::allocate(size).expect("sq");
        let rcq = CompletionQueueMemory::allocate(64).expect("cq");
        let remote = fabric
            .create_qp(ranks[p].node, QpConfig::new(TransportKind::Rc, &rsq, &rcq))
            .expect("peer qp");
        fabric.connect(qpn, remote).expect("connect");
        out.producers.push(Producer::new(sq, qpn));
        out.consumers.push(Consumer::new(cq));
        out.rings.push(HostRing::new(qpn, size, 1, 0));
        out._remote.push((rsq, rcq));
    }
    out
}

/// Host-builds `c` into queue `q`'s shadow ring at its producer counter, copies the
/// WQEBBs into the NIC's ring and publishes them.
fn post(ranks: &[Rank], qs: &mut Queues, q: usize, c: &ApiCall) {
    let start = qs.producers[q].counter;
    let comm = HostComm::new(2, 0, &ranks[0].scratch_mr, PUT_INLINE_MAX as u32);
    let windows: Vec<&Window> = ranks[0].windows.iter().collect();
    // SAFETY: host buffers alive in `ranks`; the NIC is idle or executes queues whose
    // WQEs write nothing the inline payloads are copied from (the tests keep them apart).
    let n = unsafe { host_build(&comm, &windows, c, &mut qs.rings[q], start) }
        .unwrap_or_else(|s| panic!("{c:?}: {s}"));
    let bytes = qs.rings[q].bytes();
    let slots = qs.rings[q].size().wqebbs() as u64;
    let mut blocks = Vec::new();
    for k in 0..u64::from(n) {
        let slot = ((start + k) % slots) as usize;
        blocks.extend_from_slice(&bytes[slot * 64..slot * 64 + 64]);
    }
    qs.producers[q].post_raw(&blocks);
    qs.producers[q].submit();
}

fn no_error_completions(qs: &mut Queues) {
    for c in &mut qs.consumers {
        while let Some(cqe) = c.poll() {
            assert_eq!(cqe[63] >> 4, 0, "an error completion: {cqe:02x?}");
        }
    }
}

fn word_be(buffer: &DmaBuffer, off: usize) -> u64 {
    u64::from_be_bytes(buffer.to_vec()[off..off + 8].try_into().expect("8 bytes"))
}

#[test]
fn every_operation_has_its_memory_effect_on_the_cpu_software_nic() {
    let fabric = Fabric::new();
    let ranks = world(&fabric, 2, DATA_LEN);
    let mut qs = queues(&fabric, &ranks, &[0, 1]);
    let before0 = ranks[0].data.to_vec();
    let before1 = ranks[1].data.to_vec();
    for (off, v) in EFFECT_WORDS {
        ranks[1].signals.write(off, &v.to_be_bytes()).expect("word");
    }
    for c in &effect_calls(NO_COUNTER) {
        let q = if c.peer == 0 { 0 } else { 1 };
        post(&ranks, &mut qs, q, c);
        fabric.run_until_idle();
    }
    no_error_completions(&mut qs);
    check_effects(
        &before0,
        &before1,
        &ranks[0].data.to_vec(),
        &ranks[1].data.to_vec(),
        &ranks[1].signals.to_vec(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let _ = &ranks[0].scratch;
}

/// After each single WQE the NIC executes, the signal is set only if the data is
/// complete; posting the data and the signal on two queue pairs to the same peer breaks
/// it (the fabric executes the signal's queue pair first), which shows the check can fail.
#[test]
fn the_signal_is_never_seen_before_the_data_after_any_wqe() {
    for split in [false, true] {
        let fabric = Fabric::new();
        let ranks = world(&fabric, 2, DATA_LEN);
        // Two queue pairs to peer 1; queue 0 has the lower number, so it runs first.
        let mut qs = queues(&fabric, &ranks, &[1, 1]);
        let len = 2048u32;
        let c = ApiCall {
            peer: 1,
            len,
            dst_offset: 0,
            src_offset: 512,
            signal_offset: 0,
            value: 1,
            ..call(ApiOp::PutWithSignal)
        };
        let want = ranks[0].data.to_vec()[512..512 + len as usize].to_vec();
        if split {
            post(
                &ranks,
                &mut qs,
                1,
                &ApiCall {
                    op: ApiOp::Put as u32,
                    ..c
                },
            );
            post(
                &ranks,
                &mut qs,
                0,
                &ApiCall {
                    op: ApiOp::Signal as u32,
                    ..c
                },
            );
        } else {
            post(&ranks, &mut qs, 1, &c);
        }
        let mut violated = false;
        let mut steps = 0;
        while word_be(&ranks[1].signals, 0) == 0
            || ranks[1].data.to_vec()[..len as usize] != want[..]
        {
            fabric.step_limited(1);
            steps += 1;
            assert!(steps < 16, "the NIC did not execute both WQEs");
            let signal = word_be(&ranks[1].signals, 0);
            if signal != 0 && ranks[1].data.to_vec()[..len as usize] != want[..] {
                violated = true;
            }
        }
        fabric.run_until_idle();
        no_error_completions(&mut qs);
        assert_eq!(word_be(&ranks[1].signals, 0), 1);
        assert_eq!(
            violated,
            split,
            "split = {split}: the signal was {}seen before the data",
            if violated { "" } else { "never " }
        );
    }
}

/// A thread watches the signal word (acquire loads) while the NIC's engine thread copies
/// a large payload: whenever it sees round r's signal, every data byte is round r's.
#[test]
fn a_watcher_never_sees_the_signal_before_a_slow_payload() {
    const LEN: usize = 8 << 20;
    const ROUNDS: u64 = 6;
    let fabric = Fabric::new();
    let ranks = world(&fabric, 2, LEN);
    let mut qs = queues(&fabric, &ranks, &[0, 1]);
    let engine = fabric.spawn_engine();
    let data = ranks[1].data.clone();
    let signals = ranks[1].signals.clone();
    // Rounds the watcher has finished looking at: the next round's data must not
    // overwrite what it is still reading.
    let checked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let done = checked.clone();
    let watcher = std::thread::spawn(move || {
        let mut late = 0u64;
        let mut seen = 0u64;
        while seen < ROUNDS {
            let s = u64::from_be(signals.words()[0].load(Ordering::Acquire));
            if s > seen {
                assert_eq!(s, seen + 1, "a round's signal was missed");
                seen = s;
                let round = (s % 251) as u8;
                late += data.to_vec().iter().filter(|&&b| b != round).count() as u64;
                done.store(seen, Ordering::Release);
            }
            std::hint::spin_loop();
        }
        late
    });
    for r in 1..=ROUNDS {
        // The source holds round r's bytes (the previous round completed: waited below).
        ranks[0].data.fill(0, LEN, (r % 251) as u8).expect("fill");
        let c = ApiCall {
            peer: 1,
            len: LEN as u32,
            signal_offset: 0,
            value: 1,
            ..call(ApiOp::PutWithSignal)
        };
        post(&ranks, &mut qs, 1, &c);
        while checked.load(Ordering::Acquire) < r {
            std::thread::yield_now();
        }
    }
    let late = watcher.join().expect("watcher");
    drop(engine);
    no_error_completions(&mut qs);
    assert_eq!(
        late, 0,
        "bytes of a round not yet placed when its signal was seen"
    );
}
