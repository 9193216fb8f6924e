//! The backend trait: what a NIC must provide so that the control plane can create queues
//! on it. The primitives are those of DEVX on a ConnectX, so the hardware backend is a thin
//! layer over rdma-core and the software NIC executes the very bytes the hardware would get.

use core::fmt;
use std::sync::Arc;

use super::caps::Gid;
use super::caps::PortAttributes;
use super::error::NicError;
use crate::memory::{DeviceBuffer, DmaBuffer};
use crate::queue::executor::ExecutorClaim;
use crate::queue::{
    ClaimTarget, Executor, ExecutorConflict, GpuDoorbell, HostDoorbell, PlacementKind,
    QueueBufferSpan, Registered,
};
use crate::wqe::segment::AddressVectorSegment;
use crate::wqe::RKey;

/// The access rights of a memory registration (verbs' `IBV_ACCESS_*` values).
pub use crate::softnic::Access as MemoryAccess;

/// Queue memory (a ring or a doorbell record) that a backend registers as UMEM, so that
/// CREATE_CQ and CREATE_QP can name it by UMEM id and offset.
///
/// Only the control plane makes one, from the memory of the queue it is creating: the
/// backend learns where the memory is ([`span`](Self::span)); the crate's own backends
/// also reach the buffer, as the NIC capability to it (see
/// [`SendQueueNicAccess`](crate::queue::SendQueueNicAccess)), and register it only under
/// an executor claim on the queue, so that memory another NIC executes is refused.
#[derive(Clone, Copy, Debug)]
pub struct QueueMemoryRef<'a> {
    memory: QueueMemoryKind<'a>,
    target: ClaimTarget<'a>,
}

#[derive(Clone, Copy, Debug)]
enum QueueMemoryKind<'a> {
    Host(&'a Arc<DmaBuffer>),
    Gpu(&'a Arc<DeviceBuffer>),
}

impl<'a> QueueMemoryRef<'a> {
    pub(crate) fn host(buffer: &'a Arc<DmaBuffer>, target: ClaimTarget<'a>) -> Self {
        Self {
            memory: QueueMemoryKind::Host(buffer),
            target,
        }
    }
    pub(crate) fn gpu(buffer: &'a Arc<DeviceBuffer>, target: ClaimTarget<'a>) -> Self {
        Self {
            memory: QueueMemoryKind::Gpu(buffer),
            target,
        }
    }
    /// A claim by `executor` on the queue this memory belongs to: what a backend holds for
    /// as long as it has the memory registered, refused while another executor holds one.
    pub(crate) fn claim(&self, executor: &Executor) -> Result<ExecutorClaim, ExecutorConflict> {
        self.target.claim(executor)
    }
    /// Where the memory is: its address (the device address for GPU memory) and length.
    pub fn span(&self) -> QueueBufferSpan {
        match self.memory {
            QueueMemoryKind::Host(b) => QueueBufferSpan::of(b),
            QueueMemoryKind::Gpu(b) => QueueBufferSpan::of(b),
        }
    }
    /// Where it is placed.
    pub fn placement(&self) -> PlacementKind {
        match self.memory {
            QueueMemoryKind::Host(_) => PlacementKind::Host,
            QueueMemoryKind::Gpu(_) => PlacementKind::Gpu,
        }
    }
    /// The host buffer, for the crate's NIC backends.
    pub(crate) fn host_buffer(&self) -> Option<&'a Arc<DmaBuffer>> {
        match self.memory {
            QueueMemoryKind::Host(b) => Some(b),
            QueueMemoryKind::Gpu(_) => None,
        }
    }
    /// The GPU buffer, for the crate's NIC backends (DMA-BUF export).
    #[allow(dead_code)]
    pub(crate) fn gpu_buffer(&self) -> Option<&'a Arc<DeviceBuffer>> {
        match self.memory {
            QueueMemoryKind::Gpu(b) => Some(b),
            QueueMemoryKind::Host(_) => None,
        }
    }
}

/// Data memory to register for RDMA (a memory region with keys).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum RegisterMemory {
    /// `len` bytes of host memory from `offset`.
    Host {
        /// The buffer (kept alive by the registration).
        buffer: Arc<DmaBuffer>,
        /// First byte of the region in the buffer.
        offset: usize,
        /// Length of the region.
        len: usize,
    },
    /// `len` bytes of GPU memory from `offset` (DMA-BUF on hardware).
    Gpu {
        /// The buffer (kept alive by the registration).
        buffer: Arc<DeviceBuffer>,
        /// First byte of the region in the buffer.
        offset: usize,
        /// Length of the region.
        len: usize,
    },
}

impl RegisterMemory {
    /// Where the region is: its first byte's address (the device address for GPU memory)
    /// and length, checked to lie inside its buffer.
    pub fn span(&self) -> Result<(u64, u64), NicError> {
        let (addr, buffer_len, offset, len) = match self {
            Self::Host {
                buffer,
                offset,
                len,
            } => (buffer.addr(), buffer.len(), *offset, *len),
            Self::Gpu {
                buffer,
                offset,
                len,
            } => (buffer.addr(), buffer.len(), *offset, *len),
        };
        let out_of_bounds = || {
            NicError::Memory(crate::memory::DmaError::OutOfBounds {
                offset,
                len,
                buffer_len,
            })
        };
        let end = offset.checked_add(len).ok_or_else(out_of_bounds)?;
        if end > buffer_len {
            return Err(out_of_bounds());
        }
        let start = addr.checked_add(offset as u64).ok_or_else(out_of_bounds)?;
        Ok((start, len as u64))
    }
}

/// A protection domain as a backend holds it: its number goes into CREATE_QP's `pd`.
pub trait ProtectionDomainId: Send + Sync + fmt::Debug {
    /// The PD number.
    fn pdn(&self) -> u32;
}

/// A UMEM registration: its id goes into CREATE_CQ and CREATE_QP.
pub trait UmemId: Send + Sync + fmt::Debug {
    /// The UMEM id.
    fn umem_id(&self) -> u32;
}

/// A shared receive queue: its number goes into CREATE_DCT's `srqn_xrqn` and CREATE_QP's
/// `srqn_rmpn_xrqn` (`rq_type` 1).
pub trait SharedReceiveQueueId: Send + Sync + fmt::Debug {
    /// The SRQ number.
    fn srqn(&self) -> u32;
}

/// A UAR page: its index goes into CREATE_CQ and CREATE_QP, and its doorbell register is
/// where producers ring.
pub trait UarPage: Send + Sync + fmt::Debug {
    /// The UAR page index.
    fn page_id(&self) -> u32;
    /// The 8-byte doorbell, for host producers: a store-only register page
    /// ([`HostDoorbell::register`]) on hardware, memory the software NIC watches on it.
    fn host_doorbell(&self) -> Result<HostDoorbell, NicError>;
    /// The 8-byte doorbell register mapped into the GPU, for GPU producers: a store-only
    /// device register ([`GpuDoorbell::register`]), never memory a kernel could read or a
    /// registration could name.
    fn gpu_doorbell(&self) -> Result<GpuDoorbell, NicError>;
}

/// A memory registration: what RDMA names it by.
pub trait MemoryRegistration: Registered + fmt::Debug {
    /// The remote key.
    fn rkey(&self) -> RKey;
    /// The address of the first byte.
    fn addr(&self) -> u64;
    /// The length in bytes.
    fn len(&self) -> usize;
    /// Whether it is empty (registrations never are).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An object created by a command (CQ, QP, DCT).
pub trait BackendObject: Send + Sync + fmt::Debug {}

/// A NIC the control plane can drive: one opened device context.
///
/// The methods are the primitives DEVX offers; the control plane ([`super::Device`]) does
/// all PRM encoding and decoding above them. The command methods are `unsafe`: raw command
/// bytes can name any address for the NIC to DMA to, so safe code reaches the NIC only
/// through the typed control plane.
///
/// ```compile_fail,E0133
/// use ibgda::nic::{Backend, Device};
/// fn forge<B: Backend>(device: &Device<B>) {
///     // A CREATE_QP could carry `dbr_umem_valid = 0` and any `dbr_addr`: not from safe
///     // code.
///     let mut output = [0u8; 256];
///     let _ = device.backend().create_object(&[0u8; 1024], &mut output);
/// }
/// ```
///
/// Every failure is a typed [`NicError`].
/// Each handle type releases its resource when dropped; the control plane keeps parents
/// alive as long as their children, so a backend sees teardown in the hardware's order.
///
/// A backend outside this crate cannot record an executor claim on the queues it
/// registers ([`QueueMemoryRef`]'s claim is crate-private), so "one executor per queue in
/// the process" (see [`crate::queue::Executor`]) is enforced only among the crate's own
/// executors (its backends, the software NIC's fabrics, the CUDA software NIC, the
/// doorbell sink): such a backend is not refused a queue another of them executes, nor
/// are they refused one it executes, and keeping its NIC the queue's only executor is part
/// of the `unsafe` command contracts below, under which it hands the NIC the memory it
/// sees only as [`QueueMemoryRef::span`].
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// A protection domain.
    type Pd: ProtectionDomainId;
    /// A UMEM registration of queue memory.
    type Umem: UmemId;
    /// A UAR page.
    type Uar: UarPage;
    /// A shared receive queue.
    type Srq: SharedReceiveQueueId;
    /// An object made by `create_object`.
    type Object: BackendObject;
    /// A memory region.
    type Mr: MemoryRegistration;

    /// The device's name (`mlx5_0`, `soft:node0`).
    fn name(&self) -> &str;

    /// Runs a command that creates no object (QUERY_HCA_CAP, ...): `input` is the command's
    /// PRM bytes, `output` receives its output (status and syndrome first). A command the
    /// device fails is `Err` ([`NicError::Command`]), with `output` holding what the device
    /// wrote.
    ///
    /// # Safety
    ///
    /// The four command methods hand raw PRM bytes to the NIC, which acts on every address,
    /// UMEM, UAR, PD and object number they name (DMA into a `dbr_addr` when
    /// `dbr_umem_valid` is 0, WQEs fetched from a named ring, completions written to a
    /// named CQ). The caller must guarantee that `input` is a well-formed command of its
    /// kind and that everything it names is memory or an object the caller owns for the
    /// NIC's use, which outlives whatever the command creates or changes and is not used
    /// otherwise while the NIC may touch it. [`Device`](super::Device) builds every command
    /// from owned, validated objects and keeps them alive in the hardware's order: it is the
    /// safe way to drive a backend.
    unsafe fn general_command(&self, input: &[u8], output: &mut [u8]) -> Result<(), NicError>;

    /// Runs a command that creates an object (CREATE_CQ, CREATE_QP, CREATE_DCT).
    ///
    /// # Safety
    ///
    /// As for [`general_command`](Self::general_command): every address, UMEM, UAR, PD and
    /// object the command names is the caller's for the NIC's use, and outlives the object.
    unsafe fn create_object(
        &self,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<Self::Object, NicError>;

    /// Runs a command on an object (the QP and DCT state transitions).
    ///
    /// # Safety
    ///
    /// As for [`general_command`](Self::general_command): `input` is a command on `object`
    /// whose every named address and object is the caller's for the NIC's use (an RTR
    /// names the remote QP and its path; its memory effects are governed by the keys of the
    /// registrations the caller made).
    unsafe fn modify_object(
        &self,
        object: &Self::Object,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), NicError>;

    /// Destroys an object with the DESTROY command `input` (hardware backends may send the
    /// equivalent command their driver keeps for the object).
    ///
    /// # Safety
    ///
    /// As for [`general_command`](Self::general_command); in addition no object created
    /// after `object` and depending on it (a QP on a CQ) may still exist.
    unsafe fn destroy_object(&self, object: Self::Object, input: &[u8]) -> Result<(), NicError>;

    /// The attributes of port `port` (1-based).
    fn query_port(&self, port: u8) -> Result<PortAttributes, NicError>;

    /// The event queue number completion vector `vector` reports to (CREATE_CQ's `c_eqn`).
    fn query_eqn(&self, vector: u32) -> Result<u32, NicError>;

    /// Allocates a protection domain.
    fn alloc_pd(&self) -> Result<Self::Pd, NicError>;

    /// Allocates a UAR page (non-cached, dedicated: one 8-byte doorbell per ring).
    fn alloc_uar(&self) -> Result<Self::Uar, NicError>;

    /// Creates a shared receive queue in `pd` holding up to `max_wr` receive WQEs (at
    /// least; the device may round up). DC targets and DC initiators name it, RC queue
    /// pairs may take their receives from it. On a ConnectX it is a verbs SRQ
    /// (`ibv_create_srq`, its number from `mlx5dv_init_obj`), as NVSHMEM makes it: the
    /// kernel's driver creates it in firmware with the context's DEVX user id, so DEVX
    /// queues of the same context may name it.
    fn create_srq(&self, pd: &Self::Pd, max_wr: u32) -> Result<Self::Srq, NicError>;

    /// Posts `count` zero-length receive WQEs to `srq` (each WRITE_WITH_IMM arriving at a
    /// queue that receives from it consumes one; none names memory). Refused, posting
    /// none, when the SRQ cannot take them.
    fn post_srq_receives(&self, srq: &Self::Srq, count: u32) -> Result<(), NicError>;

    /// Registers queue memory as UMEM, for the NIC to read (rings) and write (CQs,
    /// doorbell records). The registration keeps the memory alive until dropped.
    fn register_umem(&self, memory: QueueMemoryRef<'_>) -> Result<Self::Umem, NicError>;

    /// The 48-byte address vector of a path from `port` (on hardware, an address handle
    /// made in `pd` read back through `mlx5dv_init_obj`). On InfiniBand it reaches the
    /// port's own LID (a DC target's vector for its initiators). On Ethernet it reaches
    /// `gid`, sent from the port's GID `source_gid_index`, and carries the destination MAC
    /// resolved as an address handle resolves it (the kernel's neighbour lookup on
    /// hardware, the fabric's on the software NIC): the control plane reads that MAC for
    /// RC paths over RoCE. The DCT number and the key are patched in by the initiator.
    fn address_vector(
        &self,
        pd: &Self::Pd,
        port: &PortAttributes,
        source_gid_index: u8,
        gid: Gid,
    ) -> Result<AddressVectorSegment, NicError>;

    /// Registers data memory in `pd` with `access`.
    fn register_memory(
        &self,
        pd: &Self::Pd,
        memory: RegisterMemory,
        access: MemoryAccess,
    ) -> Result<Self::Mr, NicError>;
}
