//! The mlx5 hardware implementation of the control plane's [`Backend`]: the command bytes
//! the control plane encodes go to the firmware through DEVX, queue memory is registered
//! as UMEM (GPU memory by DMA-BUF, else peer memory), UAR pages are allocated with DEVX and
//! their doorbell mapped into the GPU on demand.

use std::sync::{Arc, OnceLock};

use super::devx::{DevxObject, Uar, Umem};
use super::error::Mlx5Error;
use super::verbs::{LinkLayer as VerbsLinkLayer, MemoryRegion, ProtectionDomain};
use super::Mlx5Device;
use crate::nic::gpu_access::{DmaBufExporter, IoMemoryMapper};
use crate::nic::{
    Backend, BackendError, BackendObject, Gid, LinkLayer, MemoryAccess, MemoryRegistration, Mtu,
    NicError, PortAttributes, ProtectionDomainId, QueueMemoryRef, RegisterMemory, UarPage, UmemId,
};
use crate::queue::{GpuDoorbell, HostDoorbell};
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
            Mlx5Error::NoDevice { .. } | Mlx5Error::LibraryMissing { .. } => Self::NoDevice {
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
        Self {
            device,
            dmabuf: None,
            io_mapper: None,
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
}

impl ProtectionDomainId for ProtectionDomain {
    fn pdn(&self) -> u32 {
        ProtectionDomain::pdn(self)
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
    gpu_doorbell: OnceLock<GpuDoorbell>,
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
        if let Some(mapped) = self.gpu_doorbell.get() {
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
        let mapped = GpuDoorbell::register(self.uar.gpu_doorbell(mapper)?);
        Ok(self.gpu_doorbell.get_or_init(|| mapped).clone())
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
    for index in 0..info.gid_table_len {
        // An unpopulated entry reads as zero (or fails on newer kernels): kept as the zero
        // GID so that table indices stay GID indices.
        gids.push(Gid(device.query_gid(port, index).unwrap_or([0; 16])));
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
    type Umem = Umem;
    type Uar = Mlx5Uar;
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
        })
    }

    fn register_umem(&self, memory: QueueMemoryRef<'_>) -> Result<Umem, NicError> {
        if let Some(buffer) = memory.host_buffer() {
            return Ok(self.device.register_host_umem(buffer.clone())?);
        }
        if let Some(buffer) = memory.gpu_buffer() {
            return Ok(self
                .device
                .register_gpu_umem(buffer.clone(), self.dmabuf.as_deref())?);
        }
        Err(NicError::Unsupported {
            what: format!(
                "queue memory placed {:?} on the mlx5 backend",
                memory.placement()
            ),
        })
    }

    fn address_vector(
        &self,
        pd: &ProtectionDomain,
        port: &PortAttributes,
        gid: Gid,
    ) -> Result<AddressVectorSegment, NicError> {
        // Ethernet (RoCE) paths are global: sent from the port's GID equal to `gid` (a
        // loopback) or else its first populated one. InfiniBand paths use the LID.
        let global = match port.link_layer {
            LinkLayer::Ethernet => {
                let index = port
                    .gids
                    .iter()
                    .position(|g| *g == gid)
                    .or_else(|| port.gids.iter().position(|g| g.0 != [0; 16]))
                    .ok_or(Mlx5Error::Gid {
                        port: port.port,
                        index: 0,
                        errno: 61, // ENODATA: the port has no GID to send from
                    })?;
                let index = u8::try_from(index).map_err(|_| NicError::OutOfRange {
                    what: "source GID index",
                    value: index as u64,
                    max: u64::from(u8::MAX),
                })?;
                Some((gid.0, index))
            }
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
