//! Counters of the software NIC: fabric-wide totals readable at any time, and what one
//! step did.

use core::ops::AddAssign;
use core::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[doc = $doc:literal])+ $name:ident,)*) => {
        /// Fabric-wide totals since the fabric was made, as a snapshot.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Counters {
            $($(#[doc = $doc])+ pub $name: u64,)*
        }

        /// The live totals: relaxed atomics, so that they can be read while an engine runs.
        #[derive(Debug, Default)]
        pub(crate) struct CounterBlock {
            $(pub(crate) $name: AtomicU64,)*
        }

        impl CounterBlock {
            pub(crate) fn snapshot(&self) -> Counters {
                Counters { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }
    };
}

counters! {
    /// Doorbells seen: changes of a queue's doorbell naming that queue.
    doorbells,
    /// Doorbell changes naming another queue, ignored.
    foreign_doorbells,
    /// WQEs executed successfully.
    wqes_executed,
    /// WQEs that failed (each wrote an error CQE, or tried to).
    wqes_failed,
    /// WQEs flushed because their queue was in the error state.
    wqes_flushed,
    /// Bytes written to remote memory by WRITEs.
    bytes_written,
    /// Bytes read from remote memory by READs.
    bytes_read,
    /// Atomics performed.
    atomics,
    /// CQEs written (requester, responder and error CQEs).
    cqes_written,
    /// Responder CQEs written (included in `cqes_written`).
    responder_cqes,
    /// CQEs not written because their CQ overran or was in the error state.
    cqes_dropped,
    /// READ or atomic responses dropped because their local region was deregistered while
    /// they were in flight.
    responses_dropped,
    /// Asynchronous events recorded.
    async_events,
}

impl CounterBlock {
    /// Adds `n` to a counter. Every caller holds the fabric's state lock (the counters are
    /// only passed to code running under it), so there is one writer at a time: a load
    /// and a store suffice, without the cost of an atomic read-modify-write per WQE.
    /// Readers still see whole values at any time.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }
}

/// What one step of the engine did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Doorbells seen for their own queue.
    pub doorbells: u64,
    /// Doorbells naming another queue, ignored.
    pub foreign_doorbells: u64,
    /// WQEs executed successfully.
    pub wqes_executed: u64,
    /// WQEs that failed.
    pub wqes_failed: u64,
    /// WQEs flushed.
    pub wqes_flushed: u64,
    /// CQEs written.
    pub cqes_written: u64,
    /// READ and atomic responses that landed in local memory (or were dropped).
    pub responses_landed: u64,
}

impl StepReport {
    /// Whether the step did anything at all.
    pub fn made_progress(&self) -> bool {
        *self != Self::default()
    }
    /// WQEs consumed from send queues: executed, failed or flushed.
    pub fn wqes_consumed(&self) -> u64 {
        self.wqes_executed + self.wqes_failed + self.wqes_flushed
    }
}

impl AddAssign for StepReport {
    fn add_assign(&mut self, other: Self) {
        self.doorbells += other.doorbells;
        self.foreign_doorbells += other.foreign_doorbells;
        self.wqes_executed += other.wqes_executed;
        self.wqes_failed += other.wqes_failed;
        self.wqes_flushed += other.wqes_flushed;
        self.cqes_written += other.cqes_written;
        self.responses_landed += other.responses_landed;
    }
}
