//! The memory of a queue pair, its one owner, and the conventions a NIC (hardware or the
//! software NIC) and the host share about it.
//!
//! | object | size | content |
//! |---|---|---|
//! | send ring | WQEBBs × 64 B, page aligned | WQEs, written by the producer |
//! | send doorbell record | 8 B | bytes 0..4 receive counter (unused, 0); bytes 4..8 the send counter: big-endian `next free WQEBB & 0xffff`, stored by the producer as one 64-bit release store |
//! | doorbell | 8 B | the last doorbell value: bytes 0..8 of a control segment, stored with release (a UAR register on hardware; memory the software NIC watches otherwise) |
//! | CQ ring | entries × 64 B, page aligned | CQEs, written by the NIC: bytes 0..56 first, then bytes 56..64 (with the owner bit) as one 64-bit release store; initialised to `op_own = 0xf1` (invalid, owner 1) |
//! | CQ doorbell record | 8 B | bytes 0..4 big-endian consumer index `& 0xffffff`, stored by the consumer with release after it has read a CQE; bytes 4..8 arm word (unused) |
//!
//! # Ownership
//!
//! [`SendQueueMemory`] and [`CompletionQueueMemory`] are move-only and their buffers are
//! private: the one queue that consumes them ([`SendQueue`](super::SendQueue),
//! [`CompletionQueue`](crate::cq::CompletionQueue), [`QueuePair`](super::QueuePair),
//! [`SharedSendQueue`](super::SharedSendQueue), or a [`RawSendQueue`](super::RawSendQueue)
//! for code that plays the producer itself) is the only host code that writes them, so a
//! published, unretired WQE cannot be overwritten and a CQE cannot be forged from safe
//! code. Anyone may read them (sizes, addresses, byte copies).
//!
//! The NIC side gets a capability instead of a copy: [`SendQueueNicAccess`] and
//! [`CompletionQueueNicAccess`] expose exactly what a NIC does with the memory (read the
//! ring and the records, write CQEs, the addresses to register as UMEM). The software NIC
//! takes them inside the crate; a NIC backend outside it gets them only through the
//! `unsafe` [`SendQueueMemory::nic_access_unchecked`] and
//! [`CompletionQueueMemory::nic_access_unchecked`].
//!
//! Every capability is an exclusive claim recorded in the memory it reaches (see
//! [`executor`](super::executor)): the one [`Executor`] holding claims on a queue's memory
//! is the only one that may take more, so two NICs (two fabrics, two CUDA software NICs, a
//! sink and a NIC, a backend and a fabric) never execute one queue, whoever made them.
//!
//! Buffers are moved in: every constructor takes owned [`DmaBuffer`]s or
//! [`DeviceBuffer`]s (never an `Arc` someone else could keep), so after construction the
//! queue and its executor's capability are the only handles to them.

use core::fmt;
use std::sync::Arc;

use core::sync::atomic::Ordering;

use super::executor::{Executor, ExecutorCell, ExecutorClaim, ExecutorConflict};
use super::placement::{Gpu, GpuDoorbell, Host, HostDoorbell, Placement, QueueBuffer};
use crate::cq::CQE_BYTES;
use crate::memory::{DeviceBuffer, DmaBuffer, DmaError};
use crate::order::HostBarrier;
use crate::wqe::RingSize;

/// Alignment of rings: a page, as NIC queue memory is.
pub const RING_ALIGN: usize = 4096;
/// Byte offset of the send counter in a queue pair's doorbell record.
pub const SEND_DBREC_OFFSET: usize = 4;
/// `op_own` of a CQE nobody has written: opcode 15 (invalid), owner 1.
pub const CQE_INIT_OP_OWN: u8 = 0xf1;
/// Length of a doorbell record and of a doorbell.
pub const RECORD_BYTES: usize = 8;

/// Where one buffer of queue memory is, as plain numbers: what a NIC backend registers as
/// UMEM and what a kernel is handed. Nothing can be accessed through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueBufferSpan {
    /// The address the NIC names it by: the host virtual address of host memory, the
    /// device address of GPU memory.
    pub addr: u64,
    /// The address GPU threads use, if a GPU reaches the buffer.
    pub device_addr: Option<u64>,
    /// Length in bytes.
    pub len: usize,
}

impl QueueBufferSpan {
    pub(crate) fn of<B: QueueBuffer>(buffer: &B) -> Self {
        Self {
            addr: buffer.addr(),
            device_addr: buffer.device_addr(),
            len: buffer.len(),
        }
    }

    /// Whether `[addr, addr + len)` shares a byte with this buffer.
    pub fn overlaps(&self, addr: u64, len: u64) -> bool {
        let end = self.addr.saturating_add(self.len as u64);
        let other_end = addr.saturating_add(len);
        len > 0 && self.len > 0 && addr < end && self.addr < other_end
    }
}

/// Why queue memory could not be assembled from the buffers given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueueMemoryError {
    /// A CQ's entry count that is zero or not a power of two.
    BadEntries {
        /// The count given.
        entries: u32,
    },
    /// A buffer whose length is not what its role needs.
    WrongLength {
        /// Which buffer.
        buffer: &'static str,
        /// Its length.
        len: usize,
        /// The length its role needs.
        expected: usize,
    },
    /// Host memory could not be allocated.
    Memory(DmaError),
}

impl fmt::Display for QueueMemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadEntries { entries } => {
                write!(f, "{entries} CQ entries: not a nonzero power of two")
            }
            Self::WrongLength {
                buffer,
                len,
                expected,
            } => write!(f, "the {buffer} has {len} bytes, its role needs {expected}"),
            Self::Memory(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for QueueMemoryError {}

impl From<DmaError> for QueueMemoryError {
    fn from(e: DmaError) -> Self {
        Self::Memory(e)
    }
}

fn check_len(buffer: &'static str, len: usize, expected: usize) -> Result<(), QueueMemoryError> {
    if len == expected {
        Ok(())
    } else {
        Err(QueueMemoryError::WrongLength {
            buffer,
            len,
            expected,
        })
    }
}

fn check_entries(entries: u32) -> Result<usize, QueueMemoryError> {
    if entries == 0 || !entries.is_power_of_two() {
        return Err(QueueMemoryError::BadEntries { entries });
    }
    (entries as usize)
        .checked_mul(CQE_BYTES)
        .ok_or(QueueMemoryError::BadEntries { entries })
}

/// The memory of one send queue, placed in `P`: its ring, doorbell record and doorbell.
///
/// Move-only: it cannot be copied, so one queue owns it.
///
/// ```compile_fail,E0599
/// # use ibgda::queue::*; use ibgda::wqe::*;
/// let memory = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
/// let copy = memory.clone(); // no second owner
/// ```
#[derive(Debug)]
pub struct SendQueueMemory<P: Placement = Host> {
    ring: P::Buffer,
    size: RingSize,
    dbrec: P::Buffer,
    doorbell: P::Doorbell,
    executor: Arc<ExecutorCell>,
}

impl<P: Placement> SendQueueMemory<P> {
    /// The ring's size.
    pub fn size(&self) -> RingSize {
        self.size
    }
    /// Where the ring is.
    pub fn ring(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.ring)
    }
    /// Where the doorbell record is.
    pub fn dbrec(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.dbrec)
    }
    /// Where the doorbell is.
    pub fn doorbell(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.doorbell)
    }

    /// The ring buffer, for the queue that owns this memory.
    pub(crate) fn ring_buffer(&self) -> &P::Buffer {
        &self.ring
    }
    /// The doorbell record buffer, for the queue that owns this memory.
    pub(crate) fn dbrec_buffer(&self) -> &P::Buffer {
        &self.dbrec
    }
    /// The doorbell, for the queue that owns this memory.
    pub(crate) fn doorbell_buffer(&self) -> &P::Doorbell {
        &self.doorbell
    }

    /// The NIC's capability to this memory, for the crate's own NIC code (the software NIC,
    /// control planes): a claim by `executor`, refused while another executor holds one.
    pub(crate) fn nic_access(
        &self,
        executor: &Executor,
    ) -> Result<SendQueueNicAccess<P>, ExecutorConflict> {
        let claim = self.executor.claim(executor, self.ring())?;
        Ok(SendQueueNicAccess {
            ring: self.ring.clone(),
            size: self.size,
            dbrec: self.dbrec.clone(),
            doorbell: self.doorbell.clone(),
            _claim: Some(claim),
        })
    }

    /// The NIC's capability to this memory, for a NIC backend outside this crate (such as a
    /// CUDA software NIC): a claim by `executor`, refused with [`ExecutorConflict`] while
    /// another executor holds one on this queue.
    ///
    /// # Safety
    ///
    /// Only a NIC that executes this queue's WQEs may use the capability, and only while
    /// the queue that owns this memory lives: it lets its holder read the ring the owner
    /// writes and is the route by which memory the WQEs name is accessed. Using it as
    /// anything but that NIC (for instance to register the ring as a data region, or to
    /// keep executing after the queue is gone), or holding it under an `executor` that is
    /// not the NIC actually executing the queue, breaks the owner's guarantees.
    pub unsafe fn nic_access_unchecked(
        &self,
        executor: &Executor,
    ) -> Result<SendQueueNicAccess<P>, ExecutorConflict> {
        self.nic_access(executor)
    }

    /// The number of the executor holding claims on this memory, if any.
    pub fn executor(&self) -> Option<u64> {
        self.executor.holder()
    }

    /// What a claim on this memory is taken through: its record and the span conflicts name.
    pub(crate) fn claim_target(&self) -> ClaimTarget<'_> {
        ClaimTarget {
            cell: &self.executor,
            queue: self.ring(),
        }
    }
}

/// Where a claim on one queue's memory is recorded (for the UMEM registrations of its
/// buffers): the memory's claim record and the span a conflict names.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClaimTarget<'a> {
    cell: &'a Arc<ExecutorCell>,
    queue: QueueBufferSpan,
}

impl<'a> ClaimTarget<'a> {
    /// The claim record `cell` of memory at `queue` (for memory that is no queue's own, as
    /// a backend's host shadow of GPU queue memory).
    pub(crate) fn new(cell: &'a Arc<ExecutorCell>, queue: QueueBufferSpan) -> Self {
        Self { cell, queue }
    }

    /// A claim by `executor`.
    pub(crate) fn claim(&self, executor: &Executor) -> Result<ExecutorClaim, ExecutorConflict> {
        self.cell.claim(executor, self.queue)
    }
}

impl<P: Placement> SendQueueMemory<P> {
    /// Send-queue memory over `ring`, `dbrec` and `doorbell`, checked against `size`.
    pub(crate) fn from_parts(
        size: RingSize,
        ring: P::Buffer,
        dbrec: P::Buffer,
        doorbell: P::Doorbell,
    ) -> Result<Self, QueueMemoryError> {
        check_len("send ring", ring.len(), size.bytes())?;
        check_len("send doorbell record", dbrec.len(), RECORD_BYTES)?;
        check_len("doorbell", doorbell.len(), RECORD_BYTES)?;
        Ok(Self {
            ring,
            size,
            dbrec,
            doorbell,
            executor: Arc::default(),
        })
    }
}

impl SendQueueMemory<Host> {
    /// Zeroed host memory for a send queue of `size`.
    pub fn allocate(size: RingSize) -> Result<Self, DmaError> {
        Ok(Self {
            ring: Arc::new(DmaBuffer::zeroed(size.bytes(), RING_ALIGN)?),
            size,
            dbrec: Arc::new(DmaBuffer::zeroed(RECORD_BYTES, 64)?),
            doorbell: HostDoorbell::memory(Arc::new(DmaBuffer::zeroed(RECORD_BYTES, 64)?)),
            executor: Arc::default(),
        })
    }

    /// Host memory for a send queue of `size` over buffers made elsewhere (pinned and
    /// mapped into a GPU, for a GPU producer): the ring must be `size` WQEBBs, the record
    /// and doorbell 8 bytes each.
    pub fn from_buffers(
        size: RingSize,
        ring: DmaBuffer,
        dbrec: DmaBuffer,
        doorbell: DmaBuffer,
    ) -> Result<Self, QueueMemoryError> {
        Self::from_parts(
            size,
            Arc::new(ring),
            Arc::new(dbrec),
            HostDoorbell::memory(Arc::new(doorbell)),
        )
    }

    /// A copy of the ring's bytes.
    pub fn ring_bytes(&self) -> Vec<u8> {
        self.ring.to_vec()
    }
    /// A copy of the doorbell record.
    pub fn dbrec_bytes(&self) -> [u8; 8] {
        self.dbrec.words()[0].load(Ordering::Acquire).to_ne_bytes()
    }
    /// A copy of the doorbell's last value, if the doorbell is memory (a NIC's register
    /// page is store-only: `None`).
    pub fn doorbell_bytes(&self) -> Option<[u8; 8]> {
        let memory = self.doorbell.as_memory()?;
        Some(memory.words()[0].load(Ordering::Acquire).to_ne_bytes())
    }

    /// Announces every WQEBB before `next_free` as a CPU producer does: the host barrier,
    /// the doorbell record (big-endian `next_free & 0xffff`), a write flush, the 8-byte
    /// `doorbell` value, and a write flush.
    #[inline]
    pub(crate) fn announce(&self, next_free: u64, doorbell: [u8; 8]) {
        let barrier = HostBarrier;
        barrier.to_device();
        self.store_dbrec(send_record(next_free));
        barrier.flush_writes();
        self.store_doorbell(doorbell);
        barrier.flush_writes();
    }

    /// Stores the doorbell record (one release store).
    #[inline]
    pub(crate) fn store_dbrec(&self, record: [u8; 8]) {
        self.dbrec.words()[0].store(u64::from_ne_bytes(record), Ordering::Release);
    }
    /// Stores the doorbell (one release store, to memory or to the NIC's register).
    #[inline]
    pub(crate) fn store_doorbell(&self, value: [u8; 8]) {
        self.doorbell.store(value);
    }
}

/// The doorbell record announcing every WQEBB before `next_free`.
#[inline]
fn send_record(next_free: u64) -> [u8; 8] {
    let mut record = [0u8; 8];
    record[SEND_DBREC_OFFSET..].copy_from_slice(&(next_free as u32 & 0xffff).to_be_bytes());
    record
}

impl SendQueueMemory<Gpu> {
    /// GPU memory for a send queue of `size`: the ring must be `size` WQEBBs, the record
    /// and doorbell 8 bytes each, else [`QueueMemoryError::WrongLength`].
    pub fn from_device(
        size: RingSize,
        ring: DeviceBuffer,
        dbrec: DeviceBuffer,
        doorbell: DeviceBuffer,
    ) -> Result<Self, QueueMemoryError> {
        Self::from_parts(
            size,
            Arc::new(ring),
            Arc::new(dbrec),
            GpuDoorbell::memory(Arc::new(doorbell)),
        )
    }
}

/// The memory of one completion queue, placed in `P`: its ring of 64-byte CQEs and its
/// doorbell record. Move-only, like [`SendQueueMemory`].
#[derive(Debug)]
pub struct CompletionQueueMemory<P: Placement = Host> {
    ring: P::Buffer,
    entries: u32,
    dbrec: P::Buffer,
    executor: Arc<ExecutorCell>,
}

impl<P: Placement> CompletionQueueMemory<P> {
    /// Entries in the ring (a nonzero power of two).
    pub fn entries(&self) -> u32 {
        self.entries
    }
    /// Where the ring is.
    pub fn ring(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.ring)
    }
    /// Where the doorbell record is.
    pub fn dbrec(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.dbrec)
    }

    /// The ring buffer, for the queue that owns this memory.
    pub(crate) fn ring_buffer(&self) -> &P::Buffer {
        &self.ring
    }
    /// The doorbell record buffer, for the queue that owns this memory.
    pub(crate) fn dbrec_buffer(&self) -> &P::Buffer {
        &self.dbrec
    }

    /// The NIC's capability to this memory, for the crate's own NIC code: a claim by
    /// `executor` (which may hold several, for the queues sharing the CQ), refused while
    /// another executor holds one.
    pub(crate) fn nic_access(
        &self,
        executor: &Executor,
    ) -> Result<CompletionQueueNicAccess<P>, ExecutorConflict> {
        let claim = self.executor.claim(executor, self.ring())?;
        Ok(CompletionQueueNicAccess {
            ring: self.ring.clone(),
            entries: self.entries,
            dbrec: self.dbrec.clone(),
            _claim: Some(claim),
        })
    }

    /// The NIC's capability to this memory, for a NIC backend outside this crate: a claim
    /// by `executor`, refused with [`ExecutorConflict`] while another executor holds one.
    ///
    /// # Safety
    ///
    /// Only a NIC that executes the WQEs of the queues completing into this CQ may use the
    /// capability, and only while the queue that owns this memory lives: a CQE it writes
    /// retires WQEs and releases the registrations they name, so a CQE for a WQE that was
    /// not executed lets memory be reused while the WQE can still touch it. `executor` must
    /// be the NIC actually executing those queues.
    pub unsafe fn nic_access_unchecked(
        &self,
        executor: &Executor,
    ) -> Result<CompletionQueueNicAccess<P>, ExecutorConflict> {
        self.nic_access(executor)
    }

    /// The number of the executor holding claims on this memory, if any.
    pub fn executor(&self) -> Option<u64> {
        self.executor.holder()
    }

    /// What a claim on this memory is taken through.
    pub(crate) fn claim_target(&self) -> ClaimTarget<'_> {
        ClaimTarget {
            cell: &self.executor,
            queue: self.ring(),
        }
    }

    /// CQ memory over `ring` and `dbrec`, checked against `entries` (the ring's contents
    /// are its maker's: CQEs initialised invalid).
    pub(crate) fn from_parts(
        entries: u32,
        ring: P::Buffer,
        dbrec: P::Buffer,
    ) -> Result<Self, QueueMemoryError> {
        let ring_len = check_entries(entries)?;
        check_len("CQ ring", ring.len(), ring_len)?;
        check_len("CQ doorbell record", dbrec.len(), RECORD_BYTES)?;
        Ok(Self {
            ring,
            entries,
            dbrec,
            executor: Arc::default(),
        })
    }
}

impl CompletionQueueMemory<Host> {
    /// Host memory for a CQ of `entries` (a nonzero power of two) CQEs, each initialised
    /// invalid and hardware-owned.
    pub fn allocate(entries: u32) -> Result<Self, DmaError> {
        let ring_len = check_entries(entries).map_err(|_| DmaError::BadLength {
            len: (entries as usize).saturating_mul(CQE_BYTES),
        })?;
        let ring = DmaBuffer::zeroed(ring_len, RING_ALIGN)?;
        init_cq_ring(&ring)?;
        Ok(Self {
            ring: Arc::new(ring),
            entries,
            dbrec: Arc::new(DmaBuffer::zeroed(RECORD_BYTES, 64)?),
            executor: Arc::default(),
        })
    }

    /// Host memory for a CQ of `entries` over buffers made elsewhere (pinned and mapped
    /// into a GPU): the ring must be `entries` × 64 bytes, the record 8. Every CQE is
    /// initialised invalid and hardware-owned here.
    pub fn from_buffers(
        entries: u32,
        ring: DmaBuffer,
        dbrec: DmaBuffer,
    ) -> Result<Self, QueueMemoryError> {
        let memory = Self::from_parts(entries, Arc::new(ring), Arc::new(dbrec))?;
        init_cq_ring(&memory.ring)?;
        memory.dbrec.write(0, &[0; RECORD_BYTES])?;
        Ok(memory)
    }

    /// A copy of the ring's bytes.
    pub fn ring_bytes(&self) -> Vec<u8> {
        self.ring.to_vec()
    }
    /// A copy of the doorbell record.
    pub fn dbrec_bytes(&self) -> [u8; 8] {
        self.dbrec.words()[0].load(Ordering::Acquire).to_ne_bytes()
    }

    /// Every entry invalid and hardware-owned, the record zero (for a raw CQ's reuse).
    pub(crate) fn reinitialize(&self) {
        // In bounds: whole entries of the ring, and the 8-byte record.
        let _ = init_cq_ring(&self.ring);
        self.dbrec.words()[0].store(0, Ordering::Release);
    }
}

fn init_cq_ring(ring: &DmaBuffer) -> Result<(), DmaError> {
    for entry in (0..ring.len()).step_by(CQE_BYTES) {
        ring.write(entry, &[0; CQE_BYTES - 1])?;
        ring.write(entry + CQE_BYTES - 1, &[CQE_INIT_OP_OWN])?;
    }
    Ok(())
}

impl CompletionQueueMemory<Gpu> {
    /// GPU memory for a CQ of `entries` (a nonzero power of two): the ring must be
    /// `entries` × 64 bytes, initialised with every `op_own` [`CQE_INIT_OP_OWN`] by its
    /// maker, and the record 8 bytes, else a [`QueueMemoryError`].
    pub fn from_device(
        entries: u32,
        ring: DeviceBuffer,
        dbrec: DeviceBuffer,
    ) -> Result<Self, QueueMemoryError> {
        Self::from_parts(entries, Arc::new(ring), Arc::new(dbrec))
    }
}

/// The memory of a GPU-posted queue pair's [`DeviceProducerState`](super::DeviceProducerState):
/// at least 64 bytes the GPU reaches, zeroed, which only the queue pair's GPU threads
/// write while it lives. Move-only and private, like the rest of queue memory: once given
/// to [`QueuePair::for_device`](super::QueuePair::for_device) nobody else holds it.
///
/// ```compile_fail,E0599
/// # use ibgda::queue::*; use ibgda::memory::DmaBuffer;
/// let state = ProducerStateMemory::from_buffer(DmaBuffer::zeroed(64, 64).unwrap()).unwrap();
/// let kept = state.clone(); // no second owner to write the counters behind the kernels
/// ```
#[derive(Debug)]
pub struct ProducerStateMemory<P: Placement = Host> {
    buffer: P::Buffer,
}

/// Bytes of a device producer state.
const PRODUCER_STATE_BYTES: usize = 64;

impl<P: Placement> ProducerStateMemory<P> {
    /// Where the state is.
    pub fn span(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.buffer)
    }
    /// The buffer, for the queue pair that owns it.
    pub(crate) fn into_buffer(self) -> P::Buffer {
        self.buffer
    }
    fn checked(buffer: P::Buffer) -> Result<Self, QueueMemoryError> {
        if buffer.len() < PRODUCER_STATE_BYTES {
            return Err(QueueMemoryError::WrongLength {
                buffer: "producer state",
                len: buffer.len(),
                expected: PRODUCER_STATE_BYTES,
            });
        }
        Ok(Self { buffer })
    }
}

impl ProducerStateMemory<Host> {
    /// Producer state in `buffer` (at least 64 bytes, pinned and mapped into the GPU for
    /// a GPU producer), zeroed here.
    pub fn from_buffer(buffer: DmaBuffer) -> Result<Self, QueueMemoryError> {
        let state = Self::checked(Arc::new(buffer))?;
        state.buffer.write(0, &vec![0; state.buffer.len()])?;
        Ok(state)
    }
}

impl ProducerStateMemory<Gpu> {
    /// Producer state in GPU memory (at least 64 bytes, zeroed by its maker).
    pub fn from_device(buffer: DeviceBuffer) -> Result<Self, QueueMemoryError> {
        Self::checked(Arc::new(buffer))
    }
}

/// What a NIC may do with one send queue's memory: read the ring, the doorbell record and
/// the doorbell, and know where they are. Not `Clone`; obtained only by NIC code (see
/// [`SendQueueMemory::nic_access_unchecked`]).
#[derive(Debug)]
pub struct SendQueueNicAccess<P: Placement = Host> {
    ring: P::Buffer,
    size: RingSize,
    dbrec: P::Buffer,
    doorbell: P::Doorbell,
    /// The executor's claim on the queue, released with the capability (`None` only for
    /// memory a foreign caller handed the NIC by address, which carries no claim record).
    _claim: Option<ExecutorClaim>,
}

impl SendQueueNicAccess<Host> {
    /// The capability a NIC holds over buffers it was given as UMEM (ring and record) and
    /// its own doorbell register (a UAR page): for the software NIC's command backend.
    /// `claim` is the executor's claim taken when the ring was registered.
    pub(crate) fn from_registered(
        size: RingSize,
        ring: Arc<DmaBuffer>,
        dbrec: Arc<DmaBuffer>,
        doorbell: Arc<DmaBuffer>,
        claim: Option<ExecutorClaim>,
    ) -> Result<Self, QueueMemoryError> {
        check_len("send ring", ring.len(), size.bytes())?;
        check_len("send doorbell record", dbrec.len(), RECORD_BYTES)?;
        check_len("doorbell", doorbell.len(), RECORD_BYTES)?;
        Ok(Self {
            ring,
            size,
            dbrec,
            doorbell: HostDoorbell::memory(doorbell),
            _claim: claim,
        })
    }
}

impl CompletionQueueNicAccess<Host> {
    /// The capability a NIC holds over a CQ ring and record it was given as UMEM: for the
    /// software NIC's command backend.
    /// `claim` is the executor's claim taken when the ring was registered.
    pub(crate) fn from_registered(
        entries: u32,
        ring: Arc<DmaBuffer>,
        dbrec: Arc<DmaBuffer>,
        claim: Option<ExecutorClaim>,
    ) -> Result<Self, QueueMemoryError> {
        let ring_len = check_entries(entries)?;
        check_len("CQ ring", ring.len(), ring_len)?;
        check_len("CQ doorbell record", dbrec.len(), RECORD_BYTES)?;
        Ok(Self {
            ring,
            entries,
            dbrec,
            _claim: claim,
        })
    }
}

impl<P: Placement> SendQueueNicAccess<P> {
    /// The ring's size.
    pub fn size(&self) -> RingSize {
        self.size
    }
    /// Where the ring is (to register as UMEM).
    pub fn ring(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.ring)
    }
    /// Where the doorbell record is.
    pub fn dbrec(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.dbrec)
    }
    /// Where the doorbell is.
    pub fn doorbell(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.doorbell)
    }
    /// Every buffer of the queue.
    pub fn spans(&self) -> [QueueBufferSpan; 3] {
        [self.ring(), self.dbrec(), self.doorbell()]
    }
}

impl SendQueueNicAccess<Host> {
    /// Copies `dst.len()` ring bytes from `offset` (relaxed loads).
    pub fn read_ring(&self, offset: usize, dst: &mut [u8]) -> Result<(), DmaError> {
        self.ring.read(offset, dst)
    }
    /// The doorbell record word (acquire: the WQEs it covers are visible).
    pub fn load_dbrec(&self) -> u64 {
        self.dbrec.words()[0].load(Ordering::Acquire)
    }
    /// The doorbell word (acquire), if the doorbell is memory (the software NIC's); a
    /// NIC's register page is store-only: `None`.
    pub fn load_doorbell(&self) -> Option<u64> {
        let memory = self.doorbell.as_memory()?;
        Some(memory.words()[0].load(Ordering::Acquire))
    }
}

/// What a NIC may do with one completion queue's memory: write CQEs (body, then the word
/// with the owner bit, release), read the doorbell record, and know where they are. Not
/// `Clone`; obtained only by NIC code (see
/// [`CompletionQueueMemory::nic_access_unchecked`]).
#[derive(Debug)]
pub struct CompletionQueueNicAccess<P: Placement = Host> {
    ring: P::Buffer,
    entries: u32,
    dbrec: P::Buffer,
    /// As [`SendQueueNicAccess`]'s.
    _claim: Option<ExecutorClaim>,
}

impl<P: Placement> CompletionQueueNicAccess<P> {
    /// Entries in the ring.
    pub fn entries(&self) -> u32 {
        self.entries
    }
    /// Where the ring is (to register as UMEM).
    pub fn ring(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.ring)
    }
    /// Where the doorbell record is.
    pub fn dbrec(&self) -> QueueBufferSpan {
        QueueBufferSpan::of(&self.dbrec)
    }
    /// Every buffer of the CQ.
    pub fn spans(&self) -> [QueueBufferSpan; 2] {
        [self.ring(), self.dbrec()]
    }
    /// Whether `other` is a capability to the same CQ memory.
    pub fn same_memory(&self, other: &Self) -> bool {
        self.ring() == other.ring() && self.dbrec() == other.dbrec()
    }
}

impl CompletionQueueNicAccess<Host> {
    /// Writes `cqe` into entry `slot` (taken modulo the ring): bytes 0..56 first, then
    /// bytes 56..64 (with the owner bit) as one 64-bit release store, so a poller that
    /// sees the owner word sees the whole entry.
    pub fn write_cqe(&self, slot: u32, cqe: &[u8; CQE_BYTES]) {
        let offset = (slot & (self.entries - 1)) as usize * CQE_BYTES;
        let words = self.ring.words();
        let base = offset / 8;
        crate::memory::copy_in(&words[base..base + 7], 0, &cqe[..CQE_BYTES - 8]);
        let mut last = [0u8; 8];
        last.copy_from_slice(&cqe[CQE_BYTES - 8..]);
        words[base + 7].store(u64::from_ne_bytes(last), Ordering::Release);
    }
    /// The CQ doorbell record word (acquire).
    pub fn load_dbrec(&self) -> u64 {
        self.dbrec.words()[0].load(Ordering::Acquire)
    }
    /// A copy of entry `slot` (taken modulo the ring).
    pub fn read_cqe(&self, slot: u32) -> [u8; CQE_BYTES] {
        let mut cqe = [0u8; CQE_BYTES];
        let offset = (slot & (self.entries - 1)) as usize * CQE_BYTES;
        crate::memory::copy_out(self.ring.words(), offset, &mut cqe, Ordering::Acquire);
        cqe
    }
}
