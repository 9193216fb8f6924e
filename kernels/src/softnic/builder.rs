//! The CUDA software NIC's tables, built by the library from typed parts.
//!
//! A [`DeviceNicBuilder`] is given nodes, data regions over device buffers, and the
//! GPU-placed queue pairs it is to execute (RC queue pairs, DC initiators, DC targets),
//! and makes every table record itself: each queue's ring, doorbell record and doorbell
//! from its own send-queue memory, each CQ from its own CQ memory, keys it hands out. No
//! table is accepted from a caller, so a table with a CQ ring equal to a send ring, swapped
//! records or a second NIC over a queue pair cannot be written. Taking a queue pair is an
//! exclusive executor claim recorded in its memory: a second builder, a doorbell sink or a
//! fabric over the same queue pair is refused ([`GpuError::ExecutedElsewhere`]) while the
//! first holds it.
//!
//! ```no_run
//! # use ibgda::cq::CqMode;
//! # use ibgda::order::GpuReleaseStore;
//! # use ibgda::softnic::Access;
//! # use ibgda_kernels::gpu::Gpu;
//! # use ibgda_kernels::softnic::builder::{DeviceNicBuilder, QueueOptions};
//! # use std::sync::Arc;
//! # fn main() -> Result<(), ibgda_kernels::gpu::GpuError> {
//! let gpu = Gpu::open(0)?;
//! let qp = gpu.rc_queue_pair(0x100, 64, 64, 16, CqMode::Ring, GpuReleaseStore)?;
//! let buffer = Arc::new(gpu.device_buffer(4096)?);
//! let mut nic = DeviceNicBuilder::new();
//! let node = nic.node(1)?;
//! let engine = nic.engine();
//! let region = nic.region(node, &buffer, 0, 4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
//! let queue = nic.rc(engine, node, &qp, QueueOptions::default())?;
//! nic.connect(queue, queue)?; // loopback
//! let mut nic = nic.build(&gpu)?;
//! nic.start()?;
//! # let _ = region;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use ibgda::memory::DeviceBuffer;
use ibgda::order::{GpuThread, OrderingScope, ScopeKind, ValidFor};
use ibgda::queue::{Executor, Gpu as GpuPlaced, QueuePair};
use ibgda::softnic::Access;
use ibgda::wqe::{AvForm, Dc, LKey, RKey, Rc, TypedTransport};

use super::device::{DeviceNic, NicReach, QueueReach};
use super::tables::{
    cq_mode, state, transport, watch, NicCq, NicNode, NicQueue, NicRegion, NicResponder, NicTables,
    MAX_SCRATCH_BYTES, NIC_NONE,
};
use crate::gpu::{Gpu, GpuError};

/// A node (a host port with a LID) of the CUDA software NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceNode(u32);

impl DeviceNode {
    /// Its index in the node table.
    pub fn index(self) -> u32 {
        self.0
    }
}

/// An engine: one block of the persistent kernel, with its own queues, CQs and
/// responders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EngineId(usize);

/// A queue added to a builder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceQueueSlot {
    engine: usize,
    qpn: u32,
}

impl DeviceQueueSlot {
    /// The queue pair number.
    pub fn qpn(self) -> u32 {
        self.qpn
    }
}

/// What WQEs name a region by: its first byte and length, and its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceRegionKeys {
    /// The device address of its first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Local key.
    pub lkey: LKey,
    /// Remote key.
    pub rkey: RKey,
}

/// How the NIC runs one send queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// The longest message (WRITE, READ or DUMP length) the queue accepts: at most
    /// [`MAX_SCRATCH_BYTES`].
    pub max_message_bytes: u64,
    /// Read the doorbell record only when a doorbell naming the queue arrives, even where
    /// the scope would let the NIC follow the record alone. Scopes that do not order the
    /// WQEs before the record ([`GpuFence`](ibgda::order::GpuFence),
    /// [`Unordered`](ibgda::order::Unordered)) always get this watch.
    pub doorbell_only: bool,
}

impl Default for QueueOptions {
    /// 64 KiB messages, the record followed wherever the scope allows it.
    fn default() -> Self {
        Self {
            max_message_bytes: 64 << 10,
            doorbell_only: false,
        }
    }
}

/// The tables of one engine as they are built.
#[derive(Debug, Default)]
struct EngineParts {
    cqs: Vec<NicCq>,
    responders: Vec<NicResponder>,
    queues: Vec<NicQueue>,
}

/// Builds a [`DeviceNic`] from typed parts (see the [module documentation](self)). It
/// borrows every queue pair it takes for `'q`, as the NIC it builds does.
pub struct DeviceNicBuilder<'q> {
    executor: Executor,
    nodes: Vec<NicNode>,
    regions: Vec<NicRegion>,
    data: Vec<Arc<DeviceBuffer>>,
    engines: Vec<EngineParts>,
    reach: Vec<QueueReach>,
    next_key: u32,
    _queues: core::marker::PhantomData<&'q ()>,
}

impl core::fmt::Debug for DeviceNicBuilder<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceNicBuilder")
            .field("executor", &self.executor)
            .field("nodes", &self.nodes.len())
            .field("regions", &self.regions.len())
            .field("engines", &self.engines.len())
            .finish()
    }
}

impl Default for DeviceNicBuilder<'_> {
    fn default() -> Self {
        Self::new()
    }
}

fn invalid(what: String) -> GpuError {
    GpuError::Invalid(what)
}

impl<'q> DeviceNicBuilder<'q> {
    /// An empty NIC, with an executor identity of its own.
    pub fn new() -> Self {
        let executor = Executor::new("a CUDA software NIC");
        // Keys differ between NICs (distinct executors), so that a key of one NIC names
        // nothing on another.
        let next_key = (executor.number() as u32).wrapping_mul(0x0100_0193) | 0x100;
        Self {
            executor,
            nodes: Vec::new(),
            regions: Vec::new(),
            data: Vec::new(),
            engines: Vec::new(),
            reach: Vec::new(),
            next_key,
            _queues: core::marker::PhantomData,
        }
    }

    /// The executor the NIC claims its queues under.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// Adds a node reached at `lid` (unique on the NIC).
    pub fn node(&mut self, lid: u16) -> Result<DeviceNode, GpuError> {
        if self.nodes.iter().any(|n| n.lid == u32::from(lid)) {
            return Err(invalid(format!("LID {lid:#06x} is already a node's")));
        }
        let index =
            u32::try_from(self.nodes.len()).map_err(|_| invalid("more than 2^32 nodes".into()))?;
        self.nodes.push(NicNode {
            lid: lid.into(),
            reserved: 0,
        });
        Ok(DeviceNode(index))
    }

    /// Adds an engine (one block of the persistent kernel).
    pub fn engine(&mut self) -> EngineId {
        self.engines.push(EngineParts::default());
        EngineId(self.engines.len() - 1)
    }

    fn check_node(&self, node: DeviceNode) -> Result<(), GpuError> {
        if (node.0 as usize) < self.nodes.len() {
            Ok(())
        } else {
            Err(invalid(format!("no node {}", node.0)))
        }
    }

    fn engine_mut(&mut self, engine: EngineId) -> Result<&mut EngineParts, GpuError> {
        self.engines
            .get_mut(engine.0)
            .ok_or_else(|| invalid(format!("no engine {}", engine.0)))
    }

    /// Whether a region of the NIC has `key` as its local or remote key.
    fn key_taken(&self, key: u32) -> bool {
        self.regions.iter().any(|r| r.lkey == key || r.rkey == key)
    }

    fn next_keys(&mut self) -> (u32, u32) {
        loop {
            let lkey = self.next_key;
            let rkey = self.next_key.wrapping_add(1);
            self.next_key = self.next_key.wrapping_add(2);
            // 0 is never a key; keys of live regions never repeat.
            if lkey != 0 && rkey != 0 && !self.key_taken(lkey) && !self.key_taken(rkey) {
                return (lkey, rkey);
            }
        }
    }

    /// Registers `len` bytes of `buffer` from `offset` on `node` with `access`, on every
    /// engine; the NIC keeps a reference to the buffer. Remote write and remote atomic
    /// access need local write (as in verbs); the range may not share a byte with the
    /// memory of a queue the NIC executes (checked again when it is built).
    pub fn region(
        &mut self,
        node: DeviceNode,
        buffer: &Arc<DeviceBuffer>,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<DeviceRegionKeys, GpuError> {
        self.add_region(node, buffer, offset, len, access, None)
    }

    /// As [`region`](Self::region), under keys a control plane already handed out for it
    /// (a registration made by PRM commands before the NIC is built): refused if a key is
    /// 0, the two are equal, or another region of the NIC has one of them.
    pub fn region_with_keys(
        &mut self,
        node: DeviceNode,
        buffer: &Arc<DeviceBuffer>,
        offset: usize,
        len: usize,
        access: Access,
        keys: (LKey, RKey),
    ) -> Result<DeviceRegionKeys, GpuError> {
        self.add_region(node, buffer, offset, len, access, Some(keys))
    }

    /// Adds a region another process registered (a peer rank's registration, made by
    /// that process's control plane under `keys`) on `node` (that peer's node): WQEs name
    /// its first byte `start`, the peer's address of it; this NIC moves its bytes through
    /// `buffer` from `offset`, the peer's memory as this process reaches it (an IPC import,
    /// [`crate::ipc::Imports`]), and keeps a reference to the buffer. `start` is never
    /// dereferenced: it is only what WQE addresses are translated from, so it must be
    /// congruent to the buffer's byte mod 8 (an atomic's word is one word in both views)
    /// and `start + len` may not overflow. Otherwise checked as
    /// [`region_with_keys`](Self::region_with_keys).
    #[allow(clippy::too_many_arguments)]
    pub fn remote_region(
        &mut self,
        node: DeviceNode,
        buffer: &Arc<DeviceBuffer>,
        offset: usize,
        len: usize,
        access: Access,
        start: u64,
        keys: (LKey, RKey),
    ) -> Result<DeviceRegionKeys, GpuError> {
        self.add_region_at(node, buffer, offset, len, access, Some(keys), Some(start))
    }

    fn add_region(
        &mut self,
        node: DeviceNode,
        buffer: &Arc<DeviceBuffer>,
        offset: usize,
        len: usize,
        access: Access,
        keys: Option<(LKey, RKey)>,
    ) -> Result<DeviceRegionKeys, GpuError> {
        self.add_region_at(node, buffer, offset, len, access, keys, None)
    }

    #[allow(clippy::too_many_arguments)]
    fn add_region_at(
        &mut self,
        node: DeviceNode,
        buffer: &Arc<DeviceBuffer>,
        offset: usize,
        len: usize,
        access: Access,
        keys: Option<(LKey, RKey)>,
        start: Option<u64>,
    ) -> Result<DeviceRegionKeys, GpuError> {
        self.check_node(node)?;
        let in_bounds = len > 0 && offset.checked_add(len).is_some_and(|e| e <= buffer.len());
        if !in_bounds {
            return Err(invalid(format!(
                "region of {len} bytes at offset {offset} of a {}-byte buffer",
                buffer.len()
            )));
        }
        if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && !access.contains(Access::LOCAL_WRITE)
        {
            return Err(invalid(format!(
                "access {access:?}: remote write and remote atomic need local write"
            )));
        }
        let addr = buffer.addr() + offset as u64;
        let start = start.unwrap_or(addr);
        if start.checked_add(len as u64).is_none() {
            return Err(invalid(format!(
                "region of {len} bytes named at {start:#x}: past the end of the address space"
            )));
        }
        if start.wrapping_sub(addr) % 8 != 0 {
            return Err(invalid(format!(
                "region named at {start:#x} over bytes at {addr:#x}: not congruent mod 8"
            )));
        }
        self.check_not_queue_memory(addr, len as u64)?;
        let (lkey, rkey) = match keys {
            Some((l, r)) => {
                if l.0 == 0 || r.0 == 0 || l.0 == r.0 || self.key_taken(l.0) || self.key_taken(r.0)
                {
                    return Err(invalid(format!(
                        "keys {:#x}/{:#x}: zero, equal or another region's",
                        l.0, r.0
                    )));
                }
                (l.0, r.0)
            }
            None => self.next_keys(),
        };
        self.regions.push(NicRegion {
            start,
            base: addr,
            len: len as u64,
            node: node.0,
            lkey,
            rkey,
            access: access.bits(),
        });
        if !self.data.iter().any(|b| Arc::ptr_eq(b, buffer)) {
            self.data.push(buffer.clone());
        }
        Ok(DeviceRegionKeys {
            addr: start,
            len: len as u64,
            lkey: LKey(lkey),
            rkey: RKey(rkey),
        })
    }

    fn check_not_queue_memory(&self, addr: u64, len: u64) -> Result<(), GpuError> {
        for (qa, qn) in self.reach.iter().flat_map(QueueReach::spans) {
            if addr < qa.saturating_add(qn) && qa < addr.saturating_add(len) {
                return Err(invalid(format!(
                    "region {addr:#x} (+{len}) overlaps queue memory {qa:#x} (+{qn})"
                )));
            }
        }
        Ok(())
    }

    /// Takes `qp` for the NIC: claims it, and makes its queue and CQ records in `engine`.
    fn add_queue<T, S>(
        &mut self,
        engine: EngineId,
        node: DeviceNode,
        qp: &'q QueuePair<T, GpuPlaced, S>,
        options: QueueOptions,
        dc: bool,
    ) -> Result<DeviceQueueSlot, GpuError>
    where
        T: TypedTransport,
        S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
    {
        self.check_node(node)?;
        self.engine_mut(engine)?;
        if options.max_message_bytes > MAX_SCRATCH_BYTES {
            return Err(invalid(format!(
                "max_message_bytes {} above {MAX_SCRATCH_BYTES}",
                options.max_message_bytes
            )));
        }
        let qpn = qp.device_qpn().get();
        if self.engines.iter().any(|e| {
            e.queues.iter().any(|q| q.qpn == qpn) || e.responders.iter().any(|r| r.number == qpn)
        }) {
            return Err(invalid(format!(
                "queue number {qpn:#x} is already on the NIC"
            )));
        }
        // SAFETY: the builder's NIC is the queue's NIC: the persistent kernel that
        // executes its WQEs and writes its CQEs, nothing else; it claims under its own
        // executor and holds the capabilities in the `DeviceNic`, which borrows `qp` for
        // 'q and stops its kernel before it releases them.
        let reach = unsafe { QueueReach::of(qp, &self.executor) }?;
        let (sq, cqm) = (qp.sq_memory(), qp.cq_memory());
        let ring = cqm.ring().addr;
        // The descriptor's CQ mode uses the tables' encoding (ring 0, collapsed 1).
        let mode = match qp.device_queue().raw().cq_mode {
            cq_mode::COLLAPSED => cq_mode::COLLAPSED,
            _ => cq_mode::RING,
        };
        if let Some(j) = self
            .engines
            .iter()
            .enumerate()
            .find(|(j, e)| *j != engine.0 && e.cqs.iter().any(|c| c.ring == ring))
            .map(|(j, _)| j)
        {
            return Err(invalid(format!(
                "the CQ at {ring:#x} is served by engine {j}: its queues must share an engine"
            )));
        }
        // Scopes that do not order the WQEs before the doorbell record get a NIC that
        // reads the record only after a doorbell (their `unsafe` constructors' contract).
        let unordered_record = matches!(S::KIND, ScopeKind::GpuFence | ScopeKind::Unordered);
        let parts = self.engine_mut(engine)?;
        let cq = match parts.cqs.iter().position(|c| c.ring == ring) {
            Some(i) if parts.cqs[i].mode != mode => {
                return Err(invalid(format!(
                    "the CQ at {ring:#x} is shared by queues of different CQ modes"
                )))
            }
            Some(i) => i,
            None => {
                parts.cqs.push(NicCq {
                    ring,
                    dbrec: cqm.dbrec().addr,
                    entries: cqm.entries(),
                    log2_entries: cqm.entries().trailing_zeros(),
                    mode,
                    ..Default::default()
                });
                parts.cqs.len() - 1
            }
        };
        parts.queues.push(NicQueue {
            ring: sq.ring().addr,
            dbrec: sq.dbrec().addr,
            doorbell: sq.doorbell().addr,
            max_message_bytes: options.max_message_bytes,
            qpn,
            node: node.0,
            transport: if dc { transport::DC } else { transport::RC },
            log_wqebbs: sq.size().wqebbs().trailing_zeros(),
            cq: cq as u32,
            peer: NIC_NONE,
            state: if dc { state::READY } else { state::INIT },
            watch: if options.doorbell_only || unordered_record {
                watch::DOORBELL_ONLY
            } else {
                watch::POLL_RECORD
            },
            ..Default::default()
        });
        if !dc {
            parts.responders.push(NicResponder {
                number: qpn,
                node: node.0,
                cq: NIC_NONE,
                ..Default::default()
            });
        }
        self.reach.push(reach);
        Ok(DeviceQueueSlot {
            engine: engine.0,
            qpn,
        })
    }

    /// Takes the RC queue pair `qp` on `node`, served by `engine`; it executes nothing
    /// until [`connect`](Self::connect)ed. Its receive side takes no WRITE_WITH_IMM (no
    /// receive credits: receiver not ready).
    pub fn rc<S>(
        &mut self,
        engine: EngineId,
        node: DeviceNode,
        qp: &'q QueuePair<Rc, GpuPlaced, S>,
        options: QueueOptions,
    ) -> Result<DeviceQueueSlot, GpuError>
    where
        S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
    {
        self.add_queue(engine, node, qp, options, false)
    }

    /// Takes the DC initiator `qp` on `node`, served by `engine`: ready at once, reaching
    /// the DC targets of its engine by the address vectors of its WQEs.
    pub fn dci<Av, S>(
        &mut self,
        engine: EngineId,
        node: DeviceNode,
        qp: &'q QueuePair<Dc<Av>, GpuPlaced, S>,
        options: QueueOptions,
    ) -> Result<DeviceQueueSlot, GpuError>
    where
        Av: AvForm,
        Dc<Av>: TypedTransport,
        S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
    {
        self.add_queue(engine, node, qp, options, true)
    }

    /// Connects two RC queue pairs of one engine (`a == b`: a loopback). Both must be
    /// unconnected.
    pub fn connect(&mut self, a: DeviceQueueSlot, b: DeviceQueueSlot) -> Result<(), GpuError> {
        if a.engine != b.engine {
            return Err(invalid(format!(
                "queues {:#x} and {:#x} are served by different engines",
                a.qpn, b.qpn
            )));
        }
        let parts = self.engine_mut(EngineId(a.engine))?;
        for slot in [a, b] {
            let q = parts
                .queues
                .iter()
                .find(|q| q.qpn == slot.qpn)
                .ok_or_else(|| invalid(format!("no queue {:#x}", slot.qpn)))?;
            if q.transport != transport::RC {
                return Err(invalid(format!("queue {:#x} is not RC", slot.qpn)));
            }
            if q.peer != NIC_NONE {
                return Err(invalid(format!(
                    "queue {:#x} is already connected",
                    slot.qpn
                )));
            }
        }
        for (from, to) in [(a.qpn, b.qpn), (b.qpn, a.qpn)] {
            if let Some(q) = parts.queues.iter_mut().find(|q| q.qpn == from) {
                q.peer = to;
                q.state = state::READY;
            }
        }
        Ok(())
    }

    /// Connects the RC queue pair of `slot` to queue pair `remote` of another process, on
    /// `node` (that process's rank's node, whose regions were added with
    /// [`remote_region`](Self::remote_region)): the queue executes WQEs to it, writing the
    /// peer's memory directly, as an initiating NIC whose responder is reached over a wire.
    /// The peer's receive side is a record of this NIC (its number and node) with no
    /// receive credits and no CQ: a WRITE_WITH_IMM to it fails with "receiver not ready"
    /// (receives are not modelled across processes), and an error of the peer's queue
    /// pair, which its own process's NIC records, does not reach this NIC's record. The
    /// queue must be unconnected, `remote` a 24-bit number no queue or responder of this NIC
    /// has, and `node` not the queue's own node.
    pub fn connect_remote(
        &mut self,
        slot: DeviceQueueSlot,
        remote: u32,
        node: DeviceNode,
    ) -> Result<(), GpuError> {
        self.check_node(node)?;
        if remote == 0 || remote > 0xff_ffff {
            return Err(invalid(format!(
                "remote queue pair number {remote:#x}: not a 24-bit number (at most 0xffffff)"
            )));
        }
        if self.engines.iter().any(|e| {
            e.queues.iter().any(|q| q.qpn == remote)
                || e.responders.iter().any(|r| r.number == remote)
        }) {
            return Err(invalid(format!(
                "remote queue pair number {remote:#x} is already on the NIC"
            )));
        }
        let parts = self.engine_mut(EngineId(slot.engine))?;
        let q = parts
            .queues
            .iter_mut()
            .find(|q| q.qpn == slot.qpn)
            .ok_or_else(|| invalid(format!("no queue {:#x}", slot.qpn)))?;
        if q.transport != transport::RC {
            return Err(invalid(format!("queue {:#x} is not RC", slot.qpn)));
        }
        if q.peer != NIC_NONE {
            return Err(invalid(format!(
                "queue {:#x} is already connected",
                slot.qpn
            )));
        }
        if q.node == node.0 {
            return Err(invalid(format!(
                "queue {:#x}: its remote peer {remote:#x} is on its own node {}",
                slot.qpn, node.0
            )));
        }
        q.peer = remote;
        q.state = state::READY;
        parts.responders.push(NicResponder {
            number: remote,
            node: node.0,
            cq: NIC_NONE,
            ..Default::default()
        });
        Ok(())
    }

    /// Adds a DC target numbered `number` on `node` with access key `dc_key`, reached by
    /// the DC initiators of `engine`.
    pub fn dc_target(
        &mut self,
        engine: EngineId,
        node: DeviceNode,
        number: u32,
        dc_key: u64,
    ) -> Result<(), GpuError> {
        self.check_node(node)?;
        if number == 0 || number > 0xff_ffff || number == NIC_NONE {
            return Err(invalid(format!(
                "DC target number {number:#x}: not a 24-bit number"
            )));
        }
        if self.engines.iter().any(|e| {
            e.queues.iter().any(|q| q.qpn == number)
                || e.responders.iter().any(|r| r.number == number)
        }) {
            return Err(invalid(format!(
                "queue number {number:#x} is already on the NIC"
            )));
        }
        self.engine_mut(engine)?.responders.push(NicResponder {
            dc_key,
            number,
            node: node.0,
            is_dct: 1,
            cq: NIC_NONE,
            ..Default::default()
        });
        Ok(())
    }

    /// The queue record of `qpn`, on whichever engine serves it.
    fn queue_mut(&mut self, qpn: u32) -> Result<&mut NicQueue, GpuError> {
        self.engines
            .iter_mut()
            .flat_map(|e| e.queues.iter_mut())
            .find(|q| q.qpn == qpn)
            .ok_or_else(|| invalid(format!("no queue pair {qpn:#x} on this NIC")))
    }

    /// Makes the WQE of sequence number `wqe` (0: the first the queue pair executes) of
    /// queue pair `qpn` fail with an error CQE of `syndrome` and `vendor_syndrome`,
    /// whatever it holds (the CPU NIC's `Fabric::inject_fault`); the queue pair then
    /// flushes. One per queue pair: a second replaces the first. The engine's WQE counter
    /// never starts over, so it applies once, as the CPU NIC's (spent with its WQE) does.
    pub fn inject_fault(
        &mut self,
        qpn: u32,
        wqe: u64,
        syndrome: ibgda::cq::Syndrome,
        vendor_syndrome: u8,
    ) -> Result<(), GpuError> {
        let q = self.queue_mut(qpn)?;
        q.inject_at = wqe;
        q.inject_syndrome = syndrome as u32;
        q.inject_vendor = vendor_syndrome.into();
        Ok(())
    }

    /// Makes the WQE of sequence number `wqe` of queue pair `qpn` execute without its CQE
    /// (the CPU NIC's `Fabric::drop_completion`): a completion lost, which a device wait
    /// for it ends only at its deadline. One per queue pair: a second replaces the first.
    pub fn drop_completion(&mut self, qpn: u32, wqe: u64) -> Result<(), GpuError> {
        let q = self.queue_mut(qpn)?;
        q.drop_cqe_at = wqe;
        q.drop_cqe = 1;
        Ok(())
    }

    /// The tables of every engine, as [`build`](Self::build) will write them (copies, to
    /// inspect).
    pub fn tables(&self) -> Vec<NicTables> {
        self.engines
            .iter()
            .map(|e| {
                let mut queues = e.queues.clone();
                // One step serves queues in QPN order, as the CPU NIC does.
                queues.sort_by_key(|q| q.qpn);
                NicTables {
                    nodes: self.nodes.clone(),
                    regions: self.regions.clone(),
                    cqs: e.cqs.clone(),
                    responders: e.responders.clone(),
                    queues,
                }
            })
            .collect()
    }

    /// Allocates the engines' tables in device memory and returns the NIC, not running.
    pub fn build(self, gpu: &'q Gpu) -> Result<DeviceNic<'q>, GpuError> {
        if self.engines.is_empty() {
            return Err(invalid("a NIC needs an engine".into()));
        }
        let tables = self.tables();
        let reach = NicReach::new(self.data, self.reach);
        DeviceNic::from_tables(gpu, &tables, reach)
    }
}
