//! The ownership promise, from safe code only: one executor per queue in the whole
//! process, whichever software NICs and control planes the caller makes. (The holes that
//! are type errors are compile-fail cases in `tests/compile_fail/`; the CUDA software NIC's
//! and the sink's claims are tested in `kernels/tests/nic_memory.rs` and on the GPU.)
#![forbid(unsafe_code)]

use std::sync::Arc;

use ibgda::memory::DmaBuffer;
use ibgda::nic::{Device, QueueSpec, SoftNic};
use ibgda::queue::ExecutorConflict;
use ibgda::softnic::{Access, Fabric, QpConfig, QueuePairSpec, SoftNicError};
use ibgda::wqe::{RdmaWrite, RemoteAddress, RingSize, TransportKind};

fn spec() -> QueuePairSpec {
    QueuePairSpec::new(RingSize::new(16).unwrap())
}

fn conflict(result: Result<impl std::fmt::Debug, SoftNicError>) -> ExecutorConflict {
    match result {
        Err(SoftNicError::ExecutedElsewhere(c)) => c,
        other => panic!("a second NIC took a queue another executes: {other:?}"),
    }
}

/// Hole 2: a second fabric over a live queue pair's memory is refused, so its WQEs run
/// once, on the NIC that owns them; once that NIC lets go, the memory can move.
#[test]
fn a_second_fabric_cannot_execute_a_live_queue_pair() {
    let (a, b) = (Fabric::new(), Fabric::new());
    let (node_a, node_b) = (a.add_node(1).unwrap(), b.add_node(1).unwrap());
    let mut qp = a
        .create_queue_pair::<ibgda::wqe::Rc>(node_a, spec())
        .unwrap();
    a.connect(qp.qpn(), qp.qpn()).unwrap();
    let (sq, cq) = (qp.sq().memory(), qp.cq().memory());
    let held = sq.executor().expect("fabric A executes the queue");
    assert_eq!(cq.executor(), Some(held));

    let c = conflict(b.create_qp(node_b, QpConfig::new(TransportKind::Rc, sq, cq)));
    assert_eq!(c.queue, sq.ring());
    assert!(c.to_string().contains("software NIC fabric"), "{c}");
    // Its CQ alone cannot be taken either (a fresh send queue completing into it).
    let fresh = ibgda::queue::SendQueueMemory::allocate(RingSize::new(16).unwrap()).unwrap();
    let c = conflict(b.create_qp(node_b, QpConfig::new(TransportKind::Rc, &fresh, cq)));
    assert_eq!(c.queue, cq.ring());
    assert_eq!(b.census().queue_pairs, 0, "nothing half-made on fabric B");
    assert_eq!(
        fresh.executor(),
        None,
        "the refused claim left nothing held"
    );

    // The queue still works, executed once, by fabric A.
    let buffer = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
    let region = a
        .register(
            node_a,
            buffer.clone(),
            0,
            64,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap();
    let value = 0x0102_0304_0506_0708u64.to_be_bytes();
    let wqe = RdmaWrite::new(RemoteAddress::new(region.addr(), region.rkey()))
        .inline(&value)
        .signaled()
        .build()
        .unwrap();
    let ticket = qp.post(&wqe, &[]).unwrap();
    assert_eq!(a.run_until_idle().wqes_executed, 1);
    assert_eq!(b.run_until_idle().wqes_executed, 0);
    qp.poll().unwrap().expect("one completion");
    assert!(qp.sq().is_complete(ticket));
    assert_eq!(buffer.to_vec()[..8], value);

    // Fabric A lets go: the memory can move to fabric B.
    a.destroy_qp(qp.qpn()).unwrap();
    assert_eq!(qp.sq().memory().executor(), None);
    assert_eq!(qp.cq().memory().executor(), None);
    b.create_qp(
        node_b,
        QpConfig::new(TransportKind::Rc, qp.sq().memory(), qp.cq().memory()),
    )
    .unwrap();
    assert_ne!(qp.sq().memory().executor(), Some(held));
}

/// Hole 2 through the control plane: a queue pair made by PRM commands on one software
/// NIC is claimed by its fabric from its UMEM registration on; another fabric cannot take
/// it, and it is released when the queue pair is torn down.
#[test]
fn a_control_plane_queue_pair_belongs_to_its_nic() {
    let (a, b) = (Fabric::new(), Fabric::new());
    let device = Device::open(SoftNic::open(&a, 1).unwrap()).unwrap();
    let pd = device.alloc_pd().unwrap();
    let pending = pd
        .create_rc(QueueSpec::new(RingSize::new(16).unwrap()))
        .unwrap();
    let endpoint = pending.endpoint();
    let qp = pending.connect(&endpoint).unwrap();
    assert!(qp.sq().memory().executor().is_some());
    let node_b = b.add_node(2).unwrap();
    let config = QpConfig::new(TransportKind::Rc, qp.sq().memory(), qp.cq().memory());
    conflict(b.create_qp(node_b, config));
    assert_eq!(b.census().queue_pairs, 0);
    drop(qp);
    assert_eq!(device.teardown_failures(), (0, None));
}

/// Keys are numbered per fabric: two fabrics never hand out the same keys.
#[test]
fn fabrics_number_their_keys_apart() {
    let (a, b) = (Fabric::new(), Fabric::new());
    let (node_a, node_b) = (a.add_node(1).unwrap(), b.add_node(1).unwrap());
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let ra = a
        .register(
            node_a,
            Arc::new(DmaBuffer::zeroed(64, 64).unwrap()),
            0,
            64,
            access,
        )
        .unwrap();
    let rb = b
        .register(
            node_b,
            Arc::new(DmaBuffer::zeroed(64, 64).unwrap()),
            0,
            64,
            access,
        )
        .unwrap();
    let keys_a = [ra.lkey().0, ra.rkey().0];
    let keys_b = [rb.lkey().0, rb.rkey().0];
    assert!(
        keys_a.iter().all(|k| !keys_b.contains(k)),
        "fabric A keys {keys_a:x?}, fabric B keys {keys_b:x?}"
    );
}
