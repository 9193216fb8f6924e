//! The CPU-proxy submission path (the paper's mini-proxy) and the CPU-assisted doorbell.
//!
//! GPU threads (or CPU threads standing in for them) push 16-byte request descriptors
//! ([`RequestDescriptor`]) into descriptor rings in host memory ([`ProxyRing`]), by one of
//! the paper's two handoff protocols ([`Baseline`], [`Tuned`]); CPU [`Worker`]s, each
//! owning its queue pairs, poll their rings, resolve each descriptor's window indices
//! against registered windows ([`Windows`]), chain up to `B` requests per post through the
//! typed host queues, and report completion through each ring's host-resident counter.
//! Shared versus private rings is a matter of which producers push to which ring.
//!
//! The CPU-assisted doorbell ([`assisted`]) keeps WQE construction with the producer and
//! moves only the doorbell store to a host thread; the doorbell target is part of the
//! queue's type.

pub mod assisted;
mod descriptor;
mod ring;
mod window;
mod worker;

pub use assisted::{
    AssistedDeviceQueue, AssistedError, AssistedGpuQueue, AssistedQueuePair, CpuAssisted,
    DoorbellTarget, ForwardTarget, Forwarder, ForwarderReport, MappedUar,
};
pub use descriptor::{
    opcode, words_valid, DescriptorError, Epoch, LocalRef, RemoteRef, Request, RequestDescriptor,
    MAX_CAS_VALUE, MAX_LENGTH, MAX_OPERAND, MAX_PEERS, MAX_WINDOWS, OPERAND_BITS,
};
pub use ring::{
    baseline_push, Baseline, ConsumerState, Handoff, HandoffKind, ProxyRing, PushError,
    RingConsumer, RingError, RingGeometry, RingMemory, RingProducer, RingWords, Tuned, TunedState,
    MAX_RING_SLOTS,
};
pub use window::{
    LocalRegion, LocalWindow, RemoteWindow, Resolved, WindowError, WindowSide, WindowTableError,
    Windows,
};
pub use worker::{
    wait_completed, Pinning, RequestError, Worker, WorkerConfig, WorkerError, WorkerReport,
    WorkerRing,
};
