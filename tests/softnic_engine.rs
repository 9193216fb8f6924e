//! The background engine: host threads post through the memory conventions while the
//! engine thread executes; completions arrive through the CQ's owner bits; counters are
//! readable while it runs; dropping the handle stops and joins the thread.

mod softnic_support;

use std::time::{Duration, Instant};

use ibgda::softnic::Fabric;
use ibgda::wqe::*;
use softnic_support::*;

const WRITE: u8 = 0x08;
const FETCH_ADD: u8 = 0x12;

/// Polls until a CQE arrives or the deadline passes.
fn wait_for(cq: &mut Consumer, deadline: Instant) -> [u8; 64] {
    loop {
        if let Some(cqe) = cq.poll() {
            return cqe;
        }
        assert!(Instant::now() < deadline, "no completion in time");
        std::thread::yield_now();
    }
}

#[test]
fn the_engine_executes_what_host_threads_post() {
    const WQES: u64 = 2000;
    let mut pair = RcPair::new(&Setup {
        ring_wqebbs: 16,
        cq_entries: 4,
        ..Setup::default()
    });
    pair.b.area.set(0, &[0; 8]);
    let engine = pair.fabric.spawn_engine();
    assert!(engine.is_running());
    let deadline = Instant::now() + Duration::from_secs(30);
    let q = pair.a.qpn.get();
    // Every 4th WQE is signaled; the producer waits for the CQE of a batch before posting
    // the next, so neither the ring (16) nor the CQ (4) can overflow.
    for batch in 0..WQES / 4 {
        for k in 0..4 {
            let n = batch * 4 + k;
            let wqe = if n % 2 == 0 {
                Atomic::fetch_add(pair.b.area.region.remote(0), pair.a.area.region.local(8), 1)
                    .completion(if k == 3 {
                        CompletionMode::Always
                    } else {
                        CompletionMode::OnError
                    })
                    .build()
                    .map(|w| pair.a.sq.post(&w))
            } else {
                let payload = n.to_be_bytes();
                RdmaWrite::new(pair.b.area.region.remote(8 + 8 * (n / 2 % 32)))
                    .inline(&payload)
                    .completion(if k == 3 {
                        CompletionMode::Always
                    } else {
                        CompletionMode::OnError
                    })
                    .build()
                    .map(|w| pair.a.sq.post(&w))
            };
            wqe.unwrap();
        }
        pair.a.sq.submit();
        let index = (batch * 4 + 3) as u16;
        let owner = pair.a.cq.expected_owner(pair.a.cq.index);
        let opcode = if (batch * 4 + 3) % 2 == 0 {
            FETCH_ADD
        } else {
            WRITE
        };
        let byte_cnt = if opcode == FETCH_ADD { 8 } else { 0 };
        assert_eq!(
            wait_for(&mut pair.a.cq, deadline),
            req_cqe(q, opcode, index, byte_cnt, owner)
        );
        // Counters are readable while the engine runs.
        assert!(pair.fabric.counters().wqes_executed >= (batch + 1) * 4);
    }
    assert_eq!(pair.b.area.bytes(0, 8), (WQES / 2).to_be_bytes());
    for slot in 0..32u64 {
        let last = (0..WQES)
            .filter(|n| n % 2 == 1 && n / 2 % 32 == slot)
            .max()
            .unwrap();
        assert_eq!(
            pair.b.area.bytes(8 + 8 * slot as usize, 8),
            last.to_be_bytes(),
            "slot {slot}"
        );
    }
    let counters = pair.fabric.counters();
    assert_eq!(counters.wqes_executed, WQES);
    assert_eq!(counters.atomics, WQES / 2);
    assert_eq!(counters.cqes_written, WQES / 4);
    assert!(pair.fabric.async_events().is_empty());

    // Dropping the handle stops the engine: nothing executes after it.
    drop(engine);
    pair.a
        .sq
        .post(&Nop::<Rc>::new().signaled().build().unwrap());
    pair.a.sq.submit();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(pair.a.cq.poll(), None);
    assert_eq!(pair.fabric.counters().wqes_executed, WQES);
    // A step by hand still works.
    pair.fabric.run_until_idle();
    assert!(pair.a.cq.poll().is_some());
}

#[test]
fn one_engine_serves_queues_posted_from_several_threads() {
    const THREADS: usize = 4;
    const PER_THREAD: u64 = 300;
    let fabric = Fabric::new();
    let setup = Setup {
        ring_wqebbs: 8,
        cq_entries: 8,
        ..Setup::default()
    };
    let target = side(&fabric, 100, 0, TransportKind::Rc, &setup);
    let target_region = target.area.region.clone();
    target.area.set(0, &[0; 8]);
    let mut initiators = Vec::new();
    for t in 0..THREADS {
        let a = side(&fabric, t as u16 + 1, t as u8, TransportKind::Rc, &setup);
        let (peer, ..) = queue_pair(&fabric, target.node, TransportKind::Rc, &setup);
        fabric.connect(a.qpn, peer).unwrap();
        initiators.push(a);
    }
    let engine = fabric.spawn_engine();
    std::thread::scope(|scope| {
        for mut a in initiators {
            let region = target_region.clone();
            scope.spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(30);
                for n in 0..PER_THREAD {
                    let wqe = Atomic::fetch_add(region.remote(0), a.area.region.local(0), 1)
                        .signaled()
                        .build()
                        .unwrap();
                    let index = a.sq.post(&wqe);
                    a.sq.submit();
                    let owner = a.cq.expected_owner(a.cq.index);
                    assert_eq!(
                        wait_for(&mut a.cq, deadline),
                        req_cqe(a.qpn.get(), FETCH_ADD, index, 8, owner),
                        "WQE {n}"
                    );
                }
            });
        }
    });
    drop(engine);
    let total = (THREADS as u64 * PER_THREAD).to_be_bytes();
    assert_eq!(target.area.bytes(0, 8), total);
    assert_eq!(fabric.counters().atomics, THREADS as u64 * PER_THREAD);
}
