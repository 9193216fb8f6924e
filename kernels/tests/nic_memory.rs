//! What the CUDA software NIC and GPU queue memory accept, checked on the host before
//! anything reaches a device: engine tables may name only memory derived from owned
//! buffers (regions inside registered buffers, queues and CQs inside the memory of the
//! queue pairs added), registered memory never overlaps queue memory, and a CQ of 0
//! entries never becomes queue memory (its `log_cq_entries` would be 32).
//!
//! No GPU is involved: the "device" buffers here are host allocations standing in for
//! device memory, compared as address ranges and never dereferenced (no kernel runs).

use std::sync::Arc;

use ibgda::cq::CqMode;
use ibgda::memory::DeviceBuffer;
use ibgda::order::GpuFence;
use ibgda::queue::{
    CompletionQueueMemory, DoorbellPolicy, Gpu as GpuPlaced, QpConfig, QueueMemoryError, QueuePair,
    SendQueueConfig, SendQueueMemory,
};
use ibgda::wqe::{Qpn, Rc, RingSize, WqeLimits};
use ibgda_kernels::softnic::device::{loopback_records, NicMemory};
use ibgda_kernels::softnic::{NicNode, NicRegion, NicTables};

/// A buffer of `len` bytes at a distinct, live address (a host allocation it owns).
fn stand_in(len: usize) -> DeviceBuffer {
    let backing = vec![0u64; len.div_ceil(8).max(1)];
    let addr = backing.as_ptr() as u64;
    // SAFETY: no GPU exists in these tests and no kernel is launched: the buffer is only
    // compared as an address range. `backing`, moved into the owner, keeps `len` bytes
    // allocated at `addr` for as long as the buffer lives, so ranges stay distinct.
    unsafe { DeviceBuffer::from_raw(addr, len, Box::new(backing)) }
}

fn queue_pair_numbered(qpn: u32) -> QueuePair<Rc, GpuPlaced, GpuFence> {
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
        Arc::new(stand_in(64)),
        config,
        GpuFence,
    )
    .unwrap()
}

fn queue_pair() -> QueuePair<Rc, GpuPlaced, GpuFence> {
    queue_pair_numbered(0x42)
}

fn region(b: &DeviceBuffer, offset: u64, len: u64) -> NicRegion {
    NicRegion {
        start: b.addr() + offset,
        base: b.addr() + offset,
        len,
        node: 0,
        lkey: 1,
        rkey: 2,
        access: 0xf,
    }
}

fn tables(qp: &QueuePair<Rc, GpuPlaced, GpuFence>, regions: Vec<NicRegion>) -> NicTables {
    let (queue, cq, responder) = loopback_records(qp, 0, 0, 4096);
    NicTables {
        nodes: vec![NicNode {
            lid: 1,
            reserved: 0,
        }],
        regions,
        cqs: vec![cq],
        responders: vec![responder],
        queues: vec![queue],
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
fn tables_over_owned_memory_pass() {
    let qp = queue_pair();
    let data = Arc::new(stand_in(4096));
    let mut memory = NicMemory::new();
    memory.register(&data).queue_pair(&qp);
    let t = tables(&qp, vec![region(&data, 0, 4096), region(&data, 64, 128)]);
    assert_eq!(memory.check(&[t]), Ok(()));
}

#[test]
fn a_region_outside_registered_memory_is_refused() {
    let qp = queue_pair();
    let data = Arc::new(stand_in(4096));
    let elsewhere = stand_in(4096);
    let mut memory = NicMemory::new();
    memory.register(&data).queue_pair(&qp);
    for (what, r) in [
        (
            "everything",
            NicRegion {
                start: 0,
                base: 0,
                len: u64::MAX,
                ..region(&data, 0, 1)
            },
        ),
        ("one byte past", region(&data, 1, 4096)),
        ("an unregistered buffer", region(&elsewhere, 0, 64)),
        (
            "the send ring",
            NicRegion {
                start: qp.sq_memory().ring().addr,
                base: qp.sq_memory().ring().addr,
                ..region(&data, 0, 64)
            },
        ),
        (
            "the CQ",
            NicRegion {
                start: qp.cq_memory().ring().addr,
                base: qp.cq_memory().ring().addr,
                ..region(&data, 0, 64)
            },
        ),
    ] {
        let err = memory.check(&[tables(&qp, vec![r])]);
        assert!(
            matches!(&err, Err(e) if e.to_string().contains("region 0")),
            "{what}: {err:?}"
        );
    }
}

#[test]
fn queues_and_cqs_outside_queue_memory_are_refused() {
    let qp = queue_pair();
    let other = queue_pair();
    let data = Arc::new(stand_in(4096));
    let mut memory = NicMemory::new();
    memory.register(&data).queue_pair(&qp);
    // A queue pair whose memory was not added.
    let err = memory.check(&[tables(&other, vec![])]);
    assert!(
        matches!(&err, Err(e) if e.to_string().contains("engine 0")),
        "{err:?}"
    );
    // A ring placed in registered (data) memory.
    let mut t = tables(&qp, vec![]);
    t.queues[0].ring = data.addr();
    let err = memory.check(&[t]);
    assert!(
        matches!(&err, Err(e) if e.to_string().contains("queue 0")),
        "{err:?}"
    );
    // A CQ of 0 entries in the tables.
    let mut t = tables(&qp, vec![]);
    t.cqs[0].entries = 0;
    t.cqs[0].log2_entries = 0;
    let err = memory.check(&[t]);
    assert!(
        matches!(&err, Err(e) if e.to_string().contains("CQ 0")),
        "{err:?}"
    );
    // No engine at all.
    assert!(memory.check(&[]).is_err());
}

#[test]
fn registered_memory_overlapping_queue_memory_is_refused() {
    let qp = queue_pair();
    let ring = qp.sq_memory().ring();
    // SAFETY: as `stand_in`: compared as an address range only, never dereferenced; it
    // names the queue's ring as a buggy caller's buffer would.
    let alias = Arc::new(unsafe { DeviceBuffer::from_raw(ring.addr + 64, 64, Box::new(())) });
    let mut memory = NicMemory::new();
    memory.register(&alias).queue_pair(&qp);
    let err = memory.check(&[tables(&qp, vec![])]);
    assert!(
        matches!(&err, Err(e) if e.to_string().contains("overlaps queue memory")),
        "{err:?}"
    );
}

#[test]
fn a_queue_or_cq_is_executed_by_one_engine_only() {
    let qp = queue_pair();
    let mut memory = NicMemory::new();
    memory.queue_pair(&qp);
    let t = tables(&qp, vec![]);
    // The same queue in two engines: two blocks would execute one ring.
    let err = memory.check(&[t.clone(), t.clone()]);
    assert!(
        matches!(&err, Err(e) if e.to_string().contains("send ring")),
        "{err:?}"
    );
    // The same CQ in two engines (the queues differ).
    let other = queue_pair_numbered(0x43);
    memory.queue_pair(&other);
    let mut t2 = tables(&other, vec![]);
    t2.cqs[0] = t.cqs[0];
    let err = memory.check(&[t.clone(), t2]);
    assert!(
        matches!(&err, Err(e) if e.to_string().contains("CQ ring")),
        "{err:?}"
    );
    // A CQ shared by two queues of one engine is how a NIC works: accepted.
    let mut one = tables(&qp, vec![]);
    let (mut q2, _, r2) = loopback_records(&other, 0, 0, 4096);
    q2.cq = 0;
    one.queues.push(q2);
    one.queues.sort_by_key(|q| q.qpn);
    one.responders.push(r2);
    assert_eq!(memory.check(&[one]), Ok(()));
}
