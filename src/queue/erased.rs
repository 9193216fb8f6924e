//! Erased forms of the typed queue handles, for code that picks a transport at run time.

use std::sync::Arc;
use std::time::Duration;

use super::pair::{PollError, Polled, QueuePair, Quiesce, WaitError};
use super::send::{PostError, Registered, Ticket};
use crate::wqe::{AnyWqe, Compact, Dc, Full, Qpn, Rc, TransportKind, Wqe};

/// A queue pair of any transport.
#[derive(Debug)]
pub enum AnyQueuePair {
    /// Reliable connection.
    Rc(QueuePair<Rc>),
    /// DC initiator with compact address vectors.
    DcCompact(QueuePair<Dc<Compact>>),
    /// DC initiator with full address vectors.
    DcFull(QueuePair<Dc<Full>>),
}

macro_rules! each {
    ($self:expr, $qp:ident => $body:expr) => {
        match $self {
            AnyQueuePair::Rc($qp) => $body,
            AnyQueuePair::DcCompact($qp) => $body,
            AnyQueuePair::DcFull($qp) => $body,
        }
    };
}

impl AnyQueuePair {
    /// The queue pair number.
    pub fn qpn(&self) -> Qpn {
        each!(self, qp => qp.qpn())
    }
    /// The transport.
    pub fn transport(&self) -> TransportKind {
        match self {
            Self::Rc(_) => TransportKind::Rc,
            Self::DcCompact(_) | Self::DcFull(_) => TransportKind::Dc,
        }
    }
    /// Posts an erased WQE; its target must match the transport (and AV form).
    pub fn post(
        &mut self,
        wqe: &Wqe<AnyWqe<'_>>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<Ticket, PostError> {
        each!(self, qp => qp.sq_mut().post_erased(wqe, registrations))
    }
    /// Rings the doorbell for everything published.
    pub fn ring_doorbell(&mut self) {
        each!(self, qp => qp.ring_doorbell())
    }
    /// Consumes one CQE, if any.
    pub fn poll(&mut self) -> Result<Option<Polled>, PollError> {
        each!(self, qp => qp.poll())
    }
    /// Waits for `ticket`.
    pub fn wait(&mut self, ticket: Ticket, timeout: Duration) -> Result<(), WaitError> {
        each!(self, qp => qp.wait(ticket, timeout))
    }
    /// Completes everything posted.
    pub fn drain(&mut self, timeout: Duration) -> Result<(), WaitError> {
        each!(self, qp => qp.drain(timeout))
    }
}

impl Quiesce for AnyQueuePair {
    fn begin_quiet(&mut self) -> Result<Option<Ticket>, WaitError> {
        each!(self, qp => qp.begin_quiet())
    }
    fn progress(&mut self, ticket: Ticket) -> Result<bool, WaitError> {
        each!(self, qp => qp.progress(ticket))
    }
}

impl From<QueuePair<Rc>> for AnyQueuePair {
    fn from(qp: QueuePair<Rc>) -> Self {
        Self::Rc(qp)
    }
}
impl From<QueuePair<Dc<Compact>>> for AnyQueuePair {
    fn from(qp: QueuePair<Dc<Compact>>) -> Self {
        Self::DcCompact(qp)
    }
}
impl From<QueuePair<Dc<Full>>> for AnyQueuePair {
    fn from(qp: QueuePair<Dc<Full>>) -> Self {
        Self::DcFull(qp)
    }
}
