//! Who executes a queue: one executor per queue memory in the whole process.
//!
//! A NIC, hardware or software, is the only writer of a queue's CQEs and the only reader
//! that acts on its WQEs. Two of them over one ring would each execute its WQEs (duplicate
//! writes and atomics), and each write CQEs the producer takes as its own. So whatever
//! executes a queue (the software NIC of any [`Fabric`](crate::softnic::Fabric), a
//! control-plane backend registering the memory as UMEM, the CUDA software NIC, a doorbell
//! sink) first takes a claim recorded in the queue memory itself, naming its [`Executor`].
//! The claim is refused while another executor holds one
//! ([`ExecutorConflict`]); the same executor may hold several (a CQ shared by several of its
//! queues, a ring and its doorbell record registered as two UMEMs). Claims are released as
//! the capabilities holding them drop, so a queue can move to another executor once the
//! first has let go.

use core::fmt;
use core::num::NonZeroU64;
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::memory::QueueBufferSpan;

/// The identity of something that executes queues: a NIC, a software NIC's fabric, a
/// GPU kernel standing in for a NIC. Unique in the process, and not `Clone`: two executors
/// cannot share one identity, so a claim held under it is exclusive.
///
/// ```compile_fail,E0599
/// let executor = ibgda::queue::Executor::new("a NIC");
/// let twin = executor.clone(); // one identity, one executor
/// ```
pub struct Executor {
    id: NonZeroU64,
    name: String,
}

/// The next executor number (0 is never handed out).
static NEXT_EXECUTOR: AtomicU64 = AtomicU64::new(1);

impl Executor {
    /// A new executor identity, named for messages (`"software NIC fabric 3"`,
    /// `"mlx5_0"`).
    pub fn new(name: impl Into<String>) -> Self {
        // Relaxed: only uniqueness matters. 2^64 identities cannot run out in a process.
        let n = NEXT_EXECUTOR.fetch_add(1, Ordering::Relaxed);
        Self {
            id: NonZeroU64::new(n).unwrap_or(NonZeroU64::MAX),
            name: name.into(),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its number: distinct for every executor made in this process.
    pub fn number(&self) -> u64 {
        self.id.get()
    }

    /// How messages name it: its name and number.
    fn describe(&self) -> String {
        format!("{} (executor {})", self.name, self.id)
    }
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("number", &self.id)
            .field("name", &self.name)
            .finish()
    }
}

/// A second executor asked for queue memory another one executes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutorConflict {
    /// The queue memory (the send ring, or the CQ ring) asked for.
    pub queue: QueueBufferSpan,
    /// The executor that holds it.
    pub held_by: String,
    /// The executor that asked.
    pub claimed_by: String,
}

impl fmt::Display for ExecutorConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the queue memory at {:#x} ({} bytes) is executed by {}; {} cannot execute it \
             too (one executor per queue in the process: drop the first one's queue pair or \
             NIC first)",
            self.queue.addr, self.queue.len, self.held_by, self.claimed_by
        )
    }
}

impl std::error::Error for ExecutorConflict {}

/// Who holds the claims on one queue's memory.
#[derive(Debug)]
struct Holder {
    executor: NonZeroU64,
    name: String,
    claims: usize,
}

/// The claim record of one queue's memory (send queue or CQ), shared by the memory and
/// the claims taken on it.
#[derive(Debug, Default)]
pub(crate) struct ExecutorCell {
    holder: Mutex<Option<Holder>>,
}

impl ExecutorCell {
    /// A claim by `executor` on the memory at `queue` (what a conflict names).
    pub(crate) fn claim(
        self: &Arc<Self>,
        executor: &Executor,
        queue: QueueBufferSpan,
    ) -> Result<ExecutorClaim, ExecutorConflict> {
        let mut holder = self.holder.lock().unwrap_or_else(PoisonError::into_inner);
        match holder.as_mut() {
            Some(h) if h.executor != executor.id => {
                return Err(ExecutorConflict {
                    queue,
                    held_by: h.name.clone(),
                    claimed_by: executor.describe(),
                })
            }
            Some(h) => h.claims += 1,
            None => {
                *holder = Some(Holder {
                    executor: executor.id,
                    name: executor.describe(),
                    claims: 1,
                })
            }
        }
        Ok(ExecutorClaim {
            cell: self.clone(),
            executor: executor.id,
        })
    }

    /// The number of the executor holding claims, if any.
    pub(crate) fn holder(&self) -> Option<u64> {
        let holder = self.holder.lock().unwrap_or_else(PoisonError::into_inner);
        holder.as_ref().map(|h| h.executor.get())
    }
}

/// One claim on a queue's memory by one executor, released when dropped. Not `Clone`
/// (see [`ExecutorClaim::again`] for a second claim by the same executor).
#[derive(Debug)]
pub(crate) struct ExecutorClaim {
    cell: Arc<ExecutorCell>,
    executor: NonZeroU64,
}

impl ExecutorClaim {
    /// Another claim by the same executor on the same memory (a capability derived from
    /// one already held).
    pub(crate) fn again(&self) -> Self {
        let mut holder = self
            .cell
            .holder
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // This claim is counted, so the holder is this executor.
        if let Some(h) = holder.as_mut() {
            h.claims += 1;
        }
        Self {
            cell: self.cell.clone(),
            executor: self.executor,
        }
    }
}

impl Drop for ExecutorClaim {
    fn drop(&mut self) {
        let mut holder = self
            .cell
            .holder
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = holder.as_mut().filter(|h| h.executor == self.executor) {
            h.claims -= 1;
            if h.claims == 0 {
                *holder = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span() -> QueueBufferSpan {
        QueueBufferSpan {
            addr: 0x1000,
            device_addr: None,
            len: 4096,
        }
    }

    #[test]
    fn one_executor_holds_a_cell_until_its_last_claim_drops() {
        let cell = Arc::new(ExecutorCell::default());
        let (a, b) = (Executor::new("a"), Executor::new("b"));
        assert_ne!(a.number(), b.number());
        let first = cell.claim(&a, span()).unwrap();
        let second = cell.claim(&a, span()).unwrap();
        let third = second.again();
        let refused = cell.claim(&b, span()).unwrap_err();
        assert_eq!(
            refused,
            ExecutorConflict {
                queue: span(),
                held_by: format!("a (executor {})", a.number()),
                claimed_by: format!("b (executor {})", b.number()),
            }
        );
        assert!(refused.to_string().contains(&format!(
            "executed by a (executor {}); b (executor {}) cannot",
            a.number(),
            b.number()
        )));
        drop(first);
        drop(second);
        assert_eq!(cell.holder(), Some(a.number()));
        assert!(cell.claim(&b, span()).is_err());
        drop(third);
        assert_eq!(cell.holder(), None);
        let by_b = cell.claim(&b, span()).unwrap();
        assert!(cell.claim(&a, span()).is_err());
        drop(by_b);
        assert!(cell.claim(&a, span()).is_ok());
    }
}
