//! The mlx5 hardware implementation of the control plane's [`Backend`]: the command bytes
//! the control plane encodes go to the firmware through DEVX, queue memory is registered
//! as UMEM (GPU memory by DMA-BUF, else peer memory), UAR pages are allocated with DEVX and
//! their doorbell mapped into the GPU on demand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::devx::{DevxObject, Uar, Umem};
use super::error::Mlx5Error;
use super::verbs::{
    GpuPath, LinkLayer as VerbsLinkLayer, MemoryRegion, ProtectionDomain, SharedReceiveQueue,
};
use super::Mlx5Device;
use crate::nic::gpu_access::{DmaBufExportError, DmaBufExporter, DoorbellMapping, IoMemoryMapper};
use crate::nic::{
    Backend, BackendError, BackendObject, Gid, GidEntry, GidType, LinkLayer, MemoryAccess,
    MemoryRegistration, Mtu, NicError, PortAttributes, ProtectionDomainId, QueueMemoryRef,
    RegisterMemory, SharedReceiveQueueId, UarPage, UmemId,
};
use crate::queue::executor::ExecutorClaim;
use crate::queue::{Executor, GpuDoorbell, HostDoorbell, QueueBufferSpan};
use crate::wqe::segment::AddressVectorSegment;
use crate::wqe::RKey;
use zerocopy::FromBytes;

/// A missing device is [`NicError::NoDevice`] (what the integration suite reports its
/// hardware cases ignored with) and a failed command its typed [`NicError::Command`];
/// every other error keeps its type as [`NicError::Backend`] (`downcast_ref::<Mlx5Error>`),
/// marked unsupported when the machine lacks something (a library entry point, DEVX, a GPU
/// mapping, a capability) rather than an operation failing.
impl From<Mlx5Error> for NicError {
    fn from(e: Mlx5Error) -> Self {
        match e {
            Mlx5Error::NoDevice { .. }
            | Mlx5Error::LibraryMissing { .. }
            | Mlx5Error::LibraryMismatch { .. } => Self::NoDevice {
                reason: e.to_string(),
            },
            Mlx5Error::Command { error, .. } => Self::Command(error),
            Mlx5Error::Verbs { .. }
            | Mlx5Error::DevxCall { .. }
            | Mlx5Error::UmemRegistration { .. }
            | Mlx5Error::UarAllocation { .. }
            | Mlx5Error::Gid { .. }
            | Mlx5Error::AddressHandle { .. }
            | Mlx5Error::FirstWqeFailed { .. }
            | Mlx5Error::OutOfRange { .. }
            | Mlx5Error::CommandBuffer { .. } => Self::Backend(BackendError::failed(e)),
            other => Self::Backend(BackendError::unsupported(other)),
        }
    }
}

/// The mlx5 hardware backend: an open device and, for GPU-placed queues, the GPU access
/// (DMA-BUF export and I/O mapping, implemented by the CUDA side).
pub struct Mlx5Backend {
    device: Mlx5Device,
    dmabuf: Option<Arc<dyn DmaBufExporter>>,
    io_mapper: Option<Arc<dyn IoMemoryMapper>>,
    /// The NIC's identity: every queue memory registered as UMEM is claimed under it.
    executor: Executor,
    /// Queue memory registered as UMEM now, which data registrations may not overlap.
    queue_memory: Arc<QueueSpans>,
    /// The doorbells mapped into the GPU, by registration.
    mappings: Arc<MappingCounts>,
    /// The queue memory registered as UMEM, by path.
    umems: UmemCounts,
}

/// How many UMEMs of queue memory a backend registered over its life, by the path each
/// took: [`Mlx5Backend::umem_paths`]. GPU queue memory goes by DMA-BUF when the backend has
/// an exporter and the driver takes it, else through the peer-memory module: a caller that
/// expects DMA-BUF (no `nvidia_peermem` loaded, or a test) can tell a fallback from this.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UmemPaths {
    /// Host memory.
    pub host: u64,
    /// GPU memory by DMA-BUF.
    pub dmabuf: u64,
    /// GPU memory through the peer-memory module, by GPU address.
    pub peer_memory: u64,
}

#[derive(Debug, Default)]
struct UmemCounts {
    host: AtomicU64,
    dmabuf: AtomicU64,
    peer_memory: AtomicU64,
    /// Why DMA-BUF was not used, for the first GPU UMEM that went through peer memory
    /// although an exporter was given.
    first_fallback: OnceLock<DmaBufExportError>,
}

/// The spans of the queue memory a backend has registered as UMEM, by UMEM id.
#[derive(Debug, Default)]
struct QueueSpans(Mutex<Vec<(u32, QueueBufferSpan)>>);

impl QueueSpans {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u32, QueueBufferSpan)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Refuses `[addr, addr + len)` if it shares a byte with registered queue memory.
    fn check_disjoint(&self, addr: u64, len: u64) -> Result<(), NicError> {
        match self.lock().iter().find(|(_, q)| q.overlaps(addr, len)) {
            Some(&(_, queue)) => Err(NicError::OverlapsQueueMemory { addr, len, queue }),
            None => Ok(()),
        }
    }
}

/// A UMEM registration of queue memory on the mlx5 backend: deregistered first, then the
/// span forgotten and the executor claim on the queue released.
#[derive(Debug)]
pub struct Mlx5Umem {
    umem: Umem,
    spans: Arc<QueueSpans>,
    _claim: ExecutorClaim,
}

impl UmemId for Mlx5Umem {
    fn umem_id(&self) -> u32 {
        self.umem.umem_id()
    }
}

impl Drop for Mlx5Umem {
    fn drop(&mut self) {
        let id = self.umem.umem_id();
        self.spans.lock().retain(|&(umem, _)| umem != id);
    }
}

impl core::fmt::Debug for Mlx5Backend {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Mlx5Backend")
            .field("device", &self.device.name())
            .field("dmabuf", &self.dmabuf.is_some())
            .field("gpu_doorbells", &self.io_mapper.is_some())
            .finish()
    }
}

impl Mlx5Backend {
    /// A backend on an open device, for host-placed queues.
    pub fn new(device: Mlx5Device) -> Self {
        let executor = Executor::new(device.name());
        Self {
            device,
            dmabuf: None,
            io_mapper: None,
            executor,
            queue_memory: Arc::default(),
            mappings: Arc::default(),
            umems: UmemCounts::default(),
        }
    }

    /// Opens the device named by `IBGDA_NIC` (or the first mlx5 device).
    pub fn from_env() -> Result<Self, Mlx5Error> {
        Ok(Self::new(Mlx5Device::from_env()?))
    }

    /// Adds GPU access: queue memory in the GPU is registered by DMA-BUF through `dmabuf`
    /// (else by peer memory), and UAR doorbells are mapped into the GPU through `mapper`.
    pub fn with_gpu(
        mut self,
        dmabuf: Arc<dyn DmaBufExporter>,
        mapper: Arc<dyn IoMemoryMapper>,
    ) -> Self {
        self.dmabuf = Some(dmabuf);
        self.io_mapper = Some(mapper);
        self
    }

    /// The device.
    pub fn device(&self) -> &Mlx5Device {
        &self.device
    }

    /// How many UAR doorbells this backend has mapped into the GPU as I/O memory (a
    /// ConnectX's BAR pages) and as host memory (the emulated ConnectX's pages): the
    /// backend says which registration it made.
    pub fn doorbell_mappings(&self) -> (u64, u64) {
        (
            self.mappings.io_memory.load(Ordering::Relaxed),
            self.mappings.host_memory.load(Ordering::Relaxed),
        )
    }

    /// How many UMEMs of queue memory this backend has registered, by path (host memory,
    /// GPU memory by DMA-BUF, GPU memory through peer memory): the backend says which
    /// registration it made, as for doorbells.
    pub fn umem_paths(&self) -> UmemPaths {
        UmemPaths {
            host: self.umems.host.load(Ordering::Relaxed),
            dmabuf: self.umems.dmabuf.load(Ordering::Relaxed),
            peer_memory: self.umems.peer_memory.load(Ordering::Relaxed),
        }
    }

    /// Why the first GPU UMEM that went through peer memory did not go by DMA-BUF,
    /// although this backend has a DMA-BUF exporter (the export's or
    /// `mlx5dv_devx_umem_reg_ex`'s error); `None` if none fell back.
    pub fn dmabuf_fallback(&self) -> Option<&DmaBufExportError> {
        self.umems.first_fallback.get()
    }
}

impl ProtectionDomainId for ProtectionDomain {
    fn pdn(&self) -> u32 {
        ProtectionDomain::pdn(self)
    }
}

impl SharedReceiveQueueId for SharedReceiveQueue {
    fn srqn(&self) -> u32 {
        SharedReceiveQueue::srqn(self)
    }
}

impl UmemId for Umem {
    fn umem_id(&self) -> u32 {
        self.id()
    }
}

impl BackendObject for DevxObject {}

impl MemoryRegistration for MemoryRegion {
    fn rkey(&self) -> RKey {
        RKey(MemoryRegion::rkey(self))
    }
    fn addr(&self) -> u64 {
        MemoryRegion::addr(self)
    }
    fn len(&self) -> usize {
        // A region's length came from a `usize`.
        MemoryRegion::len(self) as usize
    }
}

/// A UAR page of the mlx5 backend; its GPU doorbell is mapped once, on first use.
pub struct Mlx5Uar {
    uar: Arc<Uar>,
    io_mapper: Option<Arc<dyn IoMemoryMapper>>,
    gpu_doorbell: OnceLock<(GpuDoorbell, DoorbellMapping)>,
    mappings: Arc<MappingCounts>,
}

/// How many UAR doorbells a backend mapped into the GPU, by kind of registration.
#[derive(Debug, Default)]
struct MappingCounts {
    io_memory: AtomicU64,
    host_memory: AtomicU64,
}

impl Mlx5Uar {
    /// How its doorbell was mapped into the GPU, once it was.
    pub fn gpu_mapping(&self) -> Option<DoorbellMapping> {
        self.gpu_doorbell.get().map(|(_, kind)| *kind)
    }
}

impl core::fmt::Debug for Mlx5Uar {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Mlx5Uar")
            .field("uar", &self.uar)
            .field("gpu_mapped", &self.gpu_doorbell.get().is_some())
            .finish()
    }
}

impl UarPage for Mlx5Uar {
    fn page_id(&self) -> u32 {
        self.uar.page_id()
    }

    fn host_doorbell(&self) -> Result<HostDoorbell, NicError> {
        // The UAR register as a store-only register page: host producers store the
        // doorbell to it and nothing can read it.
        Ok(HostDoorbell::register(self.uar.host_register()?))
    }

    fn gpu_doorbell(&self) -> Result<GpuDoorbell, NicError> {
        if let Some((mapped, _)) = self.gpu_doorbell.get() {
            return Ok(mapped.clone());
        }
        let mapper = self
            .io_mapper
            .as_deref()
            .ok_or_else(|| NicError::Unsupported {
                what: "GPU doorbells: the mlx5 backend was opened without GPU access \
                   (Mlx5Backend::with_gpu)"
                    .to_owned(),
            })?;
        let (register, kind) = self.uar.gpu_doorbell(mapper)?;
        // The host's mapping of the same register (the GPU's was made from its page), for
        // recovery to ring while no kernel holds the queue.
        let host = self.uar.host_register()?;
        let counter = match kind {
            DoorbellMapping::IoMemory => &self.mappings.io_memory,
            DoorbellMapping::HostMemory => &self.mappings.host_memory,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mapped = (GpuDoorbell::register_mapped(register, host), kind);
        Ok(self.gpu_doorbell.get_or_init(|| mapped).0.clone())
    }
}

fn port_attributes(device: &Mlx5Device, port: u8) -> Result<PortAttributes, Mlx5Error> {
    let info = device.query_port(port)?;
    let mtu = u8::try_from(info.active_mtu)
        .ok()
        .and_then(Mtu::from_code)
        .ok_or(Mlx5Error::OutOfRange {
            what: "active MTU code",
            value: u64::from(info.active_mtu),
            limit: 5,
        })?;
    let mut gids = Vec::with_capacity(info.gid_table_len as usize);
    let infiniband = info.link_layer != VerbsLinkLayer::Ethernet;
    for index in 0..info.gid_table_len {
        // An unpopulated entry reads as zero (or fails on newer kernels): kept as the zero
        // GID so that table indices stay GID indices. Without `ibv_query_gid_ex` (rdma-core
        // before 32) an Ethernet entry's type is unknown: taken as RoCE v1, which the
        // control plane never sends from.
        let (gid, kind) = match device.query_gid_entry(port, index) {
            Ok((gid, super::verbs::VerbsGidType::RoceV2)) => (gid, GidType::RoceV2),
            Ok((gid, super::verbs::VerbsGidType::RoceV1)) => (gid, GidType::RoceV1),
            Ok((gid, super::verbs::VerbsGidType::InfiniBand)) => (gid, GidType::InfiniBand),
            Err(_) => (
                device.query_gid(port, index).unwrap_or([0; 16]),
                if infiniband {
                    GidType::InfiniBand
                } else {
                    GidType::RoceV1
                },
            ),
        };
        gids.push(GidEntry {
            gid: Gid(gid),
            kind,
        });
    }
    Ok(PortAttributes {
        port,
        lid: info.lid,
        mtu,
        // Verbs report 0 (unspecified) for InfiniBand ports of old drivers.
        link_layer: match info.link_layer {
            VerbsLinkLayer::Ethernet => LinkLayer::Ethernet,
            VerbsLinkLayer::InfiniBand | VerbsLinkLayer::Unspecified => LinkLayer::InfiniBand,
        },
        gids,
    })
}

impl Backend for Mlx5Backend {
    type Pd = ProtectionDomain;
    type Umem = Mlx5Umem;
    type Uar = Mlx5Uar;
    type Srq = SharedReceiveQueue;
    type Object = DevxObject;
    type Mr = MemoryRegion;

    fn name(&self) -> &str {
        self.device.name()
    }

    // The command methods pass the caller's contract (`Backend`'s `# Safety`) on to the
    // firmware unchanged: the bytes go to DEVX as they are.
    unsafe fn general_command(&self, input: &[u8], output: &mut [u8]) -> Result<(), NicError> {
        Ok(self.device.general_command(input, output)?)
    }

    unsafe fn create_object(
        &self,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<DevxObject, NicError> {
        // The control plane's handles keep every parent alive; nothing extra to hold.
        Ok(self.device.create_object(input, output, Vec::new())?)
    }

    unsafe fn modify_object(
        &self,
        object: &DevxObject,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), NicError> {
        Ok(object.modify(input, output)?)
    }

    unsafe fn destroy_object(&self, object: DevxObject, _input: &[u8]) -> Result<(), NicError> {
        // rdma-core sends the DESTROY command the kernel recorded at creation (the same
        // command the control plane encoded).
        Ok(object.destroy()?)
    }

    fn query_port(&self, port: u8) -> Result<PortAttributes, NicError> {
        Ok(port_attributes(&self.device, port)?)
    }

    fn query_eqn(&self, vector: u32) -> Result<u32, NicError> {
        Ok(self.device.query_eqn(vector)?)
    }

    fn alloc_pd(&self) -> Result<ProtectionDomain, NicError> {
        Ok(self.device.alloc_pd()?)
    }

    fn alloc_uar(&self) -> Result<Mlx5Uar, NicError> {
        Ok(Mlx5Uar {
            uar: self.device.alloc_uar()?,
            io_mapper: self.io_mapper.clone(),
            gpu_doorbell: OnceLock::new(),
            mappings: self.mappings.clone(),
        })
    }

    fn create_srq(
        &self,
        pd: &ProtectionDomain,
        max_wr: u32,
    ) -> Result<SharedReceiveQueue, NicError> {
        Ok(SharedReceiveQueue::create(pd, max_wr)?)
    }

    fn post_srq_receives(&self, srq: &SharedReceiveQueue, count: u32) -> Result<(), NicError> {
        Ok(srq.post_zero_length(count)?)
    }

    fn register_umem(&self, memory: QueueMemoryRef<'_>) -> Result<Mlx5Umem, NicError> {
        // This NIC executes the queue from here on: refused if another executor does.
        let claim = memory.claim(&self.executor)?;
        let umem = if let Some(buffer) = memory.host_buffer() {
            let umem = self.device.register_host_umem(buffer.clone())?;
            self.umems.host.fetch_add(1, Ordering::Relaxed);
            umem
        } else if let Some(buffer) = memory.gpu_buffer() {
            let umem = self
                .device
                .register_gpu_umem(buffer.clone(), self.dmabuf.as_deref())?;
            let counter = match umem.gpu_path() {
                Some(GpuPath::DmaBuf) => &self.umems.dmabuf,
                Some(GpuPath::PeerMemory) | None => &self.umems.peer_memory,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            if let Some(why) = umem.dmabuf_error() {
                let _ = self.umems.first_fallback.set(why.clone());
            }
            umem
        } else {
            return Err(NicError::Unsupported {
                what: format!(
                    "queue memory placed {:?} on the mlx5 backend",
                    memory.placement()
                ),
            });
        };
        self.queue_memory
            .lock()
            .push((umem.umem_id(), memory.span()));
        Ok(Mlx5Umem {
            umem,
            spans: self.queue_memory.clone(),
            _claim: claim,
        })
    }

    fn address_vector(
        &self,
        pd: &ProtectionDomain,
        port: &PortAttributes,
        source_gid_index: u8,
        gid: Gid,
    ) -> Result<AddressVectorSegment, NicError> {
        // Ethernet (RoCE) paths are global: to `gid`, sent from the control plane's source
        // GID; the provider (with the kernel) resolves the destination MAC. InfiniBand
        // paths use the LID.
        let global = match port.link_layer {
            LinkLayer::Ethernet => Some((gid.0, source_gid_index)),
            LinkLayer::InfiniBand => None,
        };
        let av = super::verbs::address_vector(pd, port.port, port.lid, global)?;
        AddressVectorSegment::read_from_bytes(&av).map_err(|_| NicError::OutOfRange {
            what: "address vector length",
            value: av.len() as u64,
            max: core::mem::size_of::<AddressVectorSegment>() as u64,
        })
    }

    fn register_memory(
        &self,
        pd: &ProtectionDomain,
        memory: RegisterMemory,
        access: MemoryAccess,
    ) -> Result<MemoryRegion, NicError> {
        let (addr, len) = memory.span()?;
        self.queue_memory.check_disjoint(addr, len)?;
        match memory {
            RegisterMemory::Host {
                buffer,
                offset,
                len,
            } => Ok(MemoryRegion::register_host(
                pd,
                buffer,
                offset,
                len,
                access.bits(),
            )?),
            RegisterMemory::Gpu {
                buffer,
                offset,
                len,
            } => Ok(MemoryRegion::register_gpu(
                pd,
                buffer,
                offset,
                len,
                access.bits(),
                self.dmabuf.as_deref(),
            )?),
            #[allow(unreachable_patterns)]
            _ => Err(NicError::Unsupported {
                what: "this kind of memory on the mlx5 backend".to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::QueueSpans;
    use crate::nic::NicError;
    use crate::queue::QueueBufferSpan;

    #[test]
    fn a_data_registration_over_queue_memory_is_refused() {
        let spans = QueueSpans::default();
        let ring = QueueBufferSpan {
            addr: 0x10_000,
            device_addr: None,
            len: 4096,
        };
        spans.lock().push((7, ring));
        for (addr, len) in [(0x10_000, 8), (0xf_ff8, 16), (0x10_ff8, 8), (0, u64::MAX)] {
            assert_eq!(
                spans.check_disjoint(addr, len),
                Err(NicError::OverlapsQueueMemory {
                    addr,
                    len,
                    queue: ring
                }),
                "{addr:#x}+{len}"
            );
        }
        for (addr, len) in [(0xf_ff8, 8), (0x11_000, 8), (0x10_000, 0)] {
            assert_eq!(spans.check_disjoint(addr, len), Ok(()), "{addr:#x}+{len}");
        }
        spans.lock().retain(|&(id, _)| id != 7);
        assert_eq!(spans.check_disjoint(0x10_000, 8), Ok(()));
    }
}
