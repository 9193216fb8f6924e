//! The device API's layouts and codes, as the CUDA side reads them (generated into
//! `ibgda_layout.h` by [`crate::layout`]).

use core::fmt;
use core::mem::{offset_of, size_of};

use ibgda::cq::Syndrome;
use ibgda::wqe::segment::{ControlSegment, InlineHeader, RemoteAddressSegment, WQEBB_BYTES};
use static_assertions::const_assert_eq;

/// What every device operation returns: 0 on success, a negative code naming the failure.
///
/// Codes fall in classes of 256 (the class is `-code >> 8`), so new failures extend a
/// class or take a new one without changing the meaning of any existing code:
///
/// | code | class | meaning |
/// |---|---|---|
/// | `-1 ..= -0xff` | 0 | an error CQE: `-code` is its syndrome |
/// | `-0x100` | 1 | a CQE naming no WQE in flight (stray) |
/// | `-0x201 ..` | 2 | a request refused before any WQE was built (window bounds, peer, alignment, length, counter) |
/// | `-0x400 ..` | 4 | a wait that did not end in time (a queue pair's, a proxy ring's or the communicator's run-time deadline; the compile-time spin limit of a harness's own waits) |
///
/// Classes 3 and 5 to 0x7f are free (queue recovery will take its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceStatus {
    /// Success.
    Ok,
    /// An error CQE with this syndrome byte.
    Completion(u8),
    /// A CQE that names no WQE in flight.
    StrayCompletion,
    /// An offset and length outside the window's side they name.
    WindowBounds,
    /// A peer index the communicator or the window does not have.
    BadPeer,
    /// An atomic's remote or local word not 8-byte aligned.
    Misaligned,
    /// A length the operation cannot carry (a get of 0 bytes, a transfer over 2^31 - 1).
    BadLength,
    /// A counter index the communicator does not have.
    BadCounter,
    /// The compile-time spin limit (`CompileOptions::spin_limit`) of a test or benchmark
    /// harness's own wait (its completer, the CUDA software NIC's idle bound) ran out.
    SpinTimeout,
    /// A wait's run-time deadline ran out: its queue pair's
    /// (`DeviceQueueDescriptor::wait_ns`, `QueuePair::set_device_wait`), its proxy ring's
    /// ([`crate::proxy::DeviceProxyRing::wait_ns`], `DeviceRing::set_device_wait`) or the
    /// communicator's ([`DeviceComm::wait_ns`], which its queue pairs' descriptors carry).
    Deadline,
    /// A code of no known meaning (from a newer device library).
    Unknown(i32),
}

impl DeviceStatus {
    /// Every named code, with the name the CUDA side gets (`layout::STATUS_<NAME>`).
    pub const NAMED: [(&'static str, Self); 9] = [
        ("OK", Self::Ok),
        ("STRAY_COMPLETION", Self::StrayCompletion),
        ("WINDOW_BOUNDS", Self::WindowBounds),
        ("BAD_PEER", Self::BadPeer),
        ("MISALIGNED", Self::Misaligned),
        ("BAD_LENGTH", Self::BadLength),
        ("BAD_COUNTER", Self::BadCounter),
        ("SPIN_TIMEOUT", Self::SpinTimeout),
        ("DEADLINE", Self::Deadline),
    ];

    /// The code the device returns.
    pub const fn code(self) -> i32 {
        match self {
            Self::Ok => 0,
            Self::Completion(syndrome) => -(syndrome as i32),
            Self::StrayCompletion => -0x100,
            Self::WindowBounds => -0x201,
            Self::BadPeer => -0x202,
            Self::Misaligned => -0x203,
            Self::BadLength => -0x204,
            Self::BadCounter => -0x205,
            Self::SpinTimeout => -0x400,
            Self::Deadline => -0x402,
            Self::Unknown(code) => code,
        }
    }

    /// The status a device code stands for.
    pub fn from_code(code: i32) -> Self {
        if (-0xff..=-1).contains(&code) {
            return Self::Completion((-code) as u8);
        }
        Self::NAMED
            .iter()
            .find(|(_, s)| s.code() == code)
            .map_or(Self::Unknown(code), |&(_, s)| s)
    }

    /// Whether it is success.
    pub fn is_ok(self) -> bool {
        self == Self::Ok
    }
}

impl fmt::Display for DeviceStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ok => f.write_str("ok"),
            Self::Completion(s) => match Syndrome::from_byte(*s) {
                Some(name) => write!(f, "error completion {name:?} (syndrome {s:#04x})"),
                None => write!(f, "error completion with syndrome {s:#04x}"),
            },
            Self::StrayCompletion => f.write_str("a completion naming no WQE in flight"),
            Self::WindowBounds => f.write_str("offset and length outside the window"),
            Self::BadPeer => f.write_str("a peer the communicator or window does not have"),
            Self::Misaligned => f.write_str("an atomic word not 8-byte aligned"),
            Self::BadLength => {
                f.write_str("a length the operation cannot carry (0 for a get, or over 2^31 - 1)")
            }
            Self::BadCounter => f.write_str("a counter the communicator does not have"),
            Self::SpinTimeout => {
                f.write_str("a harness's wait ran past the compile-time spin limit")
            }
            Self::Deadline => f.write_str("a wait ran past its run-time deadline"),
            Self::Unknown(c) => write!(f, "unknown device status {c:#x}"),
        }
    }
}

/// The largest put that goes inline: the payload that fits one WQEBB after the control
/// and remote-address segments and the inline header (28 bytes). Longer puts gather from
/// the source window.
pub const PUT_INLINE_MAX: usize = WQEBB_BYTES
    - size_of::<ControlSegment>()
    - size_of::<RemoteAddressSegment>()
    - size_of::<InlineHeader>();
const_assert_eq!(PUT_INLINE_MAX, 28);

/// The counter argument of an operation that counts on no counter.
pub const NO_COUNTER: u32 = u32::MAX;

/// How `wait_signal` compares the signal word with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum SignalCmp {
    /// Until equal.
    Eq = 0,
    /// Until not equal.
    Ne = 1,
    /// Until greater than or equal (unsigned).
    Ge = 2,
    /// Until greater (unsigned).
    Gt = 3,
    /// Until less than or equal (unsigned).
    Le = 4,
    /// Until less (unsigned).
    Lt = 5,
}

impl SignalCmp {
    /// Every comparison, with its C name.
    pub const ALL: [(&'static str, Self); 6] = [
        ("EQ", Self::Eq),
        ("NE", Self::Ne),
        ("GE", Self::Ge),
        ("GT", Self::Gt),
        ("LE", Self::Le),
        ("LT", Self::Lt),
    ];

    /// Whether `word` satisfies the comparison with `value`.
    pub fn holds(self, word: u64, value: u64) -> bool {
        match self {
            Self::Eq => word == value,
            Self::Ne => word != value,
            Self::Ge => word >= value,
            Self::Gt => word > value,
            Self::Le => word <= value,
            Self::Lt => word < value,
        }
    }
}

/// A communicator as a kernel receives it (by value): the queue pair to every peer, the
/// counters, the scratch word atomics without a result write to, and the bound on every
/// wait.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DeviceComm {
    /// Device address of `n_peers` queue descriptors (`DeviceQueueDescriptor`), by peer.
    pub queues: u64,
    /// Device address of `n_counters` [`DeviceCounter`]s.
    pub counters: u64,
    /// Device address of `n_counters * counter_capacity` [`DeviceCounterSlot`]s.
    pub counter_slots: u64,
    /// Address of 8 registered bytes (local key `scratch_lkey`) the results of
    /// `atomic_add` and of signals land in; nobody reads them.
    pub scratch: u64,
    /// Every wait gives up after this many ns of `%globaltimer` with
    /// [`DeviceStatus::Deadline`] (at least 1).
    pub wait_ns: u64,
    /// Peers (queue descriptors).
    pub n_peers: u32,
    /// This process's rank (its own index among the peers).
    pub rank: u32,
    /// The [`ibgda::order::ScopeKind`] of every queue.
    pub scope: u32,
    /// The local key of the scratch word.
    pub scratch_lkey: u32,
    /// Counters.
    pub n_counters: u32,
    /// Operations a counter tracks in flight (a power of two).
    pub counter_capacity: u32,
    /// Puts of at most this many bytes go inline (at most [`PUT_INLINE_MAX`] and every
    /// queue's inline limit).
    pub inline_max: u32,
    /// A publication rings the doorbell when its WQEs cross a multiple of this many WQEBBs
    /// or nobody reserved after them (1: every publication rings; larger values let
    /// concurrent posters share doorbells).
    pub doorbell_batch: u32,
}

const_assert_eq!(size_of::<DeviceComm>(), 72);
const_assert_eq!(offset_of!(DeviceComm, queues), 0);
const_assert_eq!(offset_of!(DeviceComm, wait_ns), 32);
const_assert_eq!(offset_of!(DeviceComm, n_peers), 40);
const_assert_eq!(offset_of!(DeviceComm, inline_max), 64);

/// A local completion counter: operations attached to it, and how many of them, in the
/// order they were attached, have completed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct DeviceCounter {
    /// Operations attached (an atomic add per operation).
    pub attached: u64,
    /// The first `completed` attached operations have completed.
    pub completed: u64,
    /// The advance lock (0 free, 1 held).
    pub lock: u32,
    /// Reserved; zero.
    pub reserved: [u32; 3],
}

const_assert_eq!(size_of::<DeviceCounter>(), 32);
const_assert_eq!(offset_of!(DeviceCounter, completed), 8);
const_assert_eq!(offset_of!(DeviceCounter, lock), 16);

/// Where an attached operation's completion is read: its queue pair's ticket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct DeviceCounterSlot {
    /// The ticket (end WQEBB counter) of the operation on its peer's queue pair; 0 for
    /// an operation that posted nothing.
    pub ticket: u64,
    /// The peer.
    pub peer: u32,
    /// The attach index + 1 (low 32 bits) of the operation the slot holds: written last,
    /// with a release store, so a slot is read only once it is complete.
    pub seq: u32,
}

const_assert_eq!(size_of::<DeviceCounterSlot>(), 16);
const_assert_eq!(offset_of!(DeviceCounterSlot, peer), 8);
const_assert_eq!(offset_of!(DeviceCounterSlot, seq), 12);

/// The operations of the device API, as the test records name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ApiOp {
    /// `put`.
    Put = 0,
    /// `put_value`.
    PutValue = 1,
    /// `get`.
    Get = 2,
    /// `atomic_add`.
    AtomicAdd = 3,
    /// `fetch_add`.
    FetchAdd = 4,
    /// `compare_swap`.
    CompareSwap = 5,
    /// `put_with_signal`.
    PutWithSignal = 6,
    /// `signal`.
    Signal = 7,
}

impl ApiOp {
    /// Every operation, with its C name.
    pub const ALL: [(&'static str, Self); 8] = [
        ("PUT", Self::Put),
        ("PUT_VALUE", Self::PutValue),
        ("GET", Self::Get),
        ("ATOMIC_ADD", Self::AtomicAdd),
        ("FETCH_ADD", Self::FetchAdd),
        ("COMPARE_SWAP", Self::CompareSwap),
        ("PUT_WITH_SIGNAL", Self::PutWithSignal),
        ("SIGNAL", Self::Signal),
    ];
}

/// One device API call with all its arguments, for the tests that have the device (or
/// the device library built for the host) perform calls and compare the WQEs they leave
/// with the host builders'. Windows are named by index into the windows the test passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ApiCall {
    /// The [`ApiOp`].
    pub op: u32,
    /// The peer.
    pub peer: u32,
    /// The window of the remote side (put, get, atomics, the data of put_with_signal).
    pub dst_window: u32,
    /// The window of the local side (put source, get destination, fetched results).
    pub src_window: u32,
    /// The window of the signal word (put_with_signal, signal).
    pub signal_window: u32,
    /// Length in bytes (put, get, put_with_signal).
    pub len: u32,
    /// Remote offset.
    pub dst_offset: u64,
    /// Local offset.
    pub src_offset: u64,
    /// Signal word offset.
    pub signal_offset: u64,
    /// put_value's value, the add of atomics and signals, compare_swap's swap.
    pub value: u64,
    /// compare_swap's compare.
    pub compare: u64,
    /// The counter to attach to, or [`NO_COUNTER`].
    pub counter: u32,
    /// Reserved; zero.
    pub reserved: u32,
}

const_assert_eq!(size_of::<ApiCall>(), 72);
const_assert_eq!(offset_of!(ApiCall, dst_offset), 24);
const_assert_eq!(offset_of!(ApiCall, counter), 64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_round_trip_and_keep_their_classes() {
        for (_, s) in DeviceStatus::NAMED {
            assert_eq!(DeviceStatus::from_code(s.code()), s);
        }
        for syndrome in 1..=0xffu8 {
            let s = DeviceStatus::Completion(syndrome);
            assert_eq!(DeviceStatus::from_code(s.code()), s);
            assert_eq!((-s.code()) >> 8, 0);
        }
        assert_eq!(DeviceStatus::StrayCompletion.code(), -0x100);
        for s in [
            DeviceStatus::WindowBounds,
            DeviceStatus::BadPeer,
            DeviceStatus::Misaligned,
            DeviceStatus::BadLength,
            DeviceStatus::BadCounter,
        ] {
            assert_eq!((-s.code()) >> 8, 2, "{s:?}");
        }
        for s in [DeviceStatus::SpinTimeout, DeviceStatus::Deadline] {
            assert_eq!((-s.code()) >> 8, 4, "{s:?}");
        }
        assert_eq!(
            DeviceStatus::from_code(-0x345),
            DeviceStatus::Unknown(-0x345)
        );
        assert!(DeviceStatus::from_code(0).is_ok());
    }

    #[test]
    fn comparisons_are_unsigned() {
        assert!(SignalCmp::Ge.holds(u64::MAX, 1));
        assert!(!SignalCmp::Lt.holds(u64::MAX, 1));
        assert!(SignalCmp::Eq.holds(7, 7) && SignalCmp::Ne.holds(7, 8));
        assert!(SignalCmp::Gt.holds(8, 7) && SignalCmp::Le.holds(7, 7));
    }
}
