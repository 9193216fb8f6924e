//! Placements: where a queue's ring, doorbell record and completion queue live.

use core::fmt;
use std::sync::Arc;

use crate::memory::{DeviceBuffer, DmaBuffer};

mod sealed {
    pub trait Sealed {}
}

/// Where a queue lives. Sealed: [`Host`] or [`Gpu`].
pub trait Placement: sealed::Sealed + Copy + fmt::Debug + Send + Sync + 'static {
    /// The run-time value.
    const KIND: PlacementKind;
    /// A buffer of queue memory in this placement.
    type Buffer: QueueBuffer;
}

/// A buffer of queue memory: its length and, where a GPU can reach it, its device address.
pub trait QueueBuffer: Clone + fmt::Debug + Send + Sync + 'static {
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Whether the buffer is empty (queue buffers never are).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The address the NIC names it by: the host virtual address of host memory, the
    /// device address of GPU memory.
    fn addr(&self) -> u64;
    /// The address GPU threads use for it, if it is mapped into a GPU.
    fn device_addr(&self) -> Option<u64>;
}

impl QueueBuffer for Arc<DmaBuffer> {
    fn len(&self) -> usize {
        DmaBuffer::len(self)
    }
    fn addr(&self) -> u64 {
        DmaBuffer::addr(self)
    }
    fn device_addr(&self) -> Option<u64> {
        DmaBuffer::device_addr(self)
    }
}

impl QueueBuffer for Arc<DeviceBuffer> {
    fn len(&self) -> usize {
        DeviceBuffer::len(self)
    }
    fn addr(&self) -> u64 {
        DeviceBuffer::addr(self)
    }
    fn device_addr(&self) -> Option<u64> {
        Some(self.addr())
    }
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
    type Buffer = Arc<DmaBuffer>;
}
impl Placement for Gpu {
    const KIND: PlacementKind = PlacementKind::Gpu;
    type Buffer = Arc<DeviceBuffer>;
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
