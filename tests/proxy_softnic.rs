//! The proxy end to end on the software NIC, CPU threads standing in for GPU producers:
//! every payload, counter, result and completion counter checked; malformed and
//! out-of-window descriptors complete with typed errors and move no byte; the
//! CPU-assisted doorbell executes nothing until its forwarder rings.

use std::num::NonZeroU32;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibgda::memory::DmaBuffer;
use ibgda::proxy::*;
use ibgda::queue::{DoorbellPolicy, QueuePair};
use ibgda::softnic::{Access, DoorbellWatch, Fabric, MemoryRegion, NodeId, QueuePairSpec};
use ibgda::wqe::{Rc, RdmaWrite, RingSize};

const WAIT: Duration = Duration::from_secs(20);
const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

struct World {
    fabric: Fabric,
    proxy: NodeId,
    peer: NodeId,
}

fn world() -> World {
    let fabric = Fabric::new();
    let proxy = fabric.add_node(1).unwrap();
    let peer = fabric.add_node(2).unwrap();
    World {
        fabric,
        proxy,
        peer,
    }
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

/// A worker's queue pair to the peer, chaining (explicit doorbell).
fn worker_qp(w: &World) -> QueuePair<Rc> {
    let mut spec = QueuePairSpec::new(RingSize::new(64).unwrap());
    spec.send.doorbell = DoorbellPolicy::Explicit;
    let qp = w.fabric.create_queue_pair::<Rc>(w.proxy, spec).unwrap();
    let remote = w
        .fabric
        .create_queue_pair::<Rc>(w.peer, QueuePairSpec::new(RingSize::new(64).unwrap()))
        .unwrap();
    w.fabric.connect(qp.qpn(), remote.qpn()).unwrap();
    // The responder's handle is not needed (RDMA needs no receives); its queue stays
    // in the fabric.
    std::mem::forget(remote);
    qp
}

fn wait_for(ring: &RingMemory, count: u64) {
    assert!(
        wait_completed(ring, count, WAIT),
        "ring completed {} of {count} (consumed {})",
        ring.completed(),
        ring.consumed()
    );
}

fn be(bytes: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap())
}

#[test]
fn tuned_ring_every_operation_lands_exactly() {
    let w = world();
    let _engine = w.fabric.spawn_engine();
    let (remote_buf, remote) = region(&w, w.peer, 4096, 0xee);
    let (local_buf, local) = region(&w, w.proxy, 1024, 0);
    let (results_buf, results) = region(&w, w.proxy, 16 * 8, 0);
    // Counters the atomics act on (big-endian, as InfiniBand atomics are).
    remote_buf.write(2048, &100u64.to_be_bytes()).unwrap();
    remote_buf.write(2056, &7u64.to_be_bytes()).unwrap();
    remote_buf.write(2064, &0u64.to_be_bytes()).unwrap();
    remote_buf
        .write(1024, b"remote bytes to read back")
        .unwrap();
    local_buf
        .write(0, b"local payload of 32 bytes here!!")
        .unwrap();

    let windows = Arc::new(
        Windows::new(
            vec![LocalWindow::new(local.clone())],
            vec![vec![RemoteWindow::of(&remote)]],
        )
        .unwrap(),
    );
    let (mut producer, consumer) = ProxyRing::allocate::<Tuned>(16).unwrap();
    let ring = producer.ring().clone();
    let worker = Worker::spawn(
        vec![worker_qp(&w)],
        windows,
        vec![WorkerRing {
            consumer,
            results: LocalWindow::new(results.clone()),
        }],
        WorkerConfig {
            batch: NonZeroU32::new(4).unwrap(),
            ..WorkerConfig::default()
        },
    )
    .unwrap();

    let at = |offset| RemoteRef {
        peer: 0,
        window: 0,
        offset,
    };
    let mut requests = Vec::new();
    // 40 inline writes (the ring of 16 wraps twice), then one of each other operation.
    for i in 0..40u32 {
        requests.push(Request::WriteInline8 {
            dst: at(8 * i),
            value: 0x0101_0101_0101_0101 * u64::from(i + 1),
        });
    }
    requests.push(Request::Write {
        dst: at(512),
        src: LocalRef {
            window: 0,
            offset: 0,
        },
        len: 32,
    });
    requests.push(Request::Read {
        src: at(1024),
        dst: LocalRef {
            window: 0,
            offset: 256,
        },
        len: 25,
    });
    requests.push(Request::FetchAdd {
        dst: at(2048),
        add: 5,
    });
    requests.push(Request::CompareSwap {
        dst: at(2056),
        compare: 7,
        swap: 9,
    });
    for _ in 0..10 {
        requests.push(Request::Signal {
            dst: at(2064),
            add: 3,
        });
    }
    let mut indices = Vec::new();
    for r in &requests {
        indices.push(producer.push(r).unwrap());
    }
    assert_eq!(indices, (0..requests.len() as u64).collect::<Vec<_>>());
    wait_for(&ring, requests.len() as u64);
    let report = worker.stop();
    assert_eq!(ring.errors(), 0, "{:?}", report.errors);
    assert!(report.completion_errors.is_empty());
    assert_eq!(report.taken, requests.len() as u64);
    assert_eq!(report.posted, requests.len() as u64);
    assert!(
        report.doorbells < report.posted,
        "chaining rings fewer doorbells than WQEs: {report:?}"
    );

    let r = remote_buf.to_vec();
    let mut expected = vec![0xeeu8; 4096];
    for i in 0..40usize {
        expected[8 * i..8 * i + 8]
            .copy_from_slice(&(0x0101_0101_0101_0101 * (i as u64 + 1)).to_le_bytes());
    }
    expected[512..544].copy_from_slice(b"local payload of 32 bytes here!!");
    expected[1024..1049].copy_from_slice(b"remote bytes to read back");
    expected[2048..2056].copy_from_slice(&105u64.to_be_bytes());
    expected[2056..2064].copy_from_slice(&9u64.to_be_bytes());
    expected[2064..2072].copy_from_slice(&30u64.to_be_bytes());
    assert_eq!(r, expected, "exactly the requested bytes changed");
    assert_eq!(
        &local_buf.to_vec()[256..281],
        b"remote bytes to read back",
        "READ landed in the local window"
    );
    let res = results_buf.to_vec();
    // Descriptor 42 (fetch-add) and 43 (compare-swap) are in slots 42 % 16 and 43 % 16.
    assert_eq!(
        be(&res, 8 * (42 % 16)),
        100,
        "fetch-add returns the old value"
    );
    assert_eq!(
        be(&res, 8 * (43 % 16)),
        7,
        "compare-swap returns the old value"
    );
}

#[test]
fn baseline_ring_shared_by_three_producers_loses_nothing() {
    let w = world();
    let _engine = w.fabric.spawn_engine();
    let (remote_buf, remote) = region(&w, w.peer, 3 * 200 * 8, 0);
    let (_, results) = region(&w, w.proxy, 8 * 8, 0);
    let windows = Arc::new(Windows::new(vec![], vec![vec![RemoteWindow::of(&remote)]]).unwrap());
    // A ring of 8 slots shared by three producers of 200 requests each: 75 laps.
    let (producer, consumer) = ProxyRing::allocate::<Baseline>(8).unwrap();
    let ring = producer.ring().clone();
    let worker = Worker::spawn(
        vec![worker_qp(&w)],
        windows,
        vec![WorkerRing {
            consumer,
            results: LocalWindow::new(results),
        }],
        WorkerConfig {
            batch: NonZeroU32::new(16).unwrap(),
            ..WorkerConfig::default()
        },
    )
    .unwrap();
    let threads: Vec<_> = (0..3u32)
        .map(|p| {
            let producer = producer.clone();
            std::thread::spawn(move || {
                for i in 0..200u32 {
                    let slot = p * 200 + i;
                    producer
                        .push(&Request::WriteInline8 {
                            dst: RemoteRef {
                                peer: 0,
                                window: 0,
                                offset: 8 * slot,
                            },
                            value: u64::from(slot) << 32 | 0xabcd,
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    wait_for(&ring, 600);
    let report = worker.stop();
    assert_eq!(report.taken, 600, "no descriptor read twice");
    assert_eq!(ring.errors(), 0);
    let r = remote_buf.to_vec();
    for slot in 0..600u64 {
        let at = 8 * slot as usize;
        assert_eq!(
            u64::from_le_bytes(r[at..at + 8].try_into().unwrap()),
            slot << 32 | 0xabcd,
            "write {slot} landed"
        );
    }
}

#[test]
fn bad_descriptors_complete_with_typed_errors_and_move_no_byte() {
    let w = world();
    let _engine = w.fabric.spawn_engine();
    let (remote_buf, remote) = region(&w, w.peer, 256, 0x5a);
    let (_, results) = region(&w, w.proxy, 8 * 8, 0);
    let windows = Arc::new(Windows::new(vec![], vec![vec![RemoteWindow::of(&remote)]]).unwrap());
    let (producer, consumer) = ProxyRing::allocate::<Tuned>(8).unwrap();
    let ring = producer.ring().clone();
    // A producer that writes raw slots, as a faulty GPU could.
    drop(producer);
    let g = ring.geometry();
    let put = |index: u64, words: [u64; 2]| {
        let slot = 2 * (index % g.slots()) as usize;
        // SAFETY: the ring's producer end was dropped: this closure is its only producer,
        // and it writes slots only.
        let b = unsafe { ring.words_unchecked() };
        b[slot + 1].store(words[1], Ordering::Release);
        b[slot].store(words[0], Ordering::Release);
    };
    let good = |index: u64, offset: u32| {
        RequestDescriptor::encode(
            &Request::WriteInline8 {
                dst: RemoteRef {
                    peer: 0,
                    window: 0,
                    offset,
                },
                value: 0x1111_2222_3333_4444,
            },
            Epoch::of_lap(index / g.slots()),
        )
        .unwrap()
        .to_words()
    };
    let epoch = |i: u64| u64::from(Epoch::of_lap(i / g.slots()).get());
    let le = |v: u64| u64::from_ne_bytes(v.to_le_bytes());
    let worker = Worker::spawn(
        vec![worker_qp(&w)],
        windows,
        vec![WorkerRing {
            consumer,
            results: LocalWindow::new(results),
        }],
        WorkerConfig::default(),
    )
    .unwrap();
    put(0, good(0, 0));
    // 1: unknown opcode 9.
    put(1, [le(epoch(1) | 9 << 8), le(epoch(1))]);
    // 2: past the window's end (offset 252 + 8 > 256).
    put(2, good(2, 252));
    // 3: no such peer.
    put(
        3,
        RequestDescriptor::encode(
            &Request::Signal {
                dst: RemoteRef {
                    peer: 1,
                    window: 0,
                    offset: 0,
                },
                add: 1,
            },
            Epoch::of_lap(0),
        )
        .unwrap()
        .to_words(),
    );
    // 4: a fetch-add with reserved bits set.
    put(
        4,
        [le(epoch(4) | 4 << 8 | 0x7 << 24), le(epoch(4) | 1 << 8)],
    );
    put(5, good(5, 248));
    wait_for(&ring, 6);
    let report = worker.stop();
    assert_eq!(ring.errors(), 4);
    assert_eq!(
        ring.first_error_code(),
        1,
        "the first error was a descriptor error"
    );
    let errors: Vec<(u64, RequestError)> = report.errors.iter().map(|&(_, i, e)| (i, e)).collect();
    assert_eq!(
        errors,
        vec![
            (
                1,
                RequestError::Descriptor(DescriptorError::UnknownOpcode { opcode: 9 })
            ),
            (
                2,
                RequestError::Window(WindowError::OutOfWindow {
                    side: WindowSide::Remote { peer: 0 },
                    window: 0,
                    offset: 252,
                    len: 8,
                    window_len: 256
                })
            ),
            (
                3,
                RequestError::Window(WindowError::NoSuchPeer { peer: 1, peers: 1 })
            ),
            (
                4,
                RequestError::Descriptor(DescriptorError::ReservedBits {
                    opcode: 4,
                    bits: 0x7 << 24
                })
            ),
        ]
    );
    assert_eq!(report.posted, 2, "only the two good descriptors posted");
    let mut expected = vec![0x5au8; 256];
    expected[..8].copy_from_slice(&0x1111_2222_3333_4444u64.to_le_bytes());
    expected[248..].copy_from_slice(&0x1111_2222_3333_4444u64.to_le_bytes());
    assert_eq!(
        remote_buf.to_vec(),
        expected,
        "bad descriptors moved no byte"
    );
}

/// Two workers, four rings each; one producer ring is private to a probe while the
/// others are shared by bulk producers: the same code, configured.
#[test]
fn two_workers_private_and_shared_rings() {
    let w = world();
    let _engine = w.fabric.spawn_engine();
    let (remote_buf, remote) = region(&w, w.peer, 8 * 1024, 0);
    let windows = Arc::new(Windows::new(vec![], vec![vec![RemoteWindow::of(&remote)]]).unwrap());
    let mut producers = Vec::new();
    let mut workers = Vec::new();
    for t in 0..2 {
        let mut rings = Vec::new();
        for _ in 0..4 {
            let (p, c) = ProxyRing::allocate::<Baseline>(16).unwrap();
            let (_, results) = region(&w, w.proxy, 16 * 8, 0);
            producers.push(p);
            rings.push(WorkerRing {
                consumer: c,
                results: LocalWindow::new(results),
            });
        }
        let worker = Worker::spawn(
            vec![worker_qp(&w)],
            windows.clone(),
            rings,
            WorkerConfig {
                core: Some(t),
                batch: NonZeroU32::new(8).unwrap(),
                ..WorkerConfig::default()
            },
        )
        .unwrap();
        // Pinning is reported, whether or not the machine allowed it.
        assert!(matches!(
            worker.pinning(),
            Pinning::Pinned(c) | Pinning::Failed { core: c, .. } if c == t
        ));
        workers.push(worker);
    }
    // Ring 0 is the probe's; rings 1..8 are shared by two bulk producers each.
    let bulk: Vec<_> = (0..14u32)
        .map(|b| {
            let p = producers[1 + (b as usize % 7)].clone();
            std::thread::spawn(move || {
                for i in 0..32u32 {
                    let slot = 64 + b * 32 + i;
                    p.push(&Request::WriteInline8 {
                        dst: RemoteRef {
                            peer: 0,
                            window: 0,
                            offset: 8 * slot,
                        },
                        value: u64::from(slot),
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for i in 0..64u32 {
        let index = producers[0]
            .push(&Request::WriteInline8 {
                dst: RemoteRef {
                    peer: 0,
                    window: 0,
                    offset: 8 * i,
                },
                value: u64::from(i),
            })
            .unwrap();
        // The probe waits for each of its requests: a round trip through the proxy.
        wait_for(producers[0].ring(), index + 1);
    }
    for b in bulk {
        b.join().unwrap();
    }
    // Every ring was given 64 requests (the probe's 64; two bulk producers' 32 each). What
    // a ring has consumed when it is read may still lag its pushes, so each ring is waited
    // for its known count, then counted.
    let mut total = 0;
    for p in &producers {
        wait_for(p.ring(), 64);
        total += p.ring().completed();
    }
    assert_eq!(total, 64 + 14 * 32);
    drop(workers);
    let r = remote_buf.to_vec();
    for slot in 0..(64 + 14 * 32) as usize {
        assert_eq!(
            u64::from_le_bytes(r[8 * slot..8 * slot + 8].try_into().unwrap()),
            slot as u64
        );
    }
}

#[test]
fn cpu_assisted_doorbell_executes_only_when_forwarded() {
    let w = world();
    let _engine = w.fabric.spawn_engine();
    let (remote_buf, remote) = region(&w, w.peer, 64 * 8, 0);
    let mut spec = QueuePairSpec::new(RingSize::new(64).unwrap());
    spec.send.doorbell = DoorbellPolicy::Explicit;
    // The NIC reads the doorbell record only when a doorbell arrives.
    spec.doorbell_watch = DoorbellWatch::DoorbellOnly;
    let pairs: Vec<_> = (0..2)
        .map(|_| {
            let qp = w.fabric.create_queue_pair::<Rc>(w.proxy, spec).unwrap();
            let peer = w
                .fabric
                .create_queue_pair::<Rc>(w.peer, QueuePairSpec::new(RingSize::new(64).unwrap()))
                .unwrap();
            w.fabric.connect(qp.qpn(), peer.qpn()).unwrap();
            std::mem::forget(peer);
            let slot = DmaBuffer::zeroed(64, 64).unwrap();
            AssistedQueuePair::new(qp, slot).unwrap()
        })
        .collect();
    let (mut queues, targets): (Vec<_>, Vec<_>) = pairs.into_iter().unzip();
    let mut tickets = Vec::new();
    for (q, queue) in queues.iter_mut().enumerate() {
        for i in 0..16u64 {
            let slot = q as u64 * 32 + i;
            let value = (slot + 1).to_le_bytes();
            let mut b = RdmaWrite::new(remote.remote(8 * slot)).inline(&value);
            if i == 15 {
                b = b.signaled();
            }
            tickets.push(queue.post(&b.build().unwrap(), &[]).unwrap());
        }
        queue.publish_index();
    }
    // Published and announced to the slot, but no doorbell: nothing runs.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        remote_buf.to_vec(),
        vec![0u8; 512],
        "nothing executes before the forwarder rings"
    );
    let forwarder = Forwarder::spawn(targets).unwrap();
    let deadline = Instant::now() + WAIT;
    for (q, queue) in queues.iter_mut().enumerate() {
        let last = tickets[16 * q + 15];
        while !queue.is_complete(last) {
            queue.poll().unwrap();
            assert!(Instant::now() < deadline, "queue {q} did not complete");
            std::thread::yield_now();
        }
    }
    // A second round on queue 0 after the forwarder is running.
    let value = 0xfeedu64.to_le_bytes();
    let t = queues[0]
        .post(
            &RdmaWrite::new(remote.remote(8 * 20))
                .inline(&value)
                .signaled()
                .build()
                .unwrap(),
            &[],
        )
        .unwrap();
    queues[0].publish_index();
    while !queues[0].is_complete(t) {
        queues[0].poll().unwrap();
        assert!(Instant::now() < deadline);
        std::thread::yield_now();
    }
    let report = forwarder.stop();
    assert_eq!(report.forwarded, 3, "one doorbell per published index");
    let r = remote_buf.to_vec();
    for slot in 0..64usize {
        let got = u64::from_le_bytes(r[8 * slot..8 * slot + 8].try_into().unwrap());
        let expected = match slot {
            20 => 0xfeed,
            0..=15 | 32..=47 => slot as u64 + 1,
            _ => 0,
        };
        assert_eq!(got, expected, "slot {slot}");
    }
}

#[test]
fn workers_refuse_bad_setups() {
    let w = world();
    let (_, remote) = region(&w, w.peer, 64, 0);
    let (_, results) = region(&w, w.proxy, 8, 0);
    let windows = Arc::new(Windows::new(vec![], vec![vec![RemoteWindow::of(&remote)]]).unwrap());
    let (_, consumer) = ProxyRing::allocate::<Tuned>(4).unwrap();
    let err = Worker::spawn(
        vec![worker_qp(&w)],
        windows.clone(),
        vec![WorkerRing {
            consumer,
            results: LocalWindow::new(results),
        }],
        WorkerConfig::default(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        WorkerError::ResultsTooSmall {
            ring: 0,
            len: 8,
            needed: 32
        }
    );
    let per_post = w
        .fabric
        .create_queue_pair::<Rc>(w.proxy, QueuePairSpec::new(RingSize::new(8).unwrap()))
        .unwrap();
    assert_eq!(
        Worker::spawn(
            vec![per_post],
            windows.clone(),
            vec![],
            WorkerConfig::default()
        )
        .unwrap_err(),
        WorkerError::DoorbellPolicy { peer: 0 }
    );
    assert_eq!(
        Worker::spawn(vec![], windows, vec![], WorkerConfig::default()).unwrap_err(),
        WorkerError::PeerCount {
            queue_pairs: 0,
            peers: 1
        }
    );
}
