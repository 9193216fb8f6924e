//! The CUDA software NIC behind the control plane: devices ([`ibgda::nic::SoftGpuNic`],
//! the software NIC's PRM executor over GPU queue memory) whose queue pairs and
//! registrations the CUDA software NIC then executes.
//!
//! A [`CudaFabric`] is one fabric of such devices on one GPU: [`CudaFabric::open`] gives a
//! device (a node with a LID) to open with [`ibgda::nic::Device::open`], whose queue pairs
//! are created with [`CudaFabric::queue_memory`] as their allocator and connected by
//! their PRM commands, and whose GPU memory is registered with `RegisterMemory::Gpu`.
//! [`CudaFabric::device_nic`] then builds the CUDA software NIC over what the commands
//! made: a node per device, every registration with its keys, and the given queue pairs
//! (each checked to be the one a command created over exactly its memory, in RTS, with
//! its peer among them), each connected pair served by one engine. This is how the
//! control-plane suite and the device API run on the CUDA software NIC, with the same
//! commands as on a ConnectX.

use std::sync::Arc;

use ibgda::memory::DeviceBuffer;
use ibgda::nic::team::LocalBootstrap;
use ibgda::nic::{Device, GpuDoorbellMemory, GpuObjects, GpuQueuePair, NicError, SoftGpuNic};
use ibgda::order::{GpuThread, OrderingScope, ValidFor};
use ibgda::queue::{Gpu as GpuPlaced, ProducerStateMemory, QueuePair};
use ibgda::softnic::{Fabric, QpState};
use ibgda::wqe::{Qpn, Rc};

use std::collections::{HashMap, HashSet};

use crate::gpu::{Gpu, GpuError};
use crate::nic::CudaNicAccess;
use crate::softnic::builder::{DeviceNicBuilder, DeviceNode, EngineId, QueueOptions};
use crate::softnic::device::DeviceNic;

/// Doorbells in device memory of one GPU.
#[derive(Debug)]
struct Doorbells(Arc<Gpu>);

impl GpuDoorbellMemory for Doorbells {
    fn doorbell(&self) -> Result<DeviceBuffer, NicError> {
        self.0.device_buffer(8).map_err(|e| NicError::Unsupported {
            what: format!("a GPU doorbell: {e}"),
        })
    }
}

/// Devices on one GPU whose queues the CUDA software NIC executes (see the [module
/// documentation](crate::cudanic)).
#[derive(Debug)]
pub struct CudaFabric {
    gpu: Arc<Gpu>,
    fabric: Fabric,
    memory: CudaNicAccess,
}

impl CudaFabric {
    /// A fabric on `gpu`.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        Self {
            memory: CudaNicAccess::new(gpu.clone()),
            gpu,
            fabric: Fabric::new(),
        }
    }

    /// A fabric on `gpu` whose queue numbers start at `first`
    /// ([`Fabric::with_first_queue_number`]): a process that owns one rank gives each rank
    /// its own range
    /// ([`rank_queue_numbers`](crate::multiprocess::rank_queue_numbers)), so that a
    /// peer's queue pair number names one queue pair in this process's NIC tables.
    pub fn with_first_queue_number(gpu: Arc<Gpu>, first: Qpn) -> Self {
        Self {
            memory: CudaNicAccess::new(gpu.clone()),
            gpu,
            fabric: Fabric::with_first_queue_number(first),
        }
    }

    /// A new device: a node reached at `lid`.
    pub fn open(&self, lid: u16) -> Result<SoftGpuNic, NicError> {
        SoftGpuNic::open(&self.fabric, lid, Arc::new(Doorbells(self.gpu.clone())))
    }

    /// The allocator of GPU queue memory (`ProtectionDomain::create_rc_in`).
    pub fn queue_memory(&self) -> &CudaNicAccess {
        &self.memory
    }

    /// The device producer state of one GPU-posted queue pair (64 zeroed bytes of device
    /// memory), for `PendingRc::connect_device`.
    pub fn producer_state(&self) -> Result<ProducerStateMemory<GpuPlaced>, NicError> {
        let gpu_error = |e: GpuError| NicError::Unsupported {
            what: format!("GPU producer state: {e}"),
        };
        let buffer = self.gpu.device_buffer(64).map_err(gpu_error)?;
        ProducerStateMemory::from_device(buffer).map_err(|e| NicError::Unsupported {
            what: format!("GPU producer state: {e}"),
        })
    }

    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Runs `setup` for `ranks` ranks emulated on this GPU, each on a thread of its own
    /// with its rank of a [`LocalBootstrap`] group and a fresh device (a node with LID
    /// 1 + rank); returns what each returned, by rank. The same `setup` takes its ranks
    /// from processes with another [`Bootstrap`](ibgda::nic::team::Bootstrap) and device.
    pub fn ranks<T: Send>(
        &self,
        ranks: usize,
        setup: impl Fn(&LocalBootstrap, Device<SoftGpuNic>) -> T + Sync,
    ) -> Result<Vec<T>, NicError> {
        let lids: Vec<u16> = (0..ranks)
            .map(|r| {
                u16::try_from(r + 1).map_err(|_| NicError::OutOfRange {
                    what: "ranks (one LID each)",
                    value: r as u64,
                    max: u16::MAX.into(),
                })
            })
            .collect::<Result<_, _>>()?;
        let devices = lids
            .iter()
            .map(|&lid| Device::open(self.open(lid)?))
            .collect::<Result<Vec<_>, _>>()?;
        let group = LocalBootstrap::group(ranks);
        let setup = &setup;
        Ok(std::thread::scope(|s| {
            let jobs: Vec<_> = group
                .iter()
                .zip(devices)
                .map(|(b, d)| s.spawn(move || setup(b, d)))
                .collect();
            jobs.into_iter()
                .map(|j| j.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        }))
    }

    /// The CUDA software NIC over `devices` (their nodes and registrations, under the keys
    /// the control plane gave them) and `queues` (queue pairs of those devices, the peer of
    /// each among them), messages up to `max_message_bytes`, connected pairs spread over
    /// `engines` engines (blocks). Built by [`DeviceNicBuilder`], which claims every queue
    /// pair for the NIC's executor. Not started.
    pub fn device_nic<'q, S>(
        &self,
        gpu: &'q Gpu,
        devices: &[&SoftGpuNic],
        queues: &[&'q QueuePair<Rc, GpuPlaced, S>],
        engines: usize,
        max_message_bytes: u64,
    ) -> Result<DeviceNic<'q>, GpuError>
    where
        S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
    {
        nic_builder(devices, queues, engines, max_message_bytes)?.build(gpu)
    }
}

/// What [`CudaFabric::device_nic`] builds, before any GPU memory is allocated: the
/// builder with every node, registration (under its control-plane keys) and queue pair
/// added and every pair connected (its [`DeviceNicBuilder::tables`] can be read).
pub fn nic_builder<'q, S>(
    devices: &[&SoftGpuNic],
    queues: &[&'q QueuePair<Rc, GpuPlaced, S>],
    engines: usize,
    max_message_bytes: u64,
) -> Result<DeviceNicBuilder<'q>, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    {
        if engines == 0 {
            return Err(invalid("no engine".into()));
        }
        let snapshots: Vec<GpuObjects> = devices.iter().map(|d| d.gpu_objects()).collect();
        let mut nic = DeviceNicBuilder::new();
        let mut nodes = Vec::with_capacity(snapshots.len());
        for s in &snapshots {
            let node = nic.node(s.lid)?;
            for r in &s.regions {
                let offset = usize::try_from(r.addr - r.buffer.addr())
                    .map_err(|_| invalid(format!("region {:#x}", r.addr)))?;
                nic.region_with_keys(
                    node,
                    &r.buffer,
                    offset,
                    r.len as usize,
                    r.access,
                    (r.lkey, r.rkey),
                )?;
            }
            nodes.push(node);
        }
        let found = commanded(&snapshots, queues)?;
        // Connected pairs (a queue pair connected to itself is a pair of one), each on one
        // engine: a requester finds its responder in its own engine.
        let mut engine_of: HashMap<u32, EngineId> = HashMap::new();
        let mut made: Vec<EngineId> = Vec::new();
        let mut pairs = Vec::new();
        for (_, o, _) in &found {
            let peer = o.peer.unwrap_or(o.qpn);
            if engine_of.contains_key(&o.qpn) {
                continue;
            }
            let k = pairs.len();
            let engine = if k < engines {
                let e = nic.engine();
                made.push(e);
                e
            } else {
                made[k % engines]
            };
            engine_of.insert(o.qpn, engine);
            engine_of.insert(peer, engine);
            pairs.push((o.qpn, peer));
        }
        let options = QueueOptions {
            max_message_bytes,
            ..QueueOptions::default()
        };
        let mut slots = HashMap::new();
        for (node, o, qp) in &found {
            let slot = nic.rc(engine_of[&o.qpn], nodes[*node], qp, options)?;
            slots.insert(o.qpn, slot);
        }
        for (a, b) in pairs {
            nic.connect(slots[&a], slots[&b])?;
        }
        Ok(nic)
    }
}

/// A queue pair given to the NIC: the device (node) whose commands made it, what they
/// made, and the queue pair.
type Commanded<'q, S> = (usize, GpuQueuePair, &'q QueuePair<Rc, GpuPlaced, S>);

/// Each queue pair as its command made it: the device (node) it is on, over exactly its
/// memory, in RTS, given once.
fn made_by_commands<'a, 'q, S>(
    snapshots: &[GpuObjects],
    queues: &'a [&'q QueuePair<Rc, GpuPlaced, S>],
) -> Result<Vec<Commanded<'q, S>>, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let mut found: Vec<Commanded<'q, S>> = Vec::new();
    for qp in queues {
        let qpn = qp.device_qpn().get();
        let (node, object) = snapshots
            .iter()
            .enumerate()
            .find_map(|(n, s)| s.queue_pairs.iter().find(|o| o.qpn == qpn).map(|o| (n, *o)))
            .ok_or_else(|| {
                invalid(format!(
                    "queue pair {qpn:#x} was made by none of the devices"
                ))
            })?;
        let (sq, cq) = (qp.sq_memory(), qp.cq_memory());
        if object.ring != sq.ring()
            || object.dbrec != sq.dbrec()
            || object.doorbell != sq.doorbell().addr
            || object.cq.ring != cq.ring()
            || object.cq.dbrec != cq.dbrec()
        {
            return Err(invalid(format!(
                "queue pair {qpn:#x} is not over the memory its commands named"
            )));
        }
        if object.state != QpState::ReadyToSend {
            return Err(invalid(format!(
                "queue pair {qpn:#x} is in {:?}, not RTS",
                object.state
            )));
        }
        if found.iter().any(|(_, o, _)| o.qpn == qpn) {
            return Err(invalid(format!("queue pair {qpn:#x} given twice")));
        }
        found.push((node, object, *qp));
    }
    Ok(found)
}

/// As [`made_by_commands`], every queue pair's peer among them too.
fn commanded<'q, S>(
    snapshots: &[GpuObjects],
    queues: &[&'q QueuePair<Rc, GpuPlaced, S>],
) -> Result<Vec<Commanded<'q, S>>, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let found = made_by_commands(snapshots, queues)?;
    for (_, o, _) in &found {
        let peer = o
            .peer
            .ok_or_else(|| invalid(format!("queue pair {:#x} is not connected", o.qpn)))?;
        if !found.iter().any(|(_, p, _)| p.qpn == peer) {
            return Err(invalid(format!(
                "queue pair {:#x}'s peer {peer:#x} is not among the queue pairs given",
                o.qpn
            )));
        }
    }
    Ok(found)
}

fn invalid(what: String) -> GpuError {
    GpuError::Invalid(what)
}

/// The CUDA software NIC of a process that owns one rank of a job whose other ranks are
/// processes of their own (see [`crate::multiprocess`]), before any GPU memory is
/// allocated: `device`'s node, registrations (under its control-plane keys) and the given
/// queue pairs, each checked as [`nic_builder`] checks them; every rank of `remotes` a node
/// with its registrations over this process's mappings of them
/// ([`DeviceNicBuilder::remote_region`]). A queue pair whose peer is one of `queues` (a
/// queue pair connected to itself, or to another of this device) is a local pair, as in
/// [`nic_builder`]; any other is connected to its peer on the rank whose LID its INIT2RTR
/// named ([`DeviceNicBuilder::connect_remote`]), which must list that queue pair, in RTS,
/// connected back to it at this device's LID. The initiator's NIC writes the peer's memory
/// directly: each process's NIC executes its own queue pairs and nothing else. Connected
/// pairs and remotely connected queue pairs are spread over `engines` engines.
pub fn process_nic_builder<'q, S>(
    device: &SoftGpuNic,
    queues: &[&'q QueuePair<Rc, GpuPlaced, S>],
    remotes: &[crate::multiprocess::RemoteRank],
    engines: usize,
    max_message_bytes: u64,
) -> Result<DeviceNicBuilder<'q>, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    if engines == 0 {
        return Err(invalid("no engine".into()));
    }
    let objects = device.gpu_objects();
    let mut nic = DeviceNicBuilder::new();
    let node = nic.node(objects.lid)?;
    for r in &objects.regions {
        let offset = usize::try_from(r.addr - r.buffer.addr())
            .map_err(|_| invalid(format!("region {:#x}", r.addr)))?;
        nic.region_with_keys(
            node,
            &r.buffer,
            offset,
            r.len as usize,
            r.access,
            (r.lkey, r.rkey),
        )?;
    }
    let mut remote_nodes = Vec::with_capacity(remotes.len());
    for remote in remotes {
        if remote.lid == objects.lid {
            return Err(invalid(format!(
                "rank {} has this device's LID {:#06x}",
                remote.rank, remote.lid
            )));
        }
        let n = nic.node(remote.lid)?;
        for r in &remote.regions {
            let rec = &r.record;
            let access = ibgda::softnic::Access::from_bits(rec.access).ok_or_else(|| {
                invalid(format!(
                    "rank {}: region {:#x} has access bits {:#x}",
                    remote.rank, rec.addr, rec.access
                ))
            })?;
            let (offset, len) = (usize::try_from(rec.offset), usize::try_from(rec.len));
            let (Ok(offset), Ok(len)) = (offset, len) else {
                return Err(invalid(format!(
                    "rank {}: region of {} bytes at offset {:#x}",
                    remote.rank, rec.len, rec.offset
                )));
            };
            nic.remote_region(
                n,
                &r.buffer,
                offset,
                len,
                access,
                rec.addr,
                (ibgda::wqe::LKey(rec.lkey), ibgda::wqe::RKey(rec.rkey)),
            )?;
        }
        remote_nodes.push(n);
    }
    let found = made_by_commands(std::slice::from_ref(&objects), queues)?;
    // Local pairs (both queue pairs here) and remote peers, each on one engine.
    enum Peer {
        Local(u32),
        Remote { qpn: u32, node: DeviceNode },
    }
    let mut work: Vec<(u32, Peer)> = Vec::new();
    let mut placed: HashSet<u32> = HashSet::new();
    for (_, o, _) in &found {
        if placed.contains(&o.qpn) {
            continue;
        }
        let peer = o
            .peer
            .ok_or_else(|| invalid(format!("queue pair {:#x} is not connected", o.qpn)))?;
        let local = found.iter().any(|(_, p, _)| p.qpn == peer)
            && o.peer_lid.is_none_or(|l| l == objects.lid);
        if local {
            placed.insert(o.qpn);
            placed.insert(peer);
            work.push((o.qpn, Peer::Local(peer)));
            continue;
        }
        let lid = o.peer_lid.ok_or_else(|| {
            invalid(format!(
                "queue pair {:#x}'s peer {peer:#x} was named by no LID",
                o.qpn
            ))
        })?;
        let (k, remote) = remotes
            .iter()
            .enumerate()
            .find(|(_, r)| r.lid == lid)
            .ok_or_else(|| {
                invalid(format!(
                    "queue pair {:#x}'s peer {peer:#x} at LID {lid:#06x} is on no rank given",
                    o.qpn
                ))
            })?;
        let theirs = remote
            .queue_pairs
            .iter()
            .find(|q| q.qpn == peer)
            .ok_or_else(|| {
                invalid(format!(
                    "queue pair {:#x}'s peer {peer:#x} is not among rank {}'s queue pairs",
                    o.qpn, remote.rank
                ))
            })?;
        if theirs.peer != Some(o.qpn) || theirs.peer_lid != Some(objects.lid) || !theirs.ready {
            return Err(invalid(format!(
                "rank {}'s queue pair {peer:#x} is not connected back to queue pair {:#x} at \
                 LID {:#06x} in RTS (its peer {:?} at LID {:?}, ready {})",
                remote.rank, o.qpn, objects.lid, theirs.peer, theirs.peer_lid, theirs.ready
            )));
        }
        placed.insert(o.qpn);
        work.push((
            o.qpn,
            Peer::Remote {
                qpn: peer,
                node: remote_nodes[k],
            },
        ));
    }
    let mut engine_of: HashMap<u32, EngineId> = HashMap::new();
    let mut made: Vec<EngineId> = Vec::new();
    for (k, (qpn, peer)) in work.iter().enumerate() {
        let engine = if k < engines {
            let e = nic.engine();
            made.push(e);
            e
        } else {
            made[k % engines]
        };
        engine_of.insert(*qpn, engine);
        if let Peer::Local(p) = peer {
            engine_of.insert(*p, engine);
        }
    }
    let options = QueueOptions {
        max_message_bytes,
        ..QueueOptions::default()
    };
    let mut slots = HashMap::new();
    for (_, o, qp) in &found {
        let slot = nic.rc(engine_of[&o.qpn], node, qp, options)?;
        slots.insert(o.qpn, slot);
    }
    for (qpn, peer) in work {
        match peer {
            Peer::Local(p) => nic.connect(slots[&qpn], slots[&p])?,
            Peer::Remote { qpn: p, node } => nic.connect_remote(slots[&qpn], p, node)?,
        }
    }
    Ok(nic)
}
