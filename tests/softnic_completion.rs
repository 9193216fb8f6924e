//! CQEs as the NIC writes them: only signaled successes complete, the owner bit follows the
//! pass over the ring, a collapsed CQ writes every CQE to entry 0, CQs can be shared, and
//! the crate's own CQE parser reads what the NIC wrote.

mod softnic_support;

use ibgda::cq::{parse_cqe, Completion, RequesterCompletion};
use std::sync::Arc;

use ibgda::memory::DmaBuffer;
use ibgda::queue::{CompletionQueueMemory, QueueMemoryError, SendQueueMemory, CQE_INIT_OP_OWN};
use ibgda::softnic::{Access, CqMode, Fabric, QpConfig, SoftNicError};
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
            .create_qp(node, QpConfig::new(TransportKind::Rc, &sq, &cq))
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
    let mut consumer = Consumer::new(cq);
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

    // The same CQ memory in another mode is refused.
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let conflicting = QpConfig {
        cq_mode: CqMode::Collapsed,
        ..QpConfig::new(TransportKind::Rc, &sq, consumer.memory.memory())
    };
    assert_eq!(
        fabric.create_qp(node, conflicting),
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
fn queue_memory_that_does_not_match_its_description_cannot_be_made() {
    let buffer = |len| DmaBuffer::zeroed(len, 64).unwrap();
    let size = RingSize::new(8).unwrap();
    assert_eq!(
        SendQueueMemory::from_buffers(size, buffer(16 * 64), buffer(8), buffer(8)).unwrap_err(),
        QueueMemoryError::WrongLength {
            buffer: "send ring",
            len: 16 * 64,
            expected: 8 * 64
        }
    );
    assert_eq!(
        SendQueueMemory::from_buffers(size, buffer(8 * 64), buffer(16), buffer(8)).unwrap_err(),
        QueueMemoryError::WrongLength {
            buffer: "send doorbell record",
            len: 16,
            expected: 8
        }
    );
    assert_eq!(
        SendQueueMemory::from_buffers(size, buffer(8 * 64), buffer(8), buffer(64)).unwrap_err(),
        QueueMemoryError::WrongLength {
            buffer: "doorbell",
            len: 64,
            expected: 8
        }
    );
    assert_eq!(
        CompletionQueueMemory::from_buffers(16, buffer(8 * 64), buffer(8)).unwrap_err(),
        QueueMemoryError::WrongLength {
            buffer: "CQ ring",
            len: 8 * 64,
            expected: 16 * 64
        }
    );
    for entries in [0, 6] {
        assert_eq!(
            CompletionQueueMemory::from_buffers(entries, buffer(8 * 64), buffer(8)).unwrap_err(),
            QueueMemoryError::BadEntries { entries }
        );
    }
    // Buffers of the right lengths make memory the fabric accepts, with every CQE
    // initialised invalid and hardware-owned.
    let sq = SendQueueMemory::from_buffers(size, buffer(8 * 64), buffer(8), buffer(8)).unwrap();
    let cq = CompletionQueueMemory::from_buffers(4, buffer(4 * 64), buffer(8)).unwrap();
    let ring = cq.ring_bytes();
    for entry in ring.chunks(64) {
        assert_eq!(entry[..63], [0; 63]);
        assert_eq!(entry[63], CQE_INIT_OP_OWN);
    }
    let fabric = Fabric::new();
    let node = fabric.add_node(1).unwrap();
    assert!(fabric
        .create_qp(node, QpConfig::new(TransportKind::Rc, &sq, &cq))
        .is_ok());
}

#[test]
fn queue_memory_is_never_a_data_region_nor_two_queues() {
    let fabric = Fabric::new();
    let node = fabric.add_node(1).unwrap();
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let cq = CompletionQueueMemory::allocate(8).unwrap();
    fabric
        .create_qp(node, QpConfig::new(TransportKind::Rc, &sq, &cq))
        .unwrap();

    // The same send-queue memory for a second queue is refused.
    let other_cq = CompletionQueueMemory::allocate(8).unwrap();
    assert_eq!(
        fabric.create_qp(node, QpConfig::new(TransportKind::Rc, &sq, &other_cq)),
        Err(SoftNicError::OverlapsQueueMemory {
            addr: sq.ring().addr,
            len: sq.ring().len as u64,
            queue: sq.ring(),
        })
    );

    // A buffer aliasing the ring (only `unsafe` code can make one) cannot be registered:
    // the NIC would otherwise write WQE slots or CQEs as RDMA data.
    for span in [sq.ring(), sq.dbrec(), sq.doorbell(), cq.ring(), cq.dbrec()] {
        let ptr = core::ptr::NonNull::new(span.addr as *mut u8).unwrap();
        // SAFETY: the queue memory outlives this alias (dropped at the end of the loop
        // body, before `sq` and `cq`), and every access through either is atomic.
        let alias = Arc::new(unsafe { DmaBuffer::from_raw(ptr, span.len, Box::new(())) }.unwrap());
        let refused = fabric.register(node, alias.clone(), 0, span.len, Access::LOCAL_WRITE);
        assert_eq!(
            refused.unwrap_err(),
            SoftNicError::OverlapsQueueMemory {
                addr: span.addr,
                len: span.len as u64,
                queue: span,
            }
        );
        // A range that only touches the last byte overlaps too.
        let last = span.len - 1;
        assert!(matches!(
            fabric.register(node, alias, last, 1, Access::LOCAL_WRITE),
            Err(SoftNicError::OverlapsQueueMemory { .. })
        ));
    }

    // Queue memory over a registered region is refused as well.
    let data = Arc::new(DmaBuffer::zeroed(4096, 4096).unwrap());
    let region = fabric
        .register(node, data.clone(), 0, 4096, Access::LOCAL_WRITE)
        .unwrap();
    let ptr = core::ptr::NonNull::new(data.as_ptr()).unwrap();
    let alias = |len: usize| {
        // SAFETY: `data` outlives the aliases (they are dropped with the queue memory
        // below, before `data`), and every access through them is atomic.
        unsafe { DmaBuffer::from_raw(ptr, len, Box::new(())) }.unwrap()
    };
    let fresh = |len| DmaBuffer::zeroed(len, 64).unwrap();
    let over_region =
        SendQueueMemory::from_buffers(RingSize::new(8).unwrap(), alias(8 * 64), fresh(8), fresh(8))
            .unwrap();
    assert_eq!(
        fabric.create_qp(
            node,
            QpConfig::new(TransportKind::Rc, &over_region, &other_cq)
        ),
        Err(SoftNicError::OverlapsRegion {
            queue: over_region.ring(),
            region_addr: region.addr(),
            region_len: 4096,
        })
    );
    drop(over_region);
}
