//! The CPU-assisted doorbell: producers build and publish WQEs exactly as on the GPU path,
//! but instead of storing the doorbell they publish their producer index to a
//! host-visible slot, and a host thread ([`Forwarder`]) forwards it: the host barrier, the
//! doorbell record, a write flush, the 8-byte doorbell (the queue memory's own
//! announcement sequence). This is NVSHMEM's CPU NIC handler and DOCA's CPU proxy mode,
//! for a GPU that cannot map the NIC's doorbell page.
//!
//! Where the doorbell goes is in the queue's type. A GPU-produced queue pair hands
//! kernels a [`crate::queue::DeviceQueue`] only for a mapped doorbell; a CPU-assisted one
//! ([`AssistedGpuQueue`]) hands out an [`AssistedDeviceQueue`] instead, whose doorbell
//! field is the index slot, and which launchers of mapped-doorbell kernels do not take.
//! The inner queue pair is never exposed, so the real doorbell's address never reaches a
//! kernel. On the host, [`AssistedQueuePair`] posts without a doorbell and has no method
//! that rings one. The slot value is the next free WQEBB's low 16 bits, the doorbell
//! record's counter: the forwarder needs nothing more.

use core::fmt;
use core::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::memory::DmaBuffer;
use crate::order::{GpuThread, HostBarrier, OrderingScope, ValidFor};
use crate::queue::{
    DeviceQueueDescriptor, DeviceQueueError, DoorbellPolicy, Host, HostDoorbell, PollError, Polled,
    PostError, QueuePair, Registered, SendQueueMemory, Ticket, SEND_DBREC_OFFSET,
};
use crate::wqe::{Qpn, TypedTransport, Wqe, WqeSpec};

mod sealed {
    pub trait Sealed {}
}

/// Where a queue's doorbell goes (sealed: [`MappedUar`] or [`CpuAssisted`]).
pub trait DoorbellTarget: sealed::Sealed + Copy + fmt::Debug + 'static {
    /// The name kernels are suffixed with (`""` or `"_assisted"`).
    const SUFFIX: &'static str;
}

/// The NIC's doorbell page is mapped into the producer: it stores the doorbell itself.
#[derive(Clone, Copy, Debug)]
pub struct MappedUar;
/// The producer publishes its index; a host thread rings the doorbell.
#[derive(Clone, Copy, Debug)]
pub struct CpuAssisted;
impl sealed::Sealed for MappedUar {}
impl sealed::Sealed for CpuAssisted {}
impl DoorbellTarget for MappedUar {
    const SUFFIX: &'static str = "";
}
impl DoorbellTarget for CpuAssisted {
    const SUFFIX: &'static str = "_assisted";
}

/// Why a queue cannot be made CPU-assisted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AssistedError {
    /// The queue rings its own doorbell per post.
    RingsItself,
    /// The index slot is shorter than 8 bytes or not zeroed.
    BadSlot {
        /// Its length.
        len: usize,
    },
    /// The slot is not mapped into the GPU.
    SlotNotMapped,
}

impl fmt::Display for AssistedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RingsItself => f.write_str(
                "the queue rings a doorbell per post; a CPU-assisted queue needs DoorbellPolicy::Explicit",
            ),
            Self::BadSlot { len } => {
                write!(f, "index slot of {len} bytes: needs 8, zeroed")
            }
            Self::SlotNotMapped => f.write_str("the index slot is not mapped into the GPU"),
        }
    }
}

impl std::error::Error for AssistedError {}

fn check_slot(slot: &DmaBuffer) -> Result<(), AssistedError> {
    if slot.len() < 8 || slot.words()[0].load(Ordering::Acquire) != 0 {
        return Err(AssistedError::BadSlot { len: slot.len() });
    }
    Ok(())
}

/// What the forwarder needs of one queue: its index slot, and its doorbell record and
/// doorbell (the only parts of the queue memory it writes; the queue's producer, posting
/// with an explicit doorbell policy and no ringing method, never writes them).
///
/// Move-only, like the queue memory it points into: one forwarder serves a queue, so its
/// doorbell record never goes backwards.
#[derive(Debug)]
pub struct ForwardTarget {
    slot: Arc<DmaBuffer>,
    dbrec: Arc<DmaBuffer>,
    doorbell: HostDoorbell,
    qpn: Qpn,
}

impl ForwardTarget {
    fn new(slot: Arc<DmaBuffer>, memory: &SendQueueMemory<Host>, qpn: Qpn) -> Self {
        Self {
            slot,
            dbrec: memory.dbrec_buffer().clone(),
            doorbell: memory.doorbell_buffer().clone(),
            qpn,
        }
    }

    /// Announces every WQEBB before `next` as a CPU producer does: the host barrier, the
    /// doorbell record (big-endian `next & 0xffff`), a write flush, the 8-byte doorbell,
    /// a write flush.
    fn announce(&self, next: u64) {
        let barrier = HostBarrier;
        barrier.to_device();
        let mut record = [0u8; 8];
        record[SEND_DBREC_OFFSET..].copy_from_slice(&((next as u32) & 0xffff).to_be_bytes());
        self.dbrec.words()[0].store(u64::from_ne_bytes(record), Ordering::Release);
        barrier.flush_writes();
        let value = doorbell_value(next, self.qpn);
        self.doorbell.store(value);
        barrier.flush_writes();
    }
}

/// The 8-byte doorbell announcing everything before `next`: a control segment's first
/// 8 bytes with index `next & 0xffff`, opcode 0, and the QPN (as the device library,
/// NVSHMEM and DOCA ring).
pub fn doorbell_value(next: u64, qpn: Qpn) -> [u8; 8] {
    let mut v = [0u8; 8];
    v[..4].copy_from_slice(&(((next as u32) & 0xffff) << 8).to_be_bytes());
    v[4..].copy_from_slice(&(qpn.get() << 8).to_be_bytes());
    v
}

/// A host queue pair whose doorbell a [`Forwarder`] rings: CPU threads standing in for
/// GPU producers post through it, then publish their index.
pub struct AssistedQueuePair<T: TypedTransport> {
    pair: QueuePair<T>,
    slot: Arc<DmaBuffer>,
}

impl<T: TypedTransport> fmt::Debug for AssistedQueuePair<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AssistedQueuePair")
            .field("qpn", &self.pair.qpn())
            .finish()
    }
}

impl<T: TypedTransport> AssistedQueuePair<T> {
    /// Makes `pair` (with [`DoorbellPolicy::Explicit`]) CPU-assisted through `slot`
    /// (zeroed, at least 8 bytes, moved in: the queue pair and its forwarder target are
    /// then the only handles to it, so no other queue announces through it); returns it
    /// and what its forwarder needs.
    pub fn new(
        pair: QueuePair<T>,
        slot: DmaBuffer,
    ) -> Result<(Self, ForwardTarget), AssistedError> {
        if pair.sq().config().doorbell != DoorbellPolicy::Explicit {
            return Err(AssistedError::RingsItself);
        }
        check_slot(&slot)?;
        let slot = Arc::new(slot);
        let target = ForwardTarget::new(slot.clone(), pair.sq().memory(), pair.qpn());
        Ok((Self { pair, slot }, target))
    }

    /// Builds and publishes one WQE (no doorbell).
    pub fn post<W: WqeSpec<Transport = T>>(
        &mut self,
        wqe: &Wqe<W>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<Ticket, PostError> {
        self.pair.post(wqe, registrations)
    }

    /// Publishes the producer index to the slot (release: the WQEs are written first).
    pub fn publish_index(&mut self) {
        let next = self.pair.sq().producer() & 0xffff;
        self.slot.words()[0].store(next, Ordering::Release);
    }

    /// Consumes one CQE, if any.
    pub fn poll(&mut self) -> Result<Option<Polled>, PollError> {
        self.pair.poll()
    }

    /// Whether `ticket` is complete.
    pub fn is_complete(&self, ticket: Ticket) -> bool {
        self.pair.sq().is_complete(ticket)
    }

    /// Free WQEBBs.
    pub fn free_wqebbs(&self) -> u32 {
        self.pair.sq().free_wqebbs()
    }

    /// The queue pair number.
    pub fn qpn(&self) -> Qpn {
        self.pair.qpn()
    }
}

/// A GPU-produced queue pair in host memory whose doorbell a [`Forwarder`] rings.
pub struct AssistedGpuQueue<
    T: TypedTransport,
    S: OrderingScope<Producer = GpuThread> + ValidFor<Host>,
> {
    pair: QueuePair<T, Host, S>,
    descriptor: DeviceQueueDescriptor,
}

impl<T, S> fmt::Debug for AssistedGpuQueue<T, S>
where
    T: TypedTransport,
    S: OrderingScope<Producer = GpuThread> + ValidFor<Host>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AssistedGpuQueue")
            .field("descriptor", &self.descriptor)
            .finish()
    }
}

/// The descriptor of a CPU-assisted queue as a kernel sees it: its `doorbell` field is
/// the index slot. Only kernels instantiated for a CPU-assisted doorbell take it.
///
/// Those kernels post as the queue's one exclusive producer, so the handle is unique: it
/// borrows its queue mutably ([`AssistedGpuQueue::device_queue`] takes `&mut self`) and
/// is neither `Clone` nor `Copy`. A launcher given a slice of them therefore holds each
/// queue once: the same queue twice, which would make two exclusive producers write one
/// ring, does not compile.
///
/// ```compile_fail,E0499
/// # use ibgda::order::SystemReleaseStore;
/// # use ibgda::proxy::AssistedGpuQueue;
/// # use ibgda::wqe::Rc;
/// fn twice(q: &mut AssistedGpuQueue<Rc, SystemReleaseStore>) {
///     let a = q.device_queue();
///     let b = q.device_queue();
///     let _both = [a, b];
/// }
/// ```
pub struct AssistedDeviceQueue<'q, T, S> {
    raw: DeviceQueueDescriptor,
    _borrow: PhantomData<(&'q mut (), T, S)>,
}

impl<T, S> AssistedDeviceQueue<'_, T, S> {
    /// The plain descriptor (doorbell = index slot).
    pub fn raw(&self) -> &DeviceQueueDescriptor {
        &self.raw
    }
}

impl<T, S: OrderingScope> fmt::Debug for AssistedDeviceQueue<'_, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AssistedDeviceQueue")
            .field("scope", &S::NAME)
            .field("raw", &self.raw)
            .finish()
    }
}

impl<T, S> AssistedGpuQueue<T, S>
where
    T: TypedTransport,
    S: OrderingScope<Producer = GpuThread> + ValidFor<Host>,
{
    /// Makes the GPU-produced `pair` CPU-assisted through `slot` (zeroed, mapped into the
    /// GPU, moved in: only this queue's kernels and its forwarder reach it); returns it and
    /// what its forwarder needs.
    pub fn new(
        pair: QueuePair<T, Host, S>,
        slot: DmaBuffer,
    ) -> Result<(Self, ForwardTarget), AssistedError> {
        check_slot(&slot)?;
        let slot_addr = slot.device_addr().ok_or(AssistedError::SlotNotMapped)?;
        let slot = Arc::new(slot);
        let mut descriptor = *pair.device_queue().raw();
        descriptor.doorbell = slot_addr;
        let target = ForwardTarget::new(slot, pair.sq_memory(), pair.device_qpn());
        Ok((Self { pair, descriptor }, target))
    }

    /// The descriptor kernels of a CPU-assisted doorbell take, borrowed mutably from this
    /// queue: while it lives, no other handle to the queue exists, so a kernel launched
    /// with it is the queue's one producer.
    pub fn device_queue(&mut self) -> AssistedDeviceQueue<'_, T, S> {
        AssistedDeviceQueue {
            raw: self.descriptor,
            _borrow: PhantomData,
        }
    }

    /// Bounds every device wait on this queue (as [`QueuePair::set_device_wait`] does
    /// for a queue pair handed to GPU threads); holds for handles taken after this call.
    pub fn set_device_wait(&mut self, wait: Duration) -> Result<(), DeviceQueueError> {
        self.pair.set_device_wait(wait)?;
        self.descriptor.wait_ns = self.pair.device_queue().raw().wait_ns;
        Ok(())
    }

    /// The bound on this queue's device waits ([`AssistedGpuQueue::set_device_wait`]).
    pub fn device_wait(&self) -> Duration {
        Duration::from_nanos(self.descriptor.wait_ns)
    }

    /// The queue pair number.
    pub fn qpn(&self) -> Qpn {
        self.pair.device_qpn()
    }
}

/// What a forwarder did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwarderReport {
    /// Doorbells forwarded (record + doorbell writes).
    pub forwarded: u64,
    /// Slot polls.
    pub polls: u64,
}

/// A host thread forwarding published indices to doorbells: stops and joins on drop.
pub struct Forwarder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<ForwarderReport>>,
}

impl fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Forwarder")
            .field("running", &self.thread.is_some())
            .finish()
    }
}

impl Forwarder {
    /// Starts a thread forwarding for `targets`.
    pub fn spawn(targets: Vec<ForwardTarget>) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ibgda-doorbell".into())
            .spawn(move || forward(&targets, &flag))?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread (after a last pass) and returns what it did.
    pub fn stop(mut self) -> ForwarderReport {
        self.shutdown().unwrap_or_default()
    }

    fn shutdown(&mut self) -> Option<ForwarderReport> {
        self.stop.store(true, Ordering::Release);
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn forward(targets: &[ForwardTarget], stop: &AtomicBool) -> ForwarderReport {
    let mut last = vec![0u64; targets.len()];
    let mut report = ForwarderReport::default();
    let mut idle = 0u32;
    loop {
        let stopping = stop.load(Ordering::Acquire);
        let mut any = false;
        for (t, seen) in targets.iter().zip(last.iter_mut()) {
            report.polls += 1;
            let next = t.slot.words()[0].load(Ordering::Acquire) & 0xffff;
            if next != *seen {
                t.announce(next);
                *seen = next;
                report.forwarded += 1;
                any = true;
            }
        }
        if stopping {
            return report;
        }
        if any {
            idle = 0;
        } else {
            idle = idle.saturating_add(1);
            if idle > 64 {
                std::thread::yield_now();
            }
            core::hint::spin_loop();
        }
    }
}
