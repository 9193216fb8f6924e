//! The fabric: nodes, memory regions, queue pairs, DC targets and completion queues, and
//! the control-plane calls that make them.

use core::fmt;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::cq::CqMode;
use crate::memory::DmaBuffer;
use crate::queue::{
    CompletionQueueMemory, CompletionQueueNicAccess, QueueBufferSpan, SendQueueMemory,
    SendQueueNicAccess,
};
use crate::wqe::{Qpn, TransportKind};

use super::completion::CqState;
use super::counters::{CounterBlock, Counters, StepReport};
use super::engine::EngineHandle;
use super::error::SoftNicError;
use super::fault::Fault;
use super::region::{Access, KeySpace, KeyTable, MemoryRegion, Region};
use super::srq::SrqState;
use crate::queue::Executor;

/// The largest message a queue accepts unless configured otherwise: 1 GiB (NVSHMEM's
/// `IBGDA_LOG_MAX_MSG_SIZE` of 30).
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 1 << 30;

/// The first queue number handed out (numbers below are reserved, as special QPs are).
const FIRST_QUEUE_NUMBER: u32 = 0x100;

/// A node of the fabric: one host port with its own LID, memory regions and key space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) u32);

impl NodeId {
    /// The node's index on its fabric.
    pub fn index(self) -> u32 {
        self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

/// The number of a DC target (in the same 24-bit space as queue pair numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DctNumber(pub(crate) Qpn);

impl DctNumber {
    /// The number, as an address vector's `dqp_dct` names it.
    pub fn get(self) -> u32 {
        self.0.get()
    }
    /// The number as a queue number.
    pub fn qpn(self) -> Qpn {
        self.0
    }
}

/// The number of a completion queue on a fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cqn(pub(crate) u32);

impl Cqn {
    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// A queue that receives: an RC queue pair or a DC target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueId {
    /// A queue pair.
    Qp(Qpn),
    /// A DC target.
    Dct(DctNumber),
}

impl QueueId {
    /// The queue's number.
    pub fn number(self) -> u32 {
        match self {
            Self::Qp(q) => q.get(),
            Self::Dct(d) => d.get(),
        }
    }
}

impl From<Qpn> for QueueId {
    fn from(qpn: Qpn) -> Self {
        Self::Qp(qpn)
    }
}
impl From<DctNumber> for QueueId {
    fn from(dct: DctNumber) -> Self {
        Self::Dct(dct)
    }
}

/// When the NIC reads a send queue's doorbell record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DoorbellWatch {
    /// On every step, whether or not the doorbell changed: the record is authoritative and
    /// a doorbell rung with an unchanged value is not missed.
    #[default]
    PollRecord,
    /// Only when the doorbell changes to a value naming this queue; the record read then
    /// bounds the work until the next doorbell.
    DoorbellOnly,
}

/// The receive side of a queue: where WRITE_WITH_IMM completions go.
#[derive(Clone, Copy, Debug)]
pub struct ReceiveConfig<'m> {
    /// The receive CQ (it may be the send CQ, or another queue's CQ). The fabric keeps a
    /// NIC capability to it; the memory itself stays with its owner.
    pub cq: &'m CompletionQueueMemory,
    /// How CQEs are placed in it.
    pub cq_mode: CqMode,
}

/// How to make a queue pair. The memory is borrowed: the fabric keeps NIC capabilities to
/// it, and its owner (a [`QueuePair`](crate::queue::QueuePair), a
/// [`RawSendQueue`](crate::queue::RawSendQueue), ...) takes it afterwards.
#[derive(Clone, Copy, Debug)]
pub struct QpConfig<'m> {
    /// RC (connected with [`Fabric::connect`]) or DC initiator.
    pub transport: TransportKind,
    /// The send queue's memory.
    pub sq: &'m SendQueueMemory,
    /// The send CQ's memory. Queues given the same CQ memory share one CQ.
    pub cq: &'m CompletionQueueMemory,
    /// How CQEs are placed in the send CQ.
    pub cq_mode: CqMode,
    /// The receive side (RC only; DC initiators receive nothing). Without it the queue
    /// cannot take receive credits, so a WRITE_WITH_IMM to it fails with RNR.
    pub receive: Option<ReceiveConfig<'m>>,
    /// The longest message (WRITE, READ or DUMP length) the queue accepts.
    pub max_message_bytes: u64,
    /// How many more WQEs of this queue execute before a READ or atomic response lands in
    /// local memory (0: at once).
    pub response_delay: u32,
    /// When the doorbell record is read.
    pub doorbell_watch: DoorbellWatch,
}

impl<'m> QpConfig<'m> {
    /// A configuration with a ring-mode CQ, no receive side, the default message limit,
    /// no response delay and the record polled every step.
    pub fn new(
        transport: TransportKind,
        sq: &'m SendQueueMemory,
        cq: &'m CompletionQueueMemory,
    ) -> Self {
        Self {
            transport,
            sq,
            cq,
            cq_mode: CqMode::Ring,
            receive: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            response_delay: 0,
            doorbell_watch: DoorbellWatch::PollRecord,
        }
    }
}

/// How to make a DC target.
#[derive(Clone, Copy, Debug)]
pub struct DctConfig<'m> {
    /// The DC access key initiators must present.
    pub dc_key: u64,
    /// The receive side, for WRITE_WITH_IMM.
    pub receive: Option<ReceiveConfig<'m>>,
}

impl From<u64> for DctConfig<'_> {
    fn from(dc_key: u64) -> Self {
        Self {
            dc_key,
            receive: None,
        }
    }
}

/// The state of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Just created by CREATE_QP: nothing configured yet.
    Reset,
    /// After RST2INIT; or an RC queue pair made by [`Fabric::create_qp`] and not yet
    /// connected. Either way it executes nothing.
    Init,
    /// After INIT2RTR: it could receive, but its send queue does not run.
    ReadyToReceive,
    /// Executing WQEs.
    ReadyToSend,
    /// In error: every WQE is flushed.
    Error,
}

/// Why a queue went to the error state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCause {
    /// A WQE failed.
    Wqe {
        /// The fault.
        fault: Fault,
        /// The WQE's index.
        wqe_counter: u16,
    },
    /// A CQ the queue uses overran.
    CompletionQueue {
        /// The CQ.
        cq: Cqn,
    },
    /// The control plane moved it to the error state (2ERR_QP).
    Command,
}

/// The path INIT2RTR gave an RC queue pair to its peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerPath {
    /// InfiniBand: the peer's LID.
    Lid(u16),
    /// RoCE: GID, next-hop MAC and the rest of the address path.
    Roce(RocePath),
}

/// A RoCE address path, as INIT2RTR set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RocePath {
    /// The peer's GID (`rgid_rip`).
    pub gid: [u8; 16],
    /// The next hop's MAC (`rmac`).
    pub mac: [u8; 6],
    /// The local GID index it sends from (`src_addr_index`).
    pub source_gid_index: u8,
    /// The UDP source port (`udp_sport`).
    pub udp_source_port: u16,
    /// The GRH hop limit.
    pub hop_limit: u8,
    /// The GRH traffic class.
    pub traffic_class: u8,
}

/// A snapshot of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpStatus {
    /// Its state.
    pub state: QpState,
    /// WQEBBs consumed from its ring (free-running).
    pub consumer: u64,
    /// WQEs consumed (executed, failed or flushed).
    pub wqes: u64,
    /// READ and atomic responses still in flight.
    pub responses_in_flight: usize,
    /// Signaled CQEs waiting for those responses.
    pub cqes_waiting: usize,
    /// Why it is in error, if it is.
    pub error: Option<ErrorCause>,
    /// The path to its RC peer, as INIT2RTR gave it.
    pub peer_path: Option<PeerPath>,
}

/// How many objects a fabric holds (see [`Fabric::census`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// Nodes.
    pub nodes: usize,
    /// Queue pairs (RC and DC initiators).
    pub queue_pairs: usize,
    /// DC targets.
    pub dc_targets: usize,
    /// Completion queues.
    pub completion_queues: usize,
    /// Registered memory regions.
    pub regions: usize,
    /// Shared receive queues.
    pub shared_receive_queues: usize,
}

/// An asynchronous event, as a NIC reports it on its event queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// A CQ overran and entered the error state (`IBV_EVENT_CQ_ERR`).
    CqError {
        /// The CQ.
        cq: Cqn,
    },
    /// A queue went to the error state because its CQ did (`IBV_EVENT_QP_FATAL`).
    QueueFatal {
        /// The queue.
        queue: QueueId,
        /// The CQ that failed.
        cq: Cqn,
    },
}

// ---------------------------------------------------------------------------------------
// State.

/// One node's tables.
#[derive(Debug)]
pub(crate) struct NodeState {
    pub(crate) lid: u16,
    /// An Ethernet (RoCE) node's MAC; `None` on InfiniBand.
    pub(crate) mac: Option<[u8; 6]>,
    pub(crate) local_keys: KeyTable,
    pub(crate) remote_keys: KeyTable,
    keys: KeySpace,
}

/// A response on its way back to local memory.
#[derive(Debug)]
pub(crate) struct InFlight {
    /// The sequence number of the WQE that issued it.
    pub(crate) seq: u64,
    /// It lands once the queue has executed this many WQEs.
    pub(crate) lands_at: u64,
    pub(crate) writes: Vec<LocalWrite>,
}

/// Bytes to place in a local region.
#[derive(Debug)]
pub(crate) struct LocalWrite {
    pub(crate) region: Arc<Region>,
    pub(crate) offset: usize,
    pub(crate) bytes: Vec<u8>,
}

/// A signaled CQE waiting for the responses it covers.
#[derive(Debug)]
pub(crate) struct WaitingCqe {
    pub(crate) seq: u64,
    pub(crate) cqe: [u8; 64],
}

/// The send side of a queue pair.
#[derive(Debug)]
pub(crate) struct SendQueueState {
    pub(crate) qpn: u32,
    pub(crate) node: NodeId,
    pub(crate) transport: TransportKind,
    pub(crate) memory: SendQueueNicAccess,
    pub(crate) cq: u32,
    pub(crate) max_message_bytes: u64,
    pub(crate) response_delay: u32,
    pub(crate) watch: DoorbellWatch,
    pub(crate) state: QpState,
    pub(crate) error: Option<ErrorCause>,
    /// The connected RC peer.
    pub(crate) peer: Option<u32>,
    /// The path the RC peer is reached by (set by INIT2RTR; `None` for [`Fabric::connect`]).
    pub(crate) peer_path: Option<PeerPath>,
    /// Made by PRM command: it moves only by state transitions, and a WQE published while
    /// it is not in RTS is an error rather than waiting.
    pub(crate) commanded: bool,
    /// WQEBBs consumed (free-running).
    pub(crate) consumer: u64,
    /// WQEs consumed (the sequence number of the next one).
    pub(crate) executed: u64,
    pub(crate) last_doorbell: u64,
    /// `DoorbellOnly`: the record value read at the last doorbell.
    pub(crate) armed_limit: Option<u16>,
    pub(crate) in_flight: VecDeque<InFlight>,
    pub(crate) waiting_cqes: VecDeque<WaitingCqe>,
    /// A fault to raise on the WQE of this sequence number ([`Fabric::inject_fault`]);
    /// cleared when that WQE is consumed.
    pub(crate) injected: Option<(u64, Fault)>,
    /// The WQE of this sequence number executes without its CQE
    /// ([`Fabric::drop_completion`]); cleared when that WQE is consumed.
    pub(crate) dropped_completion: Option<u64>,
}

/// The receive side of an RC queue pair or a DC target.
#[derive(Debug)]
pub(crate) struct ResponderState {
    pub(crate) node: NodeId,
    /// `Some` for a DC target.
    pub(crate) dc_key: Option<u64>,
    pub(crate) credits: u64,
    /// Receives consumed (free-running; its low 16 bits are the responder CQE's counter).
    pub(crate) received: u32,
    /// The shared receive queue its receives come from (queues made by command with an
    /// SRQ), instead of its own credits.
    pub(crate) srq: Option<u32>,
    pub(crate) cq: Option<u32>,
    pub(crate) error: bool,
    /// The remote operations the queue accepts (`rre`, `rwe`, `rae` of its context): all
    /// for queues made by [`Fabric::create_qp`] and [`Fabric::create_dct`].
    pub(crate) enabled: Access,
}

/// Every remote right: what queues made without a command accept.
pub(crate) const REMOTE_ALL: Access = Access::REMOTE_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

/// Consequences of a WQE applied after it: CQs that overran.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    pub(crate) overrun_cqs: Vec<u32>,
}

/// Everything the NIC knows, behind the fabric's lock.
#[derive(Debug, Default)]
pub(crate) struct FabricState {
    pub(crate) nodes: Vec<NodeState>,
    pub(crate) lids: HashMap<u16, NodeId>,
    /// The node each RoCE GID (an address of an Ethernet node) belongs to.
    pub(crate) gids: HashMap<[u8; 16], NodeId>,
    pub(crate) sqs: BTreeMap<u32, SendQueueState>,
    pub(crate) responders: BTreeMap<u32, ResponderState>,
    pub(crate) cqs: BTreeMap<u32, CqState>,
    pub(crate) srqs: BTreeMap<u32, SrqState>,
    pub(crate) next_srqn: u32,
    pub(crate) effects: Effects,
    pub(crate) events: Vec<AsyncEvent>,
    next_queue_number: u32,
    pub(crate) next_cqn: u32,
    /// Mixed into every node's key space: keys differ between fabrics.
    key_salt: u32,
}

/// What a [`Fabric`] handle shares.
#[derive(Debug)]
pub(crate) struct FabricShared {
    state: Mutex<FabricState>,
    pub(crate) counters: CounterBlock,
    /// Who executes the fabric's queues: every queue memory it takes is claimed under it.
    pub(crate) executor: Executor,
}

impl Default for FabricShared {
    fn default() -> Self {
        let executor = Executor::new("a software NIC fabric");
        Self {
            state: Mutex::new(FabricState {
                key_salt: scramble_fabric(executor.number()),
                ..FabricState::default()
            }),
            counters: CounterBlock::default(),
            executor,
        }
    }
}

/// A per-fabric salt for key numbering, so that two fabrics never hand out the same keys.
fn scramble_fabric(number: u64) -> u32 {
    let x = number.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 32) as u32 ^ x as u32
}

impl FabricShared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, FabricState> {
        // The engine never panics while holding the lock; if a caller's thread did, the
        // state is still consistent (every update is complete before the lock is left).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes a region's keys from its node (called when its last handle is dropped).
    pub(crate) fn deregister(&self, region: &Arc<Region>) {
        let mut state = self.lock();
        if let Some(node) = state.nodes.get_mut(region.node.0 as usize) {
            if node
                .local_keys
                .get(&region.lkey)
                .is_some_and(|r| Arc::ptr_eq(r, region))
            {
                node.local_keys.remove(&region.lkey);
            }
            if node
                .remote_keys
                .get(&region.rkey)
                .is_some_and(|r| Arc::ptr_eq(r, region))
            {
                node.remote_keys.remove(&region.rkey);
            }
        }
        region
            .live
            .store(false, core::sync::atomic::Ordering::Release);
    }
}

/// A simulated InfiniBand fabric with software mlx5 NICs: a cheaply clonable handle.
///
/// ```
/// use std::sync::Arc;
/// use ibgda::memory::DmaBuffer;
/// use ibgda::softnic::{Access, Fabric};
/// let fabric = Fabric::new();
/// let node = fabric.add_node(1)?;
/// let buffer = Arc::new(DmaBuffer::zeroed(4096, 64).unwrap());
/// let region = fabric.register(node, buffer.clone(), 0, 4096, Access::LOCAL_WRITE | Access::REMOTE_READ)?;
/// assert_ne!(region.lkey().0, region.rkey().0);
/// assert_eq!(region.addr(), buffer.addr());
/// # Ok::<(), ibgda::softnic::SoftNicError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Fabric {
    pub(crate) shared: Arc<FabricShared>,
}

impl Fabric {
    /// An empty fabric.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty fabric whose queue numbers (queue pairs and DC targets) start at `first`
    /// (or at the first number any fabric hands out, 0x100, if `first` is below it): for a
    /// process that owns one rank of a job whose other ranks are fabrics of other
    /// processes, so that the numbers of different ranks never meet (each rank its own
    /// range).
    ///
    /// ```
    /// use ibgda::softnic::Fabric;
    /// use ibgda::wqe::Qpn;
    /// let fabric = Fabric::with_first_queue_number(Qpn::new(0x1_0100).unwrap());
    /// assert_eq!(fabric.next_queue_number(), 0x1_0100);
    /// ```
    pub fn with_first_queue_number(first: Qpn) -> Self {
        let fabric = Self::default();
        fabric.shared.lock().next_queue_number = first.get();
        fabric
    }

    /// The number the next queue pair or DC target made on this fabric gets.
    pub fn next_queue_number(&self) -> u32 {
        self.shared.lock().next_queue_number.max(FIRST_QUEUE_NUMBER)
    }

    /// Adds a node with LID `lid` (DC address vectors reach it by that LID).
    pub fn add_node(&self, lid: u16) -> Result<NodeId, SoftNicError> {
        let mut state = self.shared.lock();
        if state.lids.contains_key(&lid) {
            return Err(SoftNicError::DuplicateLid { lid });
        }
        let id = NodeId(state.nodes.len() as u32);
        let key_salt = state.key_salt;
        state.nodes.push(NodeState {
            lid,
            mac: None,
            local_keys: KeyTable::default(),
            remote_keys: KeyTable::default(),
            keys: KeySpace::new(id, key_salt),
        });
        state.lids.insert(lid, id);
        Ok(id)
    }

    /// The LID of a node.
    pub fn lid(&self, node: NodeId) -> Option<u16> {
        self.shared.lock().nodes.get(node.0 as usize).map(|n| n.lid)
    }

    /// Adds an Ethernet (RoCE) node with MAC `mac` whose addresses are `gids` (the GIDs of
    /// its port's table: the link-local one and one per IP address). RoCE paths reach it by
    /// any of them, with its MAC as the next hop; it has no LID.
    pub fn add_ethernet_node(
        &self,
        mac: [u8; 6],
        gids: &[[u8; 16]],
    ) -> Result<NodeId, SoftNicError> {
        let mut state = self.shared.lock();
        if state.nodes.iter().any(|n| n.mac == Some(mac)) {
            return Err(SoftNicError::DuplicateAddress {
                address: mac.to_vec(),
            });
        }
        if let Some(gid) = gids.iter().find(|g| state.gids.contains_key(*g)) {
            return Err(SoftNicError::DuplicateAddress {
                address: gid.to_vec(),
            });
        }
        let id = NodeId(state.nodes.len() as u32);
        let key_salt = state.key_salt;
        state.nodes.push(NodeState {
            lid: 0,
            mac: Some(mac),
            local_keys: KeyTable::default(),
            remote_keys: KeyTable::default(),
            keys: KeySpace::new(id, key_salt),
        });
        for gid in gids {
            state.gids.insert(*gid, id);
        }
        Ok(id)
    }

    /// The MAC of an Ethernet node.
    pub fn mac(&self, node: NodeId) -> Option<[u8; 6]> {
        self.shared.lock().nodes.get(node.0 as usize)?.mac
    }

    /// The MAC a RoCE packet to `gid` is sent to, found as an address handle finds it: for
    /// a link-local GID from its interface id ([`link_local_mac`](crate::nic::roce::link_local_mac),
    /// as rdma-core and the kernel do without asking the network), for any other (IPv4-mapped
    /// or global IPv6) by a neighbour lookup: the MAC of the node that has the address.
    pub fn resolve_mac(&self, gid: [u8; 16]) -> Result<[u8; 6], SoftNicError> {
        if let Some(mac) = crate::nic::roce::link_local_mac(&crate::nic::Gid(gid)) {
            return Ok(mac);
        }
        let state = self.shared.lock();
        state
            .gids
            .get(&gid)
            .and_then(|node| state.nodes.get(node.0 as usize))
            .and_then(|n| n.mac)
            .ok_or(SoftNicError::NoNeighbour { gid })
    }

    /// Registers `len` bytes of `buffer` starting at `offset` on `node` with `access`.
    /// Remote write and remote atomic access require local write (as in verbs). A range
    /// sharing a byte with queue memory the fabric knows (a ring, record or doorbell) is
    /// refused with [`SoftNicError::OverlapsQueueMemory`].
    pub fn register(
        &self,
        node: NodeId,
        buffer: Arc<DmaBuffer>,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, SoftNicError> {
        if len == 0 {
            return Err(SoftNicError::EmptyRegion);
        }
        let out_of_bounds = || SoftNicError::RegionOutOfBounds {
            offset,
            len,
            buffer_len: buffer.len(),
        };
        let end = offset.checked_add(len).ok_or_else(out_of_bounds)?;
        if end > buffer.len() {
            return Err(out_of_bounds());
        }
        let start = buffer
            .addr()
            .checked_add(offset as u64)
            .filter(|s| s.checked_add(len as u64).is_some())
            .ok_or_else(out_of_bounds)?;
        if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && !access.contains(Access::LOCAL_WRITE)
        {
            return Err(SoftNicError::InvalidAccess { access });
        }
        let mut state = self.shared.lock();
        check_node(&state, node)?;
        state.check_not_queue_memory(start, len as u64)?;
        let node_state = state
            .nodes
            .get_mut(node.0 as usize)
            .ok_or(SoftNicError::UnknownNode { node })?;
        let (lkey, rkey) = loop {
            let (lkey, rkey) = node_state
                .keys
                .next_pair()
                .ok_or(SoftNicError::KeysExhausted { node })?;
            // Keys never repeat within a node's space, but an lkey may equal an older rkey
            // (or the reverse); skip such pairs so every live key names one region.
            let taken = |k: &u32| {
                node_state.local_keys.contains_key(k) || node_state.remote_keys.contains_key(k)
            };
            if !taken(&lkey) && !taken(&rkey) {
                break (lkey, rkey);
            }
        };
        let region = Arc::new(Region {
            node,
            buffer,
            offset,
            len,
            start,
            access,
            lkey,
            rkey,
            live: true.into(),
        });
        node_state.local_keys.insert(lkey, region.clone());
        node_state.remote_keys.insert(rkey, region.clone());
        Ok(MemoryRegion::new(region, Arc::downgrade(&self.shared)))
    }

    /// Creates a queue pair on `node` and returns its number (unique on the fabric).
    ///
    /// The send queue's memory must not be memory the fabric already knows (another
    /// queue's, or a registered region): [`SoftNicError::OverlapsQueueMemory`] or
    /// [`SoftNicError::OverlapsRegion`]. CQ memory may be shared with other queues.
    pub fn create_qp(&self, node: NodeId, config: QpConfig<'_>) -> Result<Qpn, SoftNicError> {
        // The fabric's claim on the queue: refused if another NIC executes it.
        let sq = config.sq.nic_access(&self.shared.executor)?;
        // The initial doorbell value is whatever the memory holds now: only changes count.
        // A NIC's store-only register page cannot be watched.
        let last_doorbell = sq.load_doorbell().ok_or(SoftNicError::InvalidQueueMemory {
            what: "a doorbell that is a NIC's store-only register page (the software \
                       NIC watches doorbells in memory)",
        })?;
        if config.transport == TransportKind::Dc && config.receive.is_some() {
            return Err(SoftNicError::InvalidQueueMemory {
                what: "a DC initiator has no receive side",
            });
        }
        let mut state = self.shared.lock();
        check_node(&state, node)?;
        for span in sq.spans() {
            state.check_new_queue_memory(span)?;
        }
        state.check_cq_memory(config.cq)?;
        if let Some(receive) = &config.receive {
            state.check_cq_memory(receive.cq)?;
        }
        let qpn = state.allocate_queue_number()?;
        let executor = &self.shared.executor;
        let cq = state.attach_cq(config.cq.nic_access(executor)?, config.cq_mode, qpn)?;
        let receive_cq = match config.receive {
            Some(receive) => match receive
                .cq
                .nic_access(executor)
                .map_err(SoftNicError::from)
                .and_then(|access| state.attach_cq(access, receive.cq_mode, qpn))
            {
                Ok(cqn) => Some(cqn),
                Err(e) => {
                    state.detach_cq(cq, qpn);
                    return Err(e);
                }
            },
            None => None,
        };
        let rc = config.transport == TransportKind::Rc;
        state.sqs.insert(
            qpn,
            SendQueueState {
                qpn,
                node,
                transport: config.transport,
                memory: sq,
                cq,
                max_message_bytes: config.max_message_bytes,
                response_delay: config.response_delay,
                watch: config.doorbell_watch,
                state: if rc {
                    QpState::Init
                } else {
                    QpState::ReadyToSend
                },
                error: None,
                peer: None,
                peer_path: None,
                commanded: false,
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
        if rc {
            state.responders.insert(
                qpn,
                ResponderState {
                    node,
                    dc_key: None,
                    credits: 0,
                    received: 0,
                    srq: None,
                    cq: receive_cq,
                    error: false,
                    enabled: REMOTE_ALL,
                },
            );
        }
        Qpn::new(qpn).map_err(|_| SoftNicError::QueueNumbersExhausted)
    }

    /// Connects two RC queue pairs (on the same node or not; `a == b` is a queue pair
    /// connected to itself). Both must be unconnected.
    pub fn connect(&self, a: Qpn, b: Qpn) -> Result<(), SoftNicError> {
        let mut state = self.shared.lock();
        for qpn in [a.get(), b.get()] {
            let sq = state
                .sqs
                .get(&qpn)
                .ok_or(SoftNicError::UnknownQueue { number: qpn })?;
            if sq.transport != TransportKind::Rc {
                return Err(SoftNicError::NotReliableConnected { number: qpn });
            }
            if sq.peer.is_some() {
                return Err(SoftNicError::AlreadyConnected { number: qpn });
            }
        }
        for (qpn, peer) in [(a.get(), b.get()), (b.get(), a.get())] {
            if let Some(sq) = state.sqs.get_mut(&qpn) {
                sq.peer = Some(peer);
                if sq.state == QpState::Init {
                    sq.state = QpState::ReadyToSend;
                }
            }
        }
        Ok(())
    }

    /// Creates a DC target on `node`: `create_dct(node, dc_key)`, or with a
    /// [`DctConfig`] that gives it a receive side.
    pub fn create_dct<'m>(
        &self,
        node: NodeId,
        config: impl Into<DctConfig<'m>>,
    ) -> Result<DctNumber, SoftNicError> {
        let config = config.into();
        let mut state = self.shared.lock();
        check_node(&state, node)?;
        let number = state.allocate_queue_number()?;
        let cq = match config.receive {
            Some(receive) => {
                state.check_cq_memory(receive.cq)?;
                let access = receive.cq.nic_access(&self.shared.executor)?;
                Some(state.attach_cq(access, receive.cq_mode, number)?)
            }
            None => None,
        };
        state.responders.insert(
            number,
            ResponderState {
                node,
                dc_key: Some(config.dc_key),
                credits: 0,
                received: 0,
                srq: None,
                cq,
                error: false,
                enabled: REMOTE_ALL,
            },
        );
        Qpn::new(number)
            .map(DctNumber)
            .map_err(|_| SoftNicError::QueueNumbersExhausted)
    }

    /// Posts `count` receive credits to an RC queue pair or DC target with a receive side:
    /// each WRITE_WITH_IMM to it consumes one.
    pub fn post_receives(&self, queue: impl Into<QueueId>, count: u32) -> Result<(), SoftNicError> {
        let queue = queue.into();
        let mut state = self.shared.lock();
        let responder = state.responder_mut(queue)?;
        if let Some(srqn) = responder.srq {
            return Err(SoftNicError::ReceivesFromSharedQueue { queue, srqn });
        }
        if responder.cq.is_none() {
            return Err(SoftNicError::NoReceiveQueue { queue });
        }
        responder.credits = responder.credits.saturating_add(count.into());
        Ok(())
    }

    /// The receive credits a queue holds.
    pub fn receive_credits(&self, queue: impl Into<QueueId>) -> Option<u64> {
        let queue = queue.into();
        let mut state = self.shared.lock();
        state.responder_mut(queue).ok().map(|r| r.credits)
    }

    /// Destroys a queue pair. Its memory is released by the NIC; a connected peer's later
    /// WQEs find no responder.
    pub fn destroy_qp(&self, qpn: Qpn) -> Result<(), SoftNicError> {
        let mut state = self.shared.lock();
        let number = qpn.get();
        let sq = state
            .sqs
            .remove(&number)
            .ok_or(SoftNicError::UnknownQueue { number })?;
        state.detach_cq(sq.cq, number);
        state.detach_srq_user(number);
        if let Some(responder) = state.responders.remove(&number) {
            if let Some(cq) = responder.cq {
                state.detach_cq(cq, number);
            }
        }
        Ok(())
    }

    /// Destroys a DC target.
    pub fn destroy_dct(&self, dct: DctNumber) -> Result<(), SoftNicError> {
        let mut state = self.shared.lock();
        let number = dct.get();
        if state
            .responders
            .get(&number)
            .is_none_or(|r| r.dc_key.is_none())
        {
            return Err(SoftNicError::UnknownQueue { number });
        }
        if let Some(cq) = state.responders.remove(&number).and_then(|r| r.cq) {
            state.detach_cq(cq, number);
        }
        state.detach_srq_user(number);
        Ok(())
    }

    /// A snapshot of a queue pair.
    pub fn qp_status(&self, qpn: Qpn) -> Option<QpStatus> {
        let state = self.shared.lock();
        state.sqs.get(&qpn.get()).map(|sq| QpStatus {
            state: sq.state,
            consumer: sq.consumer,
            wqes: sq.executed,
            responses_in_flight: sq.in_flight.len(),
            cqes_waiting: sq.waiting_cqes.len(),
            error: sq.error,
            peer_path: sq.peer_path,
        })
    }

    /// The queue pair an RC queue pair is connected to (by [`Fabric::connect`] or by its
    /// INIT2RTR command), and the LID the peer was named at (`None` for a RoCE path or a
    /// [`Fabric::connect`]ion).
    pub fn rc_peer(&self, qpn: Qpn) -> Option<(u32, Option<u16>)> {
        let state = self.shared.lock();
        let sq = state.sqs.get(&qpn.get())?;
        let lid = match sq.peer_path {
            Some(PeerPath::Lid(lid)) => Some(lid),
            _ => None,
        };
        sq.peer.map(|p| (p, lid))
    }

    /// The send CQ of a queue pair.
    pub fn send_cq(&self, qpn: Qpn) -> Option<Cqn> {
        self.shared.lock().sqs.get(&qpn.get()).map(|sq| Cqn(sq.cq))
    }

    /// The receive CQ of a queue pair or DC target.
    pub fn receive_cq(&self, queue: impl Into<QueueId>) -> Option<Cqn> {
        let queue = queue.into();
        let mut state = self.shared.lock();
        state.responder_mut(queue).ok().and_then(|r| r.cq).map(Cqn)
    }

    /// Whether a CQ is in the error state (`None` if it does not exist).
    pub fn cq_in_error(&self, cq: Cqn) -> Option<bool> {
        self.shared.lock().cqs.get(&cq.0).map(|c| c.error)
    }

    /// One deterministic pass: every send queue in QPN order observes its doorbell and
    /// executes every published WQE.
    pub fn step(&self) -> StepReport {
        self.step_limited(u64::MAX)
    }

    /// A pass that stops after `max_wqes` WQEs (executed, failed or flushed), so that
    /// tests can observe the state between WQEs.
    pub fn step_limited(&self, max_wqes: u64) -> StepReport {
        let mut state = self.shared.lock();
        state.step(&self.shared.counters, max_wqes)
    }

    /// Steps until a step does nothing; returns the sum of the steps' reports.
    pub fn run_until_idle(&self) -> StepReport {
        let mut total = StepReport::default();
        loop {
            let report = self.step();
            if !report.made_progress() {
                return total;
            }
            total += report;
        }
    }

    /// The executor every queue of this fabric is claimed under.
    pub(crate) fn executor(&self) -> &Executor {
        &self.shared.executor
    }

    /// Starts a background thread that steps the fabric until the handle is dropped.
    pub fn spawn_engine(&self) -> EngineHandle {
        EngineHandle::spawn(self.clone())
    }

    /// The fabric-wide counters (readable while an engine runs).
    pub fn counters(&self) -> Counters {
        self.shared.counters.snapshot()
    }

    /// How many objects the fabric holds now.
    pub fn census(&self) -> Census {
        let state = self.shared.lock();
        Census {
            nodes: state.nodes.len(),
            queue_pairs: state.sqs.len(),
            dc_targets: state
                .responders
                .values()
                .filter(|r| r.dc_key.is_some())
                .count(),
            completion_queues: state.cqs.len(),
            regions: state.nodes.iter().map(|n| n.local_keys.len()).sum(),
            shared_receive_queues: state.srqs.len(),
        }
    }

    /// Every asynchronous event recorded so far.
    pub fn async_events(&self) -> Vec<AsyncEvent> {
        self.shared.lock().events.clone()
    }

    /// Removes and returns the asynchronous events recorded so far.
    pub fn take_async_events(&self) -> Vec<AsyncEvent> {
        core::mem::take(&mut self.shared.lock().events)
    }
}

pub(crate) fn check_node(state: &FabricState, node: NodeId) -> Result<(), SoftNicError> {
    if (node.0 as usize) < state.nodes.len() {
        Ok(())
    } else {
        Err(SoftNicError::UnknownNode { node })
    }
}

impl FabricState {
    pub(crate) fn allocate_queue_number(&mut self) -> Result<u32, SoftNicError> {
        let number = self.next_queue_number.max(FIRST_QUEUE_NUMBER);
        if number > Qpn::MAX {
            return Err(SoftNicError::QueueNumbersExhausted);
        }
        self.next_queue_number = number + 1;
        Ok(number)
    }

    /// The CQ over `memory` (made now, or shared with the queues already using it), with
    /// `user` added to its users.
    fn attach_cq(
        &mut self,
        memory: CompletionQueueNicAccess,
        mode: CqMode,
        user: u32,
    ) -> Result<u32, SoftNicError> {
        let existing = self
            .cqs
            .iter_mut()
            .find(|(_, cq)| cq.memory.ring() == memory.ring());
        if let Some((&cqn, cq)) = existing {
            if cq.mode != mode
                || cq.memory.entries() != memory.entries()
                || !cq.memory.same_memory(&memory)
            {
                return Err(SoftNicError::CqConflict);
            }
            cq.users.insert(user);
            return Ok(cqn);
        }
        let mut cq =
            CqState::new(memory, mode).map_err(|what| SoftNicError::InvalidQueueMemory { what })?;
        cq.users.insert(user);
        self.next_cqn += 1;
        let cqn = self.next_cqn;
        self.cqs.insert(cqn, cq);
        Ok(cqn)
    }

    /// Every buffer of queue memory the fabric knows: send rings, records and doorbells,
    /// CQ rings and records.
    fn queue_memory(&self) -> impl Iterator<Item = QueueBufferSpan> + '_ {
        let sqs = self.sqs.values().flat_map(|sq| sq.memory.spans());
        let cqs = self.cqs.values().flat_map(|cq| cq.memory.spans());
        sqs.chain(cqs)
    }

    /// Refuses a region over `[addr, addr + len)` if it shares a byte with queue memory.
    fn check_not_queue_memory(&self, addr: u64, len: u64) -> Result<(), SoftNicError> {
        match self.queue_memory().find(|q| q.overlaps(addr, len)) {
            Some(queue) => Err(SoftNicError::OverlapsQueueMemory { addr, len, queue }),
            None => Ok(()),
        }
    }

    /// Refuses new queue memory that shares a byte with memory the fabric knows.
    pub(crate) fn check_new_queue_memory(&self, span: QueueBufferSpan) -> Result<(), SoftNicError> {
        self.check_not_queue_memory(span.addr, span.len as u64)?;
        self.check_not_registered(span)
    }

    /// Refuses queue memory that shares a byte with a registered region.
    fn check_not_registered(&self, span: QueueBufferSpan) -> Result<(), SoftNicError> {
        let region = self
            .nodes
            .iter()
            .flat_map(|n| n.local_keys.values())
            .find(|r| span.overlaps(r.start, r.len as u64));
        match region {
            Some(r) => Err(SoftNicError::OverlapsRegion {
                queue: span,
                region_addr: r.start,
                region_len: r.len as u64,
            }),
            None => Ok(()),
        }
    }

    /// CQ memory is either the very memory of a CQ the fabric has (shared) or new.
    fn check_cq_memory(&self, memory: &CompletionQueueMemory) -> Result<(), SoftNicError> {
        let spans = [memory.ring(), memory.dbrec()];
        if self.cqs.values().any(|cq| cq.memory.spans() == spans) {
            return Ok(());
        }
        for span in spans {
            self.check_new_queue_memory(span)?;
        }
        Ok(())
    }

    /// Removes `user` from a CQ; a CQ nobody uses is forgotten.
    pub(crate) fn detach_cq(&mut self, cqn: u32, user: u32) {
        if let Some(cq) = self.cqs.get_mut(&cqn) {
            cq.users.remove(&user);
            if cq.users.is_empty() && !cq.held {
                self.cqs.remove(&cqn);
            }
        }
    }

    fn responder_mut(&mut self, queue: QueueId) -> Result<&mut ResponderState, SoftNicError> {
        let number = queue.number();
        let is_dct = matches!(queue, QueueId::Dct(_));
        self.responders
            .get_mut(&number)
            .filter(|r| r.dc_key.is_some() == is_dct)
            .ok_or(SoftNicError::UnknownQueue { number })
    }
}
