//! The control plane: the one way to get queues, whatever the NIC.
//!
//! A NIC is reached through a [`Backend`]: the small set of primitives DEVX gives on a
//! ConnectX (a command channel that creates, modifies and destroys objects from PRM command
//! bytes; queue memory registered as UMEM; UAR pages; protection domains; memory
//! registration; port queries). Two backends implement it: the software NIC
//! ([`SoftNic`]), which *executes* the command bytes it is sent, and the mlx5 hardware
//! backend (`nic::mlx5`), which hands them to the device.
//!
//! Everything above the backend is shared code ([`Device`]): it encodes every PRM command
//! with the typed values of [`prm`] (QUERY_HCA_CAP, ALLOC_UAR, CREATE_CQ, CREATE_QP, the
//! RST -> INIT -> RTR -> RTS transitions, CREATE_DCT, DESTROY_*; byte-exact encoders and
//! decoders over big-endian bit-field layouts), decodes every output, and returns the existing
//! typed handles ([`QueuePair`](crate::queue::QueuePair) for host- and GPU-placed queues,
//! memory regions implementing [`Registered`](crate::queue::Registered)). So the same
//! command bytes reach the software NIC here and a ConnectX on a host that has one.
//!
//! # Lifetimes and teardown
//!
//! Hardware objects depend on each other: a protection domain outlives its memory
//! regions and queue pairs, a CQ outlives the QPs that complete to it, a UAR outlives the
//! CQs and QPs that ring it, and UMEM registrations outlive the objects placed in them.
//! Every handle here holds its parents (reference counted), so a parent is destroyed
//! only after its last child: the wrong teardown order cannot be written. Dropping a
//! handle destroys its object (the DESTROY command is sent), then releases its parents.
//!
//! # Connection information
//!
//! [`RcEndpoint`] (QPN, LID, GID, PSN, MTU) and [`DcEndpoint`] (DCT number, access key,
//! address vector) have a fixed, versioned byte encoding ([`connection`]) so any bootstrap
//! can carry them; [`connection::exchange`] carries them over TCP.
//!
//! # Example
//!
//! Two hosts (here two software NICs on one fabric) each make an RC queue pair, swap
//! endpoints, connect, and one writes into the other's memory:
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use ibgda::memory::DmaBuffer;
//! use ibgda::nic::{Device, MemoryAccess, QueueSpec, SoftNic};
//! use ibgda::softnic::Fabric;
//! use ibgda::wqe::{RdmaWrite, RingSize};
//!
//! let fabric = Fabric::new();
//! let _engine = fabric.spawn_engine();
//! let (a, b) = (Device::open(SoftNic::open(&fabric, 1)?)?, Device::open(SoftNic::open(&fabric, 2)?)?);
//! let (pd_a, pd_b) = (a.alloc_pd()?, b.alloc_pd()?);
//! let memory = Arc::new(DmaBuffer::zeroed(64, 64)?);
//! let region = pd_b.register(memory.clone(), 0, 64, MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_WRITE)?;
//! let spec = QueueSpec::new(RingSize::new(64)?);
//! let (qp_a, qp_b) = (pd_a.create_rc(spec)?, pd_b.create_rc(spec)?);
//! // Any bootstrap carries the endpoints (`RcEndpoint::encode`, `connection::exchange`).
//! let (to_a, to_b) = (qp_a.endpoint(), qp_b.endpoint());
//! let (mut qp_a, _qp_b) = (qp_a.connect(&to_b)?, qp_b.connect(&to_a)?);
//! let ticket = qp_a.post(&RdmaWrite::new(region.remote(0)).inline(b"hello").signaled().build()?, &[])?;
//! qp_a.wait(ticket, Duration::from_secs(5))?;
//! assert_eq!(&memory.to_vec()[..5], b"hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod prm;

mod backend;
mod caps;
pub(crate) mod command;
pub mod connection;
mod device;
mod error;
pub mod gpu_access;
#[cfg(feature = "mlx5")]
pub mod mlx5;
#[cfg(test)]
mod nvshmem_tests;
pub mod roce;
#[cfg(test)]
mod rules_tests;
mod soft;
mod soft_commands;
mod soft_gpu;
#[cfg(test)]
mod soft_tests;
pub mod team;
pub mod window;

pub use backend::{
    Backend, BackendObject, MemoryAccess, MemoryRegistration, ProtectionDomainId, QueueMemoryRef,
    RegisterMemory, SharedReceiveQueueId, UarPage, UmemId,
};
pub use caps::{
    AtomicEndianness, DeviceCaps, Gid, GidEntry, GidType, LinkLayer, Mtu, PortAttributes,
};
pub use connection::{ConnectionError, DcEndpoint, Endpoint, RcEndpoint};
pub use device::{
    DcTargetQueue, Device, HostQueueMemory, MemoryRegion, PendingDci, PendingRc, ProtectionDomain,
    QueueAllocator, QueueFill, QueuePlacement, QueueSpec, Receives, SharedReceiveQueue,
    SRQ_RECEIVES,
};
pub use error::{BackendError, NicError};
pub use roce::UdpSourcePort;
pub use soft::{
    SoftNic, SoftNicAllocations, SoftObject, SoftPd, SoftSrq, SoftUar, SoftUmem, SOFT_NIC_CAPS,
};
pub use soft_gpu::{
    GpuCq, GpuDoorbellMemory, GpuObjects, GpuQueuePair, GpuRegion, SoftGpuNic, SoftGpuRegion,
    SoftGpuUar, SoftGpuUmem,
};
pub use window::{
    DeviceWindow, DeviceWindowPeer, LocalWindow, Window, WindowEndpoint, WindowError,
};
