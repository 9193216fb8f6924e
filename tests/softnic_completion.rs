//! CQEs as the NIC writes them: only signaled successes complete, the owner bit follows the
//! pass over the ring, a collapsed CQ writes every CQE to entry 0, CQs can be shared, and
//! the crate's own CQE parser reads what the NIC wrote.

mod softnic_support;

use ibgda::cq::{parse_cqe, Completion, RequesterCompletion};
use ibgda::queue::{CompletionQueueMemory, SendQueueMemory};
use ibgda::softnic::{CqMode, Fabric, QpConfig, SoftNicError};
use ibgda::wqe::*;
use softnic_support::*;

const NOP: u8 = 0x00;
const WRITE: u8 = 0x08;
const READ: u8 = 0x10;

/// The bytes of a CQ entry nobody has written: zeros, `op_own = 0xf1`.
fn untouched() -> [u8; 64] {
    let mut c = [0u8; 64];
    c[63] = 0xf1;
    c
}

#[test]
fn only_signaled_successes_write_cqes() {
    let mut pair = RcPair::new(&Setup::default());
    let modes = [
        CompletionMode::OnError,
        CompletionMode::Always,
        CompletionMode::OnFirstError,
        CompletionMode::AlwaysWithEvent,
        CompletionMode::OnError,
        CompletionMode::Always,
    ];
    for mode in modes {
        pair.a
            .sq
            .post(&Nop::<Rc>::new().completion(mode).build().unwrap());
    }
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    let q = pair.a.qpn.get();
    assert_eq!(
        pair.a.cq.drain(),
        vec![
            req_cqe(q, NOP, 1, 0, 0),
            req_cqe(q, NOP, 3, 0, 0),
            req_cqe(q, NOP, 5, 0, 0)
        ]
    );
}

#[test]
fn the_owner_bit_follows_the_pass_over_the_ring() {
    let mut pair = RcPair::new(&Setup {
        cq_entries: 4,
        ..Setup::default()
    });
    let q = pair.a.qpn.get();
    let nop = Nop::<Rc>::new().signaled().build().unwrap();
    for lap in 0..3u16 {
        for _ in 0..4 {
            pair.a.sq.post(&nop);
        }
        pair.a.sq.submit();
        pair.fabric.run_until_idle();
        // Read the raw entries before consuming them: slot k holds CQE 4·lap + k.
        for slot in 0..4u16 {
            let owner = (lap & 1) as u8;
            assert_eq!(
                pair.a.cq.entry(slot.into()),
                req_cqe(q, NOP, 4 * lap + slot, 0, owner),
                "lap {lap} slot {slot}"
            );
        }
        assert_eq!(pair.a.cq.drain().len(), 4);
    }
}

#[test]
fn a_collapsed_cq_writes_every_cqe_to_entry_zero_and_never_overruns() {
    let mut pair = RcPair::new(&Setup {
        cq_entries: 4,
        cq_mode: CqMode::Collapsed,
        ..Setup::default()
    });
    let q = pair.a.qpn.get();
    let nop = Nop::<Rc>::new().signaled().build().unwrap();
    for k in 0..10u16 {
        pair.a.sq.post(&nop);
        pair.a.sq.submit();
        pair.fabric.run_until_idle();
        // The consumer never advances: a collapsed CQ ignores overrun.
        let owner = ((k / 4) & 1) as u8;
        assert_eq!(pair.a.cq.entry(0), req_cqe(q, NOP, k, 0, owner), "CQE {k}");
        for slot in 1..4 {
            assert_eq!(pair.a.cq.entry(slot), untouched());
        }
    }
    // Many WQEs under one doorbell: entry 0 holds the last CQE.
    for _ in 0..7 {
        pair.a.sq.post(&nop);
    }
    pair.a.sq.submit();
    let report = pair.fabric.run_until_idle();
    assert_eq!(report.cqes_written, 7);
    assert_eq!(pair.a.cq.entry(0), req_cqe(q, NOP, 16, 0, 0));
    assert!(pair.fabric.async_events().is_empty());
}

#[test]
fn queues_given_the_same_cq_memory_share_one_cq() {
    let fabric = Fabric::new();
    let node = fabric.add_node(1).unwrap();
    let cq = CompletionQueueMemory::allocate(8).unwrap();
    let mut producers = Vec::new();
    for _ in 0..2 {
        let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
        let qpn = fabric
            .create_qp(
                node,
                QpConfig::new(TransportKind::Rc, sq.clone(), cq.clone()),
            )
            .unwrap();
        fabric.connect(qpn, qpn).unwrap();
        producers.push(Producer::new(sq, qpn));
    }
    assert_eq!(
        fabric.send_cq(producers[0].qpn),
        fabric.send_cq(producers[1].qpn)
    );
    let nop = Nop::<Rc>::new().signaled().build().unwrap();
    for p in &mut producers {
        p.post(&nop);
        p.post(&nop);
        p.submit();
    }
    fabric.run_until_idle();
    let (q0, q1) = (producers[0].qpn.get(), producers[1].qpn.get());
    let mut consumer = Consumer::new(cq.clone());
    // Queues are served in QPN order, each up to its doorbell record.
    assert_eq!(
        consumer.drain(),
        vec![
            req_cqe(q0, NOP, 0, 0, 0),
            req_cqe(q0, NOP, 1, 0, 0),
            req_cqe(q1, NOP, 0, 0, 0),
            req_cqe(q1, NOP, 1, 0, 0),
        ]
    );

    // The same ring in another mode, or with another record, is refused.
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let conflicting = QpConfig {
        cq_mode: CqMode::Collapsed,
        ..QpConfig::new(TransportKind::Rc, sq.clone(), cq.clone())
    };
    assert_eq!(
        fabric.create_qp(node, conflicting),
        Err(SoftNicError::CqConflict)
    );
    let mut other_record = cq.clone();
    other_record.dbrec = CompletionQueueMemory::allocate(8).unwrap().dbrec;
    assert_eq!(
        fabric.create_qp(node, QpConfig::new(TransportKind::Rc, sq, other_record)),
        Err(SoftNicError::CqConflict)
    );
}

#[test]
fn the_crates_cqe_parser_reads_what_the_nic_wrote() {
    let mut pair = RcPair::new(&Setup::default());
    let read = RdmaRead::new(pair.b.area.region.remote(0))
        .sge(pair.a.area.region.sge(0, 33).unwrap())
        .signaled()
        .build()
        .unwrap();
    let write = RdmaWrite::new(pair.b.area.region.remote(0))
        .inline(&[1])
        .signaled()
        .build()
        .unwrap();
    pair.a.sq.post(&read);
    pair.a.sq.post(&write);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    let q = pair.a.qpn.get();
    let parsed: Vec<Completion> = pair
        .a
        .cq
        .drain()
        .iter()
        .map(|c| parse_cqe(c).unwrap())
        .collect();
    let requester = |wqe_counter, send_opcode, byte_count| {
        Completion::Requester(RequesterCompletion {
            qpn: q,
            wqe_counter,
            send_opcode,
            byte_count,
            user_index: 0,
            timestamp: 0,
        })
    };
    assert_eq!(parsed, vec![requester(0, READ, 33), requester(1, WRITE, 0)]);
}

#[test]
fn queue_memory_that_does_not_match_its_description_is_refused() {
    let fabric = Fabric::new();
    let node = fabric.add_node(1).unwrap();
    let good_sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let good_cq = CompletionQueueMemory::allocate(8).unwrap();

    let mut sq = good_sq.clone();
    sq.size = RingSize::new(16).unwrap();
    assert!(matches!(
        fabric.create_qp(node, QpConfig::new(TransportKind::Rc, sq, good_cq.clone())),
        Err(SoftNicError::InvalidQueueMemory { .. })
    ));
    let mut cq = good_cq.clone();
    cq.entries = 16;
    assert!(matches!(
        fabric.create_qp(node, QpConfig::new(TransportKind::Rc, good_sq.clone(), cq)),
        Err(SoftNicError::InvalidQueueMemory { .. })
    ));
    let mut cq = good_cq.clone();
    cq.entries = 6;
    assert!(matches!(
        fabric.create_qp(node, QpConfig::new(TransportKind::Rc, good_sq.clone(), cq)),
        Err(SoftNicError::InvalidQueueMemory { .. })
    ));
    assert!(fabric
        .create_qp(
            fabric.add_node(2).unwrap(),
            QpConfig::new(TransportKind::Rc, good_sq, good_cq)
        )
        .is_ok());
}
