//! Ordering scopes: what makes the WQE and doorbell-record stores visible to the NIC
//! before the doorbell that announces them.
//!
//! A scope is a zero-sized marker type and a type parameter of queues and device
//! descriptors. Each names who produces WQEs ([`OrderingScope::Producer`]: a CPU or a GPU
//! thread) and is valid only for the placements it orders correctly
//! ([`ValidFor`]). A queue cannot be made with a scope that is wrong for its placement:
//!
//! ```compile_fail,E0277
//! use ibgda::order::{GpuFence, ValidFor};
//! use ibgda::queue::Host;
//! // GPU-scope fences do not order stores to host memory before an MMIO doorbell.
//! fn needs_valid<S: ValidFor<Host>>() {}
//! needs_valid::<GpuFence>();
//! ```
//!
//! The scopes for GPU producers are the rows of the paper's Table 4. Each documents the
//! exact PTX the device library emits for it ([`OrderingScope::DEVICE_SEQUENCE`]); the
//! kernels crate compiles each and checks that the PTX contains exactly those ordering
//! instructions.
//!
//! # Which scopes are safe
//!
//! A scope is safe when no NIC can defeat it: every WQE store is visible before both the
//! doorbell record and the doorbell, so a NIC following either (an mlx5 NIC may follow the
//! record alone) fetches only complete WQEs. [`GpuFencedDbrec`], [`GpuReleaseStore`],
//! [`ThreadFence`], [`SystemReleaseStore`], [`SystemFence`] and [`HostBarrier`] are, and
//! are made freely. [`GpuFence`] orders the WQEs before the doorbell but not before the
//! record, and [`Unordered`] (the paper's unsafe control) orders nothing: each can only be
//! made through an `unsafe` constructor whose contract says what the executor must not do.
//!
//! ```compile_fail,E0133
//! let _ = ibgda::order::Unordered::new();
//! ```

use core::fmt;
use core::sync::atomic::{compiler_fence, fence, Ordering};

use crate::queue::{Gpu, Host, Placement};

mod sealed {
    pub trait Sealed {}
}
use sealed::Sealed;

/// Who writes WQEs and rings the doorbell. Sealed.
pub trait Producer: Sealed + Copy + fmt::Debug + 'static {
    /// Whether the producer is a GPU thread.
    const IS_GPU: bool;
}

/// A CPU thread (the host path, and CPU proxy workers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpuThread;
/// A GPU thread, warp or block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GpuThread;

impl Sealed for CpuThread {}
impl Sealed for GpuThread {}
impl Producer for CpuThread {
    const IS_GPU: bool = false;
}
impl Producer for GpuThread {
    const IS_GPU: bool = true;
}

/// The scopes, as a run-time value (for erased handles and device descriptors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ScopeKind {
    /// [`Unordered`].
    Unordered = 0,
    /// [`GpuFence`].
    GpuFence = 1,
    /// [`GpuFencedDbrec`].
    GpuFencedDbrec = 2,
    /// [`GpuReleaseStore`].
    GpuReleaseStore = 3,
    /// [`ThreadFence`].
    ThreadFence = 4,
    /// [`SystemReleaseStore`].
    SystemReleaseStore = 5,
    /// [`SystemFence`].
    SystemFence = 6,
    /// [`HostBarrier`].
    HostBarrier = 7,
}

impl ScopeKind {
    /// Every scope, in Table 4's order with the host barrier last.
    pub const ALL: [Self; 8] = [
        Self::Unordered,
        Self::GpuFence,
        Self::GpuFencedDbrec,
        Self::GpuReleaseStore,
        Self::ThreadFence,
        Self::SystemReleaseStore,
        Self::SystemFence,
        Self::HostBarrier,
    ];
}

/// An ordering scope. Sealed; implemented by the marker types of this module.
pub trait OrderingScope: Sealed + Copy + fmt::Debug + Send + Sync + 'static {
    /// Who produces WQEs under this scope.
    type Producer: Producer;
    /// The run-time value.
    const KIND: ScopeKind;
    /// A short name (the device library's template tag is `ibgda::scope::<NAME>`).
    const NAME: &'static str;
    /// The ordering instructions the device emits, in order, as PTX mnemonics: around the
    /// doorbell-record store (`dbrec`) and the doorbell store (`db`), then the load of a
    /// CQE's last word and what follows it (`cq`); empty for CPU scopes. The kernels
    /// crate compiles each scope's doorbell and poll paths for sm_90 and checks that their
    /// PTX holds exactly these ordering instructions, in this order.
    ///
    /// Every store the NIC reads (doorbell record, doorbell) and every load of memory the
    /// NIC writes (CQEs) is a strong operation of system scope (`.sys`, `.volatile` or
    /// `.mmio`), even in the GPU-scope rows: the NIC is an observer outside the GPU, and
    /// only the fences (or release stores) differ in scope between the rows.
    const DEVICE_SEQUENCE: &'static str;
}

/// Scopes that order correctly for queues placed in `P`.
pub trait ValidFor<P: Placement>: OrderingScope {}

macro_rules! gpu_scope {
    ($(#[$doc:meta])* $name:ident, $kind:ident, $seq:expr, valid: [$($place:ty),*]) => {
        $(#[$doc])*
        #[doc = ""]
        #[doc = concat!("Device sequence: `", $seq, "`.")]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name;
        impl Sealed for $name {}
        impl OrderingScope for $name {
            type Producer = GpuThread;
            const KIND: ScopeKind = ScopeKind::$kind;
            const NAME: &'static str = stringify!($name);
            const DEVICE_SEQUENCE: &'static str = $seq;
        }
        $(impl ValidFor<$place> for $name {})*
    };
}

/// GPU-scope release fence before the doorbell (DOCA GPUNetIO, NCCL GDAKI; Table 4
/// "GPU-scope fence"). The WQE stores are plain and the doorbell record a relaxed store;
/// one `fence.release.gpu` orders both before the MMIO doorbell, but nothing orders the
/// record after the WQEs it announces. It is correct only for a NIC that reads the record
/// after a doorbell and never follows it alone.
///
/// An mlx5 NIC may follow the record (it is how the device learns the producer index when
/// doorbells are coalesced or for recovery), and NVIDIA documents no ConnectX that never
/// does. With several rounds in flight, round k+1's record can become visible before round
/// k+1's WQEs: on the H200 the doorbell sink, following records as such a NIC may, fetched
/// stale WQEs under this scope (1 in 40,960,000 at 64 warps on 64 queues). So it can only
/// be made through an `unsafe` constructor, like [`Unordered`]; the safe GPU scopes order
/// the WQE stores before the record ([`GpuFencedDbrec`], [`GpuReleaseStore`],
/// [`ThreadFence`], and the system scopes).
///
/// ```compile_fail,E0133
/// let _ = ibgda::order::GpuFence::new();
/// ```
///
/// Device sequence: `dbrec: st.relaxed.sys.global.b32; fence.release.gpu; db:
/// st.mmio.relaxed.sys.global.b64; cq: ld.relaxed.sys.global.b64; fence.acquire.gpu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GpuFence {
    _private: (),
}

impl GpuFence {
    /// The GPU-scope fence scope.
    ///
    /// # Safety
    ///
    /// Queues using it may let a NIC that follows the doorbell record fetch WQEs that are
    /// not yet visible, and execute stale or partly written ones, touching any memory they
    /// name. The caller guarantees that whatever executes the queue reads the doorbell
    /// record only after a doorbell that the same fence ordered (the CUDA software NIC in
    /// its doorbell-only watch), or that nothing such a WQE could do matters (a benchmark on
    /// throw-away memory).
    pub const unsafe fn new() -> Self {
        Self { _private: () }
    }
}

impl Sealed for GpuFence {}
impl OrderingScope for GpuFence {
    type Producer = GpuThread;
    const KIND: ScopeKind = ScopeKind::GpuFence;
    const NAME: &'static str = "GpuFence";
    const DEVICE_SEQUENCE: &'static str = "dbrec: st.relaxed.sys.global.b32; fence.release.gpu; \
         db: st.mmio.relaxed.sys.global.b64; cq: ld.relaxed.sys.global.b64; fence.acquire.gpu";
}
impl ValidFor<Gpu> for GpuFence {}
gpu_scope!(
    /// [`GpuFence`] plus a fence before the doorbell record (Table 4 "+ fenced doorbell
    /// record"): the record is never visible before the WQEs, even to a NIC that reads it
    /// without a doorbell.
    GpuFencedDbrec, GpuFencedDbrec,
    "fence.release.gpu; dbrec: st.relaxed.sys.global.b32; fence.release.gpu; \
     db: st.mmio.relaxed.sys.global.b64; cq: ld.relaxed.sys.global.b64; fence.acquire.gpu",
    valid: [Gpu]
);
gpu_scope!(
    /// GPU-scope release stores of the doorbell record and the doorbell (DeepEP; NVSHMEM
    /// built for GPU memory only; Table 4 "GPU-scope release store").
    GpuReleaseStore, GpuReleaseStore,
    "dbrec: st.release.gpu.global.b32; db: st.release.gpu.global.b64; \
     cq: ld.acquire.gpu.global.b64",
    valid: [Gpu]
);
gpu_scope!(
    /// `__threadfence()` before the doorbell record and before the doorbell (NVSHMEM's
    /// default; Table 4 "`__threadfence()`"). `membar.gl` is a sequentially consistent
    /// GPU-scope fence: stronger, and dearer, than a release fence.
    ThreadFence, ThreadFence,
    "membar.gl; dbrec: st.volatile.global.b32; membar.gl; \
     db: st.mmio.relaxed.sys.global.b64; cq: ld.volatile.global.b64; membar.gl",
    valid: [Gpu]
);
gpu_scope!(
    /// System-scope release stores of the doorbell record and the doorbell (Table 4
    /// "System-scope release store"). Valid for queues in host memory too.
    SystemReleaseStore, SystemReleaseStore,
    "dbrec: st.release.sys.global.b32; db: st.release.sys.global.b64; \
     cq: ld.acquire.sys.global.b64",
    valid: [Gpu, Host]
);
gpu_scope!(
    /// `__threadfence_system()` before the doorbell record and before the doorbell
    /// (NVSHMEM with queues in host memory; Table 4 "System-scope fence").
    SystemFence, SystemFence,
    "membar.sys; dbrec: st.volatile.global.b32; membar.sys; \
     db: st.mmio.relaxed.sys.global.b64; cq: ld.volatile.global.b64; membar.sys",
    valid: [Gpu, Host]
);

/// No ordering at all: WQE, doorbell-record and doorbell stores may reach the NIC in any
/// order (Table 4 "None (unsafe control)"). Exists to measure what ordering costs.
///
/// Device sequence: `dbrec: st.relaxed.sys.global.b32; db: st.mmio.relaxed.sys.global.b64;
/// cq: ld.volatile.global.b64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Unordered {
    _private: (),
}

impl Unordered {
    /// The unordered scope.
    ///
    /// # Safety
    ///
    /// Queues using it may announce WQEs the NIC cannot yet see: the NIC can execute stale
    /// or partly written WQEs, touching any memory they name. The caller guarantees that
    /// nothing the NIC could do with such a WQE matters (a benchmark on throw-away memory).
    pub const unsafe fn new() -> Self {
        Self { _private: () }
    }
}

impl Sealed for Unordered {}
impl OrderingScope for Unordered {
    type Producer = GpuThread;
    const KIND: ScopeKind = ScopeKind::Unordered;
    const NAME: &'static str = "Unordered";
    const DEVICE_SEQUENCE: &'static str =
        "dbrec: st.relaxed.sys.global.b32; db: st.mmio.relaxed.sys.global.b64; \
         cq: ld.volatile.global.b64";
}
impl ValidFor<Gpu> for Unordered {}
impl ValidFor<Host> for Unordered {}

/// The host barrier: what rdma-core does on a CPU. A to-device barrier before the doorbell
/// record (x86-64: compiler only, stores to write-back memory are ordered; AArch64:
/// `dmb oshst`), and a write flush before and after the doorbell store (x86-64: `sfence`;
/// AArch64: `dsb st`), because doorbell pages are mapped write-combining.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HostBarrier;

impl Sealed for HostBarrier {}
impl OrderingScope for HostBarrier {
    type Producer = CpuThread;
    const KIND: ScopeKind = ScopeKind::HostBarrier;
    const NAME: &'static str = "HostBarrier";
    const DEVICE_SEQUENCE: &'static str = "";
}
impl ValidFor<Host> for HostBarrier {}

impl HostBarrier {
    /// Orders WQE stores before the doorbell-record store (`udma_to_device_barrier`).
    #[inline]
    pub fn to_device(self) {
        fence(Ordering::Release);
        // Miri cannot run inline assembly; the fences above are what its memory model
        // checks (the instructions order device-visible stores, which Miri does not model).
        #[cfg(all(target_arch = "aarch64", not(miri)))]
        // SAFETY: a data memory barrier has no memory-safety effect.
        unsafe {
            core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
        };
        #[cfg(any(not(target_arch = "aarch64"), miri))]
        compiler_fence(Ordering::SeqCst);
    }

    /// Flushes write-combining buffers (`mmio_flush_writes`): before the doorbell so the
    /// record is out first, and after it so doorbells of different CPUs stay in order.
    #[inline]
    pub fn flush_writes(self) {
        // The instruction is the barrier (rdma-core's `mmio_flush_writes` is `sfence` alone
        // on x86-64): the NIC, and the software NIC through its acquire loads, order against
        // the release stores around it, so no full fence (`lock or`) is paid per doorbell.
        // Miri cannot run the instruction, and other targets have none here: they keep a
        // sequentially consistent fence instead.
        #[cfg(any(not(any(target_arch = "x86_64", target_arch = "aarch64")), miri))]
        fence(Ordering::SeqCst);
        #[cfg(all(any(target_arch = "x86_64", target_arch = "aarch64"), not(miri)))]
        compiler_fence(Ordering::SeqCst);
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        // SAFETY: `sfence` only orders stores; it has no memory-safety effect.
        unsafe {
            core::arch::asm!("sfence", options(nostack, preserves_flags))
        };
        #[cfg(all(target_arch = "aarch64", not(miri)))]
        // SAFETY: a data synchronisation barrier has no memory-safety effect.
        unsafe {
            core::arch::asm!("dsb st", options(nostack, preserves_flags))
        };
    }
}

/// The device sequence of a scope known at run time.
pub const fn device_sequence(kind: ScopeKind) -> &'static str {
    match kind {
        ScopeKind::Unordered => Unordered::DEVICE_SEQUENCE,
        ScopeKind::GpuFence => GpuFence::DEVICE_SEQUENCE,
        ScopeKind::GpuFencedDbrec => GpuFencedDbrec::DEVICE_SEQUENCE,
        ScopeKind::GpuReleaseStore => GpuReleaseStore::DEVICE_SEQUENCE,
        ScopeKind::ThreadFence => ThreadFence::DEVICE_SEQUENCE,
        ScopeKind::SystemReleaseStore => SystemReleaseStore::DEVICE_SEQUENCE,
        ScopeKind::SystemFence => SystemFence::DEVICE_SEQUENCE,
        ScopeKind::HostBarrier => HostBarrier::DEVICE_SEQUENCE,
    }
}
