//! Recovery: a queue pair in the error state (or one that must stop) brought back to RTS
//! through the control plane's modify commands, every request it had not completed
//! returned to the caller.
//!
//! [`QueuePair::recover`] (RC) and [`QueuePair::recover_dci`] (DC initiators) do, in order:
//!
//! 1. post a signaled NOP after an unsignaled tail (WQEs that ran unsignaled complete
//!    without a CQE, and a NIC in error flushes only what it has not run, so the NOP's
//!    completion or flush is what retires them), and ring the doorbell for everything
//!    published, so the NIC knows every WQE;
//! 2. 2ERR_QP (from any state): the NIC completes every WQE it has not executed with a
//!    flush error, signaled or not;
//! 3. drain the CQ until every WQE is retired, with a deadline: the WQE an error or flush
//!    CQE names becomes an [`Unfinished`] entry (its [`Ticket`] and the completion's
//!    syndrome); the unsignaled WQEs before it that the CQE retires completed (they ran
//!    before the error: a NIC in error flushes each WQE with a CQE of its own, as mlx5 does
//!    and the software NIC models), as did those a successful CQE retires;
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

use core::fmt;
use std::time::{Duration, Instant};

use super::pair::{CompletionError, PollError, Polled, QueuePair};
use super::send::Ticket;
use crate::cq::{ResponderCompletion, Syndrome};
use crate::nic::{NicError, RcEndpoint};
use crate::wqe::{AvForm, Dc, Rc, Transport};

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
}

impl Recovery {
    fn append(&mut self, mut more: Recovery) {
        self.unfinished.append(&mut more.unfinished);
        self.received.append(&mut more.received);
        self.receive_errors.append(&mut more.receive_errors);
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
    Post(super::send::PostError),
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
            Self::CountersExhausted => f.write_str("the queue's WQEBB counter is exhausted"),
        }
    }
}

impl std::error::Error for RecoveryError {}

impl From<NicError> for RecoveryError {
    fn from(e: NicError) -> Self {
        Self::Command(e)
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
        let start = Instant::now();
        let mut found = Recovery::default();
        // WQEs that ran unsignaled at the end of the ring complete without a CQE; a NIC in
        // error only flushes what it has not run. A signaled NOP after them makes a CQE
        // cover them either way (its completion, or its flush).
        let signaled = self.signal_tail_for_recovery(start, timeout, &mut found, progress);
        let own_nop = match signaled {
            Ok(nop) => nop,
            Err(e) => {
                self.unreported.append(found);
                return Err(e);
            }
        };
        self.sq.ring_doorbell();
        if let Some(objects) = &self.nic_objects {
            objects.to_error()?;
        }
        let drained = self.drain_flushed(start, timeout, &mut found, progress);
        // The NOP is the recovery's own, not a request of the caller's.
        found.unfinished.retain(|u| Some(u.ticket) != own_nop);
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
        if let Some(objects) = &mut self.nic_objects {
            objects.reconnect(remote)?;
        }
        Ok(core::mem::take(&mut self.unreported))
    }

    /// Polls until every posted WQE is retired and the CQ is empty, listing in `found`
    /// what failed or was flushed (also when it stops with a timeout or an untrusted CQE).
    fn drain_flushed(
        &mut self,
        start: Instant,
        timeout: Duration,
        found: &mut Recovery,
        progress: &mut dyn FnMut(),
    ) -> Result<(), RecoveryError> {
        self.drain_until(start, timeout, found, progress, |qp| qp.sq.is_idle())
    }

    /// Posts a signaled NOP after an unsignaled tail, polling for room first (the ring
    /// always holds a signaled WQE within half its size, so room comes). Returns the NOP's
    /// ticket, if it posted one.
    fn signal_tail_for_recovery(
        &mut self,
        start: Instant,
        timeout: Duration,
        found: &mut Recovery,
        progress: &mut dyn FnMut(),
    ) -> Result<Option<Ticket>, RecoveryError> {
        if !self.sq.has_unsignaled_tail() {
            return Ok(None);
        }
        self.sq.ring_doorbell();
        self.drain_until(start, timeout, found, progress, |qp| {
            qp.sq.free_wqebbs() > 0 || !qp.sq.has_unsignaled_tail()
        })?;
        if !self.sq.has_unsignaled_tail() {
            return Ok(None);
        }
        // Room for one WQEBB; a NOP is one.
        self.sq.signal_tail().map_err(RecoveryError::Post)
    }

    /// Polls (listing what failed or was flushed) until `done` holds and the CQ has
    /// nothing more, or the deadline passes.
    fn drain_until(
        &mut self,
        start: Instant,
        timeout: Duration,
        found: &mut Recovery,
        progress: &mut dyn FnMut(),
        done: impl Fn(&Self) -> bool,
    ) -> Result<(), RecoveryError> {
        let mut idle_polls = 0u32;
        loop {
            let before = self.sq.retired();
            match self.poll() {
                Ok(Some(Polled::Sent { .. })) => {}
                Ok(Some(Polled::Received(r))) => found.received.push(r),
                Ok(None) if done(self) => return Ok(()),
                Ok(None) => {
                    progress();
                    idle_polls = idle_polls.wrapping_add(1);
                    if idle_polls % 64 == 0 {
                        let waited = start.elapsed();
                        if waited >= timeout {
                            let outstanding_wqebbs = self.sq.producer() - self.sq.retired();
                            return Err(RecoveryError::Timeout {
                                waited,
                                outstanding_wqebbs,
                            });
                        }
                        std::thread::yield_now();
                    }
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
                    let outcome = if error.syndrome == Some(Syndrome::WorkRequestFlushed) {
                        UnfinishedOutcome::Flushed(error)
                    } else {
                        UnfinishedOutcome::Failed(error)
                    };
                    found.unfinished.push(Unfinished {
                        ticket: Ticket {
                            qpn: self.sq.qpn(),
                            end: after,
                        },
                        wqe_index: error.wqe_index,
                        outcome,
                    });
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
