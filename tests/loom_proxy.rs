//! Loom models of the proxy's two descriptor-ring handoffs, running the ring code itself
//! ([`TunedState::try_push`], [`baseline_push`], [`ConsumerState`]) on loom's atomics.
//! Built only with `RUSTFLAGS="--cfg loom"`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p ibgda --release --test loom_proxy
//! ```
//!
//! What each model checks, under every interleaving and every reordering the atomics
//! allow: the consumer never takes a half-written descriptor (every descriptor it takes
//! decodes to exactly what was pushed); across ring wrap no descriptor is lost or taken
//! twice; the published progress never runs ahead of what the consumer has copied, and
//! never passes what producers pushed.
//!
//! The tuned producer is a GPU thread whose one 16-byte store reaches host memory as two
//! 8-byte halves in no promised order: the model's memory turns every store to a slot
//! word into a relaxed store, so loom lets the consumer see either half without the other.
#![cfg(loom)]

use std::sync::atomic::Ordering;

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;

use ibgda::proxy::{
    baseline_push, ConsumerState, RemoteRef, Request, RingGeometry, RingWords, TunedState,
};

/// Ring memory on loom's atomics.
struct Memory {
    words: Vec<AtomicU64>,
    /// Slot words below this index are stored relaxed (halves of a GPU's 16-byte store).
    relaxed_below: usize,
    /// Producers that have pushed everything (release), for the consumer's loss check.
    finished: AtomicU64,
}

impl Memory {
    fn new(g: RingGeometry, gpu_halves: bool) -> Self {
        Self {
            words: (0..g.words()).map(|_| AtomicU64::new(0)).collect(),
            relaxed_below: if gpu_halves { g.consumed_word() } else { 0 },
            finished: AtomicU64::new(0),
        }
    }
}

impl RingWords for Memory {
    fn load(&self, i: usize, order: Ordering) -> u64 {
        self.words[i].load(order)
    }
    fn store(&self, i: usize, value: u64, order: Ordering) {
        let order = if i < self.relaxed_below {
            Ordering::Relaxed
        } else {
            order
        };
        self.words[i].store(value, order)
    }
    fn fetch_add(&self, i: usize, value: u64, order: Ordering) -> u64 {
        self.words[i].fetch_add(value, order)
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f)
}

/// Loom with `preemptions` as the preemption bound.
fn model_bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    // Producers and the consumer wait on each other by spinning (yielding to loom).
    builder.max_branches = 20_000;
    builder.check(f);
}

/// Request `k` of producer `p`: every field distinct, so a torn or stale slot decodes
/// to something else.
fn request(p: u8, k: u32) -> Request {
    Request::WriteInline8 {
        dst: RemoteRef {
            peer: p,
            window: 0x10 + k as u8,
            offset: 0x1000 * (k + 1),
        },
        value: 0x0102_0304_0506_0708 * u64::from(k + 1) + u64::from(p),
    }
}

/// Takes `count` descriptors from `producers` producers, publishing progress after each
/// copy; returns them in order. Fails if a descriptor never appears once every producer
/// has finished (lost: overwritten before it was taken, or never written).
fn consume(memory: &Memory, g: RingGeometry, count: u64, producers: u64) -> Vec<(u64, Request)> {
    let mut state = ConsumerState::default();
    let mut taken = Vec::new();
    while (taken.len() as u64) < count {
        match state.poll(memory, g) {
            Some((index, d)) => {
                let r = d.decode().unwrap_or_else(|e| {
                    panic!("descriptor {index} taken half-written or stale: {e}")
                });
                taken.push((index, r));
                state.publish(memory, g);
                assert_eq!(
                    memory.load(g.consumed_word(), Ordering::Relaxed),
                    taken.len() as u64,
                    "progress is exactly what was copied"
                );
            }
            None => {
                if memory.finished.load(Ordering::Acquire) == producers {
                    // Every push is visible now: the next descriptor must be there.
                    let mut again = state;
                    assert!(
                        again.poll(memory, g).is_some(),
                        "descriptor {} was lost: every producer finished and its slot never became valid",
                        state.tail()
                    );
                }
                thread::yield_now()
            }
        }
    }
    taken
}

#[test]
fn tuned_ring_takes_whole_descriptors_in_order_across_wrap() {
    model(|| {
        // Two slots, three descriptors: the third reuses the first slot.
        let g = RingGeometry::new(2).unwrap();
        let memory = Arc::new(Memory::new(g, true));
        let producer = {
            let memory = memory.clone();
            thread::spawn(move || {
                let mut state = TunedState::default();
                for k in 0..3 {
                    loop {
                        match state.try_push(&*memory, g, &request(0, k)).unwrap() {
                            Some(index) => {
                                assert_eq!(index, u64::from(k));
                                break;
                            }
                            None => thread::yield_now(),
                        }
                    }
                    let consumed = memory.load(g.consumed_word(), Ordering::Acquire);
                    assert!(
                        consumed <= state.head(),
                        "progress {consumed} ran past the {} pushed",
                        state.head()
                    );
                }
                memory.finished.fetch_add(1, Ordering::Release);
            })
        };
        let consumer = {
            let memory = memory.clone();
            thread::spawn(move || consume(&memory, g, 3, 1))
        };
        producer.join().unwrap();
        let taken = consumer.join().unwrap();
        let expected: Vec<_> = (0..3).map(|k| (u64::from(k), request(0, k))).collect();
        assert_eq!(taken, expected, "each descriptor once, in order, whole");
    });
}

#[test]
fn baseline_ring_with_two_producers_loses_nothing_across_wrap() {
    // Three threads that spin on each other: one preemption keeps the model CI-fast; the
    // threads' own waits (yields) still interleave every reservation, publication and
    // read. The two-producer race itself is explored at two preemptions below.
    model_bounded(1, || {
        // Two slots; producer 0 pushes two descriptors, producer 1 one: the third
        // descriptor wraps onto the first slot, behind whichever producer was slower.
        let g = RingGeometry::new(2).unwrap();
        let memory = Arc::new(Memory::new(g, false));
        let producers: Vec<_> = (0..2u8)
            .map(|p| {
                let memory = memory.clone();
                thread::spawn(move || {
                    let mut mine = Vec::new();
                    for k in 0..2 - u32::from(p) {
                        mine.push(baseline_push(&*memory, g, &request(p, k)).unwrap());
                    }
                    memory.finished.fetch_add(1, Ordering::Release);
                    mine
                })
            })
            .collect();
        let consumer = {
            let memory = memory.clone();
            thread::spawn(move || consume(&memory, g, 3, 2))
        };
        let indices: Vec<Vec<u64>> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        let taken = consumer.join().unwrap();
        assert_eq!(
            taken.iter().map(|t| t.0).collect::<Vec<_>>(),
            vec![0, 1, 2],
            "every index taken once, in order"
        );
        for (p, mine) in indices.iter().enumerate() {
            for (k, &index) in mine.iter().enumerate() {
                assert_eq!(
                    taken[index as usize].1,
                    request(p as u8, k as u32),
                    "slot {index} holds what producer {p} pushed there"
                );
            }
        }
        assert_eq!(memory.load(g.reserve_word(), Ordering::Relaxed), 3);
    });
}

/// Payload cells (a WRITE's source) whose accesses loom checks for ordering.
struct Payload {
    cells: Vec<UnsafeCell<u64>>,
}

// SAFETY: every access goes through loom's `UnsafeCell`, which reports any pair of
// accesses from different threads that the protocol does not order.
unsafe impl Sync for Payload {}

#[test]
fn baseline_publication_orders_payload_and_descriptor_before_the_consumer() {
    model_bounded(2, || {
        // Two producers race for two slots, each having written a payload its request
        // names (as a WRITE's source): the consumer that takes a descriptor reads both of
        // its words and its payload, all ordered after the producer's writes by the
        // system-scope release of the control word.
        let g = RingGeometry::new(2).unwrap();
        let memory = Arc::new(Memory::new(g, false));
        let payload = Arc::new(Payload {
            cells: (0..2).map(|_| UnsafeCell::new(0)).collect(),
        });
        let producers: Vec<_> = (0..2u8)
            .map(|p| {
                let (memory, payload) = (memory.clone(), payload.clone());
                thread::spawn(move || {
                    // SAFETY: cell `p` is this producer's until it publishes the request.
                    payload.cells[usize::from(p)].with_mut(|c| unsafe { *c = 100 + u64::from(p) });
                    let index = baseline_push(&*memory, g, &request(p, 0)).unwrap();
                    memory.finished.fetch_add(1, Ordering::Release);
                    index
                })
            })
            .collect();
        let consumer = {
            let (memory, payload) = (memory.clone(), payload.clone());
            thread::spawn(move || {
                let taken = consume(&memory, g, 2, 2);
                for (_, r) in &taken {
                    let p = usize::from(match r {
                        Request::WriteInline8 { dst, .. } => dst.peer,
                        other => panic!("unexpected {other:?}"),
                    });
                    // SAFETY: the descriptor naming cell `p` was taken (acquire), so the
                    // producer's write is ordered before this read; loom reports it if not.
                    let v = payload.cells[p].with(|c| unsafe { *c });
                    assert_eq!(v, 100 + p as u64, "payload of producer {p}");
                }
                taken
            })
        };
        let indices: Vec<u64> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        let taken = consumer.join().unwrap();
        for (p, &index) in indices.iter().enumerate() {
            assert_eq!(taken[index as usize], (index, request(p as u8, 0)));
        }
    });
}
