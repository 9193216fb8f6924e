//! Typed queues: transports and placements as type parameters, slot reservation and
//! in-order publication, doorbell records and doorbells, queue pairs.
//!
//! # Ownership
//!
//! - **Unique things are unique types.** Send-queue, CQ and producer-state memory are
//!   move-only and built from owned buffers moved in ([`SendQueueMemory::from_buffers`],
//!   [`SendQueueMemory::from_device`], a [`QueueAllocator`](crate::nic::QueueAllocator)
//!   handing buffers over by value); so are the proxy's descriptor rings and CPU-assisted
//!   index slots ([`crate::proxy`]). No public API hands out a second handle to any of
//!   them. `Arc` is for data regions, whose sharing is the point.
//! - **One executor per queue, process-wide.** Whatever executes a queue (the software NIC
//!   of any fabric, a control-plane backend registering its memory as UMEM, the CUDA
//!   software NIC, the doorbell sink) takes an exclusive claim recorded in the queue memory
//!   ([`executor`]); a second executor's claim is an [`ExecutorConflict`] naming both.
//! - **Keep-alive claims come from the library.** [`Registered`] is an `unsafe trait`,
//!   implemented by the library's own region handles.
//! - **Safe scopes are the ones no NIC can defeat** (see [`crate::order`]).

pub mod executor;
mod memory;
mod placement;

pub use crate::wqe::{
    AnyTransport, Compact, Dc, Full, Rc, Transport, TransportKind, TypedTransport,
};
pub use executor::{Executor, ExecutorConflict};
pub(crate) use memory::ClaimTarget;
pub use memory::{
    CompletionQueueMemory, CompletionQueueNicAccess, ProducerStateMemory, QueueBufferSpan,
    QueueMemoryError, SendQueueMemory, SendQueueNicAccess, CQE_INIT_OP_OWN, RECORD_BYTES,
    RING_ALIGN, SEND_DBREC_OFFSET,
};

mod raw;
pub use placement::{Gpu, GpuDoorbell, Host, HostDoorbell, Placement, PlacementKind, QueueBuffer};
pub use raw::{RawCompletionQueue, RawSendQueue};

mod send;
pub use send::{
    DoorbellPolicy, NoLocalMemory, PostError, Registered, Reservation, SendQueue, SendQueueConfig,
    Ticket,
};

mod pair;
pub(crate) use pair::NicObjects;
pub use pair::{
    quiet, CompletionError, DciPool, PollError, Polled, QpConfig, QueuePair, Quiesce, WaitError,
};

mod shared;
pub use shared::{
    GroupPart, GroupReservation, PublicationCounters, SharedQueueConfig, SharedReservation,
    SharedSendQueue,
};

mod erased;
pub use erased::AnyQueuePair;

pub mod recovery;
pub use recovery::{
    DeviceQueueAccess, HostMemory, Recovery, RecoveryError, Unfinished, UnfinishedOutcome,
};

mod device;
pub use device::{
    DeviceProducerState, DeviceQueue, DeviceQueueDescriptor, DeviceQueueError, DEFAULT_DEVICE_WAIT,
};
