//! Typed queues end to end on the software NIC: what CPU producers post through
//! `QueuePair`, `DciPool` and `SharedSendQueue` lands exactly in remote memory, READs and
//! atomics return the right values, and faults come back as typed completion errors.

use std::sync::Arc;
use std::time::Duration;

use ibgda::cq::{CompletionStatus, Syndrome};
use ibgda::memory::DmaBuffer;
use ibgda::queue::*;
use ibgda::softnic::{Access, Fabric, MemoryRegion, NodeId, QueuePairSpec};
use ibgda::wqe::*;

const WAIT: Duration = Duration::from_secs(10);
const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

struct World {
    fabric: Fabric,
    a: NodeId,
    b: NodeId,
}

fn world() -> World {
    let fabric = Fabric::new();
    let a = fabric.add_node(1).unwrap();
    let b = fabric.add_node(2).unwrap();
    World { fabric, a, b }
}

fn region(w: &World, node: NodeId, len: usize, fill: u8) -> (Arc<DmaBuffer>, MemoryRegion) {
    let buffer = Arc::new(DmaBuffer::zeroed(len, 4096).unwrap());
    buffer.fill(0, len, fill).unwrap();
    let mr = w
        .fabric
        .register(node, buffer.clone(), 0, len, ALL)
        .unwrap();
    (buffer, mr)
}

fn rc_pair(w: &World, wqebbs: usize) -> (QueuePair<Rc>, QueuePair<Rc>) {
    let spec = QueuePairSpec::new(RingSize::new(wqebbs).unwrap());
    let a = w.fabric.create_queue_pair::<Rc>(w.a, spec).unwrap();
    let b = w.fabric.create_queue_pair::<Rc>(w.b, spec).unwrap();
    w.fabric.connect(a.qpn(), b.qpn()).unwrap();
    (a, b)
}

/// Waits for `ticket`, driving the NIC in step mode.
fn complete(w: &World, qp: &mut QueuePair<Rc>, ticket: Ticket) {
    qp.wait_driving(ticket, WAIT, &mut || {
        w.fabric.step();
    })
    .unwrap();
}

#[test]
fn eight_byte_inline_and_pointer_puts_land_exactly() {
    let w = world();
    let (mut qp, _peer) = rc_pair(&w, 64);
    let (remote_buf, remote) = region(&w, w.b, 256, 0xee);
    let (local_buf, local) = region(&w, w.a, 256, 0x00);
    local_buf
        .write(40, &0x0102_0304_0506_0708u64.to_be_bytes())
        .unwrap();

    let inline_value = 0xa1a2_a3a4_a5a6_a7a8u64.to_be_bytes();
    let inline = RdmaWrite::new(remote.remote(16))
        .inline(&inline_value)
        .build()
        .unwrap();
    qp.post(&inline, &[]).unwrap();
    let pointer = RdmaWrite::new(remote.remote(64))
        .sge(local.sge(40, 8).unwrap())
        .signaled()
        .build()
        .unwrap();
    let ticket = qp.post(&pointer, &[local.registered()]).unwrap();
    complete(&w, &mut qp, ticket);

    let mut expected = vec![0xee; 256];
    expected[16..24].copy_from_slice(&inline_value);
    expected[64..72].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
    assert_eq!(
        remote_buf.to_vec(),
        expected,
        "exactly the 16 bytes put changed"
    );
}

#[test]
fn reads_and_atomics_return_the_right_values() {
    let w = world();
    let (mut qp, _peer) = rc_pair(&w, 64);
    let (remote_buf, remote) = region(&w, w.b, 128, 0);
    let (local_buf, local) = region(&w, w.a, 128, 0);
    remote_buf.write(0, b"sixteen bytes!!!").unwrap();
    remote_buf.write(64, &100u64.to_be_bytes()).unwrap();
    remote_buf.write(72, &7u64.to_be_bytes()).unwrap();
    let regs = [local.registered()];

    let read = RdmaRead::new(remote.remote(0))
        .sge(local.sge(0, 16).unwrap())
        .build()
        .unwrap();
    qp.post(&read, &regs).unwrap();
    let fa = Atomic::fetch_add(remote.remote(64), local.local(32), 5)
        .build()
        .unwrap();
    qp.post(&fa, &regs).unwrap();
    let cas_hit = Atomic::compare_swap(remote.remote(72), local.local(40), 7, 9)
        .build()
        .unwrap();
    qp.post(&cas_hit, &regs).unwrap();
    let cas_miss = Atomic::compare_swap(remote.remote(72), local.local(48), 7, 11)
        .signaled()
        .build()
        .unwrap();
    let ticket = qp.post(&cas_miss, &regs).unwrap();
    complete(&w, &mut qp, ticket);

    let got = local_buf.to_vec();
    assert_eq!(&got[0..16], b"sixteen bytes!!!");
    assert_eq!(
        u64::from_be_bytes(got[32..40].try_into().unwrap()),
        100,
        "fetch-add returns the old value"
    );
    assert_eq!(
        u64::from_be_bytes(got[40..48].try_into().unwrap()),
        7,
        "a matching CAS returns the old value"
    );
    assert_eq!(
        u64::from_be_bytes(got[48..56].try_into().unwrap()),
        9,
        "a failed CAS returns the current value"
    );
    let remote_now = remote_buf.to_vec();
    assert_eq!(
        u64::from_be_bytes(remote_now[64..72].try_into().unwrap()),
        105
    );
    assert_eq!(
        u64::from_be_bytes(remote_now[72..80].try_into().unwrap()),
        9,
        "the failed CAS changed nothing"
    );
}

#[test]
fn one_doorbell_announces_a_batch() {
    let w = world();
    let spec = QueuePairSpec {
        send: SendQueueConfig {
            doorbell: DoorbellPolicy::Explicit,
            ..Default::default()
        },
        doorbell_watch: ibgda::softnic::DoorbellWatch::DoorbellOnly,
        ..QueuePairSpec::new(RingSize::new(64).unwrap())
    };
    let mut qp = w.fabric.create_queue_pair::<Rc>(w.a, spec).unwrap();
    let peer = w.fabric.create_queue_pair::<Rc>(w.b, spec).unwrap();
    w.fabric.connect(qp.qpn(), peer.qpn()).unwrap();
    let (remote_buf, remote) = region(&w, w.b, 8 * 16, 0);
    for i in 0..16u64 {
        let v = (i + 1).to_be_bytes();
        let wqe = RdmaWrite::new(remote.remote(8 * i))
            .inline(&v)
            .build()
            .unwrap();
        qp.post(&wqe, &[]).unwrap();
    }
    w.fabric.run_until_idle();
    assert_eq!(
        w.fabric.counters().wqes_executed,
        0,
        "nothing runs before the doorbell"
    );
    qp.ring_doorbell();
    w.fabric.run_until_idle();
    let c = w.fabric.counters();
    assert_eq!((c.doorbells, c.wqes_executed), (1, 16));
    let got = remote_buf.to_vec();
    for i in 0..16usize {
        assert_eq!(
            u64::from_be_bytes(got[8 * i..8 * i + 8].try_into().unwrap()),
            i as u64 + 1
        );
    }
    qp.drain_driving(WAIT, &mut || {
        w.fabric.step();
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(qp.sq().is_idle());
}

#[test]
fn dc_queues_lap_the_ring_with_one_and_two_block_wqes_to_many_targets() {
    let w = world();
    const TARGETS: usize = 5;
    let dcts: Vec<_> = (0..TARGETS)
        .map(|i| w.fabric.create_dct(w.b, 0x5623_ceaf + i as u64).unwrap())
        .collect();
    let (remote_buf, remote) = region(&w, w.b, 8 * 64, 0);
    let spec = QueuePairSpec::new(RingSize::new(8).unwrap());
    let full = w.fabric.create_queue_pair::<Dc<Full>>(w.a, spec).unwrap();
    let compact = w
        .fabric
        .create_queue_pair::<Dc<Compact>>(w.a, spec)
        .unwrap();
    let mut full_pool = DciPool::new(vec![full]).unwrap();
    let mut compact_pool = DciPool::new(vec![compact]).unwrap();
    let lid = w.fabric.lid(w.b).unwrap();
    let mut expected = vec![0u8; 8 * 64];
    for k in 0..64u64 {
        let t = k as usize % TARGETS;
        let value = (k << 8 | t as u64).to_be_bytes();
        expected[8 * k as usize..8 * k as usize + 8].copy_from_slice(&value);
        if k % 2 == 0 {
            // Full AV: control + AV48 | raddr + inline = two blocks.
            let target = FullAddressVector {
                dct: dcts[t].get(),
                dc_key: 0x5623_ceaf + t as u64,
                link: LinkAddress::InfiniBand {
                    lid,
                    sl: 0,
                    static_rate: 0,
                    source_path_bits: 0,
                    force_loopback: false,
                    grh: None,
                },
            }
            .encode()
            .unwrap();
            let wqe = RdmaWrite::new(target.at(remote.remote(8 * k)))
                .inline(&value)
                .signaled()
                .build()
                .unwrap();
            assert_eq!(wqe.wqebbs(), 2);
            let (i, ticket) = full_pool.post(&wqe, &[]).unwrap();
            w.fabric.run_until_idle();
            full_pool.dcis()[i].wait(ticket, WAIT).unwrap();
        } else {
            let target = CompactAddressVector {
                dct: dcts[t].get(),
                dc_key: 0x5623_ceaf + t as u64,
                lid,
                ..Default::default()
            }
            .encode()
            .unwrap();
            let wqe = RdmaWrite::new(target.at(remote.remote(8 * k)))
                .inline(&value)
                .signaled()
                .build()
                .unwrap();
            assert_eq!(wqe.wqebbs(), 1);
            let (i, ticket) = compact_pool.post(&wqe, &[]).unwrap();
            w.fabric.run_until_idle();
            compact_pool.dcis()[i].wait(ticket, WAIT).unwrap();
        }
    }
    assert!(
        full_pool.dcis()[0].sq().producer() >= 3 * 8 * 2,
        "the full-AV DCI lapped its ring at least 3 times"
    );
    assert!(
        compact_pool.dcis()[0].sq().producer() >= 3 * 8,
        "the compact DCI lapped its ring at least 3 times"
    );
    assert_eq!(remote_buf.to_vec(), expected);
}

#[test]
fn a_bad_rkey_is_a_typed_remote_access_error_and_the_rest_flushes() {
    let w = world();
    let (mut qp, _peer) = rc_pair(&w, 16);
    let (remote_buf, remote) = region(&w, w.b, 64, 0x55);
    let good = 1u64.to_be_bytes();
    let bad = RdmaWrite::new(RemoteAddress::new(remote.addr(), RKey(remote.rkey().0 ^ 1)))
        .inline(&good)
        .build()
        .unwrap();
    qp.post(&bad, &[]).unwrap();
    let after = RdmaWrite::new(remote.remote(0))
        .inline(&good)
        .signaled()
        .build()
        .unwrap();
    let ticket = qp.post(&after, &[]).unwrap();
    w.fabric.run_until_idle();
    let err = qp.wait(ticket, WAIT).unwrap_err();
    let WaitError::Poll(PollError::Completion(e)) = err else {
        panic!("expected an error completion, got {err:?}")
    };
    assert_eq!(e.syndrome, Some(Syndrome::RemoteAccess));
    assert_eq!((e.qpn, e.wqe_index), (qp.qpn().get(), 0));
    let flushed = qp.wait(ticket, WAIT).unwrap_err();
    let WaitError::Poll(PollError::Completion(f)) = flushed else {
        panic!("expected a flush, got {flushed:?}")
    };
    assert_eq!(
        (f.syndrome, f.status, f.wqe_index),
        (
            Some(Syndrome::WorkRequestFlushed),
            CompletionStatus::WorkRequestFlushError,
            1
        )
    );
    assert!(qp.sq().is_complete(ticket), "flushed slots are retired too");
    assert_eq!(qp.first_error(), Some(e));
    assert_eq!(remote_buf.to_vec(), vec![0x55; 64], "nothing landed");
}

#[test]
fn many_producers_on_one_shared_queue_land_every_payload() {
    let w = world();
    const PRODUCERS: u64 = 4;
    const PER_PRODUCER: u64 = 3_000;
    let (remote_buf, remote) = region(&w, w.b, (8 * PRODUCERS * PER_PRODUCER) as usize, 0);
    let (local_buf, local) = region(&w, w.a, (8 * PRODUCERS) as usize, 0);
    let size = RingSize::new(64).unwrap();
    let mut shared = SharedQueueConfig::for_ring(size);
    shared.doorbell_batch = 8;
    let queue = w
        .fabric
        .create_shared_queue::<Rc>(w.a, QueuePairSpec::new(size), shared)
        .unwrap();
    let peer = w
        .fabric
        .create_queue_pair::<Rc>(w.b, QueuePairSpec::new(size))
        .unwrap();
    w.fabric.connect(queue.qpn(), peer.qpn()).unwrap();
    let engine = w.fabric.spawn_engine();
    let regs = [local.registered()];
    std::thread::scope(|s| {
        for p in 0..PRODUCERS {
            let (queue, remote, local, regs, local_buf) =
                (&queue, &remote, &local, &regs, &local_buf);
            s.spawn(move || {
                for i in 0..PER_PRODUCER {
                    let value = (p << 48 | i).to_be_bytes();
                    let slot = 8 * (p * PER_PRODUCER + i);
                    // Half inline, half from this producer's own local word.
                    let wqe_inline = RdmaWrite::new(remote.remote(slot))
                        .inline(&value)
                        .build()
                        .unwrap();
                    let wqe_pointer = RdmaWrite::new(remote.remote(slot))
                        .sge(local.sge(8 * p, 8).unwrap())
                        .signaled()
                        .build()
                        .unwrap();
                    loop {
                        let posted = if i % 2 == 0 {
                            queue.post(&wqe_inline, &[])
                        } else {
                            // The source word is rewritten only after the previous pointer
                            // WRITE from it completed, checked by waiting below.
                            local_buf.write((8 * p) as usize, &value).unwrap();
                            queue.post(&wqe_pointer, regs)
                        };
                        match posted {
                            Ok(ticket) => {
                                if i % 2 == 1 {
                                    while !queue.is_complete(ticket) {
                                        if let Err(e) = queue.poll() {
                                            panic!("{e}");
                                        }
                                        queue.ring_doorbell();
                                    }
                                }
                                break;
                            }
                            Err(PostError::Full { .. }) => {
                                queue.poll().unwrap_or_else(|e| panic!("{e}"));
                                queue.ring_doorbell();
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
    });
    queue.ring_doorbell();
    let deadline = std::time::Instant::now() + WAIT;
    while queue.counters().retired() < queue.counters().ready()
        && std::time::Instant::now() < deadline
    {
        queue.poll().unwrap_or_else(|e| panic!("{e}"));
    }
    drop(engine);
    let got = remote_buf.to_vec();
    for p in 0..PRODUCERS {
        for i in 0..PER_PRODUCER {
            let at = (8 * (p * PER_PRODUCER + i)) as usize;
            assert_eq!(
                u64::from_be_bytes(got[at..at + 8].try_into().unwrap()),
                p << 48 | i,
                "producer {p} WQE {i}"
            );
        }
    }
    assert_eq!(queue.first_error(), None);
}

#[test]
fn a_dropped_completion_ends_a_host_wait_with_its_timeout_and_a_later_cqe_covers_it() {
    let w = world();
    let (mut qp, _peer) = rc_pair(&w, 16);
    let (remote_buf, remote) = region(&w, w.b, 64, 0x55);
    w.fabric.drop_completion(qp.qpn().get(), 0).unwrap();
    let value = 0x1122_3344_5566_7788u64.to_be_bytes();
    let write = |at| {
        RdmaWrite::new(remote.remote(at))
            .inline(&value)
            .signaled()
            .build()
            .unwrap()
    };
    let first = qp.post(&write(0), &[]).unwrap();
    w.fabric.run_until_idle();
    assert_eq!(remote_buf.to_vec()[..8], value, "the WRITE itself landed");
    let bound = Duration::from_millis(50);
    let t0 = std::time::Instant::now();
    let err = qp.wait(first, bound).unwrap_err();
    let waited = t0.elapsed();
    let WaitError::Timeout { waited: reported } = err else {
        panic!("expected a timeout, got {err:?}")
    };
    assert!(
        reported >= bound && waited >= bound,
        "{reported:?} / {waited:?}"
    );
    assert!(waited < bound + Duration::from_secs(5), "waited {waited:?}");
    assert!(!qp.sq().is_complete(first));
    // The next signaled WQE's CQE retires everything before it, the lost one included.
    let second = qp.post(&write(8), &[]).unwrap();
    complete(&w, &mut qp, second);
    assert!(qp.sq().is_complete(first));
    assert_eq!(qp.first_error(), None);
}

#[test]
fn a_retry_exceeded_error_ends_a_host_wait_with_its_syndrome() {
    let w = world();
    let (mut qp, _peer) = rc_pair(&w, 16);
    let (remote_buf, remote) = region(&w, w.b, 64, 0x55);
    w.fabric
        .inject_fault(qp.qpn().get(), 0, Syndrome::TransportRetryExceeded, 0x81)
        .unwrap();
    let ticket = qp
        .post(
            &RdmaWrite::new(remote.remote(0))
                .inline(&[1u8; 8])
                .signaled()
                .build()
                .unwrap(),
            &[],
        )
        .unwrap();
    w.fabric.run_until_idle();
    let t0 = std::time::Instant::now();
    let err = qp.wait(ticket, WAIT).unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(1), "returned at once");
    let WaitError::Poll(PollError::Completion(e)) = err else {
        panic!("expected an error completion, got {err:?}")
    };
    assert_eq!(
        (e.syndrome, e.vendor_syndrome),
        (Some(Syndrome::TransportRetryExceeded), 0x81)
    );
    assert_eq!(remote_buf.to_vec(), vec![0x55; 64], "nothing landed");
}
