//! Placements: where a queue's ring, doorbell record and completion queue live.

use core::fmt;

mod sealed {
    pub trait Sealed {}
}

/// Where a queue lives. Sealed: [`Host`] or [`Gpu`].
pub trait Placement: sealed::Sealed + Copy + fmt::Debug + Send + Sync + 'static {
    /// The run-time value.
    const KIND: PlacementKind;
}

/// Queues in host memory (pinned and GPU-mapped when a GPU posts to them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Host;

/// Queues in GPU memory: only GPU threads post to them; the host hands kernels a device
/// descriptor and never touches the ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Gpu;

impl sealed::Sealed for Host {}
impl sealed::Sealed for Gpu {}
impl Placement for Host {
    const KIND: PlacementKind = PlacementKind::Host;
}
impl Placement for Gpu {
    const KIND: PlacementKind = PlacementKind::Gpu;
}

/// A placement known at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum PlacementKind {
    /// Host memory.
    Host = 0,
    /// GPU memory.
    Gpu = 1,
}
