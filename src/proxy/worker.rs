//! Proxy workers: CPU threads, each pinned to a core when asked, owning its queue pairs
//! (one per peer), polling its rings and chaining up to `B` requests into one post per
//! queue pair (one doorbell), through the typed host queues.
//!
//! Completion back to the producer is the ring's host-resident completion counter
//! ([`RingMemory::completed`]): descriptor `i` of a ring is complete once the counter
//! exceeds `i`, after its WQE's completion was polled (or at once, with a typed error,
//! for a descriptor that does not decode or does not fit the windows: such a descriptor
//! posts nothing and moves no byte).

use core::fmt;
use core::num::NonZeroU32;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::descriptor::{DescriptorError, Request};
use super::ring::{RingConsumer, RingMemory};
use super::window::{LocalWindow, Resolved, WindowError, Windows};
use crate::queue::{PollError, PostError, QueuePair, Registered, Ticket};
use crate::wqe::{Atomic, Rc, RdmaRead, RdmaWrite, WqeError};

/// Why a descriptor completed without moving data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// The descriptor is malformed.
    Descriptor(DescriptorError),
    /// The request does not fit the worker's windows.
    Window(WindowError),
    /// The queue pair refused the WQE.
    Post(PostError),
    /// The WQE could not be built.
    Wqe(WqeError),
}

impl RequestError {
    /// A nonzero code for the ring's first-error word: 1 descriptor, 2 window, 3 post,
    /// 4 WQE.
    pub fn code(&self) -> u64 {
        match self {
            Self::Descriptor(_) => 1,
            Self::Window(_) => 2,
            Self::Post(_) => 3,
            Self::Wqe(_) => 4,
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Descriptor(e) => write!(f, "malformed descriptor: {e}"),
            Self::Window(e) => write!(f, "request outside its windows: {e}"),
            Self::Post(e) => write!(f, "post failed: {e}"),
            Self::Wqe(e) => write!(f, "WQE: {e}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// A ring a worker serves, with the window its atomics' results land in (8 bytes per
/// slot: descriptor `i`'s result at byte `8 · (i mod slots)`).
#[derive(Debug)]
pub struct WorkerRing {
    /// The consumer end.
    pub consumer: RingConsumer,
    /// The results window (at least 8 bytes per ring slot).
    pub results: LocalWindow,
}

/// How a worker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The core to pin the worker to (`None`: not pinned).
    pub core: Option<usize>,
    /// Requests chained into one post (one doorbell per queue pair touched).
    pub batch: NonZeroU32,
    /// How long a stopping worker waits for posted WQEs to complete.
    pub drain_timeout: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            core: None,
            batch: NonZeroU32::MIN,
            drain_timeout: Duration::from_secs(2),
        }
    }
}

/// Whether the worker got its core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// Not asked for.
    NotRequested,
    /// Pinned to this core.
    Pinned(usize),
    /// `sched_setaffinity` refused (the worker runs unpinned).
    Failed {
        /// The core asked for.
        core: usize,
        /// The OS error number.
        errno: i32,
    },
}

/// What a worker did, returned when it stops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Descriptors taken from the rings.
    pub taken: u64,
    /// WQEs posted.
    pub posted: u64,
    /// Doorbells rung.
    pub doorbells: u64,
    /// Descriptors completed (successfully or not).
    pub completed: u64,
    /// Descriptors that completed with a typed error: (ring, index, error), the first 1024.
    pub errors: Vec<(usize, u64, RequestError)>,
    /// Completion errors the NIC reported.
    pub completion_errors: Vec<PollError>,
    /// Descriptors still incomplete when the worker stopped.
    pub abandoned: u64,
}

/// Why a worker could not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerError {
    /// The worker needs one queue pair per peer of the window tables.
    PeerCount {
        /// Queue pairs given.
        queue_pairs: usize,
        /// Peers in the tables.
        peers: usize,
    },
    /// A results window is smaller than 8 bytes per slot of its ring.
    ResultsTooSmall {
        /// The ring (index in the worker's list).
        ring: usize,
        /// The window's length.
        len: u64,
        /// Bytes needed.
        needed: u64,
    },
    /// A queue pair rings its doorbell per post; the worker needs
    /// [`crate::queue::DoorbellPolicy::Explicit`] to chain.
    DoorbellPolicy {
        /// The peer.
        peer: usize,
    },
    /// The OS refused a thread.
    Spawn {
        /// The OS error number, if any.
        errno: Option<i32>,
    },
}

impl fmt::Display for WorkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PeerCount { queue_pairs, peers } => {
                write!(f, "{queue_pairs} queue pairs for {peers} peers")
            }
            Self::ResultsTooSmall { ring, len, needed } => write!(
                f,
                "results window of ring {ring} has {len} bytes, {needed} needed"
            ),
            Self::DoorbellPolicy { peer } => write!(
                f,
                "queue pair of peer {peer} rings per post; chaining needs an explicit doorbell"
            ),
            Self::Spawn { errno } => write!(f, "could not start the worker thread ({errno:?})"),
        }
    }
}

impl std::error::Error for WorkerError {}

/// A running worker: stops and joins on drop.
pub struct Worker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<WorkerReport>>,
    pinning: Pinning,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("pinning", &self.pinning)
            .field("running", &self.thread.is_some())
            .finish()
    }
}

enum Pending {
    Done,
    Posted { peer: usize, ticket: Ticket },
}

struct RingState {
    ring: WorkerRing,
    pending: VecDeque<Pending>,
    completed: u64,
}

struct Chained {
    ring: usize,
    index: u64,
    /// The queue pair and the WQE, or why the descriptor completes without one.
    outcome: Result<(usize, Resolved), RequestError>,
}

fn pin(core: usize) -> Pinning {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `set` is a plain bitmask owned by this frame; CPU_ZERO and CPU_SET only
        // write inside it (CPU_SET ignores cores past its capacity), and
        // sched_setaffinity(0, ..) reads `size_of::<cpu_set_t>()` bytes of it for the
        // calling thread.
        let rc = unsafe {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            libc::CPU_ZERO(&mut set);
            if core >= 8 * core::mem::size_of::<libc::cpu_set_t>() {
                return Pinning::Failed {
                    core,
                    errno: libc::EINVAL,
                };
            }
            libc::CPU_SET(core, &mut set);
            libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if rc == 0 {
            Pinning::Pinned(core)
        } else {
            Pinning::Failed {
                core,
                errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Pinning::Failed { core, errno: 0 }
    }
}

impl Worker {
    /// Starts a worker owning `queue_pairs` (entry `p` connected to peer `p` of `windows`,
    /// each with an explicit doorbell policy) and serving `rings`.
    pub fn spawn(
        queue_pairs: Vec<QueuePair<Rc>>,
        windows: Arc<Windows>,
        rings: Vec<WorkerRing>,
        config: WorkerConfig,
    ) -> Result<Self, WorkerError> {
        if queue_pairs.len() != windows.peers() {
            return Err(WorkerError::PeerCount {
                queue_pairs: queue_pairs.len(),
                peers: windows.peers(),
            });
        }
        for (peer, qp) in queue_pairs.iter().enumerate() {
            if qp.sq().config().doorbell != crate::queue::DoorbellPolicy::Explicit {
                return Err(WorkerError::DoorbellPolicy { peer });
            }
        }
        for (i, r) in rings.iter().enumerate() {
            let needed = r.consumer.ring().geometry().slots() * 8;
            if r.results.len() < needed {
                return Err(WorkerError::ResultsTooSmall {
                    ring: i,
                    len: r.results.len(),
                    needed,
                });
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ibgda-proxy".into())
            .spawn(move || {
                let pinning = config.core.map_or(Pinning::NotRequested, pin);
                let _ = tx.send(pinning);
                let mut w = Running {
                    qps: queue_pairs,
                    windows,
                    rings: rings
                        .into_iter()
                        .map(|ring| RingState {
                            ring,
                            pending: VecDeque::new(),
                            completed: 0,
                        })
                        .collect(),
                    batch: config.batch.get() as usize,
                    report: WorkerReport::default(),
                    chain: Vec::with_capacity(config.batch.get() as usize),
                    next_ring: 0,
                };
                w.run(&flag, config.drain_timeout);
                w.report
            })
            .map_err(|e| WorkerError::Spawn {
                errno: e.raw_os_error(),
            })?;
        let pinning = rx.recv().unwrap_or(Pinning::NotRequested);
        Ok(Self {
            stop,
            thread: Some(thread),
            pinning,
        })
    }

    /// Whether the worker got its core.
    pub fn pinning(&self) -> Pinning {
        self.pinning
    }

    /// Stops the worker (after waiting up to its drain timeout for posted WQEs) and
    /// returns what it did.
    pub fn stop(mut self) -> WorkerReport {
        self.shutdown().unwrap_or_default()
    }

    fn shutdown(&mut self) -> Option<WorkerReport> {
        self.stop.store(true, Ordering::Release);
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Running {
    qps: Vec<QueuePair<Rc>>,
    windows: Arc<Windows>,
    rings: Vec<RingState>,
    batch: usize,
    report: WorkerReport,
    chain: Vec<Chained>,
    next_ring: usize,
}

const MAX_REPORTED_ERRORS: usize = 1024;

impl Running {
    fn run(&mut self, stop: &AtomicBool, drain_timeout: Duration) {
        let mut idle: u32 = 0;
        while !stop.load(Ordering::Acquire) {
            let took = self.gather();
            if took > 0 {
                self.post_chain();
            }
            let completed = self.poll_completions();
            if took == 0 && !completed {
                idle = idle.saturating_add(1);
                if idle > 64 {
                    std::thread::yield_now();
                }
                core::hint::spin_loop();
            } else {
                idle = 0;
            }
        }
        let deadline = Instant::now() + drain_timeout;
        while self.rings.iter().any(|r| !r.pending.is_empty()) && Instant::now() < deadline {
            if !self.poll_completions() {
                std::thread::yield_now();
            }
        }
        self.report.abandoned = self.rings.iter().map(|r| r.pending.len() as u64).sum();
    }

    /// Takes up to `batch` descriptors, round robin over the rings, into the chain;
    /// descriptors that fail to decode or resolve complete at once with their error.
    fn gather(&mut self) -> usize {
        let n = self.rings.len();
        let mut took = 0;
        let mut empty_in_a_row = 0;
        while took < self.batch && empty_in_a_row < n {
            let r = self.next_ring;
            self.next_ring = (self.next_ring + 1) % n;
            let Some((index, descriptor)) = self.rings[r].ring.consumer.poll() else {
                empty_in_a_row += 1;
                continue;
            };
            empty_in_a_row = 0;
            took += 1;
            self.report.taken += 1;
            let slot = index % self.rings[r].ring.consumer.ring().geometry().slots();
            let resolved = descriptor
                .decode()
                .map_err(RequestError::Descriptor)
                .and_then(|request: Request| {
                    let peer = usize::from(request.remote().peer);
                    self.windows
                        .resolve(&request, &self.rings[r].ring.results, slot)
                        .map(|resolved| (peer, resolved))
                        .map_err(RequestError::Window)
                });
            self.chain.push(Chained {
                ring: r,
                index,
                outcome: resolved,
            });
        }
        for ring in &self.rings {
            ring.ring.consumer.publish_progress();
        }
        took
    }

    fn fail(&mut self, ring: usize, index: u64, e: RequestError) {
        let state = &mut self.rings[ring];
        state.ring.consumer.record_error(e.code());
        state.pending.push_back(Pending::Done);
        if self.report.errors.len() < MAX_REPORTED_ERRORS {
            self.report.errors.push((ring, index, e));
        }
    }

    fn post_chain(&mut self) {
        let chain = core::mem::take(&mut self.chain);
        let mut last_for_peer = vec![usize::MAX; self.qps.len()];
        for (i, c) in chain.iter().enumerate() {
            if let Ok((peer, _)) = c.outcome {
                last_for_peer[peer] = i;
            }
        }
        for (i, c) in chain.iter().enumerate() {
            let posted = c.outcome.and_then(|(peer, resolved)| {
                let signaled = last_for_peer[peer] == i;
                self.post_one(c.ring, peer, &resolved, signaled)
                    .map(|ticket| (peer, ticket))
            });
            match posted {
                Ok((peer, ticket)) => {
                    self.report.posted += 1;
                    self.rings[c.ring]
                        .pending
                        .push_back(Pending::Posted { peer, ticket });
                }
                Err(e) => self.fail(c.ring, c.index, e),
            }
        }
        for (peer, &last) in last_for_peer.iter().enumerate() {
            if last != usize::MAX {
                self.qps[peer].ring_doorbell();
                self.report.doorbells += 1;
            }
        }
        self.chain = chain;
        self.chain.clear();
    }

    fn post_one(
        &mut self,
        ring: usize,
        peer: usize,
        resolved: &Resolved,
        signaled: bool,
    ) -> Result<Ticket, RequestError> {
        // Room first: completions free slots (every chain's last WQE per queue is
        // signaled, and the queue signals at least every half ring).
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.qps[peer].sq().free_wqebbs() < 4 {
            self.qps[peer].ring_doorbell();
            if !self.poll_completions() {
                if Instant::now() > deadline {
                    break;
                }
                std::thread::yield_now();
            }
        }
        let qp = &mut self.qps[peer];
        let keep = |w: u8| -> Vec<Arc<dyn Registered>> {
            self.windows
                .local(w)
                .map(|l| vec![l.registration()])
                .unwrap_or_default()
        };
        let results = |r: &WorkerRing| vec![r.results.registration()];
        macro_rules! post {
            ($builder:expr, $regs:expr) => {{
                let b = $builder;
                let wqe = if signaled { b.signaled() } else { b }
                    .build()
                    .map_err(RequestError::Wqe)?;
                qp.post(&wqe, &$regs).map_err(RequestError::Post)
            }};
        }
        match *resolved {
            Resolved::WriteInline8 { remote, bytes } => {
                post!(RdmaWrite::new(remote).inline(&bytes), [])
            }
            Resolved::Write {
                remote,
                sge,
                window,
            } => post!(RdmaWrite::new(remote).sge(sge), keep(window)),
            Resolved::Read {
                remote,
                sge,
                window,
            } => post!(RdmaRead::new(remote).sge(sge), keep(window)),
            Resolved::FetchAdd {
                remote,
                result,
                add,
            } => post!(
                Atomic::fetch_add(remote, result, add),
                results(&self.rings[ring].ring)
            ),
            Resolved::CompareSwap {
                remote,
                result,
                compare,
                swap,
            } => post!(
                Atomic::compare_swap(remote, result, compare, swap),
                results(&self.rings[ring].ring)
            ),
        }
    }

    /// Polls every queue pair's CQ and advances the rings' completion counters in order.
    fn poll_completions(&mut self) -> bool {
        let mut any = false;
        for qp in &mut self.qps {
            loop {
                match qp.poll() {
                    Ok(Some(_)) => any = true,
                    Ok(None) => break,
                    Err(e) => {
                        any = true;
                        if self.report.completion_errors.len() < MAX_REPORTED_ERRORS {
                            self.report.completion_errors.push(e);
                        }
                    }
                }
            }
        }
        for state in &mut self.rings {
            let before = state.completed;
            while let Some(front) = state.pending.front() {
                let done = match *front {
                    Pending::Done => true,
                    Pending::Posted { peer, ticket } => self.qps[peer].sq().is_complete(ticket),
                };
                if !done {
                    break;
                }
                state.pending.pop_front();
                state.completed += 1;
            }
            if state.completed != before {
                self.report.completed += state.completed - before;
                state.ring.consumer.publish_completed(state.completed);
                any = true;
            }
        }
        any
    }
}

/// The rings' completion counters, for a producer to wait on.
pub fn wait_completed(ring: &RingMemory, count: u64, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while ring.completed() < count {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::yield_now();
    }
    true
}
