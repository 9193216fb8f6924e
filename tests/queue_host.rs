//! Host send queues, completion queues and queue pairs, checked against the memory a NIC
//! would see: ring bytes, doorbell record, doorbell, and CQEs written by hand from the
//! layout tables (offsets from the mlx5 facts sheet, not from our CQE types).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use ibgda::cq::{CqMode, Syndrome};
use ibgda::order::HostBarrier;
use ibgda::queue::*;
use ibgda::wqe::*;

const QPN: u32 = 0x00_0a_bc;

fn memory(wqebbs: usize, cqes: u32) -> (SendQueueMemory, CompletionQueueMemory) {
    (
        SendQueueMemory::allocate(RingSize::new(wqebbs).unwrap()).unwrap(),
        CompletionQueueMemory::allocate(cqes).unwrap(),
    )
}

fn qp_with(wqebbs: usize, cqes: u32, config: QpConfig) -> QueuePair<Rc> {
    let (sq, cq) = memory(wqebbs, cqes);
    QueuePair::new(Qpn::new(QPN).unwrap(), sq, cq, config).unwrap()
}

fn dbrec_send_counter(sq: &SendQueueMemory) -> u32 {
    let bytes = sq.dbrec_bytes();
    u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]])
}

fn inline_write(value: u64) -> [u8; 8] {
    value.to_be_bytes()
}

/// A requester CQE written by hand: offsets 44 byte_cnt, 56 sop_drop_qpn, 60 wqe_counter,
/// 63 op_own (opcode << 4 | owner).
fn requester_cqe(opcode: u8, qpn: u32, wqe_counter: u16, owner: bool) -> [u8; 64] {
    let mut cqe = [0u8; 64];
    cqe[56..60].copy_from_slice(&(u32::from(opcode) << 24 | qpn).to_be_bytes());
    cqe[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
    cqe[63] = u8::from(owner);
    cqe
}

/// A requester error CQE: offset 54 vendor syndrome, 55 syndrome, 56 opcode/QPN,
/// 60 wqe_counter, 63 op_own with opcode 13.
fn error_cqe(syndrome: u8, qpn: u32, wqe_counter: u16, owner: bool) -> [u8; 64] {
    let mut cqe = [0u8; 64];
    cqe[54] = 0x42;
    cqe[55] = syndrome;
    cqe[56..60].copy_from_slice(&(0x08u32 << 24 | qpn).to_be_bytes());
    cqe[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
    cqe[63] = 13 << 4 | u8::from(owner);
    cqe
}

/// The NIC's side of a queue pair's CQ: these tests play the NIC.
fn nic_cq(qp: &QueuePair<Rc>) -> CompletionQueueNicAccess {
    // SAFETY: the test is the only NIC of this queue pair; every CQE it writes names a WQE
    // the test posted (or is a stray the queue must refuse), and no WQE names local memory.
    let executor = ibgda::queue::Executor::new("the test playing the NIC");
    unsafe { qp.cq().memory().nic_access_unchecked(&executor) }.expect("no other NIC")
}

/// Writes a CQE as a NIC does (body, then the owner word with release).
fn put_cqe(cq: &CompletionQueueNicAccess, slot: usize, cqe: &[u8; 64]) {
    cq.write_cqe(slot as u32, cqe);
}

#[test]
fn an_inline_write_is_encoded_announced_and_rung() {
    let mut qp = qp_with(64, 64, QpConfig::default());
    let payload = inline_write(0x0102_0304_0506_0708);
    let wqe = RdmaWrite::new(RemoteAddress::new(0xdead_beef_0000, RKey(0x77)))
        .inline(&payload)
        .build()
        .unwrap();
    let ticket = qp.post(&wqe, &[]).unwrap();
    assert_eq!(ticket.end(), 1);
    let ring = qp.sq().memory().ring_bytes();
    let parsed = parse_wqe(&ring, WqeIndex(0), TransportKind::Rc).unwrap();
    assert_eq!(parsed.qpn, QPN);
    assert_eq!(parsed.ds, 3);
    match parsed.op {
        ParsedOp::Write {
            remote,
            data: ParsedData::Inline(p),
        } => {
            assert_eq!(remote, RemoteAddress::new(0xdead_beef_0000, RKey(0x77)));
            assert!(p.eq_bytes(&payload));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(dbrec_send_counter(qp.sq().memory()), 1);
    // The doorbell is the first 8 bytes of the WQE's control segment.
    assert_eq!(
        qp.sq()
            .memory()
            .doorbell_bytes()
            .expect("a memory doorbell")
            .to_vec(),
        ring[..8].to_vec()
    );
    assert_eq!(
        &ring[..8],
        &[0x00, 0x00, 0x00, 0x08, 0x00, 0x0a, 0xbc, 0x03]
    );
}

#[test]
fn explicit_batching_rings_once_for_many_wqes() {
    let config = QpConfig {
        send: SendQueueConfig {
            doorbell: DoorbellPolicy::Explicit,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut qp = qp_with(64, 64, config);
    let nop = Nop::<Rc>::new().build().unwrap();
    for _ in 0..5 {
        qp.post(&nop, &[]).unwrap();
    }
    assert_eq!(
        dbrec_send_counter(qp.sq().memory()),
        0,
        "nothing announced before the doorbell"
    );
    assert_eq!(
        qp.sq()
            .memory()
            .doorbell_bytes()
            .expect("a memory doorbell")
            .to_vec(),
        vec![0; 8]
    );
    qp.ring_doorbell();
    assert_eq!(dbrec_send_counter(qp.sq().memory()), 5);
    let ring = qp.sq().memory().ring_bytes();
    assert_eq!(
        qp.sq()
            .memory()
            .doorbell_bytes()
            .expect("a memory doorbell")
            .to_vec(),
        ring[4 * 64..4 * 64 + 8].to_vec(),
        "rung with the last WQE's control"
    );
}

#[test]
fn every_n_batching_rings_on_each_nth_wqe() {
    let config = QpConfig {
        send: SendQueueConfig {
            doorbell: DoorbellPolicy::Every(NonZeroU32::new(3).unwrap()),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut qp = qp_with(64, 64, config);
    let nop = Nop::<Rc>::new().build().unwrap();
    let mut seen = Vec::new();
    for _ in 0..7 {
        qp.post(&nop, &[]).unwrap();
        seen.push(dbrec_send_counter(qp.sq().memory()));
    }
    assert_eq!(seen, [0, 0, 3, 3, 3, 6, 6]);
}

#[test]
fn a_full_ring_refuses_until_a_completion_retires_slots() {
    let mut qp = qp_with(8, 8, QpConfig::default());
    let nop = Nop::<Rc>::new().build().unwrap();
    for _ in 0..8 {
        qp.post(&nop, &[]).unwrap();
    }
    assert_eq!(
        qp.post(&nop, &[]).unwrap_err(),
        PostError::Full { needed: 1, free: 0 }
    );
    // The queue signaled WQE 4 itself (at most 4 unsignaled WQEBBs in a row in a ring of 8).
    let ring = qp.sq().memory().ring_bytes();
    let signaled: Vec<bool> = (0..8).map(|i| ring[i * 64 + 11] & 0x0c == 0x08).collect();
    assert_eq!(
        signaled,
        [false, false, false, false, true, false, false, false]
    );
    put_cqe(&nic_cq(&qp), 0, &requester_cqe(0x00, QPN, 4, false));
    match qp.poll().unwrap() {
        Some(Polled::Sent {
            wqe_counter: 4,
            retired: 5,
            ..
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(qp.sq().free_wqebbs(), 5);
    // The CQ doorbell record now holds consumer index 1, big-endian.
    assert_eq!(qp.cq().memory().dbrec_bytes()[..4], [0, 0, 0, 1]);
    assert_eq!(
        qp.poll().unwrap(),
        None,
        "the next entry is still hardware-owned"
    );
}

#[test]
fn cqes_are_consumed_by_owner_parity_across_laps() {
    let mut qp = qp_with(64, 4, QpConfig::default());
    let nop = Nop::<Rc>::new().signaled().build().unwrap();
    let cq = nic_cq(&qp);
    for i in 0..12u16 {
        qp.post(&nop, &[]).unwrap();
        let slot = usize::from(i % 4);
        let lap_parity = (i / 4) % 2 == 1;
        // An entry with the wrong parity (left from the last lap) is not consumed.
        if i >= 4 {
            assert_eq!(qp.poll().unwrap(), None);
        }
        put_cqe(&cq, slot, &requester_cqe(0x00, QPN, i, lap_parity));
        assert!(
            matches!(qp.poll().unwrap(), Some(Polled::Sent { wqe_counter, .. }) if wqe_counter == i)
        );
    }
    assert!(qp.sq().is_idle());
}

#[test]
fn a_collapsed_cq_reports_each_new_counter_once() {
    let config = QpConfig {
        cq_mode: CqMode::Collapsed,
        ..Default::default()
    };
    let mut qp = qp_with(64, 1, config);
    let nop = Nop::<Rc>::new().signaled().build().unwrap();
    for _ in 0..3 {
        qp.post(&nop, &[]).unwrap();
    }
    let cq = nic_cq(&qp);
    put_cqe(&cq, 0, &requester_cqe(0x00, QPN, 1, false));
    assert!(matches!(
        qp.poll().unwrap(),
        Some(Polled::Sent {
            wqe_counter: 1,
            retired: 2,
            ..
        })
    ));
    assert_eq!(
        qp.poll().unwrap(),
        None,
        "the same counter again is not new"
    );
    put_cqe(&cq, 0, &requester_cqe(0x00, QPN, 2, true));
    assert!(matches!(
        qp.poll().unwrap(),
        Some(Polled::Sent {
            wqe_counter: 2,
            retired: 3,
            ..
        })
    ));
}

#[test]
fn stray_and_error_cqes_are_typed_and_retire_nothing_wrongly() {
    let mut qp = qp_with(16, 8, QpConfig::default());
    let nop = Nop::<Rc>::new().build().unwrap();
    for _ in 0..4 {
        qp.post(&nop, &[]).unwrap();
    }
    let cq = nic_cq(&qp);
    put_cqe(&cq, 0, &requester_cqe(0x00, QPN + 1, 0, false));
    assert_eq!(
        qp.poll().unwrap_err(),
        PollError::Stray {
            qpn: QPN + 1,
            wqe_counter: 0
        }
    );
    put_cqe(&cq, 1, &requester_cqe(0x00, QPN, 9, false));
    assert_eq!(
        qp.poll().unwrap_err(),
        PollError::Stray {
            qpn: QPN,
            wqe_counter: 9
        }
    );
    assert_eq!(qp.sq().retired(), 0);
    put_cqe(&cq, 2, &error_cqe(0x13, QPN, 2, false));
    let PollError::Completion(e) = qp.poll().unwrap_err() else {
        panic!("expected an error completion")
    };
    assert_eq!(e.syndrome, Some(Syndrome::RemoteAccess));
    assert_eq!((e.qpn, e.wqe_index, e.vendor_syndrome), (QPN, 2, 0x42));
    assert_eq!(
        qp.sq().retired(),
        3,
        "the failed WQE and those before it are retired"
    );
    assert_eq!(qp.first_error(), Some(e));
}

#[test]
fn a_dropped_reservation_gives_its_slots_back() {
    let mut qp = qp_with(16, 8, QpConfig::default());
    let nop = Nop::<Rc>::new().build().unwrap();
    {
        let mut r = qp.sq_mut().reserve(4).unwrap();
        r.write(&nop).unwrap();
        r.write(&nop).unwrap();
    }
    assert_eq!(qp.sq().producer(), 0);
    assert_eq!(qp.sq().free_wqebbs(), 16);
    assert_eq!(dbrec_send_counter(qp.sq().memory()), 0);
    let mut r = qp.sq_mut().reserve(4).unwrap();
    r.write(&nop).unwrap();
    assert_eq!(r.remaining(), 3);
    let t = r.publish();
    assert_eq!(
        t.end(),
        1,
        "unwritten reserved slots are returned at publish"
    );
}

#[test]
fn reservations_refuse_wqes_beyond_what_they_hold() {
    let mut qp = qp_with(16, 8, QpConfig::default());
    // On RC, the masked 8-byte compare-swap with its data is a two-block WQE.
    let wqe = Atomic::masked_compare_swap_64(
        RemoteAddress::new(0, RKey(0)),
        LocalBuffer::new(0, LKey(1)),
        1,
        2,
        3,
        4,
    )
    .build()
    .unwrap();
    assert_eq!(wqe.wqebbs(), 2);
    let mut r = qp.sq_mut().reserve(1).unwrap();
    assert_eq!(
        // SAFETY: the write is refused, so nothing is posted and no memory is named.
        unsafe { r.write_unchecked(&wqe) }.unwrap_err(),
        PostError::ReservationExhausted { needed: 2, left: 1 }
    );
}

struct Region {
    lkey: LKey,
    addr: u64,
    len: u64,
}

// SAFETY: the queues these tests post to are executed by the tests themselves (no NIC
// reaches memory through the key); the region stands in for a registration's answers.
unsafe impl Registered for Region {
    fn lkey(&self) -> LKey {
        self.lkey
    }
    fn covers(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr + self.len)
    }
}

#[test]
fn local_memory_must_be_covered_and_stays_alive_until_its_completion() {
    let mut qp = qp_with(16, 8, QpConfig::default());
    let region: Arc<dyn Registered> = Arc::new(Region {
        lkey: LKey(9),
        addr: 0x1000,
        len: 0x100,
    });
    let remote = RemoteAddress::new(0x9000, RKey(1));
    let outside = RdmaWrite::new(remote)
        .sge(Sge::new(0x10f8, 16, LKey(9)).unwrap())
        .build()
        .unwrap();
    assert_eq!(
        qp.post(&outside, std::slice::from_ref(&region))
            .unwrap_err(),
        PostError::UncoveredLocalMemory {
            span: LocalSpan {
                addr: 0x10f8,
                len: 16,
                lkey: LKey(9)
            }
        }
    );
    let wrong_key = RdmaWrite::new(remote)
        .sge(Sge::new(0x1000, 16, LKey(8)).unwrap())
        .build()
        .unwrap();
    assert!(matches!(
        qp.post(&wrong_key, std::slice::from_ref(&region)),
        Err(PostError::UncoveredLocalMemory { .. })
    ));
    let inside = RdmaWrite::new(remote)
        .sge(Sge::new(0x1000, 0x100, LKey(9)).unwrap())
        .signaled()
        .build()
        .unwrap();
    qp.post(&inside, std::slice::from_ref(&region)).unwrap();
    assert_eq!(
        Arc::strong_count(&region),
        2,
        "the queue keeps the registration"
    );
    put_cqe(&nic_cq(&qp), 0, &requester_cqe(0x08, QPN, 0, false));
    qp.poll().unwrap();
    assert_eq!(Arc::strong_count(&region), 1, "released at the completion");
}

#[test]
fn waiting_signals_an_unsignaled_tail_and_times_out_without_a_nic() {
    let mut qp = qp_with(16, 8, QpConfig::default());
    let nop = Nop::<Rc>::new().build().unwrap();
    let t = qp.post(&nop, &[]).unwrap();
    assert!(qp.sq().has_unsignaled_tail());
    let err = qp.wait(t, Duration::from_millis(20)).unwrap_err();
    assert!(matches!(err, WaitError::Timeout { .. }));
    // A signaled NOP was appended so a completion can come.
    assert_eq!(qp.sq().producer(), 2);
    let ring = qp.sq().memory().ring_bytes();
    assert_eq!(ring[64 + 11] & 0x0c, 0x08);
    assert_eq!(dbrec_send_counter(qp.sq().memory()), 2);
}

#[test]
fn erased_queue_pairs_refuse_mismatched_targets() {
    let (sq, cq) = memory(16, 8);
    let mut any: AnyQueuePair =
        QueuePair::<Dc<Compact>>::new(Qpn::new(3).unwrap(), sq, cq, QpConfig::default())
            .unwrap()
            .into();
    let remote = RemoteAddress::new(0x40, RKey(1));
    let payload = [1u8; 8];
    let rc_wqe = AnyWqe {
        target: None,
        flags: ControlFlags::default(),
        stream_id: 0,
        op: AnyOperation::Write {
            remote,
            imm: None,
            data: AnyData::Inline(&payload),
        },
    }
    .build()
    .unwrap();
    assert_eq!(
        any.post(&rc_wqe, &[]).unwrap_err(),
        PostError::TransportMismatch {
            queue: TransportKind::Dc
        }
    );
    let full = FullAddressVector {
        dct: 5,
        dc_key: 1,
        link: LinkAddress::InfiniBand {
            lid: 1,
            sl: 0,
            static_rate: 0,
            source_path_bits: 0,
            force_loopback: false,
            grh: None,
        },
    }
    .encode()
    .unwrap();
    let full_wqe = AnyWqe {
        target: Some(full.into()),
        ..*rc_wqe.spec()
    }
    .build()
    .unwrap();
    assert!(matches!(
        any.post(&full_wqe, &[]),
        Err(PostError::TransportMismatch { .. })
    ));
    let compact = CompactAddressVector {
        dct: 5,
        dc_key: 1,
        lid: 1,
        ..Default::default()
    }
    .encode()
    .unwrap();
    let ok = AnyWqe {
        target: Some(compact.into()),
        ..*rc_wqe.spec()
    }
    .build()
    .unwrap();
    assert_eq!(any.post(&ok, &[]).unwrap().end(), 1);
}

#[test]
fn wrapping_three_laps_with_one_and_two_block_wqes_keeps_every_wqe_intact() {
    let mut qp = qp_with(8, 64, QpConfig::default());
    let mut produced = 0u64;
    let mut cqes = 0usize;
    while produced < 3 * 8 + 5 {
        let two_blocks = produced % 3 == 1;
        let index = WqeIndex::from_counter(produced);
        let t = if two_blocks {
            let w = Atomic::masked_compare_swap_64(
                RemoteAddress::new(0x100, RKey(2)),
                LocalBuffer::new(0x200, LKey(3)),
                produced,
                0,
                !0,
                0,
            )
            .signaled()
            .build()
            .unwrap();
            // SAFETY: no NIC executes this ring; the addresses name no memory.
            unsafe { qp.sq_mut().post_unchecked(&w) }.unwrap()
        } else {
            let payload = produced.to_be_bytes();
            let w = RdmaWrite::new(RemoteAddress::new(produced, RKey(2)))
                .inline(&payload)
                .signaled()
                .build()
                .unwrap();
            qp.post(&w, &[]).unwrap()
        };
        let ring = qp.sq().memory().ring_bytes();
        let parsed = parse_wqe(&ring, index, TransportKind::Rc).unwrap();
        assert_eq!(parsed.wqebbs(), if two_blocks { 2 } else { 1 });
        match parsed.op {
            ParsedOp::Atomic {
                op: AtomicOp::MaskedCompareSwap { swap, .. },
                ..
            } => assert_eq!(swap, produced),
            ParsedOp::Write {
                remote,
                data: ParsedData::Inline(p),
            } => {
                assert_eq!(remote.addr, produced);
                assert!(p.eq_bytes(&produced.to_be_bytes()));
            }
            other => panic!("unexpected {other:?}"),
        }
        // Complete it, as a NIC would.
        put_cqe(
            &nic_cq(&qp),
            cqes % 64,
            &requester_cqe(0x08, QPN, index.0, (cqes / 64) % 2 == 1),
        );
        cqes += 1;
        assert!(matches!(qp.poll().unwrap(), Some(Polled::Sent { .. })));
        assert!(qp.sq().is_complete(t));
        produced = t.end();
    }
    assert!(produced >= 24, "three laps of an 8-block ring");
}

#[test]
fn a_shared_queue_publishes_many_threads_in_reservation_order() {
    // A smaller ring and fewer WQEs under Miri, which interprets every step.
    const RING: usize = if cfg!(miri) { 64 } else { 1024 };
    let (sq, cq) = memory(RING, RING as u32);
    let mut config = SharedQueueConfig::for_ring(RingSize::new(RING).unwrap());
    config.doorbell_batch = 16;
    let queue = SharedSendQueue::<Rc>::new(Qpn::new(QPN).unwrap(), sq, cq, config).unwrap();
    const THREADS: u64 = 4;
    // Fewer under Miri, which interprets every spin of the publication wait.
    const PER_THREAD: u64 = if cfg!(miri) { 12 } else { 200 };
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let queue = &queue;
            s.spawn(move || {
                for i in 0..PER_THREAD {
                    let payload = (t << 32 | i).to_be_bytes();
                    let w = RdmaWrite::new(RemoteAddress::new(t, RKey(t as u32)))
                        .inline(&payload)
                        .build()
                        .unwrap();
                    queue.post(&w, &[]).unwrap();
                }
            });
        }
    });
    let total = THREADS * PER_THREAD;
    assert_eq!(queue.counters().ready(), total);
    assert_eq!(
        dbrec_send_counter(queue.memory()),
        total as u32,
        "the last publisher announced everything"
    );
    let ring = queue.memory().ring_bytes();
    let mut next = [0u64; THREADS as usize];
    for k in 0..total {
        let parsed = parse_wqe(&ring, WqeIndex::from_counter(k), TransportKind::Rc).unwrap();
        let ParsedOp::Write {
            remote,
            data: ParsedData::Inline(p),
        } = parsed.op
        else {
            panic!("not a write")
        };
        let value = u64::from_be_bytes(p.to_vec().try_into().unwrap());
        let (t, i) = (value >> 32, value & 0xffff_ffff);
        assert_eq!(remote.addr, t);
        assert_eq!(
            i, next[t as usize],
            "each thread's WQEs appear in its own order"
        );
        next[t as usize] += 1;
    }
    assert_eq!(next, [PER_THREAD; THREADS as usize]);
    // Signaled every half ring: exactly the one-block WQEs whose end crosses a multiple
    // of half the ring (WQE 511 of the 800 posted outside Miri, 31 of 48 under it).
    let half = RING as u64 / 2;
    let signaled: Vec<u64> = (0..total)
        .filter(|&k| ring[(k as usize) * 64 + 11] & 0x0c == 0x08)
        .collect();
    let crossing: Vec<u64> = (0..total).filter(|k| (k + 1) % half == 0).collect();
    assert_eq!(signaled, crossing);
    assert_eq!(crossing.len(), 1);
}

#[test]
fn a_group_reservation_publishes_once_when_the_last_member_finishes() {
    let (sq, cq) = memory(256, 256);
    let mut config = SharedQueueConfig::for_ring(RingSize::new(256).unwrap());
    config.doorbell_batch = 256;
    let queue = SharedSendQueue::<Rc>::new(Qpn::new(QPN).unwrap(), sq, cq, config).unwrap();
    let group = queue.reserve_group(8, 2).unwrap();
    assert!(group.part(8).is_none());
    std::thread::scope(|s| {
        for i in 0..8u32 {
            let part = group.part(i).unwrap();
            s.spawn(move || {
                let mut part = part;
                let payload = u64::from(i).to_be_bytes();
                let w = RdmaWrite::new(RemoteAddress::new(i.into(), RKey(1)))
                    .inline(&payload)
                    .build()
                    .unwrap();
                part.write_registered(&w, &[]).unwrap();
                part.finish();
            });
        }
    });
    assert!(group.part(0).is_none(), "a part is handed out once");
    assert_eq!(queue.counters().ready(), 16);
    assert_eq!(dbrec_send_counter(queue.memory()), 16);
    let ring = queue.memory().ring_bytes();
    for i in 0..8u64 {
        let w = parse_wqe(&ring, WqeIndex((2 * i) as u16), TransportKind::Rc).unwrap();
        assert!(matches!(w.op, ParsedOp::Write { remote, .. } if remote.addr == i));
        let pad = parse_wqe(&ring, WqeIndex((2 * i + 1) as u16), TransportKind::Rc).unwrap();
        assert_eq!(
            pad.opcode,
            Opcode::Nop,
            "each member's unused block is a NOP"
        );
    }
}

#[test]
fn the_scope_is_recorded_in_the_queue_type() {
    let (sq, _) = memory(8, 8);
    let q = SendQueue::<Rc, Host, HostBarrier>::new(
        Qpn::new(1).unwrap(),
        sq,
        SendQueueConfig::default(),
        HostBarrier,
    )
    .unwrap();
    assert_eq!(q.scope(), HostBarrier);
    assert!(format!("{q:?}").contains("HostBarrier"));
}

/// An inline RDMA WRITE of `len` bytes (its size in WQEBBs grows with `len`).
fn inline_write_of(payload: &[u8]) -> Wqe<RdmaWrite<'_, Rc, Inline<'_>>> {
    RdmaWrite::new(RemoteAddress::new(0x1000, RKey(1)))
        .inline(payload)
        .build()
        .unwrap()
}

#[test]
fn a_completion_naming_a_slot_no_published_wqe_starts_at_is_stray() {
    let mut qp = qp_with(8, 8, QpConfig::default());
    let cq = nic_cq(&qp);
    let (small, large) = ([7u8; 40], [9u8; 100]);
    let nop = Nop::<Rc>::new().build().unwrap();
    let (two, three) = (inline_write_of(&small), inline_write_of(&large));
    assert_eq!((nop.wqebbs(), two.wqebbs(), three.wqebbs()), (1, 2, 3));

    // A reservation written with a 1-WQEBB and a 3-WQEBB WQE is forgotten: never published,
    // its drop never runs, and the sizes it recorded at slots 0 and 1 stay behind.
    {
        let mut forgotten = qp.sq_mut().reserve(4).unwrap();
        forgotten.write(&nop).unwrap();
        forgotten.write(&three).unwrap();
        std::mem::forget(forgotten);
    }
    assert_eq!(qp.sq().producer(), 0);
    // A 2-WQEBB WQE is published over slots 0 and 1.
    let ticket = qp.post(&two, &[]).unwrap();
    assert_eq!(ticket.end(), 2);

    // A CQE naming slot 1 (inside the published WQE; the forgotten 3-WQEBB WQE started
    // there and would end at 4, past the producer) is stray and retires nothing.
    put_cqe(&cq, 0, &requester_cqe(0x00, QPN, 1, false));
    assert_eq!(
        qp.poll().unwrap_err(),
        PollError::Stray {
            qpn: QPN,
            wqe_counter: 1
        }
    );
    assert_eq!(qp.sq().retired(), 0);
    assert_eq!(qp.sq().free_wqebbs(), 6);
    assert_eq!(
        qp.sq_mut().reserve(9).err(),
        Some(PostError::Full { needed: 9, free: 6 }),
        "a reservation larger than the ring never succeeds"
    );

    // The real completion, naming the published WQE, retires exactly it.
    put_cqe(&cq, 1, &requester_cqe(0x00, QPN, 0, false));
    assert!(matches!(
        qp.poll().unwrap(),
        Some(Polled::Sent {
            wqe_counter: 0,
            retired: 2,
            ..
        })
    ));
    assert!(qp.sq().is_complete(ticket));
    assert_eq!(qp.sq().free_wqebbs(), 8);

    // With two published WQEs (1 + 2 WQEBBs at 2 and 3), a CQE naming slot 4, inside the
    // second, is stray; naming 3 retires both.
    qp.post(&nop, &[]).unwrap();
    qp.post(&two, &[]).unwrap();
    put_cqe(&cq, 2, &requester_cqe(0x00, QPN, 4, false));
    assert!(matches!(
        qp.poll(),
        Err(PollError::Stray { wqe_counter: 4, .. })
    ));
    put_cqe(&cq, 3, &requester_cqe(0x00, QPN, 3, false));
    assert!(matches!(
        qp.poll().unwrap(),
        Some(Polled::Sent { retired: 5, .. })
    ));
    assert!(qp.sq().is_idle());
}

#[test]
fn shared_and_exclusive_queues_refuse_the_same_bad_limits() {
    let size = RingSize::new(16).unwrap();
    let bad_limits = [
        (
            WqeLimits {
                max_wqebbs: 0,
                ..Default::default()
            },
            WqeError::FieldBelowMinimum {
                field: "max_wqebbs",
                value: 0,
                min: 1,
            },
        ),
        (
            WqeLimits {
                max_wqebbs: 17,
                ..Default::default()
            },
            WqeError::WqeTooLarge {
                wqebbs: 17,
                max: 16,
            },
        ),
    ];
    for (limits, expected) in bad_limits {
        let (sq, cq) = memory(16, 16);
        let config = SharedQueueConfig {
            limits,
            ..SharedQueueConfig::for_ring(size)
        };
        assert_eq!(
            SharedSendQueue::<Rc>::new(Qpn::new(QPN).unwrap(), sq, cq, config).err(),
            Some(expected),
            "shared queue with {limits:?}"
        );
        let (sq, cq) = memory(16, 16);
        let config = QpConfig {
            send: SendQueueConfig {
                limits,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            QueuePair::<Rc>::new(Qpn::new(QPN).unwrap(), sq, cq, config).err(),
            Some(expected),
            "exclusive queue with {limits:?}"
        );
    }
    // The smallest valid limit still lets a dropped reservation pad with NOPs, and what is
    // published is exactly what was written.
    let (sq, cq) = memory(16, 16);
    let config = SharedQueueConfig {
        limits: WqeLimits {
            max_wqebbs: 1,
            ..Default::default()
        },
        ..SharedQueueConfig::for_ring(size)
    };
    let queue = SharedSendQueue::<Rc>::new(Qpn::new(QPN).unwrap(), sq, cq, config).unwrap();
    drop(queue.reserve(3).unwrap());
    assert_eq!(queue.counters().ready(), 3);
    let ring = queue.memory().ring_bytes();
    for index in 0..3 {
        let wqe = parse_wqe(&ring, WqeIndex(index), TransportKind::Rc).unwrap();
        assert_eq!(wqe.opcode, Opcode::Nop, "padding at {index}");
    }
}

#[test]
fn producer_state_memory_needs_64_bytes_and_keeps_its_buffer() {
    let short = ibgda::memory::DmaBuffer::zeroed(32, 64).unwrap();
    assert_eq!(
        ProducerStateMemory::from_buffer(short).unwrap_err(),
        QueueMemoryError::WrongLength {
            buffer: "producer state",
            len: 32,
            expected: 64,
        }
    );
    let dirty = ibgda::memory::DmaBuffer::zeroed(64, 64).unwrap();
    dirty.write(0, &[0xa5; 64]).unwrap();
    let addr = dirty.addr();
    let state = ProducerStateMemory::from_buffer(dirty).unwrap();
    assert_eq!(state.span().addr, addr);
    assert_eq!(state.span().len, 64);
}
