//! Errors of the software NIC's control plane (registration, queue creation, connection).
//! Faults of the data path are never errors of a call: they become error CQEs.

use core::fmt;

use super::fabric::{NodeId, QueueId};
use super::region::Access;

/// Why a control-plane call of the software NIC failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SoftNicError {
    /// No node with this id on the fabric.
    UnknownNode {
        /// The node.
        node: NodeId,
    },
    /// Another node already has this LID.
    DuplicateLid {
        /// The LID.
        lid: u16,
    },
    /// Another node already has this MAC, or this GID (as its own address).
    DuplicateAddress {
        /// The MAC, or the GID, as bytes.
        address: Vec<u8>,
    },
    /// No node of the fabric answers for this GID: an address handle's neighbour lookup
    /// (ARP, IPv6 neighbour discovery) would find no MAC.
    NoNeighbour {
        /// The GID.
        gid: [u8; 16],
    },
    /// A region of zero bytes.
    EmptyRegion,
    /// A region that does not fit in its buffer (or whose addresses overflow).
    RegionOutOfBounds {
        /// Offset of the region in the buffer.
        offset: usize,
        /// Length of the region.
        len: usize,
        /// Length of the buffer.
        buffer_len: usize,
    },
    /// Remote write or remote atomic access without local write (verbs refuses it too).
    InvalidAccess {
        /// The rights asked for.
        access: Access,
    },
    /// The node has handed out every key it can.
    KeysExhausted {
        /// The node.
        node: NodeId,
    },
    /// Every 24-bit queue number is in use.
    QueueNumbersExhausted,
    /// No queue with this number (or of this kind) exists.
    UnknownQueue {
        /// The queue number.
        number: u32,
    },
    /// Queue memory that does not match its description.
    InvalidQueueMemory {
        /// What is wrong.
        what: &'static str,
    },
    /// The CQ memory is already a CQ, described differently (mode, size or record).
    CqConflict,
    /// A region (or new queue memory) shares bytes with queue memory the fabric knows: a
    /// ring, record or doorbell is never a data region, and never two queues' memory.
    OverlapsQueueMemory {
        /// First byte of the range refused.
        addr: u64,
        /// Its length.
        len: u64,
        /// The queue memory it overlaps.
        queue: crate::queue::QueueBufferSpan,
    },
    /// New queue memory shares bytes with a registered region.
    OverlapsRegion {
        /// The queue memory refused.
        queue: crate::queue::QueueBufferSpan,
        /// First byte of the region.
        region_addr: u64,
        /// The region's length.
        region_len: u64,
    },
    /// The queue is not an RC queue pair.
    NotReliableConnected {
        /// The queue number.
        number: u32,
    },
    /// The RC queue pair is already connected.
    AlreadyConnected {
        /// The queue number.
        number: u32,
    },
    /// The queue has no receive CQ, so it cannot take receive credits.
    NoReceiveQueue {
        /// The queue.
        queue: QueueId,
    },
    /// The queue takes its receives from a shared receive queue: post them there.
    ReceivesFromSharedQueue {
        /// The queue.
        queue: QueueId,
        /// The SRQ.
        srqn: u32,
    },
    /// Posting would hold more receive WQEs than the shared receive queue's capacity.
    SharedReceiveQueueFull {
        /// The SRQ.
        srqn: u32,
        /// Its capacity.
        capacity: u64,
        /// Receive WQEs it holds now.
        outstanding: u64,
        /// Receive WQEs asked to post.
        posted: u32,
    },
    /// The queue memory is executed by another NIC (another fabric, a control-plane
    /// backend, the CUDA software NIC): one executor per queue in the process.
    ExecutedElsewhere(crate::queue::ExecutorConflict),
    /// Queue memory could not be allocated.
    Memory(crate::memory::DmaError),
    /// The host queue handle refused its configuration.
    Queue(crate::wqe::WqeError),
}

impl fmt::Display for SoftNicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownNode { node } => write!(f, "no node {node} on the fabric"),
            Self::DuplicateLid { lid } => write!(f, "LID {lid:#06x} is already in use"),
            Self::DuplicateAddress { address } => {
                write!(f, "address {address:02x?} is already another node's")
            }
            Self::NoNeighbour { gid } => write!(
                f,
                "no node answers for GID {:?}: its MAC cannot be resolved",
                crate::nic::Gid(*gid)
            ),
            Self::EmptyRegion => f.write_str("a memory region needs at least one byte"),
            Self::RegionOutOfBounds {
                offset,
                len,
                buffer_len,
            } => write!(
                f,
                "region of {len} bytes at offset {offset} exceeds its buffer of {buffer_len} bytes"
            ),
            Self::InvalidAccess { access } => write!(
                f,
                "access {access:?}: remote write and remote atomic need local write"
            ),
            Self::KeysExhausted { node } => write!(f, "node {node} has no keys left"),
            Self::QueueNumbersExhausted => f.write_str("no queue numbers left"),
            Self::UnknownQueue { number } => write!(f, "no queue {number:#08x}"),
            Self::InvalidQueueMemory { what } => write!(f, "invalid queue memory: {what}"),
            Self::OverlapsQueueMemory { addr, len, queue } => write!(
                f,
                "{addr:#x}+{len} overlaps queue memory at {:#x}+{}",
                queue.addr, queue.len
            ),
            Self::OverlapsRegion {
                queue,
                region_addr,
                region_len,
            } => write!(
                f,
                "queue memory at {:#x}+{} overlaps the registered region {region_addr:#x}+{region_len}",
                queue.addr, queue.len
            ),
            Self::CqConflict => {
                f.write_str("the CQ memory is already a CQ with another mode, size or record")
            }
            Self::NotReliableConnected { number } => {
                write!(f, "queue {number:#08x} is not an RC queue pair")
            }
            Self::AlreadyConnected { number } => {
                write!(f, "queue {number:#08x} is already connected")
            }
            Self::NoReceiveQueue { queue } => {
                write!(f, "queue {queue:?} has no receive completion queue")
            }
            Self::ReceivesFromSharedQueue { queue, srqn } => write!(
                f,
                "queue {queue:?} takes its receives from shared receive queue {srqn:#x}: post \
                 them to that SRQ"
            ),
            Self::SharedReceiveQueueFull {
                srqn,
                capacity,
                outstanding,
                posted,
            } => write!(
                f,
                "shared receive queue {srqn:#x} holds {outstanding} of its {capacity} receive \
                 WQEs: {posted} more do not fit (let WRITE_WITH_IMMs consume some, or make a \
                 larger SRQ)"
            ),
            Self::ExecutedElsewhere(e) => e.fmt(f),
            Self::Memory(e) => write!(f, "queue memory: {e}"),
            Self::Queue(e) => write!(f, "queue configuration: {e}"),
        }
    }
}

impl std::error::Error for SoftNicError {}

impl From<crate::queue::ExecutorConflict> for SoftNicError {
    fn from(e: crate::queue::ExecutorConflict) -> Self {
        Self::ExecutedElsewhere(e)
    }
}
