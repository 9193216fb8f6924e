//! What the CUDA software NIC and GPU queue memory accept, checked on the host before
//! anything reaches a device: the engines' tables are built by the library from the queue
//! pairs and buffers it is given (every queue's ring, records and doorbell are its own, in
//! their own roles), each queue pair is executed by one NIC in the process (an exclusive
//! claim in its memory), regions never cover queue memory, bad regions and connections are
//! typed errors, the doorbell watch follows the scope, and a CQ of 0 entries never becomes
//! queue memory (its `log_cq_entries` would be 32).
//!
//! No GPU is involved: the "device" buffers here are host allocations standing in for
//! device memory, compared as address ranges and never dereferenced (no kernel runs).

use std::sync::Arc;

use ibgda::cq::CqMode;
use ibgda::memory::DeviceBuffer;
use ibgda::order::{GpuFence, GpuReleaseStore, GpuThread, OrderingScope, ValidFor};
use ibgda::queue::{
    CompletionQueueMemory, DoorbellPolicy, Gpu as GpuPlaced, ProducerStateMemory, QpConfig,
    QueueMemoryError, QueuePair, SendQueueConfig, SendQueueMemory,
};
use ibgda::softnic::Access;
use ibgda::wqe::{Compact, Dc, Qpn, Rc, RingSize, TypedTransport, WqeLimits};
use ibgda_kernels::gpu::GpuError;
use ibgda_kernels::softnic::builder::{DeviceNicBuilder, QueueOptions};
use ibgda_kernels::softnic::{state, transport, watch, NIC_NONE};

/// A buffer of `len` bytes at a distinct, live address (a host allocation it owns).
fn stand_in(len: usize) -> DeviceBuffer {
    let backing = vec![0u64; len.div_ceil(8).max(1)];
    let addr = backing.as_ptr() as u64;
    // SAFETY: no GPU exists in these tests and no kernel is launched: the buffer is only
    // compared as an address range. `backing`, moved into the owner, keeps `len` bytes
    // allocated at `addr` for as long as the buffer lives, so ranges stay distinct.
    unsafe { DeviceBuffer::from_raw(addr, len, Box::new(backing)) }
}

fn typed_queue_pair<T, S>(qpn: u32, scope: S) -> QueuePair<T, GpuPlaced, S>
where
    T: TypedTransport,
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let size = RingSize::new(64).unwrap();
    let sq = SendQueueMemory::from_device(size, stand_in(size.bytes()), stand_in(8), stand_in(8))
        .unwrap();
    let cq = CompletionQueueMemory::from_device(64, stand_in(64 * 64), stand_in(8)).unwrap();
    let config = QpConfig {
        send: SendQueueConfig {
            limits: WqeLimits::default(),
            max_unsignaled_wqebbs: Some(16),
            doorbell: DoorbellPolicy::Explicit,
        },
        cq_mode: CqMode::Ring,
    };
    QueuePair::for_device(
        Qpn::new(qpn).unwrap(),
        sq,
        cq,
        ProducerStateMemory::from_device(stand_in(64)).unwrap(),
        config,
        scope,
    )
    .unwrap()
}

fn queue_pair_numbered(qpn: u32) -> QueuePair<Rc, GpuPlaced, GpuReleaseStore> {
    typed_queue_pair(qpn, GpuReleaseStore)
}

fn queue_pair() -> QueuePair<Rc, GpuPlaced, GpuReleaseStore> {
    queue_pair_numbered(0x42)
}

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

fn invalid_containing(result: Result<impl std::fmt::Debug, GpuError>, text: &str) {
    match result {
        Err(GpuError::Invalid(why)) if why.contains(text) => {}
        other => panic!("expected an invalid-argument error naming {text:?}, got {other:?}"),
    }
}

#[test]
fn a_cq_of_zero_entries_never_becomes_gpu_queue_memory() {
    let zero = CompletionQueueMemory::from_device(0, stand_in(64), stand_in(8));
    assert!(
        matches!(zero, Err(QueueMemoryError::BadEntries { entries: 0 })),
        "{zero:?}"
    );
    let short = CompletionQueueMemory::from_device(64, stand_in(64 * 63), stand_in(8));
    assert!(
        matches!(short, Err(QueueMemoryError::WrongLength { .. })),
        "{short:?}"
    );
    let d = *queue_pair().device_queue().raw();
    assert_eq!((d.log_cq_entries, d.log_sq_wqebbs), (6, 6));
}

#[test]
fn every_record_is_built_from_the_queue_pair_it_names() {
    let qp = queue_pair();
    let dci = typed_queue_pair::<Dc<Compact>, _>(0x50, GpuReleaseStore);
    let mut b = DeviceNicBuilder::new();
    let node = b.node(7).unwrap();
    let engine = b.engine();
    let slot = b.rc(engine, node, &qp, QueueOptions::default()).unwrap();
    b.dci(engine, node, &dci, QueueOptions::default()).unwrap();
    b.connect(slot, slot).unwrap();
    b.dc_target(engine, node, 0x60, 0xfeed).unwrap();
    let tables = b.tables();
    assert_eq!(tables.len(), 1);
    let t = &tables[0];
    assert_eq!(t.nodes.len(), 1);
    assert_eq!(t.nodes[0].lid, 7);
    // Sorted by QPN: the RC queue (0x42), then the DCI (0x50).
    let (q, d) = (&t.queues[0], &t.queues[1]);
    for (rec, pair_sq, pair_cq, qpn, kind) in [
        (q, qp.sq_memory(), qp.cq_memory(), 0x42, transport::RC),
        (d, dci.sq_memory(), dci.cq_memory(), 0x50, transport::DC),
    ] {
        assert_eq!(rec.qpn, qpn);
        assert_eq!(rec.transport, kind);
        assert_eq!(rec.ring, pair_sq.ring().addr, "ring of {qpn:#x}");
        assert_eq!(rec.dbrec, pair_sq.dbrec().addr, "record of {qpn:#x}");
        assert_eq!(
            rec.doorbell,
            pair_sq.doorbell().addr,
            "doorbell of {qpn:#x}"
        );
        assert_eq!(rec.log_wqebbs, 6);
        let cq = &t.cqs[rec.cq as usize];
        assert_eq!(cq.ring, pair_cq.ring().addr, "CQ of {qpn:#x}");
        assert_eq!(cq.dbrec, pair_cq.dbrec().addr, "CQ record of {qpn:#x}");
        assert_eq!((cq.entries, cq.log2_entries), (64, 6));
        assert_eq!(rec.state, state::READY);
    }
    assert_ne!(q.cq, d.cq, "each queue pair's own CQ");
    assert_eq!(q.peer, 0x42, "loopback");
    assert_eq!(d.peer, NIC_NONE);
    // The RC queue's receive side and the DC target; the DCI has none.
    let numbers: Vec<_> = t.responders.iter().map(|r| (r.number, r.is_dct)).collect();
    assert_eq!(numbers, [(0x42, 0), (0x60, 1)]);
    assert_eq!(t.responders[1].dc_key, 0xfeed);
}

#[test]
fn a_queue_pair_is_executed_by_one_nic_in_the_process() {
    let qp = queue_pair();
    let mut first = DeviceNicBuilder::new();
    let (n1, e1) = (first.node(1).unwrap(), first.engine());
    first.rc(e1, n1, &qp, QueueOptions::default()).unwrap();
    assert_eq!(qp.sq_memory().executor(), Some(first.executor().number()));
    assert_eq!(qp.cq_memory().executor(), Some(first.executor().number()));
    let mut second = DeviceNicBuilder::new();
    let (n2, e2) = (second.node(1).unwrap(), second.engine());
    match second.rc(e2, n2, &qp, QueueOptions::default()) {
        Err(GpuError::ExecutedElsewhere(conflict)) => {
            assert_eq!(conflict.queue, qp.sq_memory().ring());
            assert!(conflict.held_by.contains("CUDA software NIC"), "{conflict}");
        }
        other => panic!("a second NIC took the queue pair: {other:?}"),
    }
    // Nothing of the refused queue reached the second NIC's tables.
    assert!(second.tables()[0].queues.is_empty());
    assert!(second.tables()[0].cqs.is_empty());
    // The same queue pair twice in one NIC: two table entries would execute one ring.
    invalid_containing(
        first.rc(e1, n1, &qp, QueueOptions::default()),
        "already on the NIC",
    );
    // Dropping the first NIC releases its claims: the queue can move.
    drop(first);
    assert_eq!(qp.sq_memory().executor(), None);
    assert_eq!(qp.cq_memory().executor(), None);
    second.rc(e2, n2, &qp, QueueOptions::default()).unwrap();
}

#[test]
fn the_doorbell_watch_follows_the_scope() {
    // SAFETY: no kernel runs: the queue is only described to the builder, which must give
    // it the doorbell-only watch the scope's contract requires.
    let fenced = typed_queue_pair::<Rc, _>(0x44, unsafe { GpuFence::new() });
    let released = queue_pair_numbered(0x45);
    let forced = queue_pair_numbered(0x46);
    let mut b = DeviceNicBuilder::new();
    let (node, engine) = (b.node(1).unwrap(), b.engine());
    b.rc(engine, node, &fenced, QueueOptions::default())
        .unwrap();
    b.rc(engine, node, &released, QueueOptions::default())
        .unwrap();
    let doorbell_only = QueueOptions {
        doorbell_only: true,
        ..QueueOptions::default()
    };
    b.rc(engine, node, &forced, doorbell_only).unwrap();
    let watches: Vec<_> = b.tables()[0]
        .queues
        .iter()
        .map(|q| (q.qpn, q.watch))
        .collect();
    assert_eq!(
        watches,
        [
            (0x44, watch::DOORBELL_ONLY),
            (0x45, watch::POLL_RECORD),
            (0x46, watch::DOORBELL_ONLY)
        ]
    );
    // Unconnected RC queues execute nothing.
    assert!(b.tables()[0].queues.iter().all(|q| q.state == state::INIT));
}

#[test]
fn regions_are_checked_and_keyed_by_the_nic() {
    let qp = queue_pair();
    let data = Arc::new(stand_in(4096));
    let mut b = DeviceNicBuilder::new();
    let node = b.node(1).unwrap();
    let engine = b.engine();
    b.rc(engine, node, &qp, QueueOptions::default()).unwrap();
    let whole = b.region(node, &data, 0, 4096, RW).unwrap();
    let part = b.region(node, &data, 64, 128, Access::LOCAL_WRITE).unwrap();
    assert_eq!((whole.addr, whole.len), (data.addr(), 4096));
    assert_eq!((part.addr, part.len), (data.addr() + 64, 128));
    let keys = [whole.lkey.0, whole.rkey.0, part.lkey.0, part.rkey.0];
    for (i, k) in keys.iter().enumerate() {
        assert_ne!(*k, 0);
        assert!(!keys[i + 1..].contains(k), "key {k:#x} handed out twice");
    }
    let t = &b.tables()[0];
    assert_eq!(t.regions.len(), 2);
    assert_eq!(
        (t.regions[0].lkey, t.regions[0].rkey),
        (whole.lkey.0, whole.rkey.0)
    );
    assert_eq!(t.regions[0].access, RW.bits());
    invalid_containing(
        b.region(node, &data, 1, 4096, RW),
        "region of 4096 bytes at offset 1",
    );
    invalid_containing(
        b.region(node, &data, usize::MAX, 2, RW),
        "region of 2 bytes",
    );
    invalid_containing(b.region(node, &data, 0, 0, RW), "region of 0 bytes");
    invalid_containing(
        b.region(node, &data, 0, 64, Access::REMOTE_WRITE),
        "need local write",
    );
    // Another NIC's keys are another NIC's.
    let mut other = DeviceNicBuilder::new();
    let other_node = other.node(1).unwrap();
    let theirs = other.region(other_node, &data, 0, 4096, RW).unwrap();
    assert_ne!((theirs.lkey, theirs.rkey), (whole.lkey, whole.rkey));
}

#[test]
fn a_region_over_queue_memory_is_refused() {
    let qp = queue_pair();
    let mut b = DeviceNicBuilder::new();
    let node = b.node(1).unwrap();
    let engine = b.engine();
    b.rc(engine, node, &qp, QueueOptions::default()).unwrap();
    for (what, span) in [
        ("send ring", qp.sq_memory().ring()),
        ("doorbell record", qp.sq_memory().dbrec()),
        ("CQ", qp.cq_memory().ring()),
    ] {
        // SAFETY: as `stand_in`: compared as an address range only, never dereferenced; it
        // names the queue's memory as a buggy caller's aliasing buffer would.
        let alias = Arc::new(unsafe { DeviceBuffer::from_raw(span.addr, 8, Box::new(())) });
        invalid_containing(b.region(node, &alias, 0, 8, RW), "overlaps queue memory");
        assert!(b.tables()[0].regions.is_empty(), "{what}");
    }
}

#[test]
fn connections_and_numbers_are_checked() {
    let (a, c) = (queue_pair_numbered(0x42), queue_pair_numbered(0x43));
    let dci = typed_queue_pair::<Dc<Compact>, _>(0x44, GpuReleaseStore);
    let mut b = DeviceNicBuilder::new();
    let node = b.node(1).unwrap();
    let (e0, e1) = (b.engine(), b.engine());
    let sa = b.rc(e0, node, &a, QueueOptions::default()).unwrap();
    let sc = b.rc(e1, node, &c, QueueOptions::default()).unwrap();
    let sd = b.dci(e0, node, &dci, QueueOptions::default()).unwrap();
    invalid_containing(b.connect(sa, sc), "different engines");
    invalid_containing(b.connect(sa, sd), "is not RC");
    b.connect(sa, sa).unwrap();
    invalid_containing(b.connect(sa, sa), "already connected");
    invalid_containing(b.dc_target(e0, node, 0x42, 1), "already on the NIC");
    invalid_containing(b.dc_target(e0, node, 1 << 24, 1), "24-bit");
    let too_long = QueueOptions {
        max_message_bytes: u64::MAX,
        ..QueueOptions::default()
    };
    let e = queue_pair_numbered(0x47);
    invalid_containing(b.rc(e0, node, &e, too_long), "max_message_bytes");
    invalid_containing(b.node(1), "already a node's");
    let mut empty = DeviceNicBuilder::new();
    invalid_containing(empty.rc(e0, node, &e, QueueOptions::default()), "no node 0");
}
