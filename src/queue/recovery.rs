//! Recovery: a queue pair in the error state (or one that must stop) brought back to RTS
//! through the control plane's modify commands, every request it had not completed
//! returned to the caller.
//!
//! [`QueuePair::recover`] (RC) and [`QueuePair::recover_dci`] (DC initiators) do, in order:
//!
//! 1. ring the doorbell for everything published, so the NIC knows every WQE;
//! 2. 2ERR_QP (from any state): the NIC completes every WQE it has not executed with a
//!    flush error, signaled or not;
//! 3. drain the CQ until every WQE is retired, with a deadline: the WQE an error or flush
//!    CQE names becomes an [`Unfinished`] entry (its [`Ticket`] and the completion's
//!    syndrome); the WQEs before it without a CQE of their own that the CQE retires
//!    completed (they ran before the error: a NIC in error flushes each WQE with a CQE of
//!    its own, as mlx5 does and the software NIC models), as did those a successful CQE
//!    retires. When the CQEs stop with WQEs still out, those WQEs ran and no CQE of theirs
//!    is coming (an unsignaled tail, or a completion the NIC lost): a signaled NOP posted
//!    after them is flushed with a CQE of its own, which retires them as completed;
//! 4. 2RST_QP: the NIC forgets the queue pair's progress, so its send counter restarts at
//!    0, as rdma-core's mlx5 provider assumes when it zeroes its SQ indices and both words
//!    of the doorbell record on a move to RESET; the host does the same (the record is
//!    zeroed, the ring starts over at WQE index 0, see `SendQueue::restart`, and a
//!    collapsed CQ forgets the last WQE counter it saw);
//! 5. RST2INIT, INIT2RTR and RTR2RTS as at creation (an RC queue pair to the endpoint the
//!    peer gives for its own next connection, sending from a new PSN of its own).
//!
//! Every ticket issued before the recovery is resolved exactly once: it completed (its
//! CQE was polled before, or the drain retired it successfully), or its error CQE was
//! returned by a poll before the recovery, or it is in the [`Recovery`] list. Tickets stay
//! comparable across a recovery: the free-running counter only grows.
//!
//! A request whose completion the NIC lost (it executed; its CQE never came) cannot be
//! told from one that ran unsignaled, and is what it is: completed, never in the list. It
//! ran before the error, since a NIC in error gives every WQE it does not run a CQE of its
//! own; its effects landed. (Waits for it before the recovery end at their deadline, as
//! waits for any lost completion do.)
//!
//! A WQE in the list may have been executed before it was flushed (an atomic whose
//! response the NIC dropped in the error state has changed remote memory): repost what is
//! idempotent, report the rest.
//!
//! The RC peer must be recovered too (on hardware a requester error usually moves the
//! responder to error as well, and a peer that kept its old PSN would drop or misread the
//! new stream): both sides exchange [`QueuePair::endpoint`] before either recovers.
//!
//! A CQ that overran is in the error state and writes nothing more, so the drain of its
//! queue pair times out ([`RecoveryError::Timeout`]); such a queue pair must be made again.
//!
//! Queue pairs GPU threads post to ([`QueuePair::recover_device`]) are recovered the same
//! way, the host standing in for the stopped kernels through a [`DeviceQueueAccess`] (a
//! copy engine for GPU memory). Their doorbell is rung from the host: memory a software
//! NIC watches through the access; a ConnectX UAR register (the mlx5 backend's GPU
//! doorbells) by recovery itself, through the host's own mapping of the same UAR page
//! (`reg_addr` of `mlx5dv_devx_alloc_uar`, the mapping the GPU's was made from), as a
//! host producer rings it ([`GpuDoorbell::is_host_mapped`]). A register only the GPU
//! reaches ([`GpuDoorbell::register`]) cannot be rung from the host: recovery then fails
//! with [`RecoveryError::DeviceMemory`] before any modify command. Queue pairs the CUDA
//! software NIC executes (the kernels crate's `CudaFabric`) are not recoverable: its
//! `DeviceNic` borrows them while it runs, so recovery (`&mut`) runs only once it is
//! gone, when nothing flushes what was outstanding (the drain times out unless every WQE
//! had retired), and an engine takes the queue pairs' state from the control plane only
//! when it is built.

use core::any::Any;
use core::fmt;
use std::time::{Duration, Instant};

use super::memory::CQE_INIT_OP_OWN;
use super::pair::{CompletionError, PollError, Polled, QueuePair};
use super::placement::{GpuDoorbell, Host, HostDoorbell, Placement, QueueBuffer};
use super::send::{PostError, Ticket};
use crate::cq::{Completion, CqMode, ResponderCompletion, Syndrome, CQE_BYTES};
use crate::memory::{DmaBuffer, RegisterPage};
use crate::nic::{NicError, RcEndpoint};
use crate::order::{GpuThread, HostBarrier, OrderingScope, ValidFor};
use crate::wqe::{
    wqebbs_for_ds, AvForm, Dc, Nop, Rc, SendRing, Transport, TypedTransport, WqeIndex, WQEBB_BYTES,
};

/// How a request that did not complete ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnfinishedOutcome {
    /// It failed: its error CQE.
    Failed(CompletionError),
    /// The NIC flushed it (the queue pair was in the error state): its flush CQE, or the
    /// flush CQE of the later WQE whose completion retired it.
    Flushed(CompletionError),
}

impl UnfinishedOutcome {
    /// The completion that reported it.
    pub fn completion(&self) -> &CompletionError {
        match self {
            Self::Failed(e) | Self::Flushed(e) => e,
        }
    }
}

/// A request that did not complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unfinished {
    /// Its ticket (as posting returned it).
    pub ticket: Ticket,
    /// The 16-bit index of its first basic block.
    pub wqe_index: u16,
    /// How it ended.
    pub outcome: UnfinishedOutcome,
}

/// What a recovery found: every request that had not completed, in posting order, and
/// the receive completions it consumed on the way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The requests that failed or were flushed.
    pub unfinished: Vec<Unfinished>,
    /// Receive completions (WRITE_WITH_IMM at this queue pair) consumed while draining.
    pub received: Vec<ResponderCompletion>,
    /// Receive-side error completions consumed while draining.
    pub receive_errors: Vec<CompletionError>,
    /// GPU-produced queues: WQEBBs reserved by a kernel that never published them (it
    /// stopped in the middle of a post), given up (no WQE of theirs reached the NIC).
    pub abandoned_wqebbs: u64,
}

impl Recovery {
    fn append(&mut self, mut more: Recovery) {
        self.unfinished.append(&mut more.unfinished);
        self.received.append(&mut more.received);
        self.receive_errors.append(&mut more.receive_errors);
        self.abandoned_wqebbs += more.abandoned_wqebbs;
    }
}

/// Why a recovery did not bring the queue pair back.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecoveryError {
    /// The queue pair was not made by the control plane ([`crate::nic`]): there is no NIC
    /// object to send the state transitions to.
    NotControlPlane,
    /// A state-transition command failed. The queue pair is in the state the NIC left it
    /// in; `recover` may be called again (every step can be repeated).
    Command(NicError),
    /// After 2ERR_QP the NIC had not completed every WQE when the timeout passed (its CQ
    /// is in the error state, or the NIC stopped). What the drain found so far is kept
    /// and returned by the next recovery that finishes.
    Timeout {
        /// How long the drain waited.
        waited: Duration,
        /// WQEBBs still not completed.
        outstanding_wqebbs: u64,
    },
    /// A CQE that is not one for this queue pair (malformed, or naming nothing it posted):
    /// the CQ cannot be trusted, and nothing was reset.
    Poll(PollError),
    /// The signaled NOP that makes a CQE cover an unsignaled tail could not be posted.
    Post(PostError),
    /// The memory of a GPU-produced queue pair could not be read or written.
    DeviceMemory(String),
    /// The free-running WQEBB counter cannot move on (2^64 WQEBBs posted).
    CountersExhausted,
}

impl fmt::Display for RecoveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotControlPlane => f.write_str(
                "the queue pair was not made by the control plane (nic::Device): no NIC object \
                 to move through RESET",
            ),
            Self::Command(e) => write!(f, "recovery command failed: {e}"),
            Self::Timeout {
                waited,
                outstanding_wqebbs,
            } => write!(
                f,
                "{outstanding_wqebbs} WQEBBs not completed {waited:?} after 2ERR_QP (a CQ in \
                 the error state writes nothing: make the queue pair again)"
            ),
            Self::Poll(e) => write!(f, "recovery found a CQE it cannot trust: {e}"),
            Self::Post(e) => write!(f, "recovery could not signal the tail: {e}"),
            Self::DeviceMemory(e) => write!(f, "recovery could not reach the queue's memory: {e}"),
            Self::CountersExhausted => f.write_str("the queue's WQEBB counter is exhausted"),
        }
    }
}

impl std::error::Error for RecoveryError {}

impl From<PostError> for RecoveryError {
    fn from(e: PostError) -> Self {
        Self::Post(e)
    }
}

impl From<NicError> for RecoveryError {
    fn from(e: NicError) -> Self {
        Self::Command(e)
    }
}

/// The deadline of one recovery, shared by its phases.
struct Deadline {
    start: Instant,
    timeout: Duration,
    idle_polls: u32,
}

impl Deadline {
    fn new(timeout: Duration) -> Self {
        Self {
            start: Instant::now(),
            timeout,
            idle_polls: 0,
        }
    }

    /// A poll found nothing: now and then yields the CPU, and says when time is up.
    fn idle(&mut self, outstanding_wqebbs: u64) -> Result<(), RecoveryError> {
        self.idle_polls = self.idle_polls.wrapping_add(1);
        if self.idle_polls % 64 == 0 {
            let waited = self.start.elapsed();
            if waited >= self.timeout {
                return Err(RecoveryError::Timeout {
                    waited,
                    outstanding_wqebbs,
                });
            }
            std::thread::yield_now();
        }
        Ok(())
    }
}

/// The request an error or flush CQE names: it ends at `end`.
fn unfinished(qpn: crate::wqe::Qpn, end: u64, error: CompletionError) -> Unfinished {
    let outcome = if error.syndrome == Some(Syndrome::WorkRequestFlushed) {
        UnfinishedOutcome::Flushed(error)
    } else {
        UnfinishedOutcome::Failed(error)
    };
    Unfinished {
        ticket: Ticket { qpn, end },
        wqe_index: error.wqe_index,
        outcome,
    }
}

impl<T: Transport> QueuePair<T> {
    /// Steps 1 to 5 of the module documentation for a host-placed queue pair.
    fn recover_host(
        &mut self,
        remote: Option<&RcEndpoint>,
        timeout: Duration,
        progress: &mut dyn FnMut(),
    ) -> Result<Recovery, RecoveryError> {
        if self.nic_objects.is_none() {
            return Err(RecoveryError::NotControlPlane);
        }
        let mut deadline = Deadline::new(timeout);
        let mut found = Recovery::default();
        // The NIC learns of everything published, then flushes what it has not run.
        self.sq.ring_doorbell();
        if let Some(objects) = &self.nic_objects {
            if let Err(e) = objects.to_error() {
                self.unreported.append(found);
                return Err(e.into());
            }
        }
        let drained = self.drain_flushed(&mut deadline, &mut found, progress);
        // What was found is kept even if the drain did not finish.
        self.unreported.append(found);
        drained?;
        if let Some(objects) = &self.nic_objects {
            objects.to_reset()?;
        }
        // The NIC's send counter is 0 now: so is the record, before RST2INIT lets the NIC
        // read it again.
        self.sq.memory().store_dbrec([0; 8]);
        self.sq.restart().ok_or(RecoveryError::CountersExhausted)?;
        self.cq.restart();
        self.first_error = None;
        self.recovery_nop = None;
        if let Some(objects) = &mut self.nic_objects {
            objects.reconnect(remote)?;
        }
        Ok(core::mem::take(&mut self.unreported))
    }

    /// Polls until every posted WQE is retired and the CQ is empty, listing in `found`
    /// what failed or was flushed (also when it stops with a timeout or an untrusted CQE).
    /// The queue pair is in the error state: when the CQEs stop with WQEs still out (they
    /// ran, and no CQE of theirs is coming: an unsignaled tail, or a completion the NIC
    /// lost), a signaled NOP is posted after them, whose flush CQE retires them.
    fn drain_flushed(
        &mut self,
        deadline: &mut Deadline,
        found: &mut Recovery,
        progress: &mut dyn FnMut(),
    ) -> Result<(), RecoveryError> {
        // Room comes: a ring always holds a signaled WQE within half its size, and the NIC
        // flushes every WQE it has not run with a CQE of its own.
        self.drain_until(deadline, found, progress, |qp| {
            qp.sq.is_idle() || qp.sq.free_wqebbs() > 0
        })?;
        if self.sq.is_idle() {
            return Ok(());
        }
        // One NOP per error: a recovery that timed out left its NOP last in the ring, and
        // what was posted after it is flushed with CQEs of its own (the queue pair is
        // still in error), so that NOP still covers everything.
        let own_nop = match self.recovery_nop.filter(|t| !self.sq.is_complete(*t)) {
            Some(nop) => nop,
            None => {
                let nop = self.sq.post_signaled_nop().map_err(RecoveryError::Post)?;
                self.recovery_nop = Some(nop);
                self.sq.ring_doorbell();
                nop
            }
        };
        let drained = self.drain_until(deadline, found, progress, |qp| qp.sq.is_idle());
        // The NOP is the recovery's own, not a request of the caller's.
        found.unfinished.retain(|u| u.ticket != own_nop);
        drained
    }

    /// The caller's WQEBBs not yet retired (the recovery's own NOP left out).
    fn outstanding_requests(&self) -> u64 {
        let nop = self
            .recovery_nop
            .filter(|t| !self.sq.is_complete(*t))
            .map_or(0, |_| 1);
        self.sq.producer() - self.sq.retired() - nop
    }

    /// Polls (listing what failed or was flushed) until `done` holds and the CQ has
    /// nothing more, or the deadline passes.
    fn drain_until(
        &mut self,
        deadline: &mut Deadline,
        found: &mut Recovery,
        progress: &mut dyn FnMut(),
        done: impl Fn(&Self) -> bool,
    ) -> Result<(), RecoveryError> {
        loop {
            let before = self.sq.retired();
            match self.poll() {
                Ok(Some(Polled::Sent { .. })) => {}
                Ok(Some(Polled::Received(r))) => found.received.push(r),
                Ok(None) if done(self) => return Ok(()),
                Ok(None) => {
                    progress();
                    deadline.idle(self.outstanding_requests())?;
                }
                Err(PollError::Completion(error)) => {
                    let after = self.sq.retired();
                    if after == before {
                        // A receive-side error: it retired no send WQE.
                        found.receive_errors.push(error);
                        continue;
                    }
                    // The CQE names one WQE (which ends at `after`). The unsignaled WQEs
                    // before it that it retires completed: they ran before the error, for
                    // a NIC in error completes every WQE it flushes with a CQE of its own.
                    found
                        .unfinished
                        .push(unfinished(self.sq.qpn(), after, error));
                }
                Err(e) => return Err(RecoveryError::Poll(e)),
            }
        }
    }
}

impl QueuePair<Rc> {
    /// What the peer needs to connect to this queue pair after its next recovery: its
    /// number, the PSN its next connection sends from, its port's addresses (`None` if it
    /// was not made by the control plane). Both sides exchange these before either calls
    /// [`recover`](Self::recover).
    pub fn endpoint(&self) -> Option<RcEndpoint> {
        self.nic_objects.as_ref()?.endpoint()
    }

    /// Brings the queue pair back to RTS connected to `remote` (the peer's
    /// [`endpoint`](Self::endpoint) for its own recovery), returning every request that
    /// had not completed (see the [module documentation](self)). Waits at most `timeout`
    /// for the NIC to flush.
    pub fn recover(
        &mut self,
        remote: &RcEndpoint,
        timeout: Duration,
    ) -> Result<Recovery, RecoveryError> {
        self.recover_host(Some(remote), timeout, &mut || {})
    }

    /// [`recover`](Self::recover), calling `progress` between polls that find nothing (for
    /// a NIC that needs driving, such as the software NIC stepped by hand).
    pub fn recover_driving(
        &mut self,
        remote: &RcEndpoint,
        timeout: Duration,
        progress: &mut dyn FnMut(),
    ) -> Result<Recovery, RecoveryError> {
        self.recover_host(Some(remote), timeout, progress)
    }
}

impl<Av: AvForm> QueuePair<Dc<Av>> {
    /// Brings the DC initiator back to RTS, returning every request that had not
    /// completed (see the [module documentation](self)). Waits at most `timeout` for the
    /// NIC to flush.
    pub fn recover_dci(&mut self, timeout: Duration) -> Result<Recovery, RecoveryError> {
        self.recover_host(None, timeout, &mut || {})
    }

    /// [`recover_dci`](Self::recover_dci), calling `progress` between polls that find
    /// nothing.
    pub fn recover_dci_driving(
        &mut self,
        timeout: Duration,
        progress: &mut dyn FnMut(),
    ) -> Result<Recovery, RecoveryError> {
        self.recover_host(None, timeout, progress)
    }
}

// ---------------------------------------------------------------------------------------
// GPU-produced queue pairs.

/// How recovery reaches, from the host, the memory of a queue pair that GPU threads post
/// to: its send ring, doorbell record, CQ ring and record and producer state (the
/// buffers the queue pair owns, lent to the methods by recovery itself for the length of
/// one call, as a plain borrow of the owned buffer: [`DmaBuffer`] and
/// [`DeviceBuffer`](crate::memory::DeviceBuffer) are not `Clone`, so no second handle can
/// be made from it), and its doorbell. [`HostMemory`] is the host's own access to queue
/// memory in host memory (the `Host` placement); GPU memory needs a copy engine
/// (`cuMemcpy`), which the code that owns the CUDA context provides.
///
/// A doorbell that is a NIC register the host also has mapped (a ConnectX UAR, whose page
/// the backend allocated with `mlx5dv_devx_alloc_uar` and mapped into the GPU) is rung by
/// recovery itself through that host mapping, as a host producer rings it, after the
/// writes (which `write` makes visible to the NIC before it returns): `ring` is called
/// only for other doorbells.
///
/// # Safety
///
/// `read` and `write` must move exactly the bytes asked for, at `offset` of the buffer
/// given (its device address for GPU memory), and `ring` must store the 8-byte value to the
/// doorbell given, as a producer of the placement does; none may touch anything else, and
/// none may keep the buffer or doorbell it is lent, or any pointer or address derived from
/// it, past the call (the queue pair owns them; a kept address is a write into queue
/// memory behind its owner's back). Recovery trusts them as it trusts the memory itself:
/// a wrong write is a WQE the NIC executes.
pub unsafe trait DeviceQueueAccess<P: Placement> {
    /// Copies `dst.len()` bytes from `offset` of `buffer`.
    fn read(&self, buffer: &P::Owned, offset: usize, dst: &mut [u8]) -> Result<(), String>;
    /// Copies `src` to `offset` of `buffer`, visible to the NIC when it returns (a NIC
    /// reading the memory, once the call returned, sees these bytes).
    fn write(&self, buffer: &P::Owned, offset: usize, src: &[u8]) -> Result<(), String>;
    /// Stores `value` to the doorbell, after every earlier write.
    fn ring(&self, doorbell: &P::Doorbell, value: [u8; 8]) -> Result<(), String>;
}

/// The host's access to queue memory in host memory (pinned and mapped into the GPU).
#[derive(Clone, Copy, Debug, Default)]
pub struct HostMemory;

// SAFETY: exactly the bytes asked for, through the buffers' checked accessors; the doorbell
// with the host producer's release store.
unsafe impl DeviceQueueAccess<Host> for HostMemory {
    fn read(&self, buffer: &DmaBuffer, offset: usize, dst: &mut [u8]) -> Result<(), String> {
        buffer.read(offset, dst).map_err(|e| e.to_string())
    }
    fn write(&self, buffer: &DmaBuffer, offset: usize, src: &[u8]) -> Result<(), String> {
        buffer.write(offset, src).map_err(|e| e.to_string())?;
        core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
        Ok(())
    }
    fn ring(&self, doorbell: &HostDoorbell, value: [u8; 8]) -> Result<(), String> {
        HostBarrier.flush_writes();
        doorbell.store(value);
        HostBarrier.flush_writes();
        Ok(())
    }
}

/// The host's mapping of a GPU queue's doorbell, if it is a NIC register the host maps
/// too ([`GpuDoorbell::is_host_mapped`]). A host queue's doorbell is rung through its access
/// ([`HostMemory`] stores to a register page as a host producer does).
fn host_mapped_register<D: QueueBuffer>(doorbell: &D) -> Option<&RegisterPage> {
    (doorbell as &dyn Any)
        .downcast_ref::<GpuDoorbell>()
        .and_then(GpuDoorbell::host_register)
}

/// The counters of a [`DeviceProducerState`](super::DeviceProducerState) as recovery reads
/// and writes them.
#[derive(Clone, Copy, Debug)]
struct DeviceCounters {
    reserved: u64,
    ready: u64,
    retired: u64,
    cq_consumer: u64,
    collapsed_seen: u32,
}

/// Byte offsets in the producer state (pinned in `queue::device`).
mod state_offset {
    pub const RESERVED: usize = 0;
    pub const READY: usize = 8;
    pub const POSTED: usize = 16;
    pub const RETIRED: usize = 24;
    pub const CQ_CONSUMER: usize = 32;
    pub const DOORBELL_LOCK: usize = 40;
    pub const COLLAPSED_SEEN: usize = 48;
}

impl<T, P, S> QueuePair<T, P, S>
where
    T: TypedTransport,
    P: Placement,
    S: OrderingScope<Producer = GpuThread> + ValidFor<P>,
{
    /// What the peer needs to connect to this RC queue pair after its next recovery (see
    /// [`QueuePair::endpoint`]); `None` for a DCI or a queue pair not made by the control
    /// plane.
    pub fn endpoint(&self) -> Option<RcEndpoint> {
        self.nic_objects.as_ref()?.endpoint()
    }

    /// Brings a queue pair GPU threads post to back to RTS (an RC queue pair connected to
    /// `remote`, the peer's `endpoint()`; a DCI with `None`), as the [module documentation](self) says, reaching its memory through
    /// `access`. Where the host stands in for the device: the WQEs the kernels published
    /// and did not announce are announced, the CQ is drained from where the kernels left
    /// it (a signaled NOP after what is still out when the CQEs stop, as for host-placed
    /// queues: an unsignaled tail, a lost completion), and the producer state is rewritten
    /// for the next kernel (every counter skipped ahead to the next multiple of 2^16, the
    /// locks free, a collapsed CQ's last seen counter forgotten). Slots reserved but never
    /// published (a kernel that stopped in the middle of a post) are abandoned and counted
    /// in [`Recovery::abandoned_wqebbs`]. The doorbell is rung from the host (see the
    /// [module documentation](self): a ConnectX UAR through the host's mapping of it).
    ///
    /// No kernel may post to the queue meanwhile, and the borrow proves it: kernels get
    /// the queue as a [`DeviceQueue`](super::DeviceQueue) borrowed from this queue pair,
    /// and the launchers' contracts require the launched work to complete before that
    /// borrow ends, so while `&mut self` exists no launched kernel can still hold it.
    pub fn recover_device(
        &mut self,
        remote: Option<&RcEndpoint>,
        access: &dyn DeviceQueueAccess<P>,
        timeout: Duration,
        progress: &mut dyn FnMut(),
    ) -> Result<Recovery, RecoveryError> {
        if self.nic_objects.is_none() {
            return Err(RecoveryError::NotControlPlane);
        }
        let mut deadline = Deadline::new(timeout);
        let mut found = Recovery::default();
        let drained = self.device_drain(access, &mut deadline, &mut found, progress);
        self.unreported.append(found);
        let mut counters = drained?;
        if let Some(objects) = &self.nic_objects {
            objects.to_reset()?;
        }
        let io = |e: String| RecoveryError::DeviceMemory(e);
        access
            .write(self.sq.memory().dbrec_buffer().as_ref(), 0, &[0; 8])
            .map_err(io)?;
        let next = counters
            .ready
            .checked_next_multiple_of(1 << 16)
            .ok_or(RecoveryError::CountersExhausted)?;
        counters = DeviceCounters {
            reserved: next,
            ready: next,
            retired: next,
            collapsed_seen: 0,
            ..counters
        };
        if self.cq.mode() == CqMode::Collapsed {
            let mut last = [0u8; 8];
            last[7] = CQE_INIT_OP_OWN;
            access
                .write(
                    self.cq.memory().ring_buffer().as_ref(),
                    CQE_BYTES - 8,
                    &last,
                )
                .map_err(io)?;
        }
        self.write_counters(access, &counters)?;
        self.first_error = None;
        self.recovery_nop = None;
        if let Some(objects) = &mut self.nic_objects {
            objects.reconnect(remote)?;
        }
        Ok(core::mem::take(&mut self.unreported))
    }

    fn state_buffer(&self) -> Result<&P::Owned, RecoveryError> {
        self.device_state
            .as_ref()
            .map(AsRef::as_ref)
            .ok_or(RecoveryError::DeviceMemory("no producer state".into()))
    }

    fn read_counters(
        &self,
        access: &dyn DeviceQueueAccess<P>,
    ) -> Result<DeviceCounters, RecoveryError> {
        let mut b = [0u8; 64];
        access
            .read(self.state_buffer()?, 0, &mut b)
            .map_err(RecoveryError::DeviceMemory)?;
        let u64_at = |at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]));
        Ok(DeviceCounters {
            reserved: u64_at(state_offset::RESERVED),
            ready: u64_at(state_offset::READY),
            retired: u64_at(state_offset::RETIRED),
            cq_consumer: u64_at(state_offset::CQ_CONSUMER),
            collapsed_seen: u32_at(state_offset::COLLAPSED_SEEN),
        })
    }

    /// Writes every counter, `posted` equal to `ready`, the locks free.
    fn write_counters(
        &self,
        access: &dyn DeviceQueueAccess<P>,
        c: &DeviceCounters,
    ) -> Result<(), RecoveryError> {
        let mut b = [0u8; 64];
        b[state_offset::RESERVED..][..8].copy_from_slice(&c.reserved.to_ne_bytes());
        b[state_offset::READY..][..8].copy_from_slice(&c.ready.to_ne_bytes());
        b[state_offset::POSTED..][..8].copy_from_slice(&c.ready.to_ne_bytes());
        b[state_offset::RETIRED..][..8].copy_from_slice(&c.retired.to_ne_bytes());
        b[state_offset::CQ_CONSUMER..][..8].copy_from_slice(&c.cq_consumer.to_ne_bytes());
        b[state_offset::DOORBELL_LOCK..][..8].copy_from_slice(&[0; 8]);
        b[state_offset::COLLAPSED_SEEN..][..4].copy_from_slice(&c.collapsed_seen.to_ne_bytes());
        access
            .write(self.state_buffer()?, 0, &b)
            .map_err(RecoveryError::DeviceMemory)
    }

    /// The control segment's first 12 bytes of the WQE at free-running counter `at`.
    fn device_ctrl(
        &self,
        access: &dyn DeviceQueueAccess<P>,
        at: u64,
    ) -> Result<[u8; 12], RecoveryError> {
        let slot = (at & u64::from(self.sq.size().wqebbs() - 1)) as usize;
        let mut ctrl = [0u8; 12];
        access
            .read(
                self.sq.memory().ring_buffer().as_ref(),
                slot * WQEBB_BYTES,
                &mut ctrl,
            )
            .map_err(RecoveryError::DeviceMemory)?;
        Ok(ctrl)
    }

    /// Announces what the kernels published, sends 2ERR_QP and drains the CQ, posting a
    /// signaled NOP after WQEs that ran and will get no CQE (as the host path does): the
    /// counters the queue ends with.
    fn device_drain(
        &mut self,
        access: &dyn DeviceQueueAccess<P>,
        deadline: &mut Deadline,
        found: &mut Recovery,
        progress: &mut dyn FnMut(),
    ) -> Result<DeviceCounters, RecoveryError> {
        let mut c = self.read_counters(access)?;
        if c.reserved > c.ready {
            found.abandoned_wqebbs += c.reserved - c.ready;
        }
        c.reserved = c.ready;
        // Announce whatever the kernels published (a doorbell they did not ring).
        let ctrl = [((c.ready & 0xffff) << 8) as u32, self.sq.qpn().get() << 8];
        let mut doorbell = [0u8; 8];
        doorbell[..4].copy_from_slice(&ctrl[0].to_be_bytes());
        doorbell[4..].copy_from_slice(&ctrl[1].to_be_bytes());
        self.device_announce(access, c.ready, doorbell)?;
        self.write_counters(access, &c)?;
        if let Some(objects) = &self.nic_objects {
            objects.to_error()?;
        }
        // Room comes: the ring always has a signaled WQE within half its size, and the NIC
        // flushes every WQE it has not run with a CQE of its own.
        let capacity = u64::from(self.sq.size().wqebbs());
        let mut drained = self.device_poll_until(access, &mut c, deadline, found, progress, |c| {
            c.retired == c.ready || c.ready - c.retired < capacity
        });
        if drained.is_ok() && c.retired < c.ready {
            let own_nop = match self.recovery_nop.filter(|t| t.end > c.retired) {
                Some(nop) => nop,
                None => {
                    let nop = self.device_nop(access, &mut c)?;
                    self.recovery_nop = Some(nop);
                    nop
                }
            };
            drained = self.device_poll_until(access, &mut c, deadline, found, progress, |c| {
                c.retired == c.ready
            });
            found.unfinished.retain(|u| u.ticket != own_nop);
        }
        // The counters as far as the drain got, for the next kernel or recovery.
        self.write_counters(access, &c)?;
        drained?;
        Ok(c)
    }

    /// Writes a signaled NOP at `c.ready` and announces it: its ticket.
    fn device_nop(
        &self,
        access: &dyn DeviceQueueAccess<P>,
        c: &mut DeviceCounters,
    ) -> Result<Ticket, RecoveryError> {
        let capacity = u64::from(self.sq.size().wqebbs());
        let at = c.ready;
        let nop = Nop::<T>::new()
            .signaled()
            .build()
            .map_err(PostError::from)?;
        let mut block = [0u8; WQEBB_BYTES];
        SendRing::new(&mut block, Default::default())
            .and_then(|mut ring| ring.write(WqeIndex::from_counter(at), self.sq.qpn(), &nop))
            .map_err(PostError::from)?;
        let slot = (at & (capacity - 1)) as usize;
        access
            .write(
                self.sq.memory().ring_buffer().as_ref(),
                slot * WQEBB_BYTES,
                &block,
            )
            .map_err(RecoveryError::DeviceMemory)?;
        c.ready = at + 1;
        c.reserved = c.ready;
        let mut doorbell = [0u8; 8];
        doorbell.copy_from_slice(&block[..8]);
        self.device_announce(access, c.ready, doorbell)?;
        Ok(Ticket {
            qpn: self.sq.qpn(),
            end: c.ready,
        })
    }

    /// The doorbell record for everything before `next_free`, then the doorbell.
    fn device_announce(
        &self,
        access: &dyn DeviceQueueAccess<P>,
        next_free: u64,
        doorbell: [u8; 8],
    ) -> Result<(), RecoveryError> {
        let mut record = [0u8; 8];
        record[4..].copy_from_slice(&((next_free & 0xffff) as u32).to_be_bytes());
        let io = RecoveryError::DeviceMemory;
        access
            .write(self.sq.memory().dbrec_buffer().as_ref(), 0, &record)
            .map_err(io)?;
        let doorbell_of_queue = self.sq.memory().doorbell_buffer();
        match host_mapped_register(doorbell_of_queue) {
            // A NIC register the host maps too (a ConnectX UAR): rung as a host producer
            // rings it. The writes are visible to the NIC already (`write`'s contract); the
            // flushes keep the store from sitting in a write-combining buffer.
            Some(page) => {
                HostBarrier.flush_writes();
                page.store(0, doorbell)
                    .map_err(|e| RecoveryError::DeviceMemory(e.to_string()))?;
                HostBarrier.flush_writes();
                Ok(())
            }
            None => access.ring(doorbell_of_queue, doorbell).map_err(io),
        }
    }

    /// Consumes CQEs from where the kernels left the CQ until `done` holds and the CQ has
    /// nothing more, listing what failed or was flushed, as the device library polls
    /// (owner bit or collapsed counter, `wqe_counter` relative to `retired`, the WQE's size
    /// from its control segment).
    fn device_poll_until(
        &self,
        access: &dyn DeviceQueueAccess<P>,
        c: &mut DeviceCounters,
        deadline: &mut Deadline,
        found: &mut Recovery,
        progress: &mut dyn FnMut(),
        done: impl Fn(&DeviceCounters) -> bool,
    ) -> Result<(), RecoveryError> {
        let io = RecoveryError::DeviceMemory;
        let cq = self.cq.memory();
        let entries = cq.entries();
        let collapsed = self.cq.mode() == CqMode::Collapsed;
        loop {
            let slot = if collapsed {
                0
            } else {
                (c.cq_consumer & u64::from(entries - 1)) as usize
            };
            let mut bytes = [0u8; CQE_BYTES];
            access
                .read(cq.ring_buffer().as_ref(), slot * CQE_BYTES, &mut bytes)
                .map_err(io)?;
            let op_own = bytes[CQE_BYTES - 1];
            let counter = u16::from_be_bytes([bytes[60], bytes[61]]);
            let valid = op_own >> 4 != 0xf
                && if collapsed {
                    u32::from(counter) + 1 != c.collapsed_seen
                } else {
                    (op_own & 1 != 0) == (c.cq_consumer & u64::from(entries) != 0)
                };
            if !valid {
                if done(c) {
                    return Ok(());
                }
                progress();
                // The caller's WQEBBs: the recovery's own NOP left out.
                let nop = self
                    .recovery_nop
                    .filter(|t| t.end > c.retired)
                    .map_or(0, |_| 1);
                deadline.idle(c.ready - c.retired - nop)?;
                continue;
            }
            c.cq_consumer += 1;
            if collapsed {
                c.collapsed_seen = u32::from(counter) + 1;
            } else {
                let ci = ((c.cq_consumer & 0xff_ffff) as u32).to_be_bytes();
                access
                    .write(
                        cq.dbrec_buffer().as_ref(),
                        0,
                        &[ci[0], ci[1], ci[2], ci[3], 0, 0, 0, 0],
                    )
                    .map_err(io)?;
            }
            let completion = crate::cq::parse_cqe(&bytes)
                .map_err(|e| RecoveryError::Poll(PollError::Malformed(e)))?;
            let qpn = self.sq.qpn();
            let stray = RecoveryError::Poll(PollError::Stray {
                qpn: completion.qpn(),
                wqe_counter: completion.wqe_counter(),
            });
            let (error, requester) = match completion {
                Completion::Responder(r) if r.qpn == qpn.get() => {
                    found.received.push(r);
                    continue;
                }
                Completion::Requester(r) if r.qpn == qpn.get() => (None, true),
                Completion::Error(e) if e.qpn == qpn.get() => (
                    Some(CompletionError {
                        qpn: e.qpn,
                        wqe_index: e.wqe_counter,
                        syndrome: e.syndrome,
                        syndrome_byte: e.syndrome_byte,
                        vendor_syndrome: e.vendor_syndrome,
                        status: e.status(),
                    }),
                    e.requester,
                ),
                _ => return Err(stray),
            };
            if !requester {
                if let Some(e) = error {
                    found.receive_errors.push(e);
                }
                continue;
            }
            let first = c.retired + u64::from(counter.wrapping_sub(c.retired as u16));
            if first >= c.ready {
                return Err(stray);
            }
            let ctrl = self.device_ctrl(access, first)?;
            let end = first + u64::from(wqebbs_for_ds(usize::from(ctrl[7] & 0x3f)).max(1));
            c.retired = end.min(c.ready);
            if let Some(error) = error {
                found.unfinished.push(unfinished(qpn, c.retired, error));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The faults a control-plane queue pair meets only if its ring is written behind its
    //! back (the builders never write a malformed WQE, one naming another queue, or one
    //! longer than what is published) or if it is moved out of RTS behind the control
    //! plane's back, each followed by recovery: the corrupted WQE is returned failed with
    //! its syndrome, the ones after it flushed, and the queue pair works again.

    use std::sync::Arc;

    use super::*;
    use crate::memory::DmaBuffer;
    use crate::nic::prm::{self, Command};
    use crate::nic::{Device, MemoryAccess, QueueSpec, SoftNic, SoftObject};
    use crate::softnic::Fabric;
    use crate::wqe::{RdmaWrite, RingSize};

    const LOCAL_QP_OP: u8 = 0x02;

    struct Setup {
        fabric: Fabric,
        device: Device<SoftNic>,
        buffer: Arc<DmaBuffer>,
        region: crate::nic::MemoryRegion<SoftNic>,
        qp: QueuePair<Rc>,
    }

    fn setup() -> Setup {
        let fabric = Fabric::new();
        let device = Device::open(SoftNic::open(&fabric, 1).unwrap()).unwrap();
        let pd = device.alloc_pd().unwrap();
        let buffer = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
        let region = pd
            .register(buffer.clone(), 0, 64, MemoryAccess::all())
            .unwrap();
        let pending = pd
            .create_rc(QueueSpec::new(RingSize::new(16).unwrap()))
            .unwrap();
        let endpoint = pending.endpoint();
        let qp = pending.connect(&endpoint).unwrap();
        Setup {
            fabric,
            device,
            buffer,
            region,
            qp,
        }
    }

    impl Setup {
        fn write(&mut self, at: u64, byte: u8) -> Ticket {
            let payload = [byte; 8];
            let wqe = RdmaWrite::new(self.region.remote(at))
                .inline(&payload)
                .signaled()
                .build()
                .unwrap();
            self.qp.post(&wqe, &[]).unwrap()
        }

        /// Recovers, expecting `failed` to fail with `vendor` and `flushed` to be flushed,
        /// then checks the queue pair writes again.
        fn recover_expecting(&mut self, failed: Ticket, vendor: u8, flushed: &[Ticket]) {
            let next = self.qp.endpoint().unwrap();
            let fabric = self.fabric.clone();
            let recovery = self
                .qp
                .recover_driving(&next, Duration::from_secs(5), &mut || {
                    fabric.step();
                })
                .unwrap();
            let mut expected = vec![(failed, true, LOCAL_QP_OP, vendor)];
            expected.extend(flushed.iter().map(|t| (*t, false, 0x05, 0)));
            let found: Vec<_> = recovery
                .unfinished
                .iter()
                .map(|u| {
                    let e = u.outcome.completion();
                    (
                        u.ticket,
                        matches!(u.outcome, UnfinishedOutcome::Failed(_)),
                        e.syndrome_byte,
                        e.vendor_syndrome,
                    )
                })
                .collect();
            assert_eq!(found, expected);
            assert_eq!(self.buffer.to_vec(), vec![0; 64], "nothing landed");
            let t = self.write(0, 0x5a);
            self.qp
                .wait_driving(t, Duration::from_secs(5), &mut || {
                    self.fabric.step();
                })
                .unwrap();
            assert_eq!(self.buffer.to_vec()[..8], [0x5a; 8]);
        }

        /// Rewrites byte `at` of the WQE starting at `ticket - 1`'s slot.
        fn corrupt(&self, ticket: Ticket, at: usize, byte: u8) {
            let slot = ((ticket.end() - 1) % 16) as usize;
            self.qp
                .sq
                .memory()
                .ring_buffer()
                .write(slot * 64 + at, &[byte])
                .unwrap();
        }
    }

    #[test]
    fn a_malformed_wqe_then_recovery() {
        let mut s = setup();
        let failed = s.write(0, 1);
        // Opcode byte 3 of the control segment: 0x07 is no opcode.
        s.corrupt(failed, 3, 0x07);
        let flushed = [s.write(8, 2), s.write(16, 3)];
        s.fabric.run_until_idle();
        s.recover_expecting(failed, 0x01, &flushed);
    }

    #[test]
    fn a_wqe_naming_another_queue_then_recovery() {
        let mut s = setup();
        let failed = s.write(0, 1);
        // The QPN is bytes 4..7 of the control segment.
        s.corrupt(failed, 6, 0x77);
        let flushed = [s.write(8, 2)];
        s.fabric.run_until_idle();
        s.recover_expecting(failed, 0x02, &flushed);
    }

    #[test]
    fn a_wqe_longer_than_what_is_published_then_recovery() {
        let mut s = setup();
        let failed = s.write(0, 1);
        // DS 8 (two basic blocks) where one is published.
        s.corrupt(failed, 7, 8);
        s.fabric.run_until_idle();
        s.recover_expecting(failed, 0x03, &[]);
    }

    #[test]
    fn a_wqe_before_rts_then_recovery() {
        let mut s = setup();
        let qpn = s.qp.qpn().get();
        let modify = |input: Vec<u8>| {
            s.device
                .backend()
                .modify_object(&SoftObject::Qp(qpn), &input, &mut [0u8; 64])
                .unwrap()
        };
        // Behind the control plane's back: RESET (the host starting over as recovery
        // would), then INIT only.
        modify(prm::Qp2Rst { uid: 0, qpn }.encode().unwrap());
        s.qp.sq.memory().store_dbrec([0; 8]);
        s.qp.sq.restart().unwrap();
        modify(
            prm::Rst2InitQp {
                uid: 0,
                qpn,
                opt_param_mask: 0,
                pm_state: prm::PmState::Migrated,
                vhca_port_num: 1,
                pkey_index: 0,
                access: prm::RemoteAccess::ALL,
                atomic_mode: prm::AtomicMode::UpTo8Bytes,
                dc_access_key: 0,
            }
            .encode()
            .unwrap(),
        );
        let failed = s.write(0, 1);
        let flushed = [s.write(8, 2)];
        s.fabric.run_until_idle();
        s.recover_expecting(failed, 0x04, &flushed);
    }
}

#[cfg(test)]
mod device_tests {
    //! Recovery of a GPU-produced queue pair in host memory, on the CPU software NIC, with
    //! the test playing the GPU producer (writing WQEs, the producer state, the record and
    //! the doorbell as the device library does).

    use core::ptr::NonNull;
    use std::sync::Arc;

    use super::*;
    use crate::memory::DmaBuffer;
    use crate::nic::{
        Device, HostQueueMemory, MemoryAccess, NicError, QueueAllocator, QueueFill, QueueSpec,
        SoftNic,
    };
    use crate::order::SystemReleaseStore;
    use crate::queue::ProducerStateMemory;
    use crate::softnic::Fabric;
    use crate::wqe::{RdmaWrite, RemoteAddress, RingSize, Wqe, WqeSpec};

    /// Host queue memory with a "GPU address": the host's own (the test is the GPU).
    struct Mapped;

    fn mapped(plain: DmaBuffer) -> DmaBuffer {
        let len = plain.len();
        let addr = plain.addr();
        // `as_ptr` carries the provenance of the whole allocation (a reference to one
        // word would cover only that word).
        let ptr = NonNull::new(plain.as_ptr()).expect("a buffer's pointer is never null");
        // SAFETY: `plain` owns the memory and becomes the new buffer's owner, so the span
        // stays valid for as long as the new buffer; all access goes through it. The GPU
        // address is the host address: no GPU exists here, the test plays the producer.
        unsafe { DmaBuffer::from_raw_mapped(ptr, len, addr, Box::new(plain)) }
            .expect("a word-aligned span")
    }

    impl QueueAllocator<Host> for Mapped {
        fn allocate(
            &self,
            len: usize,
            align: usize,
            fill: QueueFill,
        ) -> Result<DmaBuffer, NicError> {
            Ok(mapped(HostQueueMemory.allocate(len, align, fill)?))
        }
    }

    type GpuQp = QueuePair<Rc, Host, SystemReleaseStore>;

    struct Setup {
        fabric: Fabric,
        _device: Device<SoftNic>,
        read_only: crate::nic::MemoryRegion<SoftNic>,
        region: crate::nic::MemoryRegion<SoftNic>,
        buffer: Arc<DmaBuffer>,
        qp: GpuQp,
    }

    fn setup() -> Setup {
        let fabric = Fabric::new();
        let device = Device::open(
            SoftNic::open(&fabric, 1)
                .unwrap()
                .with_mapped_doorbells_for_tests(),
        )
        .unwrap();
        let pd = device.alloc_pd().unwrap();
        let buffer = Arc::new(DmaBuffer::zeroed(128, 64).unwrap());
        let region = pd
            .register(buffer.clone(), 0, 64, MemoryAccess::all())
            .unwrap();
        let read_only = pd
            .register(
                buffer.clone(),
                64,
                64,
                MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_READ,
            )
            .unwrap();
        let pending = pd
            .create_rc_in(QueueSpec::new(RingSize::new(16).unwrap()), &Mapped)
            .unwrap();
        let endpoint = pending.endpoint();
        let state =
            ProducerStateMemory::from_buffer(mapped(DmaBuffer::zeroed(64, 64).unwrap())).unwrap();
        let qp = pending
            .connect_device(&endpoint, state, SystemReleaseStore)
            .unwrap();
        Setup {
            fabric,
            _device: device,
            read_only,
            region,
            buffer,
            qp,
        }
    }

    /// Posts as a GPU thread does, through `access`: the WQE at `reserved` (its WQEBBs one
    /// after another, wrapping), the counters, the record, the doorbell. Returns the ticket
    /// (the end counter).
    pub(super) fn device_post<T, P, S, W>(
        qp: &QueuePair<T, P, S>,
        access: &dyn DeviceQueueAccess<P>,
        wqe: &Wqe<W>,
    ) -> Ticket
    where
        T: TypedTransport,
        P: Placement,
        S: OrderingScope<Producer = GpuThread> + ValidFor<P>,
        W: WqeSpec<Transport = T>,
    {
        let mut c = qp.read_counters(access).unwrap();
        let at = c.reserved;
        let wqebbs = wqe.wqebbs();
        let mut bytes = vec![0u8; wqebbs as usize * WQEBB_BYTES];
        SendRing::new(&mut bytes, Default::default())
            .unwrap()
            .write(WqeIndex::from_counter(at), qp.device_qpn(), wqe)
            .unwrap();
        let size = u64::from(qp.sq.size().wqebbs());
        for (k, block) in bytes.chunks(WQEBB_BYTES).enumerate() {
            let slot = ((at + k as u64) % size) as usize;
            access
                .write(
                    qp.sq.memory().ring_buffer().as_ref(),
                    slot * WQEBB_BYTES,
                    block,
                )
                .unwrap();
        }
        c.reserved = at + u64::from(wqebbs);
        c.ready = c.reserved;
        qp.write_counters(access, &c).unwrap();
        let mut doorbell = [0u8; 8];
        doorbell.copy_from_slice(&bytes[..8]);
        qp.device_announce(access, c.ready, doorbell).unwrap();
        Ticket {
            qpn: qp.device_qpn(),
            end: c.ready,
        }
    }

    impl Setup {
        fn device_post<W: WqeSpec<Transport = Rc>>(&self, wqe: &Wqe<W>) -> Ticket {
            device_post(&self.qp, &HostMemory, wqe)
        }

        fn write(&self, remote: RemoteAddress, byte: u8, signaled: bool) -> Ticket {
            let payload = [byte; 8];
            let w = RdmaWrite::new(remote).inline(&payload);
            let w = if signaled {
                w.signaled().build()
            } else {
                w.build()
            };
            self.device_post(&w.unwrap())
        }

        fn recover(&mut self) -> Recovery {
            let next = self.qp.endpoint().unwrap();
            let fabric = self.fabric.clone();
            self.qp
                .recover_device(
                    Some(&next),
                    &HostMemory,
                    Duration::from_secs(5),
                    &mut || {
                        fabric.step();
                    },
                )
                .unwrap()
        }
    }

    #[test]
    fn a_gpu_produced_queue_pair_recovers_its_requests_and_its_producer_state() {
        let mut s = setup();
        let done = s.write(s.region.remote(0), 0x11, true);
        s.fabric.run_until_idle();
        // The "device" consumes that CQE.
        let mut c = s.qp.read_counters(&HostMemory).unwrap();
        let mut found = Recovery::default();
        s.qp.device_poll_until(
            &HostMemory,
            &mut c,
            &mut Deadline::new(Duration::from_secs(5)),
            &mut found,
            &mut || {},
            |c| c.retired == done.end(),
        )
        .unwrap();
        s.qp.write_counters(&HostMemory, &c).unwrap();
        let failed = s.write(s.read_only.remote(0), 0x22, true);
        let flushed = [
            s.write(s.region.remote(8), 0x33, false),
            s.write(s.region.remote(16), 0x44, true),
        ];
        s.fabric.run_until_idle();
        // A kernel that stopped after reserving 3 more slots.
        let mut c = s.qp.read_counters(&HostMemory).unwrap();
        c.reserved += 3;
        s.qp.write_counters(&HostMemory, &c).unwrap();
        let recovery = s.recover();
        let found: Vec<_> = recovery
            .unfinished
            .iter()
            .map(|u| (u.ticket, u.outcome.completion().syndrome))
            .collect();
        assert_eq!(
            found,
            vec![
                (failed, Some(Syndrome::RemoteAccess)),
                (flushed[0], Some(Syndrome::WorkRequestFlushed)),
                (flushed[1], Some(Syndrome::WorkRequestFlushed)),
            ]
        );
        assert_eq!(recovery.abandoned_wqebbs, 3);
        let mut image = vec![0x11; 8];
        image.extend([0; 120]);
        assert_eq!(s.buffer.to_vec(), image);
        // The producer state is what the next kernel starts from: everything retired at a
        // multiple of 2^16 (WQE index 0, slot 0), the CQ consumed where the NIC is.
        let c = s.qp.read_counters(&HostMemory).unwrap();
        assert_eq!(
            (c.reserved, c.ready, c.retired),
            (1 << 16, 1 << 16, 1 << 16)
        );
        assert_eq!(c.cq_consumer, 4);
        assert_eq!(s.qp.sq.memory().dbrec_bytes(), [0; 8]);
        let again = s.write(s.region.remote(24), 0x55, true);
        assert_eq!(first_index(again), 0);
        s.fabric.run_until_idle();
        assert_eq!(s.buffer.to_vec()[24..32], [0x55; 8]);
    }

    fn first_index(t: Ticket) -> u16 {
        (t.end() - 1) as u16
    }

    #[test]
    fn a_completion_the_nic_lost_is_completed_by_recovery() {
        let mut s = setup();
        s.fabric
            .drop_completion(s.qp.device_qpn().get(), 0)
            .unwrap();
        let lost = s.write(s.region.remote(0), 0x77, true);
        s.fabric.run_until_idle();
        // It ran, signaled, and its CQE never comes: recovery's NOP covers it, and it is
        // not reported.
        assert_eq!(s.buffer.to_vec()[..8], [0x77; 8]);
        let recovery = s.recover();
        assert_eq!(recovery, Recovery::default());
        let c = s.qp.read_counters(&HostMemory).unwrap();
        assert!(c.retired >= lost.end() && c.retired == 1 << 16);
        // One CQE consumed: the NOP's flush, which retired the request (not a skip of the
        // counters past it).
        assert_eq!(c.cq_consumer, 1);
        let again = s.write(s.region.remote(8), 0x78, true);
        assert_eq!(first_index(again), 0);
        s.fabric.run_until_idle();
        assert_eq!(s.buffer.to_vec()[8..16], [0x78; 8]);
    }

    #[test]
    fn an_unsignaled_tail_the_kernels_left_is_covered_by_recovery() {
        let mut s = setup();
        let ran = s.write(s.region.remote(0), 0x66, false);
        s.fabric.run_until_idle();
        // It ran, and no CQE will ever say so: recovery's NOP covers it.
        assert_eq!(s.buffer.to_vec()[..8], [0x66; 8]);
        let recovery = s.recover();
        assert!(recovery.unfinished.is_empty(), "{recovery:?}");
        let c = s.qp.read_counters(&HostMemory).unwrap();
        assert!(c.retired >= ran.end() && c.retired == 1 << 16);
    }

    /// A GPU-produced DC initiator in host memory, the test playing the GPU producer: a
    /// WRITE that completed (its CQE left for recovery to consume), one the target refused
    /// (remote access), an unsignaled and a signaled one after it; recovery returns the
    /// refused one failed and the two after it flushed, leaves the producer state at WQE
    /// index 0 of the next 2^16, and the DCI writes again.
    #[test]
    fn a_gpu_produced_dci_recovers_its_requests_and_its_producer_state() {
        use crate::wqe::{Dc, DcTarget, Full};
        let fabric = Fabric::new();
        let device = Device::open(
            SoftNic::open(&fabric, 1)
                .unwrap()
                .with_mapped_doorbells_for_tests(),
        )
        .unwrap();
        let pd = device.alloc_pd().unwrap();
        let buffer = Arc::new(DmaBuffer::zeroed(128, 64).unwrap());
        let region = pd
            .register(buffer.clone(), 0, 64, MemoryAccess::all())
            .unwrap();
        let read_only = pd
            .register(
                buffer.clone(),
                64,
                64,
                MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_READ,
            )
            .unwrap();
        let dct = pd.create_dct(0x1122_3344_5566_7788, 16).unwrap();
        let target = dct.endpoint().full_target().unwrap();
        let state =
            ProducerStateMemory::from_buffer(mapped(DmaBuffer::zeroed(64, 64).unwrap())).unwrap();
        let mut dci: QueuePair<Dc<Full>, Host, SystemReleaseStore> = pd
            .create_dci_in::<Full, Host>(QueueSpec::new(RingSize::new(16).unwrap()), &Mapped)
            .unwrap()
            .activate_device(state, SystemReleaseStore)
            .unwrap();
        fn write(
            dci: &QueuePair<Dc<Full>, Host, SystemReleaseStore>,
            target: DcTarget<Full>,
            remote: RemoteAddress,
            byte: u8,
            signaled: bool,
        ) -> Ticket {
            let payload = [byte; 8];
            let w = RdmaWrite::new(target.at(remote)).inline(&payload);
            let wqe = if signaled {
                w.signaled().build()
            } else {
                w.build()
            };
            device_post(dci, &HostMemory, &wqe.unwrap())
        }
        let done = write(&dci, target, region.remote(0), 0x11, true);
        fabric.run_until_idle();
        let failed = write(&dci, target, read_only.remote(0), 0x22, true);
        let flushed = [
            write(&dci, target, region.remote(8), 0x33, false),
            write(&dci, target, region.remote(16), 0x44, true),
        ];
        fabric.run_until_idle();
        let recovery = dci
            .recover_device(None, &HostMemory, Duration::from_secs(5), &mut || {
                fabric.step();
            })
            .unwrap();
        let found: Vec<_> = recovery
            .unfinished
            .iter()
            .map(|u| (u.ticket, u.outcome.completion().syndrome))
            .collect();
        assert_eq!(
            found,
            vec![
                (failed, Some(Syndrome::RemoteAccess)),
                (flushed[0], Some(Syndrome::WorkRequestFlushed)),
                (flushed[1], Some(Syndrome::WorkRequestFlushed)),
            ]
        );
        assert!(!found.iter().any(|(t, _)| *t == done), "it completed");
        assert_eq!(recovery.abandoned_wqebbs, 0);
        let mut image = vec![0x11; 8];
        image.extend([0; 120]);
        assert_eq!(buffer.to_vec(), image, "only the completed WRITE landed");
        let c = dci.read_counters(&HostMemory).unwrap();
        assert_eq!(
            (c.reserved, c.ready, c.retired),
            (1 << 16, 1 << 16, 1 << 16)
        );
        assert_eq!(c.cq_consumer, 4);
        assert_eq!(dci.sq.memory().dbrec_bytes(), [0; 8]);
        // A DC WQE with the full address vector is two WQEBBs: its index is its first.
        let again = write(&dci, target, region.remote(24), 0x55, true);
        assert_eq!((again.end() - 2) as u16, 0);
        fabric.run_until_idle();
        assert_eq!(buffer.to_vec()[24..32], [0x55; 8]);
    }
}

#[cfg(test)]
mod gpu_placed_tests {
    //! Recovery of a queue pair placed in GPU memory (`P = Gpu`, the path a CUDA context's
    //! access takes), without a GPU: its "device memory" is host memory whose device
    //! address is its host address, which the test's access reaches as a copy engine would
    //! (through the words it was allocated as, never by address), on the GPU software NIC's
    //! control plane ([`SoftGpuNic`], whose executor runs only host shadows of the queues).
    //! The test plays the GPU producer and the NIC: it completes or fails what it was told
    //! to, and once the control plane moved the queue pair to the error state it flushes
    //! what the doorbell record announces, a CQE per WQE, as a NIC in error does.

    use core::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use super::device_tests::device_post;
    use super::*;
    use crate::memory::{DeviceBuffer, DeviceRegister};
    use crate::nic::{
        Device, GpuDoorbellMemory, NicError, QueueAllocator, QueueFill, QueueSpec, SoftGpuNic,
    };
    use crate::order::GpuReleaseStore;
    use crate::queue::{
        CompletionQueueMemory, Gpu, ProducerStateMemory, QpConfig, SendQueueMemory,
    };
    use crate::softnic::{completion, Fabric, QpState};
    use crate::wqe::{Qpn, RKey, RdmaWrite, RemoteAddress, RingSize};

    /// One stand-in allocation: its words, and the address its first word is at.
    struct Piece {
        base: u64,
        words: Arc<[AtomicU64]>,
    }

    /// Host memory standing in for GPU memory: the allocator, the doorbell memory and the
    /// access (reads and writes by device address, which is the host address).
    #[derive(Default)]
    struct StandIns {
        pieces: Mutex<Vec<Piece>>,
    }

    impl core::fmt::Debug for StandIns {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str("StandIns")
        }
    }

    impl StandIns {
        fn buffer(&self, len: usize, align: usize, fill: QueueFill) -> DeviceBuffer {
            let align = align.max(8);
            let words: Arc<[AtomicU64]> = (0..(len + align) / 8 + 1)
                .map(|_| AtomicU64::new(0))
                .collect();
            // Only the address is taken (never turned back into a pointer).
            let base = words.as_ptr() as u64;
            let addr = base.next_multiple_of(align as u64);
            self.pieces.lock().unwrap().push(Piece {
                base,
                words: words.clone(),
            });
            if fill == QueueFill::InvalidCqes {
                for entry in (0..len / CQE_BYTES).map(|i| i as u64 * CQE_BYTES as u64) {
                    self.store(addr + entry + CQE_BYTES as u64 - 1, &[CQE_INIT_OP_OWN]);
                }
            }
            // SAFETY: `[addr, addr + len)` lies inside `words` (rounded up to `align`
            // within `align` spare bytes), which the buffer's owner keeps allocated. Nothing
            // dereferences the address: the test reaches the memory through `words` only,
            // as the GPU producer, the NIC and recovery's access (the parties the queue's
            // memory belongs to).
            unsafe { DeviceBuffer::from_raw(addr, len, Box::new(words)) }
        }

        /// The piece holding `[addr, addr + len)` and the byte offset of `addr` in it.
        fn find(&self, addr: u64, len: usize) -> (Arc<[AtomicU64]>, usize) {
            let pieces = self.pieces.lock().unwrap();
            let p = pieces
                .iter()
                .find(|p| addr >= p.base && addr + len as u64 <= p.base + 8 * p.words.len() as u64)
                .unwrap_or_else(|| panic!("{len} bytes at {addr:#x} are no stand-in's"));
            (p.words.clone(), (addr - p.base) as usize)
        }

        fn load(&self, addr: u64, dst: &mut [u8]) {
            let (words, at) = self.find(addr, dst.len());
            for (k, b) in dst.iter_mut().enumerate() {
                let i = at + k;
                *b = words[i / 8].load(Ordering::Acquire).to_ne_bytes()[i % 8];
            }
        }

        fn store(&self, addr: u64, src: &[u8]) {
            let (words, at) = self.find(addr, src.len());
            for (k, b) in src.iter().enumerate() {
                let i = at + k;
                let mut bytes = words[i / 8].load(Ordering::Acquire).to_ne_bytes();
                bytes[i % 8] = *b;
                words[i / 8].store(u64::from_ne_bytes(bytes), Ordering::Release);
            }
        }
    }

    impl QueueAllocator<Gpu> for StandIns {
        fn allocate(
            &self,
            len: usize,
            align: usize,
            fill: QueueFill,
        ) -> Result<DeviceBuffer, NicError> {
            Ok(self.buffer(len, align, fill))
        }
    }

    impl GpuDoorbellMemory for StandIns {
        fn doorbell(&self) -> Result<DeviceBuffer, NicError> {
            Ok(self.buffer(8, 8, QueueFill::Zero))
        }
    }

    /// The doorbells the access rang (memory doorbells only).
    #[derive(Default)]
    struct Access {
        memory: Arc<StandIns>,
        rung: Mutex<Vec<(u64, [u8; 8])>>,
    }

    // SAFETY: exactly the bytes asked for, at `offset` of the buffer given (by its device
    // address, which is the host address of stand-in memory), through the stand-ins' words;
    // nothing is kept. A register doorbell is refused (as the CUDA access refuses one).
    unsafe impl DeviceQueueAccess<Gpu> for Access {
        fn read(&self, buffer: &DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<(), String> {
            if offset + dst.len() > buffer.len() {
                return Err(format!(
                    "{} bytes at {offset} of {}",
                    dst.len(),
                    buffer.len()
                ));
            }
            self.memory.load(buffer.addr() + offset as u64, dst);
            Ok(())
        }
        fn write(&self, buffer: &DeviceBuffer, offset: usize, src: &[u8]) -> Result<(), String> {
            if offset + src.len() > buffer.len() {
                return Err(format!(
                    "{} bytes at {offset} of {}",
                    src.len(),
                    buffer.len()
                ));
            }
            self.memory.store(buffer.addr() + offset as u64, src);
            Ok(())
        }
        fn ring(&self, doorbell: &GpuDoorbell, value: [u8; 8]) -> Result<(), String> {
            if doorbell.is_register() {
                return Err("a register doorbell: only a GPU thread rings it".into());
            }
            self.memory.store(doorbell.addr(), &value);
            self.rung.lock().unwrap().push((doorbell.addr(), value));
            Ok(())
        }
    }

    /// The NIC the test plays, over the queue pair's memory by address (as a NIC has it
    /// from CREATE_QP and CREATE_CQ): where it has got to in the ring, and its CQ producer.
    struct Nic {
        memory: Arc<StandIns>,
        qpn: u32,
        ring: u64,
        wqebbs: u64,
        dbrec: u64,
        cq_ring: u64,
        cq_entries: u64,
        executed: u64,
        cq_produced: u64,
    }

    impl Nic {
        fn of(memory: &Arc<StandIns>, qp: &QueuePair<Rc, Gpu, GpuReleaseStore>) -> Self {
            Self {
                memory: memory.clone(),
                qpn: qp.device_qpn().get(),
                ring: qp.sq_memory().ring().addr,
                wqebbs: u64::from(qp.sq_memory().size().wqebbs()),
                dbrec: qp.sq_memory().dbrec().addr,
                cq_ring: qp.cq_memory().ring().addr,
                cq_entries: u64::from(qp.cq_memory().entries()),
                executed: 0,
                cq_produced: 0,
            }
        }

        /// Writes `cqe` (its owner bit set) as the next CQE.
        fn complete(&mut self, mut cqe: [u8; CQE_BYTES]) {
            let owner = ((self.cq_produced / self.cq_entries) & 1) as u8;
            cqe[CQE_BYTES - 1] = (cqe[CQE_BYTES - 1] & !1) | owner;
            let slot = self.cq_produced % self.cq_entries;
            self.memory
                .store(self.cq_ring + slot * CQE_BYTES as u64, &cqe);
            self.cq_produced += 1;
        }

        /// The WQE at the NIC's cursor: its index and WQEBBs.
        fn next_wqe(&self) -> (u16, u64) {
            let slot = self.executed % self.wqebbs;
            let mut ctrl = [0u8; 8];
            self.memory
                .load(self.ring + slot * WQEBB_BYTES as u64, &mut ctrl);
            let index = u16::from_be_bytes([ctrl[1], ctrl[2]]);
            assert_eq!(index, self.executed as u16, "the WQE at the NIC's cursor");
            (
                index,
                u64::from(wqebbs_for_ds(usize::from(ctrl[7] & 0x3f)).max(1)),
            )
        }

        /// Runs one WQE: a successful CQE, or an error with `syndrome`.
        fn run(&mut self, syndrome: Option<u8>) {
            let (index, wqebbs) = self.next_wqe();
            let cqe = match syndrome {
                None => completion::requester_cqe(self.qpn, 0x08, index, 0),
                Some(s) => completion::error_cqe(self.qpn, 0x08, index, s, 0),
            };
            self.complete(cqe);
            self.executed += wqebbs;
        }

        /// In error: flushes every WQE up to the doorbell record, a CQE each.
        fn flush(&mut self) {
            let mut record = [0u8; 8];
            self.memory.load(self.dbrec, &mut record);
            let announced = u16::from_be_bytes([record[6], record[7]]);
            while self.executed as u16 != announced {
                let (index, wqebbs) = self.next_wqe();
                self.complete(completion::error_cqe(self.qpn, 0x08, index, 0x05, 0));
                self.executed += wqebbs;
            }
        }
    }

    /// A GPU thread's WRITE of 8 inline bytes (to memory the test's NIC never touches).
    fn write(
        qp: &QueuePair<Rc, Gpu, GpuReleaseStore>,
        access: &Access,
        byte: u8,
        at: u64,
        signaled: bool,
    ) -> Ticket {
        let payload = [byte; 8];
        let w = RdmaWrite::new(RemoteAddress::new(0x7000_0000 + at, RKey(0x99))).inline(&payload);
        let wqe = if signaled {
            w.signaled().build()
        } else {
            w.build()
        };
        device_post(qp, access, &wqe.unwrap())
    }

    /// A GPU-placed RC queue pair the kernels left with a completed WRITE (its CQE not
    /// consumed), a failed one, an unsignaled and a signaled one after it, an unsignaled
    /// tail and 2 reserved, unpublished slots: recovery announces what was published with
    /// a signaled NOP after the tail, rings the doorbell through the access, moves the queue
    /// pair to error (the NIC flushes what the record announces), drains, resets and
    /// reconnects it: the failed WRITE is returned with its syndrome, the three after it
    /// flushed, the NOP's flush is its own, and the kernels' next WQE is index 0 with the
    /// CQ consumed where the NIC got to.
    #[test]
    fn a_gpu_placed_queue_pair_recovers_through_a_device_access() {
        let fabric = Fabric::new();
        let memory = Arc::new(StandIns::default());
        let access = Access {
            memory: memory.clone(),
            rung: Mutex::default(),
        };
        let device = Device::open(SoftGpuNic::open(&fabric, 1, memory.clone()).unwrap()).unwrap();
        let pd = device.alloc_pd().unwrap();
        let pending = pd
            .create_rc_in(QueueSpec::new(RingSize::new(16).unwrap()), &*memory)
            .unwrap();
        let endpoint = pending.endpoint();
        let state =
            ProducerStateMemory::from_device(memory.buffer(64, 64, QueueFill::Zero)).unwrap();
        let mut qp = pending
            .connect_device(&endpoint, state, GpuReleaseStore)
            .unwrap();
        let qpn = qp.device_qpn();
        let doorbell = qp.sq_memory().doorbell().addr;
        let mut nic = Nic::of(&memory, &qp);
        // The kernels post; the NIC completes the first WRITE and fails the second.
        let done = write(&qp, &access, 0x11, 0, true);
        let failed = write(&qp, &access, 0x22, 8, true);
        nic.run(None);
        nic.run(Some(0x13));
        let flushed = [
            write(&qp, &access, 0x33, 16, false),
            write(&qp, &access, 0x44, 24, true),
            write(&qp, &access, 0x55, 32, false),
        ];
        // A kernel that stopped after reserving 2 more slots.
        let mut c = qp.read_counters(&access).unwrap();
        c.reserved += 2;
        qp.write_counters(&access, &c).unwrap();
        access.rung.lock().unwrap().clear();

        let recovery = qp
            .recover_device(
                Some(&endpoint),
                &access,
                Duration::from_secs(5),
                &mut || {
                    let status = fabric.qp_status(qpn).expect("the queue pair exists");
                    if status.state == QpState::Error {
                        nic.flush();
                    }
                },
            )
            .unwrap();
        let found: Vec<_> = recovery
            .unfinished
            .iter()
            .map(|u| (u.ticket, u.outcome.completion().syndrome))
            .collect();
        assert_eq!(
            found,
            vec![
                (failed, Some(Syndrome::RemoteAccess)),
                (flushed[0], Some(Syndrome::WorkRequestFlushed)),
                (flushed[1], Some(Syndrome::WorkRequestFlushed)),
                (flushed[2], Some(Syndrome::WorkRequestFlushed)),
            ]
        );
        assert!(!found.iter().any(|(t, _)| *t == done), "it completed");
        assert_eq!(recovery.abandoned_wqebbs, 2);
        // The doorbell was rung twice, through the access: first to announce what the
        // kernels published (producer index 5, no WQE of its own: DS 0), then for the NOP
        // recovery posted at WQE index 5 once completions stopped (its control segment's
        // first 8 bytes: DS 1).
        let rung = access.rung.lock().unwrap().clone();
        assert_eq!(rung.len(), 2, "{rung:?}");
        for (ring, ds) in rung.iter().zip([0u8, 1]) {
            assert_eq!(ring.0, doorbell);
            assert_eq!(&ring.1[1..3], &5u16.to_be_bytes(), "{rung:?}");
            assert_eq!(&ring.1[4..7], &qpn.get().to_be_bytes()[1..], "{rung:?}");
            assert_eq!(ring.1[7] & 0x3f, ds, "{rung:?}");
        }
        // 2 + 3 WQEs and the NOP: 6 CQEs, all consumed.
        assert_eq!(nic.cq_produced, 6);
        let c = qp.read_counters(&access).unwrap();
        assert_eq!(
            (c.reserved, c.ready, c.retired, c.cq_consumer),
            (1 << 16, 1 << 16, 1 << 16, 6)
        );
        let mut record = [0xffu8; 8];
        access
            .read(qp.sq.memory().dbrec_buffer().as_ref(), 0, &mut record)
            .unwrap();
        assert_eq!(record, [0; 8]);
        assert_eq!(
            fabric.qp_status(qpn).map(|s| s.state),
            Some(QpState::ReadyToSend)
        );
        // The kernels start over at WQE index 0; the NIC does too (2RST).
        let again = write(&qp, &access, 0x66, 40, true);
        assert_eq!((again.end() - 1) as u16, 0);
        let mut nic = Nic::of(&memory, &qp);
        nic.cq_produced = 6;
        nic.run(None);
        let mut c = qp.read_counters(&access).unwrap();
        let mut none = Recovery::default();
        qp.device_poll_until(
            &access,
            &mut c,
            &mut Deadline::new(Duration::from_secs(5)),
            &mut none,
            &mut || {},
            |c| c.retired == again.end(),
        )
        .unwrap();
        assert!(none.unfinished.is_empty(), "{none:?}");
    }

    /// A GPU doorbell that is a NIC register the host maps too (a ConnectX UAR) is rung by
    /// recovery through the host's mapping, after the record, never through the access; a
    /// register only the GPU reaches is left to the access, which refuses it (as the CUDA
    /// access does), and recovery stops with the error.
    #[test]
    fn recovery_rings_a_host_mapped_register_doorbell_from_the_host() {
        use crate::memory::RegisterPage;
        use core::ptr::NonNull;

        let memory = Arc::new(StandIns::default());
        let access = Access {
            memory: memory.clone(),
            rung: Mutex::default(),
        };
        let size = RingSize::new(8).unwrap();
        let pair = |doorbell: GpuDoorbell| {
            let sq = SendQueueMemory::<Gpu>::from_parts(
                size,
                Arc::new(memory.buffer(size.bytes(), 4096, QueueFill::Zero)),
                Arc::new(memory.buffer(8, 64, QueueFill::Zero)),
                doorbell,
            )
            .unwrap();
            let cq = CompletionQueueMemory::from_device(
                8,
                memory.buffer(8 * CQE_BYTES, 4096, QueueFill::InvalidCqes),
                memory.buffer(8, 64, QueueFill::Zero),
            )
            .unwrap();
            let state =
                ProducerStateMemory::from_device(memory.buffer(64, 64, QueueFill::Zero)).unwrap();
            QueuePair::<Rc, Gpu, GpuReleaseStore>::for_device(
                Qpn::new(0x42).unwrap(),
                sq,
                cq,
                state,
                QpConfig::default(),
                GpuReleaseStore,
            )
            .unwrap()
        };
        let register = || {
            // SAFETY: an 8-aligned address never stored to (no kernel runs): only the
            // descriptor names it.
            unsafe { DeviceRegister::from_raw(0x7f00_0000_0800, 8, Box::new(())) }.unwrap()
        };
        // The host's mapping of the UAR register: a word this test keeps and reads.
        let word = Arc::new(AtomicU64::new(0));
        let ptr = NonNull::from(&*word).cast::<u8>();
        // SAFETY: an 8-aligned, 8-byte word kept alive by the owner (a clone of its
        // `Arc`); stores to it change only that word.
        let page = unsafe { RegisterPage::from_raw(ptr, 8, Box::new(word.clone())) }.unwrap();
        let mapped = pair(GpuDoorbell::register_mapped(register(), page));
        assert!(mapped.sq.memory().doorbell_buffer().is_host_mapped());
        assert_eq!(mapped.sq_memory().doorbell().addr, 0x7f00_0000_0800);
        let value = [1, 2, 3, 4, 5, 6, 7, 8];
        mapped.device_announce(&access, 3, value).unwrap();
        assert_eq!(word.load(Ordering::Acquire).to_ne_bytes(), value);
        assert!(
            access.rung.lock().unwrap().is_empty(),
            "not through the access"
        );
        let mut record = [0u8; 8];
        access
            .read(mapped.sq.memory().dbrec_buffer().as_ref(), 0, &mut record)
            .unwrap();
        assert_eq!(record, [0, 0, 0, 0, 0, 0, 0, 3]);

        let gpu_only = pair(GpuDoorbell::register(register()));
        assert!(!gpu_only.sq.memory().doorbell_buffer().is_host_mapped());
        let refused = gpu_only.device_announce(&access, 3, value);
        assert!(
            matches!(&refused, Err(RecoveryError::DeviceMemory(m)) if m.contains("register")),
            "{refused:?}"
        );
    }
}
