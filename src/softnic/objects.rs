//! Objects made by PRM commands: CQs that live until destroyed, queue pairs that start in
//! RESET and move only by state transitions, DC targets bound to a CQ. The command bytes
//! are decoded by the control plane's software backend (`crate::nic::SoftNic`); this is
//! the NIC state they change. Every check runs before anything changes, so a refused
//! command leaves the NIC as it was.

use std::collections::VecDeque;

use crate::cq::CqMode;
use crate::queue::{CompletionQueueNicAccess, SendQueueNicAccess};
use crate::wqe::{Qpn, TransportKind};

use super::completion::CqState;
use super::error::SoftNicError;
use super::fabric::{
    check_node, DoorbellWatch, Fabric, FabricState, NodeId, PeerPath, QpState, ResponderState,
    SendQueueState, DEFAULT_MAX_MESSAGE_BYTES,
};
use super::region::Access;

/// Why the NIC refused an object command (the control plane turns these into PRM statuses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ObjectRefusal {
    /// No such object (status BAD_RESOURCE).
    Unknown,
    /// The object is still used by others (status RESOURCE_BUSY).
    Busy,
    /// The transition does not start from the queue's state (status BAD_QP_STATE).
    BadState(QpState),
    /// The parameters do not describe valid queue memory (status BAD_PARAMETER).
    Invalid(SoftNicError),
}

/// A queue pair as CREATE_QP describes it.
#[derive(Debug)]
pub(crate) struct CommandedQp {
    pub(crate) node: NodeId,
    pub(crate) transport: TransportKind,
    pub(crate) sq: SendQueueNicAccess,
    pub(crate) send_cq: u32,
    /// The receive CQ (RC with a receive queue).
    pub(crate) receive_cq: Option<u32>,
    /// The shared receive queue receives come from (`rq_type` SRQ): RC queue pairs with it
    /// take WRITE_WITH_IMM; DC initiators name one but never receive.
    pub(crate) srq: Option<u32>,
}

/// A state transition command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    /// RST2INIT_QP, with the remote operations the queue accepts.
    ResetToInit {
        /// `rre`, `rwe`, `rae` as access rights.
        enabled: Access,
    },
    /// INIT2RTR_QP, with the RC peer (QPN and path) for an RC queue pair.
    InitToRtr {
        /// The remote QPN and the path it is reached by (RC only).
        peer: Option<(u32, PeerPath)>,
    },
    /// RTR2RTS_QP.
    RtrToRts,
    /// 2ERR_QP, from any state.
    ToError,
    /// 2RST_QP, from any state.
    ToReset,
}

impl FabricState {
    /// 2RST_QP: the queue pair forgets everything it had in progress, as hardware does:
    /// its consumer counters restart at 0 (the next WQE it executes is the one at WQE index
    /// 0), responses in flight are dropped without landing, CQEs waiting for them are
    /// dropped, the RC peer is forgotten (INIT2RTR sets it again), and the receive side
    /// loses its credits, its counter and its rights. No CQE is written; CQEs already
    /// written stay where they are.
    pub(crate) fn reset_queue(&mut self, qpn: u32) {
        if let Some(sq) = self.sqs.get_mut(&qpn) {
            sq.state = QpState::Reset;
            sq.error = None;
            sq.peer = None;
            sq.peer_path = None;
            sq.consumer = 0;
            sq.executed = 0;
            sq.armed_limit = None;
            sq.in_flight.clear();
            sq.waiting_cqes.clear();
        }
        if let Some(responder) = self.responders.get_mut(&qpn) {
            responder.credits = 0;
            responder.received = 0;
            responder.error = false;
            responder.enabled = Access::empty();
        }
    }
}

impl Fabric {
    /// Makes a CQ over `memory` that lives until [`Fabric::destroy_cq_object`]; a ring CQ
    /// with `overrun_ignore` never detects an overrun (`cqc.oi`).
    pub(crate) fn create_cq_object(
        &self,
        memory: CompletionQueueNicAccess,
        mode: CqMode,
        overrun_ignore: bool,
    ) -> Result<u32, ObjectRefusal> {
        let spans = memory.spans();
        let mut cq = CqState::new(memory, mode)
            .map_err(|what| ObjectRefusal::Invalid(SoftNicError::InvalidQueueMemory { what }))?;
        cq.held = true;
        cq.overrun_ignore |= overrun_ignore;
        let mut state = self.shared.lock();
        for span in spans {
            state
                .check_new_queue_memory(span)
                .map_err(ObjectRefusal::Invalid)?;
        }
        let cqn = state
            .next_cqn
            .checked_add(1)
            .ok_or(ObjectRefusal::Invalid(SoftNicError::QueueNumbersExhausted))?;
        state.next_cqn = cqn;
        state.cqs.insert(cqn, cq);
        Ok(cqn)
    }

    /// Destroys a CQ made by [`Fabric::create_cq_object`]; refused while a queue uses it.
    pub(crate) fn destroy_cq_object(&self, cqn: u32) -> Result<(), ObjectRefusal> {
        let mut state = self.shared.lock();
        let cq = state
            .cqs
            .get(&cqn)
            .filter(|cq| cq.held)
            .ok_or(ObjectRefusal::Unknown)?;
        if !cq.users.is_empty() {
            return Err(ObjectRefusal::Busy);
        }
        state.cqs.remove(&cqn);
        Ok(())
    }

    /// The transport of a queue pair made by command.
    pub(crate) fn commanded_transport(&self, qpn: u32) -> Option<TransportKind> {
        let state = self.shared.lock();
        state
            .sqs
            .get(&qpn)
            .filter(|sq| sq.commanded)
            .map(|sq| sq.transport)
    }

    /// Whether `cqn` is a CQ made by command.
    pub(crate) fn has_cq_object(&self, cqn: u32) -> bool {
        self.shared.lock().cqs.get(&cqn).is_some_and(|cq| cq.held)
    }

    /// Makes a queue pair in RESET over CQs made by command.
    pub(crate) fn create_commanded_qp(&self, qp: CommandedQp) -> Result<Qpn, ObjectRefusal> {
        let mut state = self.shared.lock();
        check_node(&state, qp.node).map_err(ObjectRefusal::Invalid)?;
        let last_doorbell = qp.sq.load_doorbell().ok_or(ObjectRefusal::Invalid(
            SoftNicError::InvalidQueueMemory {
                what: "a doorbell that is a NIC's store-only register page (the software \
                       NIC watches doorbells in memory)",
            },
        ))?;
        // The ring and the record are new queue memory; the doorbell is the NIC's own UAR.
        for span in [qp.sq.ring(), qp.sq.dbrec()] {
            state
                .check_new_queue_memory(span)
                .map_err(ObjectRefusal::Invalid)?;
        }
        for cqn in core::iter::once(qp.send_cq).chain(qp.receive_cq) {
            if !state.cqs.get(&cqn).is_some_and(|cq| cq.held) {
                return Err(ObjectRefusal::Unknown);
            }
        }
        if qp.srq.is_some_and(|srqn| !state.has_srq(srqn, qp.node)) {
            return Err(ObjectRefusal::Unknown);
        }
        let qpn = state
            .allocate_queue_number()
            .map_err(ObjectRefusal::Invalid)?;
        let number = Qpn::new(qpn)
            .map_err(|_| ObjectRefusal::Invalid(SoftNicError::QueueNumbersExhausted))?;
        for cqn in core::iter::once(qp.send_cq).chain(qp.receive_cq) {
            if let Some(cq) = state.cqs.get_mut(&cqn) {
                cq.users.insert(qpn);
            }
        }
        if let Some(srqn) = qp.srq {
            state.attach_srq(srqn, qp.node, qpn)?;
        }
        state.sqs.insert(
            qpn,
            SendQueueState {
                qpn,
                node: qp.node,
                transport: qp.transport,
                memory: qp.sq,
                cq: qp.send_cq,
                max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
                response_delay: 0,
                watch: DoorbellWatch::PollRecord,
                state: QpState::Reset,
                error: None,
                peer: None,
                peer_path: None,
                commanded: true,
                consumer: 0,
                executed: 0,
                last_doorbell,
                armed_limit: None,
                in_flight: VecDeque::new(),
                waiting_cqes: VecDeque::new(),
                injected: None,
                dropped_completion: None,
            },
        );
        if qp.transport == TransportKind::Rc {
            state.responders.insert(
                qpn,
                ResponderState {
                    node: qp.node,
                    dc_key: None,
                    credits: 0,
                    received: 0,
                    srq: qp.srq.filter(|_| qp.receive_cq.is_some()),
                    cq: qp.receive_cq,
                    error: false,
                    // Nothing until RST2INIT enables it.
                    enabled: Access::empty(),
                },
            );
        }
        Ok(number)
    }

    /// Applies a state transition to a queue pair made by command.
    pub(crate) fn transition(&self, qpn: u32, transition: Transition) -> Result<(), ObjectRefusal> {
        let mut state = self.shared.lock();
        let sq = state
            .sqs
            .get_mut(&qpn)
            .filter(|sq| sq.commanded)
            .ok_or(ObjectRefusal::Unknown)?;
        let (from, to) = match transition {
            Transition::ResetToInit { .. } => (QpState::Reset, QpState::Init),
            Transition::InitToRtr { .. } => (QpState::Init, QpState::ReadyToReceive),
            Transition::RtrToRts => (QpState::ReadyToReceive, QpState::ReadyToSend),
            Transition::ToError => {
                state.modify_to_error(qpn, &self.shared.counters);
                return Ok(());
            }
            Transition::ToReset => {
                state.reset_queue(qpn);
                return Ok(());
            }
        };
        if sq.state != from {
            return Err(ObjectRefusal::BadState(sq.state));
        }
        if let Transition::ResetToInit { enabled } = transition {
            if let Some(responder) = state.responders.get_mut(&qpn) {
                responder.enabled = enabled;
            }
        }
        let sq = state.sqs.get_mut(&qpn).ok_or(ObjectRefusal::Unknown)?;
        if let Transition::ResetToInit { .. } = transition {
            // Doorbells rung in RESET were not seen; only later changes count.
            if let Some(doorbell) = sq.memory.load_doorbell() {
                sq.last_doorbell = doorbell;
            }
        }
        if let Transition::InitToRtr { peer } = transition {
            if sq.transport == TransportKind::Rc {
                let (remote, path) =
                    peer.ok_or(ObjectRefusal::Invalid(SoftNicError::NotReliableConnected {
                        number: qpn,
                    }))?;
                sq.peer = Some(remote);
                sq.peer_path = Some(path);
            }
        }
        sq.state = to;
        Ok(())
    }

    /// Destroys a queue pair made by command.
    pub(crate) fn destroy_commanded_qp(&self, qpn: u32) -> Result<(), ObjectRefusal> {
        if !self
            .shared
            .lock()
            .sqs
            .get(&qpn)
            .is_some_and(|sq| sq.commanded)
        {
            return Err(ObjectRefusal::Unknown);
        }
        let number = Qpn::new(qpn).map_err(|_| ObjectRefusal::Unknown)?;
        self.destroy_qp(number).map_err(|_| ObjectRefusal::Unknown)
    }

    /// Makes the WQE of sequence number `wqe` (0 for the first this queue pair executes)
    /// of queue pair `qpn` fail with an error CQE of `syndrome` and `vendor_syndrome`,
    /// whatever it holds, as if the NIC had rejected it; the queue then flushes as after
    /// any error. One injection per queue pair: a second replaces the first.
    ///
    /// The injection is spent once the WQE of that number is consumed, whether it failed
    /// as injected or was flushed (its queue pair already in error): a fault happens once.
    /// Sequence numbers count the WQEs consumed since the queue pair was made or last
    /// reset (2RST_QP starts them over at 0), so an injection not yet reached when the
    /// queue pair is reset applies to the WQE of that number after the reset, and a spent
    /// one does not come back: recovery after an injected fault leaves a working queue pair.
    pub fn inject_fault(
        &self,
        qpn: u32,
        wqe: u64,
        syndrome: crate::cq::Syndrome,
        vendor_syndrome: u8,
    ) -> Result<(), SoftNicError> {
        let mut state = self.shared.lock();
        let sq = state
            .sqs
            .get_mut(&qpn)
            .ok_or(SoftNicError::UnknownQueue { number: qpn })?;
        sq.injected = Some((
            wqe,
            super::fault::Fault::Injected {
                syndrome,
                vendor_syndrome,
            },
        ));
        Ok(())
    }

    /// Makes the WQE of sequence number `wqe` of queue pair `qpn` execute (its effects
    /// land as usual) without writing its CQE, signaled or not: a completion the NIC
    /// loses, which only a later CQE covers or the waiter's deadline ends. One per queue
    /// pair: a second replaces the first. Only a successful completion is lost (an error
    /// or flush CQE is always written), and, like [`inject_fault`](Self::inject_fault),
    /// the loss is spent once the WQE of that number is consumed.
    pub fn drop_completion(&self, qpn: u32, wqe: u64) -> Result<(), SoftNicError> {
        let mut state = self.shared.lock();
        let sq = state
            .sqs
            .get_mut(&qpn)
            .ok_or(SoftNicError::UnknownQueue { number: qpn })?;
        sq.dropped_completion = Some(wqe);
        Ok(())
    }

    /// Makes a DC target whose receive completions go to a CQ made by command and whose
    /// receives come from SRQ `srqn` of its node.
    pub(crate) fn create_commanded_dct(
        &self,
        node: NodeId,
        dc_key: u64,
        cqn: u32,
        srqn: u32,
        enabled: Access,
    ) -> Result<Qpn, ObjectRefusal> {
        let mut state = self.shared.lock();
        check_node(&state, node).map_err(ObjectRefusal::Invalid)?;
        if !state.cqs.get(&cqn).is_some_and(|cq| cq.held) || !state.has_srq(srqn, node) {
            return Err(ObjectRefusal::Unknown);
        }
        let number = state
            .allocate_queue_number()
            .map_err(ObjectRefusal::Invalid)?;
        let qpn = Qpn::new(number)
            .map_err(|_| ObjectRefusal::Invalid(SoftNicError::QueueNumbersExhausted))?;
        if let Some(cq) = state.cqs.get_mut(&cqn) {
            cq.users.insert(number);
        }
        state.attach_srq(srqn, node, number)?;
        state.responders.insert(
            number,
            ResponderState {
                node,
                dc_key: Some(dc_key),
                credits: 0,
                received: 0,
                srq: Some(srqn),
                cq: Some(cqn),
                error: false,
                enabled,
            },
        );
        Ok(qpn)
    }
}
