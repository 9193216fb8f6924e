//! The fence and response-delay model: READ and atomic responses land `response_delay`
//! WQEs later; a WQE whose fence mode waits for reads lands them first; a CQE is never
//! written before the data of the WQEs it covers; an idle queue drains.

mod softnic_support;

use std::sync::Arc;

use ibgda::memory::DmaBuffer;
use ibgda::softnic::Access;
use ibgda::wqe::*;
use softnic_support::*;

const NOP: u8 = 0x00;
const READ: u8 = 0x10;
const FETCH_ADD: u8 = 0x12;
const DUMP: u8 = 0x23;

fn delayed(delay: u32) -> RcPair {
    RcPair::new(&Setup {
        response_delay: delay,
        ..Setup::default()
    })
}

fn remote_pattern(offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len).map(|i| pattern(0x77, i)).collect()
}

fn local_pattern(offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len).map(|i| pattern(0x11, i)).collect()
}

/// READ B[0..8] into A[0..8], then WRITE A[0..8] to B[100..108] with `fence`: returns what
/// B[100..108] received.
fn read_then_forward(fence: FenceMode, delay: u32) -> Vec<u8> {
    let mut pair = delayed(delay);
    let read = RdmaRead::new(pair.b.area.region.remote(0))
        .sge(pair.a.area.region.sge(0, 8).unwrap())
        .build()
        .unwrap();
    let forward = RdmaWrite::new(pair.b.area.region.remote(100))
        .sge(pair.a.area.region.sge(0, 8).unwrap())
        .fence(fence)
        .signaled()
        .build()
        .unwrap();
    pair.a.sq.post(&read);
    pair.a.sq.post(&forward);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    // Either way the READ's data has landed by the time the queue is idle.
    assert_eq!(pair.a.area.bytes(0, 8), remote_pattern(0, 8));
    pair.b.area.bytes(100, 8)
}

#[test]
fn without_a_fence_a_write_gathers_the_bytes_from_before_the_read_landed() {
    assert_eq!(read_then_forward(FenceMode::None, 2), local_pattern(0, 8));
    assert_eq!(
        read_then_forward(FenceMode::InitiatorSmall, 2),
        local_pattern(0, 8)
    );
}

#[test]
fn a_fence_that_waits_for_reads_lands_them_first() {
    for fence in [
        FenceMode::Fence,
        FenceMode::StrongOrdering,
        FenceMode::SmallAndFence,
    ] {
        assert!(fence.waits_for_reads());
        assert_eq!(
            read_then_forward(fence, 2),
            remote_pattern(0, 8),
            "{fence:?}"
        );
    }
}

#[test]
fn with_no_delay_responses_land_at_once() {
    assert_eq!(read_then_forward(FenceMode::None, 0), remote_pattern(0, 8));
}

#[test]
fn a_cqe_waits_for_the_data_of_every_wqe_it_covers() {
    let mut pair = delayed(3);
    let read = RdmaRead::new(pair.b.area.region.remote(16))
        .sge(pair.a.area.region.sge(32, 8).unwrap())
        .build()
        .unwrap();
    pair.a.sq.post(&read);
    pair.a
        .sq
        .post(&Nop::<Rc>::new().signaled().build().unwrap());
    for _ in 0..3 {
        pair.a.sq.post(&Nop::<Rc>::new().build().unwrap());
    }
    pair.a.sq.submit();
    let q = pair.a.qpn.get();
    let old = local_pattern(32, 8);
    let new = remote_pattern(16, 8);

    // One WQE per step: the READ's response lands once three more WQEs have executed,
    // and the NOP's CQE (which covers the READ) only with it.
    for executed in 1..=3u64 {
        let report = pair.fabric.step_limited(1);
        assert_eq!(report.wqes_executed, 1);
        assert_eq!(pair.a.area.bytes(32, 8), old, "after {executed} WQEs");
        assert_eq!(pair.a.cq.poll(), None, "after {executed} WQEs");
        let status = pair.fabric.qp_status(pair.a.qpn).unwrap();
        assert_eq!(status.responses_in_flight, 1);
        assert_eq!(status.cqes_waiting, usize::from(executed >= 2));
    }
    let report = pair.fabric.step_limited(1);
    assert_eq!((report.responses_landed, report.cqes_written), (1, 1));
    assert_eq!(pair.a.area.bytes(32, 8), new);
    assert_eq!(pair.a.cq.drain(), vec![req_cqe(q, NOP, 1, 0, 0)]);
    pair.fabric.run_until_idle();
    assert!(pair.a.cq.drain().is_empty());
}

#[test]
fn an_idle_queue_drains_its_responses() {
    let mut pair = delayed(100);
    let read = RdmaRead::new(pair.b.area.region.remote(0))
        .sge(pair.a.area.region.sge(0, 24).unwrap())
        .signaled()
        .build()
        .unwrap();
    pair.a.sq.post(&read);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    assert_eq!(pair.a.area.bytes(0, 24), remote_pattern(0, 24));
    assert_eq!(
        pair.a.cq.drain(),
        vec![req_cqe(pair.a.qpn.get(), READ, 0, 24, 0)]
    );
}

#[test]
fn an_atomic_updates_remote_memory_at_once_and_its_result_lands_later() {
    let mut pair = delayed(1);
    pair.b.area.set(8, &41u64.to_be_bytes());
    let add = Atomic::fetch_add(
        pair.b.area.region.remote(8),
        pair.a.area.region.local(64),
        1,
    )
    .signaled()
    .build()
    .unwrap();
    pair.a.sq.post(&add);
    pair.a.sq.post(&Nop::<Rc>::new().build().unwrap());
    pair.a.sq.submit();
    pair.fabric.step_limited(1);
    assert_eq!(pair.b.area.bytes(8, 8), 42u64.to_be_bytes());
    assert_eq!(pair.a.area.bytes(64, 8), local_pattern(64, 8));
    assert_eq!(pair.a.cq.poll(), None);
    pair.fabric.step_limited(1);
    assert_eq!(pair.a.area.bytes(64, 8), 41u64.to_be_bytes());
    assert_eq!(
        pair.a.cq.drain(),
        vec![req_cqe(pair.a.qpn.get(), FETCH_ADD, 0, 8, 0)]
    );
}

#[test]
fn a_fenced_dump_completes_only_after_earlier_reads_landed() {
    // NVSHMEM's consistency op: a DUMP with FM = FENCE after READs.
    let mut pair = delayed(10);
    let read = RdmaRead::new(pair.b.area.region.remote(200))
        .sge(pair.a.area.region.sge(200, 16).unwrap())
        .build()
        .unwrap();
    let dump = Dump::<Rc>::new(pair.a.area.region.sge(0, 1).unwrap())
        .fence(FenceMode::Fence)
        .signaled()
        .build()
        .unwrap();
    pair.a.sq.post(&read);
    pair.a.sq.post(&dump);
    pair.a.sq.post(&Nop::<Rc>::new().build().unwrap());
    pair.a.sq.submit();
    pair.fabric.step_limited(1);
    assert_eq!(pair.a.area.bytes(200, 16), local_pattern(200, 16));
    pair.fabric.step_limited(1);
    assert_eq!(pair.a.area.bytes(200, 16), remote_pattern(200, 16));
    assert_eq!(
        pair.a.cq.drain(),
        vec![req_cqe(pair.a.qpn.get(), DUMP, 1, 0, 0)]
    );
}

#[test]
fn a_failing_wqe_lands_earlier_responses_and_completes_earlier_cqes_first() {
    let mut pair = delayed(10);
    let read = RdmaRead::new(pair.b.area.region.remote(0))
        .sge(pair.a.area.region.sge(0, 8).unwrap())
        .signaled()
        .build()
        .unwrap();
    let bad = RdmaWrite::new(pair.b.area.region.remote(0))
        .sge(Sge::new(0x10, 8, LKey(0xbad)).unwrap())
        .build()
        .unwrap();
    pair.a.sq.post(&read);
    pair.a.sq.post(&bad);
    pair.a.sq.submit();
    pair.fabric.step_limited(2);
    let q = pair.a.qpn.get();
    assert_eq!(pair.a.area.bytes(0, 8), remote_pattern(0, 8));
    assert_eq!(
        pair.a.cq.drain(),
        vec![
            req_cqe(q, READ, 0, 8, 0),
            err_cqe(q, 0x08, 1, 0x04, 0x20, 0)
        ]
    );
}

#[test]
fn a_response_to_a_deregistered_region_is_dropped() {
    let mut pair = delayed(5);
    let scratch = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
    let region = pair
        .fabric
        .register(pair.a.node, scratch.clone(), 0, 64, Access::LOCAL_WRITE)
        .unwrap();
    let read = RdmaRead::new(pair.b.area.region.remote(0))
        .sge(region.sge(0, 64).unwrap())
        .signaled()
        .build()
        .unwrap();
    pair.a.sq.post(&read);
    pair.a.sq.post(&Nop::<Rc>::new().build().unwrap());
    pair.a.sq.submit();
    pair.fabric.step_limited(1);
    drop(region);
    pair.fabric.run_until_idle();
    assert_eq!(scratch.to_vec(), vec![0; 64], "the NIC never wrote it");
    assert_eq!(pair.fabric.counters().responses_dropped, 1);
    // The READ itself succeeded at the responder; its CQE still reports it.
    assert_eq!(
        pair.a.cq.drain(),
        vec![req_cqe(pair.a.qpn.get(), READ, 0, 64, 0)]
    );
}

#[test]
fn a_read_onto_its_own_source_lands_the_bytes_read_before_it_landed() {
    // A queue pair connected to itself READs region bytes 0..64 into 32..64 and 64..96 of
    // the same region: the second entry receives the source's original bytes 32..64, not
    // what the first entry put there, whether the response lands at once or later.
    for delay in [0, 2] {
        let fabric = ibgda::softnic::Fabric::new();
        let setup = Setup {
            response_delay: delay,
            ..Setup::default()
        };
        let mut side = side(&fabric, 1, 0x11, TransportKind::Rc, &setup);
        fabric.connect(side.qpn, side.qpn).unwrap();
        let region = &side.area.region;
        let read = RdmaRead::new(region.remote(0))
            .gather([region.sge(32, 32).unwrap(), region.sge(64, 32).unwrap()])
            .signaled()
            .build()
            .unwrap();
        let index = side.sq.post(&read);
        side.sq.submit();
        fabric.run_until_idle();
        let mut expected = local_pattern(0, 128);
        expected[32..96].copy_from_slice(&local_pattern(0, 64));
        assert_eq!(side.area.bytes(0, 128), expected, "delay {delay}");
        assert_eq!(
            side.cq.drain(),
            vec![req_cqe(side.qpn.get(), READ, index, 64, 0)],
            "delay {delay}"
        );
    }
}
