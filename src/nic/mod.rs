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

pub mod prm;

mod backend;
mod caps;
mod command;
pub mod connection;
mod device;
mod error;
pub mod gpu_access;
#[cfg(feature = "mlx5")]
pub mod mlx5;
mod soft;
mod soft_commands;
#[cfg(test)]
mod soft_tests;

pub use backend::{
    Backend, BackendObject, MemoryAccess, MemoryRegistration, ProtectionDomainId, QueueMemoryRef,
    RegisterMemory, UarPage, UmemId,
};
pub use caps::{AtomicEndianness, DeviceCaps, Gid, LinkLayer, Mtu, PortAttributes};
pub use connection::{ConnectionError, DcEndpoint, Endpoint, RcEndpoint};
pub use device::{
    DcTargetQueue, Device, HostQueueMemory, MemoryRegion, PendingDci, PendingRc, ProtectionDomain,
    QueueAllocator, QueueFill, QueuePlacement, QueueSpec,
};
pub use error::NicError;
pub use soft::{SoftNic, SoftNicAllocations, SoftObject, SoftPd, SoftUar, SoftUmem, SOFT_NIC_CAPS};
