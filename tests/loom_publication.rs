//! Loom models of the shared send queue's publication protocol. Built only with
//! `RUSTFLAGS="--cfg loom"` (the README's test command runs them):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p ibgda --test loom_publication
//! ```
//!
//! They run in a debug build, so that overflow checks are on: an interleaving in which
//! counter arithmetic wraps panics instead of passing silently.
//!
//! Loom runs each model under every interleaving (and every allowed reordering of the
//! protocol's atomics), and reports any access to a slot that is not ordered after the
//! write that filled it. Every actor (producer, NIC) is a spawned thread: loom explores
//! the interleavings of spawned threads, not those of the model's own thread before it
//! joins them.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use ibgda::queue::{
    CompletionQueueMemory, PublicationCounters, SendQueueMemory, SharedQueueConfig, SharedSendQueue,
};
use ibgda::wqe::{parse_wqe, Nop, Opcode, Qpn, Rc, RingSize, TransportKind, WqeIndex};

/// Slots whose contents loom tracks: a read not ordered after the write is a data race.
struct Slots {
    cells: Vec<UnsafeCell<u64>>,
}

// SAFETY: every access goes through loom's `UnsafeCell`, which checks that accesses from
// different threads are ordered; the models below only access a slot while owning it
// under the protocol.
unsafe impl Sync for Slots {}

impl Slots {
    fn new(n: usize) -> Self {
        Self {
            cells: (0..n).map(|_| UnsafeCell::new(0)).collect(),
        }
    }
    fn write(&self, slot: usize, value: u64) {
        // SAFETY: the caller reserved this slot and no one else accesses it until published.
        self.cells[slot].with_mut(|p| unsafe { *p = value });
    }
    fn read(&self, slot: usize) -> u64 {
        // SAFETY: the caller observed the slot as published (acquire), so the write is ordered
        // before this read; loom reports it if not.
        self.cells[slot].with(|p| unsafe { *p })
    }
}

/// Loom with a preemption bound: every interleaving with at most this many preemptions
/// (enough for every bug class these models target, and CI-fast).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

#[test]
fn published_slots_are_fully_written_and_in_reservation_order() {
    model(|| {
        let counters = Arc::new(PublicationCounters::new(4));
        let slots = Arc::new(Slots::new(4));
        let producers: Vec<_> = (1..=2u64)
            .map(|id| {
                let (counters, slots) = (counters.clone(), slots.clone());
                thread::spawn(move || {
                    let start = counters.reserve(1).expect("room for both");
                    slots.write(start as usize, id);
                    counters.publish(start, start + 1);
                })
            })
            .collect();
        // The consumer (the NIC) reads whatever is published, while producers run.
        let nic = {
            let (counters, slots) = (counters.clone(), slots.clone());
            thread::spawn(move || {
                let ready = counters.ready();
                for slot in 0..ready as usize {
                    let v = slots.read(slot);
                    assert!(v == 1 || v == 2, "published slot {slot} holds {v}");
                }
            })
        };
        for p in producers {
            p.join().unwrap();
        }
        nic.join().unwrap();
        assert_eq!(counters.ready(), 2);
        let (a, b) = (slots.read(0), slots.read(1));
        assert!(
            a != b && a + b == 3,
            "each producer's slot holds its own value"
        );
    });
}

#[test]
fn a_reservation_preempted_between_its_two_loads_retries_instead_of_underflowing() {
    model(|| {
        // One slot. The reserver loads `reserved` (0), and may be preempted before it loads
        // `retired`; meanwhile the other producer reserves slot 0, publishes it and retires
        // it as the poller would, so `retired` (1) passes the `reserved` the first one holds.
        let counters = Arc::new(PublicationCounters::new(1));
        let reserver = {
            let counters = counters.clone();
            thread::spawn(move || loop {
                match counters.reserve(1) {
                    Ok(start) => {
                        counters.publish(start, start + 1);
                        break start;
                    }
                    Err(free) => {
                        assert_eq!(free, 0, "a full one-slot ring has nothing free");
                        thread::yield_now();
                    }
                }
            })
        };
        let other = {
            let counters = counters.clone();
            thread::spawn(move || {
                // This thread is also the poller: while the ring is full it retires what
                // is published.
                let start = loop {
                    match counters.reserve(1) {
                        Ok(start) => break start,
                        Err(_) => {
                            let ready = counters.ready();
                            if ready > counters.retired() {
                                counters.retire(ready);
                            }
                            thread::yield_now();
                        }
                    }
                };
                counters.publish(start, start + 1);
                counters.retire(start + 1);
                start
            })
        };
        let first = reserver.join().unwrap();
        let second = other.join().unwrap();
        // Each got its own slot, in some order.
        assert_eq!(first + second, 1, "slots {first} and {second}");
        assert_eq!(counters.reserved(), 2);
        assert_eq!(counters.ready(), 2);
    });
}

#[test]
fn a_full_ring_waits_for_retirement_before_a_slot_is_reused() {
    model(|| {
        // One slot: the producer's second WQE reuses the slot of its first, which it may
        // only do once the NIC has read the first and a completion retired it.
        let counters = Arc::new(PublicationCounters::new(1));
        let slots = Arc::new(Slots::new(1));
        let producer = {
            let (counters, slots) = (counters.clone(), slots.clone());
            thread::spawn(move || {
                for (k, value) in [(0u64, 10u64), (1, 11)] {
                    let start = loop {
                        match counters.reserve(1) {
                            Ok(start) => break start,
                            Err(free) => {
                                assert_eq!(free, 0);
                                thread::yield_now();
                            }
                        }
                    };
                    assert_eq!(start, k);
                    slots.write(0, value);
                    counters.publish(start, start + 1);
                }
            })
        };
        let nic = {
            let (counters, slots) = (counters.clone(), slots.clone());
            thread::spawn(move || {
                for (k, value) in [(1u64, 10u64), (2, 11)] {
                    while counters.ready() < k {
                        thread::yield_now();
                    }
                    assert_eq!(slots.read(0), value);
                    counters.retire(k);
                }
            })
        };
        producer.join().unwrap();
        nic.join().unwrap();
        assert_eq!((counters.ready(), counters.retired()), (2, 2));
    });
}

#[test]
fn concurrent_publishers_announce_everything_with_a_monotonic_doorbell_record() {
    model(|| {
        let sq = SendQueueMemory::allocate(RingSize::new(4).unwrap()).unwrap();
        let cq = CompletionQueueMemory::allocate(4).unwrap();
        let mut config = SharedQueueConfig::for_ring(RingSize::new(4).unwrap());
        config.doorbell_batch = 4;
        let queue =
            Arc::new(SharedSendQueue::<Rc>::new(Qpn::new(9).unwrap(), sq, cq, config).unwrap());
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let queue = queue.clone();
                thread::spawn(move || {
                    let nop = Nop::<Rc>::new().build().unwrap();
                    queue.post(&nop, &[]).unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Whoever published last saw nobody after it and rang for both.
        let record = queue.memory().dbrec_bytes();
        assert_eq!(record[4..8], [0, 0, 0, 2]);
        let ring = queue.memory().ring_bytes();
        for k in 0..2u16 {
            let wqe = parse_wqe(&ring, WqeIndex(k), TransportKind::Rc).unwrap();
            assert_eq!(wqe.opcode, Opcode::Nop);
        }
    });
}
