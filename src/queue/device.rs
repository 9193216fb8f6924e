//! Device descriptors: what a kernel receives to post to a queue pair from GPU threads.
//!
//! The only way to get one is [`QueuePair::device_queue`] on a queue pair whose scope
//! belongs to a GPU producer and is valid for its placement, and whose every buffer the
//! GPU can reach. The descriptor is `#[repr(C)]` and passed to kernels by value; the CUDA
//! headers of the kernels crate are generated from these layouts (sizes and offsets are
//! pinned here and `static_assert`ed there), so the device side never defines its own.

use core::fmt;
use core::marker::PhantomData;
use core::mem::{offset_of, size_of};
use core::time::Duration;

use static_assertions::const_assert_eq;

use super::memory::{
    CompletionQueueMemory, ProducerStateMemory, SendQueueMemory, SEND_DBREC_OFFSET,
};
use super::pair::{QpConfig, QueuePair};
use super::placement::{Placement, QueueBuffer};
use super::send::{SendQueue, SendQueueConfig};
use crate::cq::{CompletionQueue, CqMode, CQE_BYTES};
use crate::order::{GpuThread, OrderingScope, ValidFor};
use crate::wqe::{Qpn, TypedTransport, WQEBB_BYTES};

/// The producer state of a GPU-posted queue, in memory the GPU reaches (zeroed at
/// creation). All counters are free-running WQEBB (or CQE) counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct DeviceProducerState {
    /// Next WQEBB to reserve (advanced with an atomic add).
    pub reserved: u64,
    /// Published prefix: every WQEBB before it is fully written.
    pub ready: u64,
    /// Announced to the NIC (doorbell record and doorbell) up to here.
    pub posted: u64,
    /// Every WQEBB before it has completed.
    pub retired: u64,
    /// CQEs consumed.
    pub cq_consumer: u64,
    /// The doorbell lock (0 free, 1 held).
    pub doorbell_lock: u32,
    /// The completion lock (0 free, 1 held).
    pub poll_lock: u32,
    /// The last WQE counter seen on a collapsed CQ, plus one (0: none yet).
    pub collapsed_seen: u32,
    /// Reserved; zero.
    pub reserved_word: u32,
}

const_assert_eq!(size_of::<DeviceProducerState>(), 64);
const_assert_eq!(offset_of!(DeviceProducerState, reserved), 0);
const_assert_eq!(offset_of!(DeviceProducerState, ready), 8);
const_assert_eq!(offset_of!(DeviceProducerState, posted), 16);
const_assert_eq!(offset_of!(DeviceProducerState, retired), 24);
const_assert_eq!(offset_of!(DeviceProducerState, cq_consumer), 32);
const_assert_eq!(offset_of!(DeviceProducerState, doorbell_lock), 40);
const_assert_eq!(offset_of!(DeviceProducerState, poll_lock), 44);
const_assert_eq!(offset_of!(DeviceProducerState, collapsed_seen), 48);

/// The descriptor of a queue pair as a kernel sees it. Plain data, passed by value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DeviceQueueDescriptor {
    /// Device address of the send ring.
    pub sq_ring: u64,
    /// Device address of the big-endian send counter (the doorbell record + 4).
    pub sq_dbrec: u64,
    /// Device address of the 8-byte doorbell (a mapped UAR register, or memory a software
    /// NIC watches).
    pub doorbell: u64,
    /// Device address of the CQ ring.
    pub cq_ring: u64,
    /// Device address of the CQ doorbell record (big-endian consumer index).
    pub cq_dbrec: u64,
    /// Device address of the [`DeviceProducerState`].
    pub state: u64,
    /// Queue pair number.
    pub qpn: u32,
    /// log2 of the send ring's WQEBBs.
    pub log_sq_wqebbs: u32,
    /// log2 of the CQ's entries.
    pub log_cq_entries: u32,
    /// Largest inline payload in bytes.
    pub max_inline: u32,
    /// 0: ring CQ with owner bits; 1: collapsed CQ.
    pub cq_mode: u32,
    /// 0: RC; 1: DC.
    pub transport: u32,
    /// The [`crate::order::ScopeKind`] of the descriptor's scope.
    pub scope: u32,
    /// A WQE crossing a multiple of this many WQEBBs is signaled.
    pub signal_interval: u32,
    /// How long, in ns of the GPU's global timer, a device wait on this queue pair (for
    /// room in the ring, a ticket, the queue pair, quiet, the publication frontier) spins
    /// before it gives up with the deadline status; counted from the wait's first failed
    /// check, and read only then ([`QueuePair::set_device_wait`]; at least 1).
    pub wait_ns: u64,
}

const_assert_eq!(size_of::<DeviceQueueDescriptor>(), 88);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, sq_ring), 0);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, sq_dbrec), 8);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, doorbell), 16);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, cq_ring), 24);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, cq_dbrec), 32);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, state), 40);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, qpn), 48);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, log_sq_wqebbs), 52);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, log_cq_entries), 56);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, max_inline), 60);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, cq_mode), 64);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, transport), 68);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, scope), 72);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, signal_interval), 76);
const_assert_eq!(offset_of!(DeviceQueueDescriptor, wait_ns), 80);

/// How long a device wait on a queue pair spins before it gives up, until
/// [`QueuePair::set_device_wait`] says otherwise: 60 s. Longer than the NIC's own bound on
/// an RC request (the control plane's local ACK timeout, 4.096 µs × 2^20 ≈ 4.3 s, tried
/// 1 + 7 times: about 34 s, after which the NIC reports a retry-exceeded error CQE), so
/// the deadline ends what the NIC never reports: a completion that never comes.
pub const DEFAULT_DEVICE_WAIT: Duration = Duration::from_secs(60);

/// A device wait as the descriptor carries it: ns, 1 to `u64::MAX`.
pub(crate) fn device_wait_ns(wait: Duration) -> Result<u64, DeviceQueueError> {
    u64::try_from(wait.as_nanos())
        .ok()
        .filter(|&ns| ns > 0)
        .ok_or(DeviceQueueError::DeviceWait { wait })
}

/// A device descriptor whose transport and scope are in its type, borrowed from the queue
/// pair that keeps its memory alive. A kernel instantiated for scope `S` takes it.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct DeviceQueue<'q, T, S> {
    raw: DeviceQueueDescriptor,
    _borrow: PhantomData<(&'q (), T, S)>,
}

impl<T, S> DeviceQueue<'_, T, S> {
    /// The plain descriptor.
    pub fn raw(&self) -> &DeviceQueueDescriptor {
        &self.raw
    }
}

impl<T, S: OrderingScope> fmt::Debug for DeviceQueue<'_, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceQueue")
            .field("scope", &S::NAME)
            .field("raw", &self.raw)
            .finish()
    }
}

/// Why a queue pair cannot be handed to GPU threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceQueueError {
    /// A buffer has no device address (host memory not mapped into the GPU).
    NotMapped {
        /// Which buffer.
        buffer: &'static str,
    },
    /// A buffer is smaller than its role needs.
    TooSmall {
        /// Which buffer.
        buffer: &'static str,
        /// Its length.
        len: usize,
        /// The length needed.
        needed: usize,
    },
    /// A configuration value is out of range.
    Config(crate::wqe::WqeError),
    /// A device wait bound outside 1 ns to `u64::MAX` ns (a wait of 0 could never
    /// succeed once it spins).
    DeviceWait {
        /// The bound asked for.
        wait: Duration,
    },
}

impl fmt::Display for DeviceQueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotMapped { buffer } => write!(f, "the {buffer} is not mapped into the GPU"),
            Self::TooSmall {
                buffer,
                len,
                needed,
            } => {
                write!(f, "the {buffer} has {len} bytes, {needed} needed")
            }
            Self::Config(e) => e.fmt(f),
            Self::DeviceWait { wait } => write!(
                f,
                "a device wait of {wait:?}: it must be 1 ns to {} ns",
                u64::MAX
            ),
        }
    }
}

impl std::error::Error for DeviceQueueError {}

fn device_addr<B: QueueBuffer>(
    buffer: &B,
    name: &'static str,
    needed: usize,
) -> Result<u64, DeviceQueueError> {
    if buffer.len() < needed {
        return Err(DeviceQueueError::TooSmall {
            buffer: name,
            len: buffer.len(),
            needed,
        });
    }
    buffer
        .device_addr()
        .ok_or(DeviceQueueError::NotMapped { buffer: name })
}

impl<T, P, S> QueuePair<T, P, S>
where
    T: TypedTransport,
    P: Placement,
    S: OrderingScope<Producer = GpuThread> + ValidFor<P>,
{
    /// A queue pair that GPU threads post to, over memory in `P` that the GPU reaches, with
    /// `state` holding the device producer state (moved in: the queue pair is its only
    /// owner, so nothing but the kernels writes the counters).
    pub fn for_device(
        qpn: Qpn,
        sq: SendQueueMemory<P>,
        cq: CompletionQueueMemory<P>,
        state: ProducerStateMemory<P>,
        config: QpConfig,
        scope: S,
    ) -> Result<Self, DeviceQueueError> {
        let mut pair = Self {
            nic_objects: None,
            sq: SendQueue::new(qpn, sq, config.send, scope).map_err(DeviceQueueError::Config)?,
            cq: CompletionQueue::new(cq, config.cq_mode),
            first_error: None,
            unreported: Default::default(),
            recovery_nop: None,
            device_state: Some(state.into_buffer()),
            descriptor: DeviceQueueDescriptor::default(),
        };
        pair.descriptor = pair.describe()?;
        Ok(pair)
    }

    fn describe(&self) -> Result<DeviceQueueDescriptor, DeviceQueueError> {
        let sq = self.sq.memory();
        let cq = self.cq.memory();
        let state = self
            .device_state
            .as_ref()
            .ok_or(DeviceQueueError::NotMapped {
                buffer: "producer state",
            })?;
        let config: &SendQueueConfig = self.sq.config();
        Ok(DeviceQueueDescriptor {
            sq_ring: device_addr(
                sq.ring_buffer(),
                "send ring",
                sq.size().wqebbs() as usize * WQEBB_BYTES,
            )?,
            sq_dbrec: device_addr(sq.dbrec_buffer(), "send doorbell record", 8)?
                + SEND_DBREC_OFFSET as u64,
            doorbell: device_addr(sq.doorbell_buffer(), "doorbell", 8)?,
            cq_ring: device_addr(
                cq.ring_buffer(),
                "CQ ring",
                cq.entries() as usize * CQE_BYTES,
            )?,
            cq_dbrec: device_addr(cq.dbrec_buffer(), "CQ doorbell record", 8)?,
            state: device_addr(state, "producer state", size_of::<DeviceProducerState>())?,
            qpn: self.sq.qpn().get(),
            log_sq_wqebbs: sq.size().wqebbs().trailing_zeros(),
            log_cq_entries: cq.entries().trailing_zeros(),
            max_inline: config.limits.max_inline.min(u32::MAX as usize) as u32,
            cq_mode: match self.cq.mode() {
                CqMode::Ring => 0,
                CqMode::Collapsed => 1,
            },
            transport: match T::KIND {
                crate::wqe::TransportKind::Rc => 0,
                crate::wqe::TransportKind::Dc => 1,
            },
            scope: S::KIND as u32,
            signal_interval: config
                .max_unsignaled_wqebbs
                .unwrap_or((sq.size().wqebbs() / 2).max(1)),
            wait_ns: device_wait_ns(DEFAULT_DEVICE_WAIT)?,
        })
    }

    /// Bounds every device wait on this queue pair (room in the ring, a ticket, the queue
    /// pair, quiet, the shared protocol's publication frontier): a wait that has spun this
    /// long returns the deadline status (`ibgda_kernels::api::DeviceStatus::Deadline`,
    /// -0x402) instead of spinning on. Counted from the wait's first failed check; a wait
    /// that needs no spinning never reads it. Kernels get it with the descriptor, so it
    /// holds for descriptors taken after this call. [`DEFAULT_DEVICE_WAIT`] until set.
    pub fn set_device_wait(&mut self, wait: Duration) -> Result<(), DeviceQueueError> {
        self.descriptor.wait_ns = device_wait_ns(wait)?;
        Ok(())
    }

    /// The bound on this queue pair's device waits ([`QueuePair::set_device_wait`]).
    pub fn device_wait(&self) -> Duration {
        Duration::from_nanos(self.descriptor.wait_ns)
    }

    /// The descriptor kernels take, borrowed from this queue pair (which keeps the memory
    /// alive). Its scope is `S`, so only a kernel instantiated for `S` accepts it.
    pub fn device_queue(&self) -> DeviceQueue<'_, T, S> {
        DeviceQueue {
            raw: self.descriptor,
            _borrow: PhantomData,
        }
    }

    /// The queue pair number.
    pub fn device_qpn(&self) -> Qpn {
        self.sq.qpn()
    }

    /// The send queue's memory.
    pub fn sq_memory(&self) -> &SendQueueMemory<P> {
        self.sq.memory()
    }

    /// The completion queue's memory.
    pub fn cq_memory(&self) -> &CompletionQueueMemory<P> {
        self.cq.memory()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_device_wait_outlasts_the_nics_own_bound_on_an_rc_request() {
        use crate::nic::command::{ACK_TIMEOUT, RETRY_COUNT};
        // Each try waits 4.096 µs × 2^ack_timeout for an ACK; the first and RETRY_COUNT more.
        let per_try = Duration::from_nanos(4096 << ACK_TIMEOUT);
        let nic_bound = per_try * (1 + u32::from(RETRY_COUNT));
        assert!(
            DEFAULT_DEVICE_WAIT > nic_bound,
            "{DEFAULT_DEVICE_WAIT:?} against the NIC's {nic_bound:?}"
        );
    }

    #[test]
    fn a_device_wait_is_one_ns_to_the_largest_u64() {
        assert_eq!(device_wait_ns(Duration::from_nanos(1)), Ok(1));
        assert_eq!(device_wait_ns(Duration::from_nanos(u64::MAX)), Ok(u64::MAX));
        assert_eq!(device_wait_ns(DEFAULT_DEVICE_WAIT), Ok(60_000_000_000));
        for wait in [
            Duration::ZERO,
            Duration::from_nanos(u64::MAX) + Duration::from_nanos(1),
        ] {
            let e = device_wait_ns(wait).expect_err("out of range");
            assert_eq!(e, DeviceQueueError::DeviceWait { wait });
            assert!(e.to_string().contains(&format!("{wait:?}")), "{e}");
        }
    }
}
