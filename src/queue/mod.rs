//! Typed queues: transports and placements as type parameters, slot reservation and
//! in-order publication, doorbell records and doorbells, queue pairs.

mod memory;
mod placement;

pub use crate::wqe::{
    AnyTransport, Compact, Dc, Full, Rc, Transport, TransportKind, TypedTransport,
};
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

mod device;
pub use device::{DeviceProducerState, DeviceQueue, DeviceQueueDescriptor, DeviceQueueError};
