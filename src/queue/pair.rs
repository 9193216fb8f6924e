//! Queue pairs (a send queue, its completion queue and its number), completion scopes
//! (one ticket, one queue pair, or all of them), and DCI pools.

use core::fmt;
use std::time::{Duration, Instant};

use super::memory::{CompletionQueueMemory, SendQueueMemory};
use super::placement::{Host, Placement};
use super::send::{PostError, Registered, SendQueue, SendQueueConfig, Ticket};
use crate::cq::{
    Completion, CompletionQueue, CompletionStatus, CqMode, CqeError, ResponderCompletion, Syndrome,
};
use crate::order::{HostBarrier, OrderingScope, ValidFor};
use crate::wqe::{AvForm, Dc, Qpn, Transport, Wqe, WqeError, WqeSpec};
use std::sync::Arc;

/// A completion with error, naming the syndrome, the queue pair and the WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletionError {
    /// The queue pair.
    pub qpn: u32,
    /// The 16-bit index of the failed WQE's first basic block.
    pub wqe_index: u16,
    /// The syndrome, if mlx5 defines the byte.
    pub syndrome: Option<Syndrome>,
    /// The raw syndrome byte.
    pub syndrome_byte: u8,
    /// The vendor syndrome.
    pub vendor_syndrome: u8,
    /// The verbs status.
    pub status: CompletionStatus,
}

impl fmt::Display for CompletionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.syndrome {
            Some(s) => write!(f, "{s}")?,
            None => write!(f, "unknown syndrome {:#04x}", self.syndrome_byte)?,
        }
        write!(
            f,
            " on QP {:#08x}, WQE {:#06x} ({:?}, vendor syndrome {:#04x})",
            self.qpn, self.wqe_index, self.status, self.vendor_syndrome
        )
    }
}

impl std::error::Error for CompletionError {}

/// Why polling failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PollError {
    /// The NIC completed a WQE with an error.
    Completion(CompletionError),
    /// The CQE is not one this crate accepts.
    Malformed(CqeError),
    /// A CQE names another queue pair, or a WQE that is not posted and unretired here: the
    /// NIC's memory is not trusted, so it is reported and nothing is retired.
    Stray {
        /// The QPN in the CQE.
        qpn: u32,
        /// The WQE counter in the CQE.
        wqe_counter: u16,
    },
}

impl fmt::Display for PollError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Completion(e) => e.fmt(f),
            Self::Malformed(e) => write!(f, "malformed CQE: {e}"),
            Self::Stray { qpn, wqe_counter } => {
                write!(
                    f,
                    "CQE for QP {qpn:#08x} WQE {wqe_counter:#06x} matches nothing posted here"
                )
            }
        }
    }
}

impl std::error::Error for PollError {}

/// Why waiting ended without success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// Polling failed (an error CQE among them).
    Poll(PollError),
    /// The wait timed out.
    Timeout {
        /// How long it waited.
        waited: Duration,
    },
    /// Posting the signaled NOP that a wait needs failed.
    Post(PostError),
}

impl From<PollError> for WaitError {
    fn from(e: PollError) -> Self {
        Self::Poll(e)
    }
}

impl From<PostError> for WaitError {
    fn from(e: PostError) -> Self {
        Self::Post(e)
    }
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Poll(e) => e.fmt(f),
            Self::Timeout { waited } => write!(f, "no completion after {waited:?}"),
            Self::Post(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for WaitError {}

/// What one successful poll consumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polled {
    /// Send WQEs completed: every WQEBB before `retired` is free again.
    Sent {
        /// The WQE counter of the signaled WQE.
        wqe_counter: u16,
        /// The new retirement counter.
        retired: u64,
        /// The send opcode byte.
        send_opcode: u8,
        /// Byte count (READ).
        byte_count: u32,
    },
    /// A receive completed (WRITE_WITH_IMM at this queue pair).
    Received(ResponderCompletion),
}

/// How a queue pair is set up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpConfig {
    /// The send queue's configuration.
    pub send: SendQueueConfig,
    /// How the NIC fills the completion queue.
    pub cq_mode: CqMode,
}

/// NIC objects a queue pair keeps until it is dropped (see [`crate::nic`]), and the
/// commands recovery sends to them.
pub(crate) trait NicObjects: Send + Sync + fmt::Debug {
    /// 2ERR_QP.
    fn to_error(&self) -> Result<(), crate::nic::NicError>;
    /// 2RST_QP.
    fn to_reset(&self) -> Result<(), crate::nic::NicError>;
    /// RST2INIT, INIT2RTR and RTR2RTS again: an RC queue pair to `remote`, a DCI to none.
    fn reconnect(
        &mut self,
        remote: Option<&crate::nic::RcEndpoint>,
    ) -> Result<(), crate::nic::NicError>;
    /// What a peer needs to connect to an RC queue pair's next connection.
    fn endpoint(&self) -> Option<crate::nic::RcEndpoint>;
}

impl<T: Transport, P: Placement, S: OrderingScope + ValidFor<P>> QueuePair<T, P, S> {
    /// The same queue pair, keeping `objects` until it is dropped.
    pub(crate) fn with_nic_objects(mut self, objects: Box<dyn NicObjects>) -> Self {
        self.nic_objects = Some(objects);
        self
    }
}

/// A queue pair of transport `T`, placed in `P`, ordered by `S`: send queue, completion
/// queue and number. One CQ serves one QP here, as in NVSHMEM and DOCA, so a completion
/// retires this QP's own slots.
///
/// With the host scope (the defaults) CPU threads post and poll through it. With a GPU
/// scope it has no host posting or polling methods: the host makes it, keeps its memory
/// alive, and hands kernels its [`device_queue`](QueuePair::device_queue).
///
/// ```compile_fail,E0599
/// # use ibgda::queue::*; use ibgda::wqe::*; use ibgda::order::GpuFence;
/// fn host_posts(qp: &mut QueuePair<Rc, Gpu, GpuFence>, wqe: &Wqe<Nop<Rc>>) {
///     qp.post(wqe, &[]); // no host posting on a GPU-placed queue
/// }
/// ```
#[derive(Debug)]
pub struct QueuePair<
    T: Transport,
    P: Placement = Host,
    S: OrderingScope + ValidFor<P> = HostBarrier,
> {
    /// The NIC objects behind the queue (QP, CQ, UMEMs, UAR) when the control plane made
    /// it: declared first so that they are destroyed before the memory is released.
    pub(crate) nic_objects: Option<Box<dyn NicObjects>>,
    pub(crate) sq: SendQueue<T, P, S>,
    pub(crate) cq: CompletionQueue<P>,
    pub(crate) first_error: Option<CompletionError>,
    /// What a recovery that did not finish (it timed out) already found, for the next
    /// one to return.
    pub(crate) unreported: super::recovery::Recovery,
    /// The signaled NOP a recovery posted after the requests still out, while it is not
    /// retired (see `recovery`): a later recovery posts no second one.
    pub(crate) recovery_nop: Option<super::send::Ticket>,
    pub(crate) device_state: Option<P::Buffer>,
    /// What kernels get (for GPU-produced queues; zero otherwise).
    pub(crate) descriptor: super::device::DeviceQueueDescriptor,
}

impl<T: Transport> QueuePair<T> {
    /// A queue pair over host memory, posted from CPU threads.
    pub fn new(
        qpn: Qpn,
        sq: SendQueueMemory,
        cq: CompletionQueueMemory,
        config: QpConfig,
    ) -> Result<Self, WqeError> {
        Ok(Self {
            nic_objects: None,
            sq: SendQueue::new(qpn, sq, config.send, HostBarrier)?,
            cq: CompletionQueue::new(cq, config.cq_mode),
            first_error: None,
            unreported: Default::default(),
            recovery_nop: None,
            device_state: None,
            descriptor: Default::default(),
        })
    }

    /// The queue pair number.
    pub fn qpn(&self) -> Qpn {
        self.sq.qpn()
    }
    /// The send queue.
    pub fn sq(&self) -> &SendQueue<T, Host, HostBarrier> {
        &self.sq
    }
    /// The send queue, for reservations and doorbells.
    pub fn sq_mut(&mut self) -> &mut SendQueue<T, Host, HostBarrier> {
        &mut self.sq
    }
    /// The completion queue.
    pub fn cq(&self) -> &CompletionQueue {
        &self.cq
    }
    /// The first error this queue pair completed with: from then on the NIC flushes it.
    pub fn first_error(&self) -> Option<CompletionError> {
        self.first_error
    }

    /// Posts a WQE whose local buffers lie in `registrations` (see [`SendQueue::post`]).
    #[inline(always)]
    pub fn post<W: WqeSpec<Transport = T>>(
        &mut self,
        wqe: &Wqe<W>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<Ticket, PostError> {
        self.sq.post(wqe, registrations)
    }

    /// Rings the doorbell for everything published.
    pub fn ring_doorbell(&mut self) {
        self.sq.ring_doorbell();
    }

    /// Consumes one CQE, if there is one, and retires the send slots it covers.
    pub fn poll(&mut self) -> Result<Option<Polled>, PollError> {
        let Some(result) = self.cq.poll() else {
            return Ok(None);
        };
        let completion = result.map_err(PollError::Malformed)?;
        let qpn = self.sq.qpn().get();
        let stray = PollError::Stray {
            qpn: completion.qpn(),
            wqe_counter: completion.wqe_counter(),
        };
        match completion {
            Completion::Responder(r) if r.qpn == qpn => Ok(Some(Polled::Received(r))),
            Completion::Requester(c) if c.qpn == qpn => {
                let retired = self.sq.retire_through(c.wqe_counter).ok_or(stray)?;
                Ok(Some(Polled::Sent {
                    wqe_counter: c.wqe_counter,
                    retired,
                    send_opcode: c.send_opcode,
                    byte_count: c.byte_count,
                }))
            }
            Completion::Error(e) if e.qpn == qpn => {
                let error = CompletionError {
                    qpn: e.qpn,
                    wqe_index: e.wqe_counter,
                    syndrome: e.syndrome,
                    syndrome_byte: e.syndrome_byte,
                    vendor_syndrome: e.vendor_syndrome,
                    status: e.status(),
                };
                // A requester error retires the failed WQE and all before it; a responder
                // error names a receive, which this send queue does not track.
                if e.requester {
                    self.sq.retire_through(e.wqe_counter).ok_or(stray)?;
                }
                self.first_error.get_or_insert(error);
                Err(PollError::Completion(error))
            }
            _ => Err(stray),
        }
    }

    /// Polls until `ticket` is complete, an error CQE arrives, or `timeout` passes. If the
    /// ticket's WQE and those after it are unsignaled, a signaled NOP is posted so that a
    /// completion will come.
    pub fn wait(&mut self, ticket: Ticket, timeout: Duration) -> Result<(), WaitError> {
        self.wait_driving(ticket, timeout, &mut || {})
    }

    /// [`QueuePair::wait`], calling `progress` between polls that find nothing: for a NIC
    /// that needs driving (the software NIC in step mode), or to do other work meanwhile.
    pub fn wait_driving(
        &mut self,
        ticket: Ticket,
        timeout: Duration,
        progress: &mut dyn FnMut(),
    ) -> Result<(), WaitError> {
        if self.sq.is_complete(ticket) {
            return Ok(());
        }
        if ticket.end() > self.sq.signaled_through() {
            self.sq.signal_tail()?;
        }
        self.sq.ring_doorbell();
        let mut spin = Spin::new(timeout);
        while !self.sq.is_complete(ticket) {
            if self.poll()?.is_none() {
                progress();
                spin.pause()?;
            }
        }
        Ok(())
    }

    /// Completes everything posted to this queue pair (signaling the tail if needed).
    pub fn drain(&mut self, timeout: Duration) -> Result<(), WaitError> {
        self.drain_driving(timeout, &mut || {})
    }

    /// [`QueuePair::drain`], calling `progress` between polls that find nothing.
    pub fn drain_driving(
        &mut self,
        timeout: Duration,
        progress: &mut dyn FnMut(),
    ) -> Result<(), WaitError> {
        let Some(end) = self.begin_drain()? else {
            return Ok(());
        };
        self.wait_driving(end, timeout, progress)
    }

    /// Prepares a drain: signals the tail, rings, and returns the ticket covering all.
    fn begin_drain(&mut self) -> Result<Option<Ticket>, WaitError> {
        if self.sq.is_idle() {
            return Ok(None);
        }
        self.sq.signal_tail()?;
        self.sq.ring_doorbell();
        Ok(Some(Ticket {
            qpn: self.sq.qpn(),
            end: self.sq.producer(),
        }))
    }
}

/// Spinning with a deadline: busy spins first, then yields the CPU.
struct Spin {
    start: Instant,
    timeout: Duration,
    rounds: u32,
}

impl Spin {
    fn new(timeout: Duration) -> Self {
        Self {
            start: Instant::now(),
            timeout,
            rounds: 0,
        }
    }
    fn pause(&mut self) -> Result<(), WaitError> {
        self.rounds = self.rounds.wrapping_add(1);
        if self.rounds < 256 {
            core::hint::spin_loop();
            return Ok(());
        }
        if self.rounds % 64 == 0 {
            let waited = self.start.elapsed();
            if waited >= self.timeout {
                return Err(WaitError::Timeout { waited });
            }
        }
        std::thread::yield_now();
        Ok(())
    }
}

/// Anything a quiet can complete: a queue pair of any transport.
pub trait Quiesce {
    /// Signals and announces everything posted; the ticket to wait for, if any.
    fn begin_quiet(&mut self) -> Result<Option<Ticket>, WaitError>;
    /// Polls once; whether the ticket is complete.
    fn progress(&mut self, ticket: Ticket) -> Result<bool, WaitError>;
}

impl<T: Transport> Quiesce for QueuePair<T> {
    fn begin_quiet(&mut self) -> Result<Option<Ticket>, WaitError> {
        self.begin_drain()
    }
    fn progress(&mut self, ticket: Ticket) -> Result<bool, WaitError> {
        if !self.sq.is_complete(ticket) {
            self.poll()?;
        }
        Ok(self.sq.is_complete(ticket))
    }
}

/// Completes everything posted to every queue pair given (NVSHMEM's quiet), polling them
/// round-robin so that one slow QP does not hold the others' completions back.
pub fn quiet(qps: &mut [&mut dyn Quiesce], timeout: Duration) -> Result<(), WaitError> {
    let mut pending: Vec<(usize, Ticket)> = Vec::with_capacity(qps.len());
    for (i, qp) in qps.iter_mut().enumerate() {
        if let Some(t) = qp.begin_quiet()? {
            pending.push((i, t));
        }
    }
    let mut spin = Spin::new(timeout);
    while !pending.is_empty() {
        let before = pending.len();
        let mut error = None;
        pending.retain(|&(i, t)| match qps[i].progress(t) {
            Ok(done) => !done,
            Err(e) => {
                error.get_or_insert(e);
                false
            }
        });
        if let Some(e) = error {
            return Err(e);
        }
        if pending.len() == before {
            spin.pause()?;
        }
    }
    Ok(())
}

/// A pool of DC initiators. Every WQE carries its own target; the pool picks the DCI by
/// the target's DCT number, so WQEs to one target keep their order on one DCI.
#[derive(Debug)]
pub struct DciPool<Av: AvForm> {
    dcis: Vec<QueuePair<Dc<Av>>>,
}

impl<Av: AvForm> DciPool<Av> {
    /// A pool of these DCIs (at least one).
    pub fn new(dcis: Vec<QueuePair<Dc<Av>>>) -> Option<Self> {
        (!dcis.is_empty()).then_some(Self { dcis })
    }
    /// The DCIs.
    pub fn dcis(&mut self) -> &mut [QueuePair<Dc<Av>>] {
        &mut self.dcis
    }
    /// The DCI that carries WQEs to DCT `dct`.
    pub fn for_target(&mut self, dct: u32) -> &mut QueuePair<Dc<Av>> {
        let n = self.dcis.len();
        &mut self.dcis[dct as usize % n]
    }
    /// Posts a WQE on the DCI for its target (NOP and DUMP, which have none, go to the
    /// first DCI); returns that DCI's index and the ticket.
    pub fn post<W: WqeSpec<Transport = Dc<Av>>>(
        &mut self,
        wqe: &Wqe<W>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<(usize, Ticket), PostError> {
        let n = self.dcis.len();
        let i = wqe.spec().target().map_or(0, |t| t.dct() as usize % n);
        Ok((i, self.dcis[i].post(wqe, registrations)?))
    }
    /// Completes everything posted on every DCI.
    pub fn quiet(&mut self, timeout: Duration) -> Result<(), WaitError> {
        let mut qps: Vec<&mut dyn Quiesce> = self
            .dcis
            .iter_mut()
            .map(|q| q as &mut dyn Quiesce)
            .collect();
        quiet(&mut qps, timeout)
    }
}
