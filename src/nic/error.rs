//! Errors of the control plane, with what to do about them.

use core::fmt;
use std::error::Error;
use std::sync::Arc;

use super::prm::PrmError;

/// An error of a NIC backend, kept with its own type: [`downcast_ref`](Self::downcast_ref)
/// gives it back (for instance the mlx5 backend's `Mlx5Error`, with every field it had).
///
/// It is shared (`Clone` keeps one error), and two compare equal when they are the same
/// error or say the same thing with the same kind.
#[derive(Clone)]
pub struct BackendError {
    error: Arc<dyn Error + Send + Sync + 'static>,
    unsupported: bool,
}

impl BackendError {
    /// A backend operation that failed.
    pub fn failed(error: impl Error + Send + Sync + 'static) -> Self {
        Self {
            error: Arc::new(error),
            unsupported: false,
        }
    }
    /// Something the machine does not offer (a library entry point, a capability, a GPU
    /// mapping): not a fault of the operation, and the message says what to install or
    /// enable.
    pub fn unsupported(error: impl Error + Send + Sync + 'static) -> Self {
        Self {
            error: Arc::new(error),
            unsupported: true,
        }
    }
    /// Whether the machine lacks what the operation needs (see [`unsupported`](Self::unsupported)).
    pub fn is_unsupported(&self) -> bool {
        self.unsupported
    }
    /// The backend's error as its own type, if it is a `T`.
    pub fn downcast_ref<T: Error + 'static>(&self) -> Option<&T> {
        self.error.downcast_ref::<T>()
    }
    /// The backend's error.
    pub fn get(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.error
    }
}

impl fmt::Debug for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendError")
            .field("error", &self.error)
            .field("unsupported", &self.unsupported)
            .finish()
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl PartialEq for BackendError {
    fn eq(&self, other: &Self) -> bool {
        self.unsupported == other.unsupported
            && (Arc::ptr_eq(&self.error, &other.error)
                || self.error.to_string() == other.error.to_string())
    }
}
impl Eq for BackendError {}

/// Why a control-plane operation failed. Every message says what was wrong and, where the
/// user can act, what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NicError {
    /// No RDMA device (of this name) exists.
    NoDevice {
        /// What was looked for and what was found.
        reason: String,
    },
    /// The device does not implement something this crate needs.
    Unsupported {
        /// What is missing (a symbol, a capability, a placement).
        what: String,
    },
    /// A capability has a value this crate cannot work with.
    Capability {
        /// The capability's PRM name.
        name: &'static str,
        /// Its value.
        found: u64,
        /// What is needed.
        needed: &'static str,
    },
    /// A PRM command failed: the device returned a status and syndrome
    /// ([`PrmError::CommandError`]), a value did not fit its field, or (on the software
    /// NIC) the command bytes were malformed, in which case nothing was changed.
    Command(PrmError),
    /// An opcode the backend does not execute.
    UnknownOpcode {
        /// The opcode read from the command bytes.
        opcode: u16,
    },
    /// A value out of the range a field or a device accepts.
    OutOfRange {
        /// What the value is.
        what: &'static str,
        /// The value.
        value: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// An operating-system or driver call failed.
    Os {
        /// The call.
        call: &'static str,
        /// The `errno` it reported.
        errno: i32,
    },
    /// Queue memory could not be allocated or described.
    Memory(crate::memory::DmaError),
    /// Queue memory that does not match its description.
    QueueMemory(crate::queue::QueueMemoryError),
    /// The queue handle refused its configuration.
    Queue(crate::wqe::WqeError),
    /// A GPU-placed queue handle could not be built.
    DeviceQueue(crate::queue::DeviceQueueError),
    /// The software NIC refused a registration or a queue.
    SoftNic(crate::softnic::SoftNicError),
    /// The queue memory is executed by another NIC (one executor per queue in the
    /// process).
    ExecutedElsewhere(crate::queue::ExecutorConflict),
    /// A data registration shares bytes with queue memory this NIC executes (a ring,
    /// record or doorbell is never a data region).
    OverlapsQueueMemory {
        /// First byte of the range refused.
        addr: u64,
        /// Its length.
        len: u64,
        /// The queue memory it overlaps.
        queue: crate::queue::QueueBufferSpan,
    },
    /// Connection information that cannot be decoded.
    Connection(super::connection::ConnectionError),
    /// A RoCE port has no RoCE v2 GID to send from (RoCE v2 GIDs come from the IP
    /// addresses of the port's network interface).
    NoRoceV2Gid {
        /// The device.
        device: String,
        /// The port.
        port: u8,
        /// Entries of its GID table.
        entries: usize,
    },
    /// The backend failed, with its own error type (downcast it through
    /// [`BackendError::downcast_ref`]); [`BackendError::is_unsupported`] says whether the
    /// machine lacks what was needed.
    Backend(BackendError),
}

impl fmt::Display for NicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDevice { reason } => write!(
                f,
                "no RDMA device: {reason} (check `ibv_devices`; set IBGDA_NIC=soft for the software NIC)"
            ),
            Self::Unsupported { what } => write!(f, "not supported by this device: {what}"),
            Self::Capability {
                name,
                found,
                needed,
            } => write!(f, "capability {name} is {found:#x}; needed: {needed}"),
            Self::Command(e) => e.fmt(f),
            Self::UnknownOpcode { opcode } => {
                write!(f, "command opcode {opcode:#06x} is not one this NIC executes")
            }
            Self::OutOfRange { what, value, max } => {
                write!(f, "{what} {value:#x} is out of range (at most {max:#x})")
            }
            Self::Os { call, errno } => write!(f, "{call} failed with errno {errno}"),
            Self::Memory(e) => write!(f, "queue memory: {e}"),
            Self::Queue(e) => write!(f, "queue configuration: {e}"),
            Self::QueueMemory(e) => write!(f, "queue memory: {e}"),
            Self::DeviceQueue(e) => write!(f, "GPU-placed queue: {e}"),
            Self::Connection(e) => write!(f, "connection information: {e}"),
            Self::NoRoceV2Gid {
                device,
                port,
                entries,
            } => write!(
                f,
                "port {port} of {device} is Ethernet (RoCE) and none of its {entries} GID \
                 entries is RoCE v2: give its network interface an IPv4 or IPv6 address \
                 (the kernel adds a RoCE v2 GID for each), and check the table with \
                 `show_gids` or /sys/class/infiniband/{device}/ports/{port}/gid_attrs/types/"
            ),
            Self::SoftNic(e) => write!(f, "software NIC: {e}"),
            Self::ExecutedElsewhere(e) => e.fmt(f),
            Self::OverlapsQueueMemory { addr, len, queue } => write!(
                f,
                "memory {addr:#x}+{len} overlaps queue memory at {:#x}+{} that this NIC \
                 executes: queue memory is never registered as a data region",
                queue.addr, queue.len
            ),
            Self::Backend(e) if e.is_unsupported() => {
                write!(f, "not supported by this device: {e}")
            }
            Self::Backend(e) => write!(f, "NIC backend: {e}"),
        }
    }
}

impl std::error::Error for NicError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Backend(e) => Some(e.get()),
            _ => None,
        }
    }
}

impl From<crate::queue::ExecutorConflict> for NicError {
    fn from(e: crate::queue::ExecutorConflict) -> Self {
        Self::ExecutedElsewhere(e)
    }
}
impl From<crate::memory::DmaError> for NicError {
    fn from(e: crate::memory::DmaError) -> Self {
        Self::Memory(e)
    }
}
impl From<crate::wqe::WqeError> for NicError {
    fn from(e: crate::wqe::WqeError) -> Self {
        Self::Queue(e)
    }
}
impl From<crate::queue::DeviceQueueError> for NicError {
    fn from(e: crate::queue::DeviceQueueError) -> Self {
        Self::DeviceQueue(e)
    }
}
impl From<super::connection::ConnectionError> for NicError {
    fn from(e: super::connection::ConnectionError) -> Self {
        Self::Connection(e)
    }
}
impl From<PrmError> for NicError {
    fn from(e: PrmError) -> Self {
        Self::Command(e)
    }
}
impl From<crate::queue::QueueMemoryError> for NicError {
    fn from(e: crate::queue::QueueMemoryError) -> Self {
        Self::QueueMemory(e)
    }
}
