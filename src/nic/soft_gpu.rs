//! The software NIC as a control-plane backend for GPU-placed queues: the same PRM
//! executor, object tables and QP state machine as [`SoftNic`] (this backend wraps one),
//! with the queues' memory, doorbells and data registrations in GPU memory, for a NIC
//! that executes WQEs on the GPU (the kernels crate's CUDA software NIC).
//!
//! The executor needs host buffers for the UMEMs it checks commands against; each GPU
//! queue buffer registered as UMEM gets a host *shadow* of its exact length, registered
//! with the wrapped [`SoftNic`], so that CREATE_CQ and CREATE_QP are decoded, checked and
//! refused with the same rules and syndromes, and their objects (numbers, RESET -> INIT
//! -> RTR -> RTS, peers) live in the same fabric. The shadows are never executed: no
//! doorbell of theirs is ever rung, the fabric's CPU engine finds nothing to do. What the
//! commands made is read back with [`SoftGpuNic::gpu_objects`]: each queue pair and CQ
//! with the GPU memory its UMEMs stand for, its state and its peer, and every data
//! registration with its keys, for the GPU engine's tables.
//!
//! Data registrations are GPU memory only (the GPU engine reaches nothing else); their
//! keys are this backend's own.

use core::fmt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use super::backend::{
    Backend, MemoryAccess, MemoryRegistration, ProtectionDomainId, QueueMemoryRef, RegisterMemory,
    UarPage, UmemId,
};
use super::caps::{Gid, PortAttributes};
use super::error::NicError;
use super::prm::{Command, CreateCq, CreateQp, ServiceType};
use super::soft::{SoftNic, SoftObject, SoftPd, SoftSrq, SoftUar, SoftUmem};
use crate::memory::{DeviceBuffer, DmaBuffer};
use crate::queue::executor::ExecutorCell;
use crate::queue::{
    ClaimTarget, GpuDoorbell, HostDoorbell, PlacementKind, QueueBufferSpan, Registered,
};
use crate::softnic::{Fabric, QpState};
use crate::wqe::segment::AddressVectorSegment;
use crate::wqe::{LKey, Qpn, RKey};

/// Where a [`SoftGpuNic`] gets the device memory of its doorbells: 8 zeroed bytes of GPU
/// memory per UAR page, which GPU producers store to and the GPU engine watches.
///
/// Each doorbell is handed over by value, so the allocator keeps no handle to it (one
/// that could write doorbells no producer rang). The backend then shares it, and only as
/// a doorbell is shared on hardware: between the UAR page it belongs to (and the device's
/// table of pages, which the GPU engine's tables are built from) and the queue pair the
/// control plane rings through that page (one dedicated page per queue pair); GPU
/// producers store to it and the NIC reads it, which is what a doorbell is for.
pub trait GpuDoorbellMemory: Send + Sync + fmt::Debug {
    /// A fresh doorbell, handed over.
    fn doorbell(&self) -> Result<DeviceBuffer, NicError>;
}

/// A completion queue a command made over GPU memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuCq {
    /// Its number.
    pub cqn: u32,
    /// The CQE ring.
    pub ring: QueueBufferSpan,
    /// The doorbell record (consumer index).
    pub dbrec: QueueBufferSpan,
    /// Entries.
    pub entries: u32,
    /// Collapsed (every CQE at entry 0, overrun ignored) rather than a ring.
    pub collapsed: bool,
}

/// An RC queue pair a command made over GPU memory, as the fabric's state machine has
/// it now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuQueuePair {
    /// Its number.
    pub qpn: u32,
    /// The LID of its node.
    pub lid: u16,
    /// Its state (RESET, INIT, RTR, RTS) after the commands it was sent.
    pub state: QpState,
    /// The queue pair INIT2RTR connected it to.
    pub peer: Option<u32>,
    /// The LID INIT2RTR named the peer at.
    pub peer_lid: Option<u16>,
    /// The send ring.
    pub ring: QueueBufferSpan,
    /// The send doorbell record.
    pub dbrec: QueueBufferSpan,
    /// The doorbell (its UAR page's device memory).
    pub doorbell: u64,
    /// log2 of the ring's WQEBBs.
    pub log_wqebbs: u32,
    /// Its send CQ.
    pub cq: GpuCq,
}

/// A registration of GPU memory, with its keys.
#[derive(Clone, Debug)]
pub struct GpuRegion {
    /// The buffer (the GPU engine keeps a reference to it).
    pub buffer: Arc<DeviceBuffer>,
    /// The device address of its first byte.
    pub addr: u64,
    /// Its length.
    pub len: u64,
    /// Local key.
    pub lkey: LKey,
    /// Remote key.
    pub rkey: RKey,
    /// Access rights.
    pub access: MemoryAccess,
}

/// What a [`SoftGpuNic`]'s commands and registrations made, for the GPU engine.
#[derive(Clone, Debug, Default)]
pub struct GpuObjects {
    /// The LID of the device's node.
    pub lid: u16,
    /// Every RC queue pair.
    pub queue_pairs: Vec<GpuQueuePair>,
    /// Every live data registration.
    pub regions: Vec<GpuRegion>,
}

#[derive(Debug, Default)]
struct GpuTables {
    /// UMEM id -> the GPU memory its shadow stands for.
    umems: HashMap<u32, QueueBufferSpan>,
    /// UAR page -> its doorbell.
    uars: HashMap<u32, Arc<DeviceBuffer>>,
    cqs: HashMap<u32, GpuCq>,
    /// QPN -> (ring, record, doorbell, log size, send CQ).
    qps: HashMap<u32, (QueueBufferSpan, QueueBufferSpan, u64, u32, u32)>,
    regions: Vec<Weak<RegionInner>>,
    next_key: u32,
}

#[derive(Debug, Default)]
struct SharedGpuTables(Mutex<GpuTables>);

impl SharedGpuTables {
    fn lock(&self) -> MutexGuard<'_, GpuTables> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A software mlx5 device whose queues, doorbells and data live in GPU memory, for a NIC
/// that executes WQEs on the GPU (the kernels crate's CUDA software NIC).
///
/// It runs the PRM executor, object tables and QP state machine of the [`SoftNic`] it
/// wraps: each GPU queue buffer registered as UMEM gets a host *shadow* of its exact
/// length, registered with the wrapped NIC, so that CREATE_CQ and CREATE_QP are decoded,
/// checked and refused with the same rules and syndromes, and their objects (numbers,
/// RESET -> INIT -> RTR -> RTS, peers) live in the same fabric; the shadows are never
/// executed. [`SoftGpuNic::gpu_objects`] reads back what the commands made, with the GPU
/// memory each UMEM stands for, for the GPU engine's tables. The GPU queue itself is
/// claimed by the engine built over it. Data registrations are GPU memory only, with this
/// backend's own keys.
#[derive(Debug)]
pub struct SoftGpuNic {
    soft: SoftNic,
    doorbells: Arc<dyn GpuDoorbellMemory>,
    tables: Arc<SharedGpuTables>,
}

impl SoftGpuNic {
    /// A new device on `fabric` (a node with LID `lid`, as [`SoftNic::open`]), its
    /// doorbells from `doorbells`.
    pub fn open(
        fabric: &Fabric,
        lid: u16,
        doorbells: Arc<dyn GpuDoorbellMemory>,
    ) -> Result<Self, NicError> {
        let soft = SoftNic::open(fabric, lid)?;
        let tables = SharedGpuTables(Mutex::new(GpuTables {
            // Keys of different nodes differ (the GPU engine checks the node too).
            next_key: (u32::from(lid) << 16) | 0x100,
            ..GpuTables::default()
        }));
        Ok(Self {
            soft,
            doorbells,
            tables: Arc::new(tables),
        })
    }

    /// The wrapped software NIC (its fabric, node, executed commands).
    pub fn soft(&self) -> &SoftNic {
        &self.soft
    }

    /// Every RC queue pair and data registration made so far, with the state the
    /// commands left the queue pairs in.
    pub fn gpu_objects(&self) -> GpuObjects {
        let t = self.tables.lock();
        let fabric = self.soft.fabric();
        let lid = self.soft.port_attributes().lid;
        let mut queue_pairs: Vec<GpuQueuePair> = t
            .qps
            .iter()
            .filter_map(|(&qpn, &(ring, dbrec, doorbell, log_wqebbs, cqn))| {
                let number = Qpn::new(qpn).ok()?;
                let status = fabric.qp_status(number)?;
                let (peer, peer_lid) = match fabric.rc_peer(number) {
                    Some((p, l)) => (Some(p), l),
                    None => (None, None),
                };
                Some(GpuQueuePair {
                    qpn,
                    lid,
                    state: status.state,
                    peer,
                    peer_lid,
                    ring,
                    dbrec,
                    doorbell,
                    log_wqebbs,
                    cq: *t.cqs.get(&cqn)?,
                })
            })
            .collect();
        queue_pairs.sort_by_key(|q| q.qpn);
        let regions = t
            .regions
            .iter()
            .filter_map(Weak::upgrade)
            .map(|r| GpuRegion {
                buffer: r.buffer.clone(),
                addr: r.addr,
                len: r.len,
                lkey: r.lkey,
                rkey: r.rkey,
                access: r.access,
            })
            .collect();
        GpuObjects {
            lid,
            queue_pairs,
            regions,
        }
    }

    fn umem_span(&self, id: u32) -> Option<QueueBufferSpan> {
        self.tables.lock().umems.get(&id).copied()
    }

    /// Records the GPU memory of what a successful command created.
    fn record(&self, made: SoftObject, input: &[u8]) -> Result<(), NicError> {
        match made {
            SoftObject::Cq(cqn) => {
                let c = CreateCq::decode(input)?;
                let (Some(ring), Some(dbrec)) = (
                    self.umem_span(c.cq_umem_id),
                    self.umem_span(c.cqc.dbr_umem_id),
                ) else {
                    return Err(unsupported("a CQ over host memory"));
                };
                self.tables.lock().cqs.insert(
                    cqn,
                    GpuCq {
                        cqn,
                        ring,
                        dbrec,
                        entries: 1 << c.cqc.log_cq_size,
                        collapsed: c.cqc.collapsed,
                    },
                );
            }
            SoftObject::Qp(qpn) => {
                let q = CreateQp::decode(input)?;
                if q.qpc.service_type != ServiceType::Rc {
                    return Err(unsupported("DC initiators"));
                }
                let (Some(ring), Some(dbrec)) = (
                    self.umem_span(q.wq_umem_id),
                    self.umem_span(q.qpc.dbr_umem_id),
                ) else {
                    return Err(unsupported("a queue pair over host memory"));
                };
                let mut t = self.tables.lock();
                let doorbell = t
                    .uars
                    .get(&q.qpc.uar_page)
                    .map(|d| d.addr())
                    .ok_or_else(|| unsupported("a UAR page this device did not allocate"))?;
                t.qps.insert(
                    qpn,
                    (
                        ring,
                        dbrec,
                        doorbell,
                        q.qpc.log_sq_size.into(),
                        q.qpc.cqn_snd,
                    ),
                );
            }
            SoftObject::Dct(_) => return Err(unsupported("DC targets")),
        }
        Ok(())
    }
}

fn unsupported(what: &str) -> NicError {
    NicError::Unsupported {
        what: format!("{what} on the GPU software NIC backend"),
    }
}

/// A UMEM registration of GPU queue memory: the executor's host shadow (with a claim
/// record of its own, which the fabric's executor claims) and its id.
#[derive(Debug)]
pub struct SoftGpuUmem {
    umem: SoftUmem,
    _shadow: Arc<DmaBuffer>,
    _shadow_claims: Arc<ExecutorCell>,
    tables: Weak<SharedGpuTables>,
}

impl UmemId for SoftGpuUmem {
    fn umem_id(&self) -> u32 {
        self.umem.umem_id()
    }
}

impl Drop for SoftGpuUmem {
    fn drop(&mut self) {
        if let Some(t) = self.tables.upgrade() {
            t.lock().umems.remove(&self.umem.umem_id());
        }
    }
}

/// A UAR page of a [`SoftGpuNic`]: its doorbell is GPU memory.
#[derive(Debug)]
pub struct SoftGpuUar {
    uar: SoftUar,
    doorbell: Arc<DeviceBuffer>,
    tables: Weak<SharedGpuTables>,
}

impl UarPage for SoftGpuUar {
    fn page_id(&self) -> u32 {
        self.uar.page_id()
    }
    fn host_doorbell(&self) -> Result<HostDoorbell, NicError> {
        Err(unsupported("host-placed queues"))
    }
    fn gpu_doorbell(&self) -> Result<GpuDoorbell, NicError> {
        Ok(GpuDoorbell::memory(self.doorbell.clone()))
    }
}

impl Drop for SoftGpuUar {
    fn drop(&mut self) {
        if let Some(t) = self.tables.upgrade() {
            t.lock().uars.remove(&self.uar.page_id());
        }
    }
}

#[derive(Debug)]
struct RegionInner {
    buffer: Arc<DeviceBuffer>,
    addr: u64,
    len: u64,
    lkey: LKey,
    rkey: RKey,
    access: MemoryAccess,
}

/// A registration of GPU memory on a [`SoftGpuNic`]. It keeps the buffer alive; dropping
/// it deregisters (a GPU engine built afterwards no longer has it).
#[derive(Debug)]
pub struct SoftGpuRegion {
    inner: Arc<RegionInner>,
}

// SAFETY: the region keeps its buffer (an `Arc<DeviceBuffer>`) allocated for as long as it
// lives, and the GPU engine built over this backend's registrations accepts `lkey` for
// exactly the bytes `covers` accepts (the region's range, recorded with its keys).
unsafe impl Registered for SoftGpuRegion {
    fn lkey(&self) -> LKey {
        self.inner.lkey
    }
    fn covers(&self, addr: u64, len: u64) -> bool {
        addr >= self.inner.addr
            && len <= self.inner.len
            && addr - self.inner.addr <= self.inner.len - len
    }
}

impl MemoryRegistration for SoftGpuRegion {
    fn rkey(&self) -> RKey {
        self.inner.rkey
    }
    fn addr(&self) -> u64 {
        self.inner.addr
    }
    fn len(&self) -> usize {
        // Registered from a `usize` length.
        self.inner.len as usize
    }
}

impl Backend for SoftGpuNic {
    type Pd = SoftPd;
    type Umem = SoftGpuUmem;
    type Uar = SoftGpuUar;
    type Srq = SoftSrq;
    type Object = SoftObject;
    type Mr = SoftGpuRegion;

    fn name(&self) -> &str {
        Backend::name(&self.soft)
    }

    // SAFETY (of the four command methods): the wrapped software NIC's command methods
    // are safe (they name queue memory only by its own UMEM ids, whose buffers are host
    // shadows it owns); recording reads only the command bytes.
    unsafe fn general_command(&self, input: &[u8], output: &mut [u8]) -> Result<(), NicError> {
        self.soft.general_command(input, output)
    }

    unsafe fn create_object(
        &self,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<SoftObject, NicError> {
        let made = self.soft.create_object(input, output)?;
        if let Err(e) = self.record(made, input) {
            // Not an object this backend can serve: undone, as a refused command.
            let destroy = match made {
                SoftObject::Cq(cqn) => super::command::destroy_cq(cqn),
                SoftObject::Qp(qpn) => super::command::destroy_qp(qpn),
                SoftObject::Dct(dct) => super::command::destroy_dct(dct),
            };
            if let Ok(bytes) = destroy {
                let _ = self.soft.destroy_object(made, &bytes);
            }
            return Err(e);
        }
        Ok(made)
    }

    unsafe fn modify_object(
        &self,
        object: &SoftObject,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), NicError> {
        self.soft.modify_object(object, input, output)
    }

    unsafe fn destroy_object(&self, object: SoftObject, input: &[u8]) -> Result<(), NicError> {
        self.soft.destroy_object(object, input)?;
        let mut t = self.tables.lock();
        match object {
            SoftObject::Cq(cqn) => {
                t.cqs.remove(&cqn);
            }
            SoftObject::Qp(qpn) => {
                t.qps.remove(&qpn);
            }
            SoftObject::Dct(_) => {}
        }
        Ok(())
    }

    fn query_port(&self, port: u8) -> Result<PortAttributes, NicError> {
        self.soft.query_port(port)
    }

    fn query_eqn(&self, vector: u32) -> Result<u32, NicError> {
        self.soft.query_eqn(vector)
    }

    fn alloc_pd(&self) -> Result<SoftPd, NicError> {
        self.soft.alloc_pd()
    }

    fn create_srq(&self, pd: &SoftPd, max_wr: u32) -> Result<SoftSrq, NicError> {
        self.soft.create_srq(pd, max_wr)
    }

    fn post_srq_receives(&self, srq: &SoftSrq, count: u32) -> Result<(), NicError> {
        self.soft.post_srq_receives(srq, count)
    }

    fn alloc_uar(&self) -> Result<SoftGpuUar, NicError> {
        let doorbell = Arc::new(self.doorbells.doorbell()?);
        if doorbell.len() < 8 {
            return Err(NicError::OutOfRange {
                what: "GPU doorbell bytes",
                value: doorbell.len() as u64,
                max: 8,
            });
        }
        let uar = self.soft.alloc_uar()?;
        self.tables
            .lock()
            .uars
            .insert(uar.page_id(), doorbell.clone());
        Ok(SoftGpuUar {
            uar,
            doorbell,
            tables: Arc::downgrade(&self.tables),
        })
    }

    fn register_umem(&self, memory: QueueMemoryRef<'_>) -> Result<SoftGpuUmem, NicError> {
        if memory.placement() != PlacementKind::Gpu {
            return Err(unsupported("host queue memory"));
        }
        // The GPU queue itself is claimed by the engine that executes it (the GPU NIC
        // built over these objects); the executor of the commands claims only its shadow.
        let span = memory.span();
        let shadow = Arc::new(DmaBuffer::zeroed(span.len, 64)?);
        let claims = Arc::new(ExecutorCell::default());
        let target = ClaimTarget::new(&claims, QueueBufferSpan::of(&shadow));
        let umem = self
            .soft
            .register_umem(QueueMemoryRef::host(&shadow, target))?;
        self.tables.lock().umems.insert(umem.umem_id(), span);
        Ok(SoftGpuUmem {
            umem,
            _shadow: shadow,
            _shadow_claims: claims,
            tables: Arc::downgrade(&self.tables),
        })
    }

    fn address_vector(
        &self,
        pd: &SoftPd,
        port: &PortAttributes,
        source_gid_index: u8,
        gid: Gid,
    ) -> Result<AddressVectorSegment, NicError> {
        self.soft.address_vector(pd, port, source_gid_index, gid)
    }

    fn register_memory(
        &self,
        pd: &SoftPd,
        memory: RegisterMemory,
        access: MemoryAccess,
    ) -> Result<SoftGpuRegion, NicError> {
        if !self.soft.has_pd(pd.pdn()) {
            return Err(NicError::OutOfRange {
                what: "protection domain number (not allocated on this device)",
                value: pd.pdn().into(),
                max: 0,
            });
        }
        let RegisterMemory::Gpu {
            buffer,
            offset,
            len,
        } = memory
        else {
            return Err(unsupported("host memory registration"));
        };
        let in_bounds = len > 0 && offset.checked_add(len).is_some_and(|e| e <= buffer.len());
        if !in_bounds {
            return Err(NicError::Memory(crate::memory::DmaError::OutOfBounds {
                offset,
                len,
                buffer_len: buffer.len(),
            }));
        }
        if access.intersects(MemoryAccess::REMOTE_WRITE | MemoryAccess::REMOTE_ATOMIC)
            && !access.contains(MemoryAccess::LOCAL_WRITE)
        {
            return Err(NicError::SoftNic(
                crate::softnic::SoftNicError::InvalidAccess { access },
            ));
        }
        let mut t = self.tables.lock();
        let lkey = t.next_key;
        t.next_key = t.next_key.wrapping_add(2);
        let inner = Arc::new(RegionInner {
            addr: buffer.addr() + offset as u64,
            buffer,
            len: len as u64,
            lkey: LKey(lkey),
            rkey: RKey(lkey + 1),
            access,
        });
        t.regions.retain(|r| r.strong_count() > 0);
        t.regions.push(Arc::downgrade(&inner));
        Ok(SoftGpuRegion { inner })
    }
}
