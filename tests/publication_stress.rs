//! The shared queue's reservation counters under real threads, in a build with overflow
//! checks on (a debug build; `scripts/test` runs it so): a reserving thread preempted
//! between its load of `reserved` and its load of `retired` finds `retired` past the
//! `reserved` it loaded, and the free-slot arithmetic must not underflow.
//!
//! In release builds (overflow checks off) the wrapped arithmetic is harmless, so the test
//! is ignored there with that reason rather than reported as passed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibgda::queue::PublicationCounters;

/// Reservations per producer thread, at most.
const RESERVATIONS: u64 = 50_000;
/// How long the producers run at most (before the fix, the underflow came within a
/// couple of seconds on a 2-core machine).
const RUN_FOR: Duration = Duration::from_secs(8);
/// Producer threads (more than this machine's cores, so that producers are preempted).
const PRODUCERS: u64 = 8;

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "needs overflow checks: scripts/test runs it in a debug build"
)]
fn reservations_racing_retirement_never_underflow_and_never_overfill() {
    let capacity = 1;
    let counters = Arc::new(PublicationCounters::new(capacity));
    let done = Arc::new(AtomicBool::new(false));
    // The poller: retires everything published, as completions arrive.
    let poller = {
        let (counters, done) = (counters.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                let ready = counters.ready();
                if ready > counters.retired() {
                    counters.retire(ready);
                }
                std::hint::spin_loop();
            }
        })
    };
    let deadline = Instant::now() + RUN_FOR;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            let counters = counters.clone();
            std::thread::spawn(move || {
                let mut reserved = 0;
                while reserved < RESERVATIONS && Instant::now() < deadline {
                    match counters.reserve(1) {
                        Ok(start) => {
                            // Never more in flight than the ring holds.
                            let retired = counters.retired();
                            assert!(
                                start + 1 - retired <= capacity,
                                "reserved slot {start} with only {retired} retired"
                            );
                            counters.publish(start, start + 1);
                            reserved += 1;
                        }
                        Err(free) => {
                            assert!(free <= capacity, "{free} free of {capacity}");
                            // Spin rather than yield: threads stay inside `reserve`, where
                            // the scheduler's preemptions then land.
                            std::hint::spin_loop();
                        }
                    }
                }
                reserved
            })
        })
        .collect();
    let results: Vec<_> = producers.into_iter().map(|p| p.join()).collect();
    done.store(true, Ordering::Release);
    poller.join().unwrap();
    let mut total = 0;
    for result in results {
        match result {
            Ok(n) => total += n,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    assert!(
        total >= PRODUCERS,
        "only {total} reservations in {RUN_FOR:?}"
    );
    assert_eq!(counters.reserved(), total);
    assert_eq!(counters.ready(), total);
}
