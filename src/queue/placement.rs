//! Placements: where a queue's ring, doorbell record and completion queue live.

use core::fmt;
use core::sync::atomic::Ordering;
use std::sync::Arc;

use crate::memory::{DeviceBuffer, DeviceRegister, DmaBuffer, RegisterPage};

mod sealed {
    pub trait Sealed {}
}

/// Where a queue lives. Sealed: [`Host`] or [`Gpu`].
pub trait Placement: sealed::Sealed + Copy + fmt::Debug + Send + Sync + 'static {
    /// The run-time value.
    const KIND: PlacementKind;
    /// An owned buffer of this placement, as allocators hand it over (moved into the
    /// queue memory, so that nobody else keeps a handle to it).
    type Owned: Send + Sync + 'static;
    /// A buffer of queue memory in this placement, as the queue and its NIC capability
    /// hold it (it lends the owned buffer, never a second handle, to recovery's access).
    type Buffer: QueueBuffer + From<Self::Owned> + AsRef<Self::Owned>;
    /// Where this placement's producers ring the doorbell: memory a software NIC watches,
    /// or a store-only register of a NIC ([`HostDoorbell`], [`GpuDoorbell`]).
    type Doorbell: QueueBuffer;
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
    type Owned = DmaBuffer;
    type Buffer = Arc<DmaBuffer>;
    type Doorbell = HostDoorbell;
}
impl Placement for Gpu {
    const KIND: PlacementKind = PlacementKind::Gpu;
    type Owned = DeviceBuffer;
    type Buffer = Arc<DeviceBuffer>;
    type Doorbell = GpuDoorbell;
}

/// The 8-byte doorbell a host producer rings: memory the software NIC watches, or a NIC's
/// store-only register page (a UAR). Either way the producer only stores to it (one
/// 64-bit release store after the host barrier); only the memory form can be read back.
#[derive(Clone, Debug)]
pub struct HostDoorbell {
    target: HostDoorbellTarget,
}

#[derive(Clone, Debug)]
enum HostDoorbellTarget {
    Memory(Arc<DmaBuffer>),
    Register(Arc<RegisterPage>),
}

impl HostDoorbell {
    /// A doorbell in memory, watched by the software NIC.
    pub(crate) fn memory(buffer: Arc<DmaBuffer>) -> Self {
        Self {
            target: HostDoorbellTarget::Memory(buffer),
        }
    }
    /// A NIC's doorbell register (an 8-byte store-only page, such as an mlx5 UAR's).
    pub fn register(page: RegisterPage) -> Self {
        Self {
            target: HostDoorbellTarget::Register(Arc::new(page)),
        }
    }
    /// The doorbell's memory, if it is memory (the software NIC reads it).
    pub(crate) fn as_memory(&self) -> Option<&Arc<DmaBuffer>> {
        match &self.target {
            HostDoorbellTarget::Memory(buffer) => Some(buffer),
            HostDoorbellTarget::Register(_) => None,
        }
    }
    /// Whether it is a register (store-only) rather than memory.
    pub fn is_register(&self) -> bool {
        matches!(self.target, HostDoorbellTarget::Register(_))
    }
    /// Stores `value` with one 64-bit release store.
    #[inline]
    pub(crate) fn store(&self, value: [u8; 8]) {
        match &self.target {
            HostDoorbellTarget::Memory(buffer) => {
                buffer.words()[0].store(u64::from_ne_bytes(value), Ordering::Release)
            }
            HostDoorbellTarget::Register(page) => {
                // Offset 0 of a page of at least 8 bytes (8-aligned by construction):
                // the store's bounds and alignment checks cannot fail.
                let stored = page.store(0, value);
                debug_assert!(stored.is_ok(), "{stored:?}");
            }
        }
    }
}

impl QueueBuffer for HostDoorbell {
    fn len(&self) -> usize {
        match &self.target {
            HostDoorbellTarget::Memory(buffer) => buffer.len(),
            HostDoorbellTarget::Register(page) => page.len(),
        }
    }
    fn addr(&self) -> u64 {
        match &self.target {
            HostDoorbellTarget::Memory(buffer) => buffer.addr(),
            HostDoorbellTarget::Register(page) => page.addr(),
        }
    }
    fn device_addr(&self) -> Option<u64> {
        match &self.target {
            HostDoorbellTarget::Memory(buffer) => buffer.device_addr(),
            // A host register page is not mapped into a GPU.
            HostDoorbellTarget::Register(_) => None,
        }
    }
}

/// The 8-byte doorbell GPU threads ring: GPU memory a software NIC (the CUDA one) watches,
/// or a NIC's register mapped into the GPU ([`DeviceRegister`], store-only), which the
/// host may have mapped too (a ConnectX UAR: the mlx5 backend allocated the page and maps
/// it into the GPU from the host's mapping).
#[derive(Clone, Debug)]
pub struct GpuDoorbell {
    target: GpuDoorbellTarget,
}

#[derive(Clone, Debug)]
enum GpuDoorbellTarget {
    Memory(Arc<DeviceBuffer>),
    Register {
        device: Arc<DeviceRegister>,
        /// The same register as the host maps it, if the host does: what recovery rings
        /// while no kernel holds the queue.
        host: Option<Arc<RegisterPage>>,
    },
}

impl GpuDoorbell {
    /// A doorbell in GPU memory, watched by a software NIC.
    pub(crate) fn memory(buffer: Arc<DeviceBuffer>) -> Self {
        Self {
            target: GpuDoorbellTarget::Memory(buffer),
        }
    }
    /// A NIC's doorbell register mapped into the GPU. Recovery cannot ring it from the host
    /// (only a GPU thread's store reaches it); the crate's mlx5 backend gives its GPU
    /// doorbells the host's mapping of the same register as well.
    pub fn register(register: DeviceRegister) -> Self {
        Self {
            target: GpuDoorbellTarget::Register {
                device: Arc::new(register),
                host: None,
            },
        }
    }
    /// A NIC's doorbell register mapped into the GPU (`device`) and into this process
    /// (`host`, the very same register: the page the GPU mapping was made from), so that
    /// recovery can ring it from the host while no kernel holds the queue. Crate-private:
    /// only a backend that mapped both knows they are one register.
    #[cfg_attr(not(feature = "mlx5"), allow(dead_code))]
    pub(crate) fn register_mapped(device: DeviceRegister, host: RegisterPage) -> Self {
        Self {
            target: GpuDoorbellTarget::Register {
                device: Arc::new(device),
                host: Some(Arc::new(host)),
            },
        }
    }
    /// Whether it is a register (store-only) rather than memory.
    pub fn is_register(&self) -> bool {
        matches!(self.target, GpuDoorbellTarget::Register { .. })
    }
    /// Whether it is a register the host has mapped too, which recovery rings from the
    /// host.
    pub fn is_host_mapped(&self) -> bool {
        self.host_register().is_some()
    }
    /// The host's mapping of the register, if it is one the host has mapped.
    pub(crate) fn host_register(&self) -> Option<&RegisterPage> {
        match &self.target {
            GpuDoorbellTarget::Register {
                host: Some(page), ..
            } => Some(page),
            _ => None,
        }
    }
}

impl QueueBuffer for GpuDoorbell {
    fn len(&self) -> usize {
        match &self.target {
            GpuDoorbellTarget::Memory(buffer) => buffer.len(),
            GpuDoorbellTarget::Register { device, .. } => device.len(),
        }
    }
    fn addr(&self) -> u64 {
        match &self.target {
            GpuDoorbellTarget::Memory(buffer) => buffer.addr(),
            GpuDoorbellTarget::Register { device, .. } => device.device_addr(),
        }
    }
    fn device_addr(&self) -> Option<u64> {
        Some(self.addr())
    }
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

#[cfg(test)]
mod tests {
    use core::ptr::NonNull;
    use core::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use super::{GpuDoorbell, HostDoorbell};
    use crate::memory::{DeviceBuffer, DeviceRegister, DmaBuffer, RegisterPage};
    use crate::order::GpuFencedDbrec;
    use crate::queue::{
        CompletionQueueMemory, Gpu, ProducerStateMemory, QpConfig, QueuePair, SendQueueMemory,
        RECORD_BYTES,
    };
    use crate::wqe::{Qpn, Rc, RingSize};

    /// A register page over a word this test keeps (standing in for a UAR mapping), so the
    /// test can see what the producer stored.
    fn register_page() -> (RegisterPage, Arc<AtomicU64>) {
        let word = Arc::new(AtomicU64::new(0));
        let ptr = NonNull::from(&*word).cast::<u8>();
        // SAFETY: `ptr` is an 8-aligned, 8-byte word kept alive by the owner (a clone of
        // its `Arc`); stores to it change only that word.
        let page = unsafe { RegisterPage::from_raw(ptr, 8, Box::new(word.clone())) }.unwrap();
        (page, word)
    }

    #[test]
    fn a_host_producer_rings_a_register_page_with_the_same_store_as_memory() {
        let size = RingSize::new(8).unwrap();
        let (page, word) = register_page();
        let memory = SendQueueMemory::<super::Host>::from_parts(
            size,
            Arc::new(DmaBuffer::zeroed(size.bytes(), 4096).unwrap()),
            Arc::new(DmaBuffer::zeroed(RECORD_BYTES, 64).unwrap()),
            HostDoorbell::register(page),
        )
        .unwrap();
        let doorbell = [1, 2, 3, 4, 5, 6, 7, 8];
        memory.announce(3, doorbell);
        assert_eq!(word.load(Ordering::Acquire).to_ne_bytes(), doorbell);
        assert_eq!(memory.dbrec_bytes(), [0, 0, 0, 0, 0, 0, 0, 3]);
        // Store-only: neither the owner nor the NIC side reads it back.
        assert_eq!(memory.doorbell_bytes(), None);
        let nic = crate::queue::Executor::new("a test NIC");
        assert_eq!(memory.nic_access(&nic).unwrap().load_doorbell(), None);
        assert_eq!(memory.doorbell().len, 8);

        // The memory form, for the software NIC, is read back by both.
        let watched = SendQueueMemory::allocate(size).unwrap();
        watched.announce(3, doorbell);
        assert_eq!(watched.doorbell_bytes(), Some(doorbell));
        assert_eq!(
            watched.nic_access(&nic).unwrap().load_doorbell(),
            Some(u64::from_ne_bytes(doorbell))
        );
    }

    #[test]
    fn a_register_page_of_another_length_is_not_a_doorbell() {
        let word = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let ptr = NonNull::from(&*word).cast::<u8>();
        // SAFETY: 16 aligned bytes kept alive by the owner.
        let page = unsafe { RegisterPage::from_raw(ptr, 16, Box::new(word.clone())) }.unwrap();
        let size = RingSize::new(8).unwrap();
        let err = SendQueueMemory::<super::Host>::from_parts(
            size,
            Arc::new(DmaBuffer::zeroed(size.bytes(), 4096).unwrap()),
            Arc::new(DmaBuffer::zeroed(RECORD_BYTES, 64).unwrap()),
            HostDoorbell::register(page),
        )
        .unwrap_err();
        assert_eq!(
            err,
            crate::queue::QueueMemoryError::WrongLength {
                buffer: "doorbell",
                len: 16,
                expected: 8
            }
        );
    }

    #[test]
    fn the_software_nic_refuses_a_queue_whose_doorbell_it_cannot_watch() {
        use crate::softnic::{Fabric, QpConfig as SoftQpConfig, SoftNicError};
        use crate::wqe::TransportKind;
        let fabric = Fabric::new();
        let node = fabric.add_node(1).unwrap();
        let size = RingSize::new(8).unwrap();
        let (page, _word) = register_page();
        let sq = SendQueueMemory::<super::Host>::from_parts(
            size,
            Arc::new(DmaBuffer::zeroed(size.bytes(), 4096).unwrap()),
            Arc::new(DmaBuffer::zeroed(RECORD_BYTES, 64).unwrap()),
            HostDoorbell::register(page),
        )
        .unwrap();
        let cq = CompletionQueueMemory::allocate(8).unwrap();
        let refused = fabric.create_qp(node, SoftQpConfig::new(TransportKind::Rc, &sq, &cq));
        assert!(
            matches!(
                refused,
                Err(SoftNicError::InvalidQueueMemory { what }) if what.contains("register page")
            ),
            "{refused:?}"
        );
        // The same queue with a memory doorbell is accepted.
        let watched = SendQueueMemory::allocate(size).unwrap();
        assert!(fabric
            .create_qp(node, SoftQpConfig::new(TransportKind::Rc, &watched, &cq))
            .is_ok());
    }

    /// Host memory standing in for device memory: no GPU here, only addresses are used.
    fn stand_in(len: usize) -> DeviceBuffer {
        let backing = vec![0u64; len.div_ceil(8)];
        let addr = backing.as_ptr() as u64;
        // SAFETY: never dereferenced (no kernel runs); `backing` keeps the range allocated.
        unsafe { DeviceBuffer::from_raw(addr, len, Box::new(backing)) }
    }

    #[test]
    fn a_gpu_placed_queue_hands_kernels_the_register_as_its_doorbell() {
        const REGISTER: u64 = 0x7f00_0000_0800;
        // SAFETY: never stored to (no kernel runs); only its address is described.
        let register = unsafe { DeviceRegister::from_raw(REGISTER, 8, Box::new(())) }.unwrap();
        let size = RingSize::new(8).unwrap();
        let sq = SendQueueMemory::<Gpu>::from_parts(
            size,
            Arc::new(stand_in(size.bytes())),
            Arc::new(stand_in(8)),
            GpuDoorbell::register(register),
        )
        .unwrap();
        let cq = CompletionQueueMemory::from_device(8, stand_in(8 * 64), stand_in(8)).unwrap();
        let state = ProducerStateMemory::from_device(stand_in(64)).unwrap();
        let pair = QueuePair::<Rc, Gpu, GpuFencedDbrec>::for_device(
            Qpn::new(5).unwrap(),
            sq,
            cq,
            state,
            QpConfig::default(),
            GpuFencedDbrec,
        )
        .unwrap();
        assert_eq!(pair.device_queue().raw().doorbell, REGISTER);
        assert_eq!(pair.sq_memory().doorbell().device_addr, Some(REGISTER));
    }

    #[test]
    fn a_device_register_is_8_aligned_whole_words() {
        // SAFETY: rejected before use; never stored to.
        let odd = unsafe { DeviceRegister::from_raw(0x1004, 8, Box::new(())) };
        assert!(odd.is_err());
        // SAFETY: as above.
        let short = unsafe { DeviceRegister::from_raw(0x1000, 4, Box::new(())) };
        assert!(short.is_err());
    }
}
