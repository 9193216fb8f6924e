//! Typed queue pairs on the software NIC: memory allocated, the queue created in the
//! fabric, and the host handle built over the same memory, in one call.
//!
//! These are the fabric's own shortcuts, for tests of NIC behaviours that no PRM command
//! configures (response delay, doorbell watching, shared multi-producer queues). Queues
//! an application uses come from the control plane ([`crate::nic::Device`], with
//! [`crate::nic::SoftNic`] as the backend), which reaches this NIC through the same PRM
//! command bytes a ConnectX gets.

use std::sync::Arc;

use super::error::SoftNicError;
use super::fabric::{DoorbellWatch, Fabric, NodeId, QpConfig};
use super::region::MemoryRegion;
use crate::cq::CqMode;
use crate::queue::{
    self, CompletionQueueMemory, QueuePair, Registered, SendQueueConfig, SendQueueMemory,
    SharedQueueConfig, SharedSendQueue,
};
use crate::wqe::{LKey, RingSize, TypedTransport, WqeLimits};

/// How to make a host queue pair on the software NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuePairSpec {
    /// Send ring size.
    pub sq: RingSize,
    /// CQ entries (a power of two; ring mode needs as many as WQEs can complete unpolled).
    pub cq_entries: u32,
    /// How the NIC fills the CQ.
    pub cq_mode: CqMode,
    /// The send queue's configuration (limits, signaling, doorbell batching).
    pub send: SendQueueConfig,
    /// How many more WQEs run before a READ or atomic response lands (see the fence model).
    pub response_delay: u32,
    /// When the NIC reads the doorbell record.
    pub doorbell_watch: DoorbellWatch,
}

impl QueuePairSpec {
    /// A queue pair with a send ring of `sq` WQEBBs and as many CQ entries, ring-mode CQ,
    /// inline payloads up to what one 16-block WQE holds, default signaling and a doorbell
    /// per WQE.
    pub fn new(sq: RingSize) -> Self {
        Self {
            sq,
            cq_entries: sq.wqebbs(),
            cq_mode: CqMode::Ring,
            send: SendQueueConfig::default(),
            response_delay: 0,
            doorbell_watch: DoorbellWatch::PollRecord,
        }
    }

    fn memory(&self) -> Result<(SendQueueMemory, CompletionQueueMemory), SoftNicError> {
        let sq = SendQueueMemory::allocate(self.sq).map_err(SoftNicError::Memory)?;
        let cq = CompletionQueueMemory::allocate(self.cq_entries).map_err(SoftNicError::Memory)?;
        Ok((sq, cq))
    }

    fn fabric_config<'m, T: TypedTransport>(
        &self,
        sq: &'m SendQueueMemory,
        cq: &'m CompletionQueueMemory,
    ) -> QpConfig<'m> {
        let mut config = QpConfig::new(T::KIND, sq, cq);
        config.cq_mode = self.cq_mode;
        config.response_delay = self.response_delay;
        config.doorbell_watch = self.doorbell_watch;
        config
    }
}

impl Fabric {
    /// Creates a queue pair of transport `T` on `node` and returns the typed host handle
    /// over the same memory. RC pairs still need [`Fabric::connect`].
    ///
    /// ```
    /// use ibgda::softnic::{Access, Fabric, QueuePairSpec};
    /// use ibgda::memory::DmaBuffer;
    /// use ibgda::wqe::{Rc, RdmaWrite, RingSize};
    /// use std::{sync::Arc, time::Duration};
    ///
    /// let fabric = Fabric::new();
    /// let node = fabric.add_node(1)?;
    /// let buffer = Arc::new(DmaBuffer::zeroed(64, 64)?);
    /// let target = fabric.register(node, buffer.clone(), 0, 64, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    /// let mut qp = fabric.create_queue_pair::<Rc>(node, QueuePairSpec::new(RingSize::new(16)?))?;
    /// fabric.connect(qp.qpn(), qp.qpn())?; // loopback
    /// let payload = 0x1122_3344_5566_7788u64.to_be_bytes();
    /// let wqe = RdmaWrite::new(target.remote(8)).inline(&payload).signaled().build()?;
    /// let ticket = qp.post(&wqe, &[])?;
    /// fabric.run_until_idle();
    /// qp.wait(ticket, Duration::from_secs(1))?;
    /// assert_eq!(buffer.to_vec()[8..16], payload);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_queue_pair<T: TypedTransport>(
        &self,
        node: NodeId,
        spec: QueuePairSpec,
    ) -> Result<QueuePair<T>, SoftNicError> {
        let (sq, cq) = spec.memory()?;
        let qpn = self.create_qp(node, spec.fabric_config::<T>(&sq, &cq))?;
        let config = queue::QpConfig {
            send: spec.send,
            cq_mode: spec.cq_mode,
        };
        QueuePair::new(qpn, sq, cq, config).map_err(SoftNicError::Queue)
    }

    /// Creates a queue pair of transport `T` on `node` that many CPU threads post to.
    pub fn create_shared_queue<T: TypedTransport>(
        &self,
        node: NodeId,
        spec: QueuePairSpec,
        shared: SharedQueueConfig,
    ) -> Result<SharedSendQueue<T>, SoftNicError> {
        let spec = QueuePairSpec {
            cq_mode: shared.cq_mode,
            ..spec
        };
        let (sq, cq) = spec.memory()?;
        let qpn = self.create_qp(node, spec.fabric_config::<T>(&sq, &cq))?;
        SharedSendQueue::new(qpn, sq, cq, shared).map_err(SoftNicError::Queue)
    }
}

impl QueuePairSpec {
    /// Inline payloads up to `max_inline` bytes.
    pub fn with_max_inline(mut self, max_inline: usize) -> Self {
        self.send.limits = WqeLimits {
            max_inline,
            ..self.send.limits
        };
        self
    }
}

// SAFETY: while a handle lives the region stays in its node's key tables (it is
// deregistered when the last handle drops) and keeps its buffer alive; `covers` answers
// for exactly the region's bytes.
unsafe impl Registered for MemoryRegion {
    fn lkey(&self) -> LKey {
        MemoryRegion::lkey(self)
    }
    fn covers(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr()
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr() + self.len() as u64)
    }
}

impl MemoryRegion {
    /// This registration as a keep-alive handle for posting (see [`Registered`]).
    pub fn registered(&self) -> Arc<dyn Registered> {
        Arc::new(self.clone())
    }
}
