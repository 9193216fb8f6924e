//! Shared receive queues: the receive WQEs that RC queue pairs and DC targets made by
//! command consume, one per WRITE_WITH_IMM.
//!
//! An SRQ is modelled by what its ring holds, not by its bytes: a count of posted
//! zero-length receive WQEs (at most its capacity outstanding, as a ring of that many
//! WQEs holds), and the index of the next one the NIC consumes, which a responder CQE
//! carries in `wqe_counter` as hardware reports the SRQ WQE it used. Every queue that
//! names the SRQ (a queue pair with `rq_type` SRQ, a DC target) is one of its users: the
//! SRQ cannot be destroyed while one lives, as firmware keeps a reference to it.

use std::collections::BTreeSet;

use super::error::SoftNicError;
use super::fabric::{check_node, Fabric, FabricState, NodeId};
use super::objects::ObjectRefusal;

/// One shared receive queue.
#[derive(Debug)]
pub(crate) struct SrqState {
    /// The node (the device) it belongs to: only that node's queues may use it.
    pub(crate) node: NodeId,
    /// The most receive WQEs it holds at once.
    pub(crate) capacity: u64,
    /// Receive WQEs posted and not yet consumed.
    pub(crate) posted: u64,
    /// Receive WQEs consumed (free-running; its low 16 bits are the index of the WQE a
    /// responder CQE reports).
    pub(crate) consumed: u32,
    /// The queue numbers that name it.
    pub(crate) users: BTreeSet<u32>,
}

impl FabricState {
    /// Makes `user` (a queue on `node`) a user of SRQ `srqn`, which must exist on that node.
    pub(crate) fn attach_srq(
        &mut self,
        srqn: u32,
        node: NodeId,
        user: u32,
    ) -> Result<(), ObjectRefusal> {
        match self.srqs.get_mut(&srqn) {
            Some(srq) if srq.node == node => {
                srq.users.insert(user);
                Ok(())
            }
            _ => Err(ObjectRefusal::Unknown),
        }
    }

    /// Whether SRQ `srqn` exists on `node`.
    pub(crate) fn has_srq(&self, srqn: u32, node: NodeId) -> bool {
        self.srqs.get(&srqn).is_some_and(|s| s.node == node)
    }

    /// Removes queue `user` from every SRQ it used.
    pub(crate) fn detach_srq_user(&mut self, user: u32) {
        for srq in self.srqs.values_mut() {
            srq.users.remove(&user);
        }
    }
}

impl Fabric {
    /// Makes an SRQ on `node` holding up to `capacity` receive WQEs (at least one); returns
    /// its number (24 bits, from 1).
    pub(crate) fn create_srq(&self, node: NodeId, capacity: u32) -> Result<u32, SoftNicError> {
        if capacity == 0 {
            return Err(SoftNicError::InvalidQueueMemory {
                what: "a shared receive queue of zero receive WQEs",
            });
        }
        let mut state = self.shared.lock();
        check_node(&state, node)?;
        let srqn = state.next_srqn.max(1);
        if srqn > 0xff_ffff {
            return Err(SoftNicError::QueueNumbersExhausted);
        }
        state.next_srqn = srqn + 1;
        state.srqs.insert(
            srqn,
            SrqState {
                node,
                capacity: capacity.into(),
                posted: 0,
                consumed: 0,
                users: BTreeSet::new(),
            },
        );
        Ok(srqn)
    }

    /// Posts `count` zero-length receive WQEs to SRQ `srqn`; refused, posting none, when
    /// that would hold more than its capacity.
    pub(crate) fn post_srq_receives(&self, srqn: u32, count: u32) -> Result<(), SoftNicError> {
        let mut state = self.shared.lock();
        let srq = state
            .srqs
            .get_mut(&srqn)
            .ok_or(SoftNicError::UnknownQueue { number: srqn })?;
        let posted = srq.posted.saturating_add(count.into());
        if posted > srq.capacity {
            return Err(SoftNicError::SharedReceiveQueueFull {
                srqn,
                capacity: srq.capacity,
                outstanding: srq.posted,
                posted: count,
            });
        }
        srq.posted = posted;
        Ok(())
    }

    /// The receive WQEs SRQ `srqn` holds now (`None` if it does not exist).
    pub fn srq_receives(&self, srqn: u32) -> Option<u64> {
        self.shared.lock().srqs.get(&srqn).map(|s| s.posted)
    }

    /// Destroys SRQ `srqn`; refused while a queue names it.
    pub(crate) fn destroy_srq(&self, srqn: u32) -> Result<(), ObjectRefusal> {
        let mut state = self.shared.lock();
        let srq = state.srqs.get(&srqn).ok_or(ObjectRefusal::Unknown)?;
        if !srq.users.is_empty() {
            return Err(ObjectRefusal::Busy);
        }
        state.srqs.remove(&srqn);
        Ok(())
    }
}

impl Fabric {
    /// Whether SRQ `srqn` exists on `node` (what CREATE_QP and CREATE_DCT check).
    pub(crate) fn srq_on(&self, srqn: u32, node: NodeId) -> bool {
        self.shared.lock().has_srq(srqn, node)
    }
}

impl Fabric {
    /// Whether a queue names SRQ `srqn`.
    pub(crate) fn srq_in_use(&self, srqn: u32) -> bool {
        self.shared
            .lock()
            .srqs
            .get(&srqn)
            .is_some_and(|s| !s.users.is_empty())
    }
}
