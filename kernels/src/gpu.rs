//! Host glue over cudarc 0.19 (driver API, loaded at run time): a GPU with the kernels
//! loaded, GPU-placed and host-mapped queue memory, an RAII host registration, and typed
//! launchers.
//!
//! Nothing here panics when the driver, NVRTC or a GPU is missing: [`Gpu::open`] checks
//! that the driver library is present before cudarc touches it (cudarc panics otherwise)
//! and returns a [`GpuError`].

use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::sys as cu;
use cudarc::driver::{result, CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

use ibgda::cq::CqMode;
use ibgda::memory::{DeviceBuffer, DmaBuffer};
use ibgda::order::{GpuThread, OrderingScope, ValidFor};
use ibgda::queue::{
    CompletionQueueMemory, DeviceProducerState, DeviceQueue, DeviceQueueDescriptor,
    DeviceQueueError, Gpu as GpuPlaced, ProducerStateMemory, SendQueueMemory, CQE_INIT_OP_OWN,
};
use ibgda::queue::{DoorbellPolicy, QpConfig, QueuePair, SendQueueConfig};
use ibgda::wqe::{Qpn, Rc, RingSize, TypedTransport, WqeLimits};

use crate::nvrtc::{compile, compile_source, Compiled, Program};
use crate::ptx::kernel_orderings;

/// Why the GPU path is unavailable or failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GpuError {
    /// No CUDA driver library (`libcuda.so.1`) could be loaded.
    DriverMissing,
    /// No NVRTC could be loaded (why).
    NvrtcMissing(String),
    /// An NVRTC call failed.
    Nvrtc(String),
    /// A program did not compile (its log).
    Compile {
        /// The program.
        program: String,
        /// NVRTC's log.
        log: String,
    },
    /// A driver call failed (no device, launch failure, ...).
    Driver(String),
    /// A queue could not be described for the device.
    Queue(DeviceQueueError),
    /// Bad arguments to a launcher.
    Invalid(String),
    /// A wait did not end within its time limit.
    Timeout {
        /// What was waited for.
        what: String,
        /// The limit.
        limit: std::time::Duration,
        /// Whether the kernel may still run (the host gave up waiting: what it uses was
        /// left allocated and the context must not be synchronized again); `false` when a
        /// device-side watchdog ended the wait and the kernel finished.
        still_running: bool,
    },
    /// The queue is executed by another NIC (one executor per queue in the process).
    ExecutedElsewhere(ibgda::queue::ExecutorConflict),
    /// A queue that had to be fresh (nothing ever reserved, posted, retired or consumed)
    /// was not: what its producer state shows.
    QueueNotFresh {
        /// Its queue pair number.
        qpn: u32,
        /// The device address of its send ring.
        sq_ring: u64,
        /// Its producer state, as read (boxed: 64 bytes aligned to 64).
        state: Box<ibgda::queue::DeviceProducerState>,
    },
    /// A kernel instantiated for one scope was given a descriptor of another.
    ScopeMismatch {
        /// The scope kind (`ibgda::order::ScopeKind` as `u32`) the kernel was built for.
        kernel: u32,
        /// The scope kind the descriptor carries.
        descriptor: u32,
    },
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DriverMissing => f.write_str("no CUDA driver (libcuda.so.1) could be loaded"),
            Self::NvrtcMissing(why) => write!(f, "NVRTC unavailable: {why}"),
            Self::Nvrtc(e) => write!(f, "NVRTC error: {e}"),
            Self::Compile { program, log } => write!(f, "{program} did not compile:\n{log}"),
            Self::Driver(e) => write!(f, "CUDA driver error: {e}"),
            Self::Queue(e) => write!(f, "queue: {e}"),
            Self::Invalid(e) => write!(f, "invalid argument: {e}"),
            Self::Timeout {
                what,
                limit,
                still_running,
            } => write!(
                f,
                "timed out: {what} did not end within {limit:?}{}",
                if *still_running {
                    " (still running: the GPU is left as it is)"
                } else {
                    " (ended by the device-side watchdog)"
                }
            ),
            Self::ExecutedElsewhere(e) => e.fmt(f),
            Self::QueueNotFresh {
                qpn,
                sq_ring,
                state,
            } => write!(
                f,
                "queue pair {qpn:#x} (send ring at {sq_ring:#x}) is not fresh: {} WQEBBs \
                 reserved, {} published, {} announced, {} retired, {} CQEs consumed, locks \
                 {}/{}",
                state.reserved,
                state.ready,
                state.posted,
                state.retired,
                state.cq_consumer,
                state.doorbell_lock,
                state.poll_lock
            ),
            Self::ScopeMismatch { kernel, descriptor } => write!(
                f,
                "a kernel of scope kind {kernel} was given a descriptor of scope kind {descriptor}"
            ),
        }
    }
}

impl std::error::Error for GpuError {}

impl From<result::DriverError> for GpuError {
    fn from(e: result::DriverError) -> Self {
        Self::Driver(format!("{e:?}"))
    }
}

impl From<ibgda::queue::ExecutorConflict> for GpuError {
    fn from(e: ibgda::queue::ExecutorConflict) -> Self {
        Self::ExecutedElsewhere(e)
    }
}

impl From<DeviceQueueError> for GpuError {
    fn from(e: DeviceQueueError) -> Self {
        Self::Queue(e)
    }
}

/// Whether the CUDA driver library can be loaded (without touching it otherwise).
pub fn driver_present() -> bool {
    // SAFETY: probing for a library by name has no preconditions.
    unsafe { cu::is_culib_present() }
}

/// A device descriptor as a kernel argument: the descriptor, by value, with the transport
/// `T`, the scope `S` and the borrow `'q` of the queue pair it came from still in its type.
///
/// Only [`KernelQueue::new`] makes one, from a [`DeviceQueue`] (itself only made from a
/// validated queue pair), so a launcher that takes a `KernelQueue<'q, T, S>` receives a
/// descriptor of scope `S` whose memory lives for `'q`.
#[repr(transparent)]
pub struct KernelQueue<'q, T, S> {
    raw: DeviceQueueDescriptor,
    _queue: PhantomData<DeviceQueue<'q, T, S>>,
}

impl<T, S> Clone for KernelQueue<'_, T, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, S> Copy for KernelQueue<'_, T, S> {}

impl<T, S: OrderingScope> fmt::Debug for KernelQueue<'_, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelQueue")
            .field("scope", &S::NAME)
            .field("raw", &self.raw)
            .finish()
    }
}

// SAFETY: `KernelQueue` is `#[repr(transparent)]` over `DeviceQueueDescriptor` (the
// `PhantomData` is zero-sized), a `#[repr(C)]` struct of `u64` and `u32` fields (88 bytes,
// no padding) whose layout the CUDA side takes from the generated header, where
// `static_assert`s pin every offset and the size. Passing it by value copies plain bytes.
unsafe impl<T, S> DeviceRepr for KernelQueue<'_, T, S> {}

impl<'q, T, S> KernelQueue<'q, T, S> {
    /// The argument form of a typed device queue.
    pub fn new(q: &DeviceQueue<'q, T, S>) -> Self {
        Self {
            raw: *q.raw(),
            _queue: PhantomData,
        }
    }
    /// The descriptor.
    pub fn raw(&self) -> &DeviceQueueDescriptor {
        &self.raw
    }
}

/// A descriptor argument of [`Gpu::launch_raw`]: a [`KernelQueue`] whose scope was
/// dropped from the type (the raw launcher takes kernels of any scope; the device library
/// traps a kernel whose scope differs from the descriptor's), still borrowing its queue
/// pair for `'q`.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct QueueArg<'q> {
    raw: DeviceQueueDescriptor,
    _queue: PhantomData<&'q ()>,
}

// SAFETY: as for `KernelQueue`: transparent over the 88-byte plain-data descriptor.
unsafe impl DeviceRepr for QueueArg<'_> {}

impl<'q, T, S> From<KernelQueue<'q, T, S>> for QueueArg<'q> {
    fn from(q: KernelQueue<'q, T, S>) -> Self {
        Self {
            raw: q.raw,
            _queue: PhantomData,
        }
    }
}

impl<'q, T, S> From<&DeviceQueue<'q, T, S>> for QueueArg<'q> {
    fn from(q: &DeviceQueue<'q, T, S>) -> Self {
        KernelQueue::new(q).into()
    }
}

/// The bytes of a descriptor, as the device reads an array of them (for kernels that
/// take `const DeviceQueueDescriptor*`).
pub fn descriptor_bytes(d: &DeviceQueueDescriptor) -> [u8; DESCRIPTOR_BYTES] {
    let mut b = [0u8; DESCRIPTOR_BYTES];
    let words64 = [
        d.sq_ring, d.sq_dbrec, d.doorbell, d.cq_ring, d.cq_dbrec, d.state,
    ];
    for (i, w) in words64.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
    }
    let words32 = [
        d.qpn,
        d.log_sq_wqebbs,
        d.log_cq_entries,
        d.max_inline,
        d.cq_mode,
        d.transport,
        d.scope,
        d.signal_interval,
    ];
    for (i, w) in words32.iter().enumerate() {
        b[48 + i * 4..52 + i * 4].copy_from_slice(&w.to_ne_bytes());
    }
    b[80..88].copy_from_slice(&d.wait_ns.to_ne_bytes());
    b
}

/// The size of a [`DeviceQueueDescriptor`] as kernels read it.
pub const DESCRIPTOR_BYTES: usize = core::mem::size_of::<DeviceQueueDescriptor>();

/// What a [`Gpu`] compiles its programs with: a closed set of typed options (never free
/// NVRTC flags, which could change what the kernels that safe launchers run do).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    spin_limit_ns: Option<u64>,
}

impl CompileOptions {
    /// The defaults: device wait loops spin until their condition holds.
    pub const fn new() -> Self {
        Self {
            spin_limit_ns: None,
        }
    }

    /// Bounds the test and benchmark harnesses' own device waits (`IBGDA_SPIN_LIMIT_NS`:
    /// their completers, the CUDA software NIC's idle bound): such a wait that lasts longer
    /// returns `SPIN_TIMEOUT` (-1024) instead of spinning on. The library's waits take
    /// their bound at run time from their descriptor instead (a queue pair's:
    /// `QueuePair::set_device_wait`; a proxy ring's: `DeviceRing::set_device_wait`). A zero duration is refused (a wait could never
    /// succeed).
    pub fn spin_limit(self, limit: Duration) -> Result<Self, GpuError> {
        let ns = u64::try_from(limit.as_nanos()).map_err(|_| {
            GpuError::Invalid(format!("spin limit {limit:?} exceeds {} ns", u64::MAX))
        })?;
        if ns == 0 {
            return Err(GpuError::Invalid("spin limit of 0 ns".into()));
        }
        Ok(Self {
            spin_limit_ns: Some(ns),
        })
    }

    /// The bound on the device waits not on a queue pair, if any.
    pub fn spin_limit_ns(&self) -> Option<u64> {
        self.spin_limit_ns
    }

    /// The NVRTC options these stand for (added after the crate's fixed ones).
    pub fn nvrtc_options(&self) -> Vec<String> {
        self.spin_limit_ns
            .map(|ns| format!("-DIBGDA_SPIN_LIMIT_NS={ns}ull"))
            .into_iter()
            .collect()
    }
}

/// Every kernel (`.entry`) of a loaded module, each fully loaded now.
///
/// Under CUDA's lazy loading (the default since CUDA 12.2, `CUDA_MODULE_LOADING` unset),
/// `cuModuleLoadData` and `cuModuleGetFunction` may leave a function partially loaded, and
/// its first launch then loads it, which can wait for the kernels already running on the
/// context: a producer launched beside a running persistent kernel (the sink, the CUDA
/// software NIC) would wait for a kernel that waits for it. `cuFuncLoad` (CUDA 12.4+)
/// finishes loading a function; it is called on every entry right after the module is
/// loaded, and `cuFuncIsLoaded` must then report it loaded. The environment is never
/// touched, so this holds whatever `CUDA_MODULE_LOADING` says.
pub(crate) fn load_every_kernel(
    module: &Arc<CudaModule>,
    ptx: &str,
) -> Result<HashMap<String, CudaFunction>, GpuError> {
    // SAFETY: `culib` opens the driver library, which `Gpu::open` found present.
    let lib = unsafe { cu::culib() };
    for symbol in ["cuFuncLoad", "cuFuncIsLoaded"] {
        // SAFETY: only probes for the symbol (cudarc panics on a missing one); the
        // returned pointer is not used.
        let present = unsafe { lib.get::<unsafe extern "C" fn()>(symbol.as_bytes()) }.is_ok();
        if !present {
            return Err(GpuError::Driver(format!(
                "the CUDA driver has no {symbol} (CUDA 12.4 or newer is needed to load kernels eagerly)"
            )));
        }
    }
    let mut out = HashMap::new();
    for entry in kernel_orderings(ptx) {
        let name = entry.kernel;
        if name.contains('\0') {
            return Err(GpuError::Invalid(format!(
                "kernel name {name:?} holds a NUL"
            )));
        }
        let f = module.load_function(&name)?;
        // SAFETY: `f` is a function handle of `module`, which `f` keeps loaded.
        unsafe { cu::cuFuncLoad(f.cu_function()) }.result()?;
        let mut state = cu::CUfunctionLoadingState::CU_FUNCTION_LOADING_STATE_UNLOADED;
        // SAFETY: as above; `state` is a valid out-pointer.
        unsafe { cu::cuFuncIsLoaded(&mut state, f.cu_function()) }.result()?;
        if state != cu::CUfunctionLoadingState::CU_FUNCTION_LOADING_STATE_LOADED {
            return Err(GpuError::Driver(format!(
                "{name} is still not loaded after cuFuncLoad ({state:?})"
            )));
        }
        out.insert(name, f);
    }
    Ok(out)
}

/// How many GPUs the driver sees (after checking that it is present).
pub fn device_count() -> Result<usize, GpuError> {
    if !driver_present() {
        return Err(GpuError::DriverMissing);
    }
    result::init()?;
    let n = result::device::get_count()?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// The driver's handle of GPU `ordinal` (refused past the GPUs present).
pub(crate) fn device(ordinal: usize) -> Result<cu::CUdevice, GpuError> {
    let count = device_count()?;
    let o = i32::try_from(ordinal)
        .ok()
        .filter(|&o| (o as usize) < count)
        .ok_or_else(|| GpuError::Driver(format!("no GPU {ordinal} ({count} present)")))?;
    Ok(result::device::get(o)?)
}

/// A GPU with the crate's programs compiled and loaded, every kernel fully loaded.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    side_stream: Arc<CudaStream>,
    kernels: HashMap<String, CudaFunction>,
    raw: HashMap<String, CudaFunction>,
    options: CompileOptions,
    compiled: Vec<Compiled>,
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ctx.ordinal())
            .field("options", &self.options)
            .finish()
    }
}

impl Gpu {
    /// Opens GPU `ordinal`: checks the driver is present, makes a context, compiles the
    /// programs with NVRTC (sm_90), loads them and every kernel in them (eagerly, whatever
    /// `CUDA_MODULE_LOADING` says; see [`Gpu::open_with`]).
    pub fn open(ordinal: usize) -> Result<Self, GpuError> {
        Self::open_with(ordinal, &CompileOptions::new())
    }

    /// As [`Gpu::open`], compiling with `options`.
    ///
    /// Kernels of this crate run concurrently and wait on each other (a producer and the
    /// sink, producers and the CUDA software NIC). Under CUDA's default lazy loading the
    /// first launch of a kernel may wait for the kernels already running, which would
    /// deadlock such pairs; so every kernel of every program is loaded here with
    /// `cuFuncLoad` (CUDA 12.4+) and checked with `cuFuncIsLoaded`. The process
    /// environment is never read for this nor written.
    pub fn open_with(ordinal: usize, options: &CompileOptions) -> Result<Self, GpuError> {
        Self::open_compiling(ordinal, options, &Program::ALL)
    }

    /// Opens GPU `ordinal` with only the CUDA software NIC's kernel (`ibgda_softnic`,
    /// [`Program::SoftNic`]) compiled with `options` and loaded: for a process that runs
    /// [`DeviceNic`](crate::softnic::device::DeviceNic) and nothing else of the crate's (the
    /// emulated ConnectX's GPU build), in about a third of [`Gpu::open`]'s NVRTC time, which
    /// is most of its time. [`Gpu::raw_function`] finds no kernel on it.
    pub fn open_softnic(ordinal: usize, options: &CompileOptions) -> Result<Self, GpuError> {
        Self::open_compiling(ordinal, options, &[Program::SoftNic])
    }

    /// Opens GPU `ordinal` for the caller's programs alone
    /// ([`Gpu::compile_program`], [`Gpu::load_compiled`], device-API programs), compiled
    /// with `options`: none of the crate's programs is compiled at open, so
    /// [`Gpu::function`] and [`Gpu::raw_function`] find no kernel on it.
    pub fn open_for_user_programs(
        ordinal: usize,
        options: &CompileOptions,
    ) -> Result<Self, GpuError> {
        Self::open_compiling(ordinal, options, &[])
    }

    /// Opens GPU `ordinal` without compiling or loading any program (NVRTC is not
    /// needed): for memory, host registrations and NIC access only (the DMA-BUF export and
    /// doorbell mapping of [`CudaNicAccess`](crate::nic::CudaNicAccess)), as a host check
    /// uses it. [`Gpu::function`] and [`Gpu::raw_function`] find no kernel on it.
    pub fn open_without_programs(ordinal: usize) -> Result<Self, GpuError> {
        Self::open_compiling(ordinal, &CompileOptions::new(), &[])
    }

    /// A context on GPU `ordinal` with `programs` compiled with `options` and loaded,
    /// every kernel fully loaded: the first program's kernels are [`Gpu::function`]'s, the
    /// second's [`Gpu::raw_function`]'s.
    fn open_compiling(
        ordinal: usize,
        options: &CompileOptions,
        programs: &[Program],
    ) -> Result<Self, GpuError> {
        let ctx = Self::new_context(ordinal)?;
        let compiled: Vec<Compiled> = programs
            .iter()
            .map(|&p| compile(p, options))
            .collect::<Result<_, _>>()?;
        let load = |c: &Compiled| -> Result<HashMap<String, CudaFunction>, GpuError> {
            let module = ctx.load_module(Ptx::from_binary(c.cubin.clone()))?;
            load_every_kernel(&module, &c.ptx)
        };
        let kernels = compiled.first().map(load).transpose()?.unwrap_or_default();
        let raw = compiled.get(1).map(load).transpose()?.unwrap_or_default();
        Self::with_streams(ctx, kernels, raw, *options, compiled)
    }

    /// The GPU of `ctx` with its two streams and the programs loaded in it.
    fn with_streams(
        ctx: Arc<CudaContext>,
        kernels: HashMap<String, CudaFunction>,
        raw: HashMap<String, CudaFunction>,
        options: CompileOptions,
        compiled: Vec<Compiled>,
    ) -> Result<Self, GpuError> {
        // cudarc synchronizes the whole context when a handle makes its first stream with
        // event tracking on, and every `Gpu` has a handle of its own on the device's
        // primary context: a `Gpu` opened while a persistent kernel runs (the CUDA
        // software NIC, the sink, or a program's kernel when the emulated ConnectX opens
        // its GPU side during that program's registration) would wait for that kernel.
        // SAFETY: event tracking only orders the uses of cudarc's `CudaSlice`s across
        // streams; nothing on this handle allocates one (device memory comes from the
        // driver directly, as `DeviceBuffer`s whose users synchronize before freeing).
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream()?;
        let side_stream = ctx.new_stream()?;
        Ok(Self {
            ctx,
            stream,
            side_stream,
            kernels,
            raw,
            options,
            compiled,
        })
    }

    /// The context of GPU `ordinal`, after checking that the driver is present (cudarc
    /// panics without it) and that the GPU exists.
    fn new_context(ordinal: usize) -> Result<Arc<CudaContext>, GpuError> {
        if !driver_present() {
            return Err(GpuError::DriverMissing);
        }
        result::init()?;
        let count = result::device::get_count()?;
        if i32::try_from(ordinal).map_or(true, |o| o >= count) {
            return Err(GpuError::Driver(format!(
                "no GPU {ordinal} ({count} present)"
            )));
        }
        Ok(CudaContext::new(ordinal)?)
    }

    /// The options the programs were compiled with.
    pub fn options(&self) -> &CompileOptions {
        &self.options
    }

    /// The compiled programs (PTX, cubin, log).
    pub fn compiled(&self) -> &[Compiled] {
        &self.compiled
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// A kernel of the device-library program (loaded at open).
    pub fn function(&self, name: &str) -> Result<CudaFunction, GpuError> {
        self.kernels
            .get(name)
            .cloned()
            .ok_or_else(|| GpuError::Invalid(format!("no kernel {name} in kernels.cu")))
    }

    /// A kernel of the raw-baseline program (loaded at open).
    pub fn raw_function(&self, name: &str) -> Result<CudaFunction, GpuError> {
        self.raw
            .get(name)
            .cloned()
            .ok_or_else(|| GpuError::Invalid(format!("no kernel {name} in raw_baseline.cu")))
    }

    /// The stream launches go to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// A second stream, for a persistent kernel (the sink) running beside the first.
    pub fn side_stream(&self) -> &Arc<CudaStream> {
        &self.side_stream
    }

    /// Waits for all work on the context.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        Ok(self.ctx.synchronize()?)
    }

    /// Compiles a user's CUDA source (which may `#include "ibgda.cuh"`, see
    /// [`crate::include_dir`]) with NVRTC for sm_90 and this GPU's [`CompileOptions`], and
    /// loads it with every kernel fully loaded. `name` is the source's file name (for
    /// NVRTC's messages).
    pub fn compile_program(&self, name: &str, source: &str) -> Result<UserProgram, GpuError> {
        let compiled = compile_source(name, source, &self.options)?;
        self.ctx.bind_to_thread()?;
        let module = self
            .ctx
            .load_module(Ptx::from_binary(compiled.cubin.clone()))?;
        let functions = load_every_kernel(&module, &compiled.ptx)?;
        Ok(UserProgram {
            functions,
            compiled,
            stream: self.stream.clone(),
        })
    }

    /// Loads a program compiled elsewhere (the benchmark's variant builds, the peers'
    /// programs) with every kernel fully loaded, as at open; returns its kernels by name.
    pub fn load_compiled(
        &self,
        compiled: &Compiled,
    ) -> Result<HashMap<String, CudaFunction>, GpuError> {
        self.ctx.bind_to_thread()?;
        let module = self
            .ctx
            .load_module(Ptx::from_binary(compiled.cubin.clone()))?;
        load_every_kernel(&module, &compiled.ptx)
    }

    /// Zeroed device memory of `len` bytes, owned: move it into queue memory (which has
    /// one owner), or share it in an `Arc` as a data region.
    pub fn device_buffer(&self, len: usize) -> Result<DeviceBuffer, GpuError> {
        self.ctx.bind_to_thread()?;
        // SAFETY: a plain allocation of `len` (> 0 checked by the driver) bytes.
        let addr = unsafe { result::malloc_sync(len.max(1)) }?;
        let owner = DeviceAlloc {
            ctx: self.ctx.clone(),
            addr,
        };
        // SAFETY: `addr` is a fresh allocation of at least `len` bytes.
        unsafe { result::memset_d8_sync(addr, 0, len.max(1)) }?;
        // SAFETY: the allocation lives as long as `owner`, which the buffer keeps.
        Ok(unsafe { DeviceBuffer::from_raw(addr, len, Box::new(owner)) })
    }

    /// Device memory holding `bytes`, owned.
    pub fn device_buffer_from(&self, bytes: &[u8]) -> Result<DeviceBuffer, GpuError> {
        let b = self.device_buffer(bytes.len())?;
        self.write_device(&b, 0, bytes)?;
        Ok(b)
    }

    /// Copies `bytes` into device memory at `offset`.
    pub fn write_device(
        &self,
        buf: &DeviceBuffer,
        offset: usize,
        bytes: &[u8],
    ) -> Result<(), GpuError> {
        let at = buf.addr() + checked_range(offset, bytes.len(), buf.len())?;
        self.ctx.bind_to_thread()?;
        // SAFETY: `offset + bytes.len() <= buf.len()` without overflow (checked above), so
        // the range lies inside the live device allocation `buf` owns.
        unsafe { result::memcpy_htod_sync(at, bytes) }?;
        Ok(())
    }

    /// Copies a device buffer out (synchronous).
    pub fn read_device(&self, buf: &DeviceBuffer) -> Result<Vec<u8>, GpuError> {
        self.ctx.bind_to_thread()?;
        let mut out = vec![0u8; buf.len()];
        // SAFETY: `out` has the buffer's length; the allocation is live.
        unsafe { result::memcpy_dtoh_sync(&mut out, buf.addr()) }?;
        Ok(out)
    }

    /// The producer state of a GPU-posted queue pair (its counters, locks and collapsed
    /// CQ mark), copied out (synchronous). Reads only the state buffer the queue pair owns
    /// and borrows for `'q`.
    pub fn read_producer_state<T, S>(
        &self,
        q: &DeviceQueue<'_, T, S>,
    ) -> Result<DeviceProducerState, GpuError> {
        let mut bytes = [0u8; core::mem::size_of::<DeviceProducerState>()];
        self.ctx.bind_to_thread()?;
        // SAFETY: a `DeviceQueue` is made only by `QueuePair::device_queue`, whose
        // descriptor names, in `state`, the device address of the producer-state buffer
        // the queue pair owns (checked there to hold at least these 64 bytes) and keeps
        // alive while the `DeviceQueue` borrows it; `bytes` has the copied length.
        unsafe { result::memcpy_dtoh_sync(&mut bytes, q.raw().state) }?;
        let u64_at = |i: usize| u64::from_ne_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_ne_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        Ok(DeviceProducerState {
            reserved: u64_at(0),
            ready: u64_at(8),
            posted: u64_at(16),
            retired: u64_at(24),
            cq_consumer: u64_at(32),
            doorbell_lock: u32_at(40),
            poll_lock: u32_at(44),
            collapsed_seen: u32_at(48),
            reserved_word: u32_at(52),
        })
    }

    /// The send ring of a GPU-posted queue pair, copied out (synchronous): to inspect
    /// what GPU threads wrote. Reads only the ring the queue pair owns and borrows for
    /// `'q`.
    pub fn read_send_ring<T, S>(&self, q: &DeviceQueue<'_, T, S>) -> Result<Vec<u8>, GpuError> {
        let d = q.raw();
        let len = 1usize
            .checked_shl(d.log_sq_wqebbs)
            .and_then(|n| n.checked_mul(ibgda::wqe::WQEBB_BYTES))
            .ok_or_else(|| GpuError::Invalid(format!("ring of 2^{} WQEBBs", d.log_sq_wqebbs)))?;
        let mut out = vec![0u8; len];
        self.ctx.bind_to_thread()?;
        // SAFETY: a `DeviceQueue` is made only by `QueuePair::device_queue`, whose
        // descriptor names the send ring the queue pair owns (checked there to hold
        // 2^log_sq_wqebbs WQEBBs) and keeps alive while the `DeviceQueue` borrows it; `out`
        // has that length.
        unsafe { result::memcpy_dtoh_sync(&mut out, d.sq_ring) }?;
        Ok(out)
    }

    /// Zeroed pinned host memory mapped into the GPU (a `Host`-placed queue buffer the GPU
    /// posts to), owned: move it into queue memory, or share it in an `Arc`.
    pub fn mapped_host_buffer(&self, len: usize) -> Result<DmaBuffer, GpuError> {
        if len == 0 || len % 8 != 0 {
            return Err(GpuError::Invalid(format!(
                "length {len} not a multiple of 8"
            )));
        }
        self.ctx.bind_to_thread()?;
        let flags = cu::CU_MEMHOSTALLOC_DEVICEMAP | cu::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: a plain pinned allocation of `len` bytes.
        let ptr = unsafe { result::malloc_host(len, flags) }?;
        // Nothing touches the pointer before it is known to be non-null.
        let nn = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| GpuError::Driver("cuMemHostAlloc returned null".into()))?;
        let owner = PinnedAlloc {
            ctx: self.ctx.clone(),
            ptr,
        };
        // SAFETY: `nn` is `len` writable bytes just allocated (non-null, checked above).
        unsafe { core::ptr::write_bytes(nn.as_ptr(), 0, len) };
        let mut dptr: cu::CUdeviceptr = 0;
        // SAFETY: `ptr` is a mapped pinned allocation; `dptr` a valid out-pointer.
        unsafe { cu::cuMemHostGetDevicePointer_v2(&mut dptr, ptr, 0) }.result()?;
        // SAFETY: `nn` is valid for `len` bytes, page aligned, until `owner` frees it; the
        // host only accesses it through the buffer's atomics; `dptr` maps the same memory.
        let buf = unsafe { DmaBuffer::from_raw_mapped(nn, len, dptr, Box::new(owner)) }
            .map_err(|e| GpuError::Invalid(e.to_string()))?;
        Ok(buf)
    }

    /// The memory of a GPU-placed RC queue pair: a send ring of `wqebbs`, a CQ of
    /// `cq_entries` (initialised invalid, hardware-owned), records, doorbell and state.
    pub fn gpu_queue_memory(
        &self,
        wqebbs: usize,
        cq_entries: u32,
    ) -> Result<GpuQueueMemory, GpuError> {
        let size = RingSize::new(wqebbs).map_err(|e| GpuError::Invalid(e.to_string()))?;
        check_cq_entries(cq_entries)?;
        let mut cq = vec![0u8; cq_entries as usize * 64];
        for e in cq.chunks_mut(64) {
            e[63] = CQE_INIT_OP_OWN;
        }
        let invalid = |e: ibgda::queue::QueueMemoryError| GpuError::Invalid(e.to_string());
        let cq_ring = self.device_buffer(cq.len())?;
        self.write_device(&cq_ring, 0, &cq)?;
        Ok(GpuQueueMemory {
            sq: SendQueueMemory::from_device(
                size,
                self.device_buffer(size.bytes())?,
                self.device_buffer(8)?,
                self.device_buffer(8)?,
            )
            .map_err(invalid)?,
            cq: CompletionQueueMemory::from_device(cq_entries, cq_ring, self.device_buffer(8)?)
                .map_err(invalid)?,
            state: ProducerStateMemory::from_device(self.device_buffer(64)?).map_err(invalid)?,
        })
    }

    /// A GPU-placed RC queue pair for scope `S` over fresh device memory: a send ring of
    /// `wqebbs` WQEBBs, a CQ of `cq_entries` in `cq_mode`, a signaled WQE at least every
    /// `signal_interval` WQEBBs, doorbells rung explicitly (by the GPU threads).
    pub fn rc_queue_pair<S>(
        &self,
        qpn: u32,
        wqebbs: usize,
        cq_entries: u32,
        signal_interval: u32,
        cq_mode: CqMode,
        scope: S,
    ) -> Result<QueuePair<Rc, GpuPlaced, S>, GpuError>
    where
        S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
    {
        self.queue_pair(qpn, wqebbs, cq_entries, signal_interval, cq_mode, scope)
    }

    /// A GPU-placed queue pair of transport `T` (RC, or a DC initiator) for scope `S`,
    /// as [`Gpu::rc_queue_pair`] makes RC ones.
    pub fn queue_pair<T, S>(
        &self,
        qpn: u32,
        wqebbs: usize,
        cq_entries: u32,
        signal_interval: u32,
        cq_mode: CqMode,
        scope: S,
    ) -> Result<QueuePair<T, GpuPlaced, S>, GpuError>
    where
        T: TypedTransport,
        S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
    {
        let mem = self.gpu_queue_memory(wqebbs, cq_entries)?;
        let config = QpConfig {
            send: SendQueueConfig {
                limits: WqeLimits::default(),
                max_unsignaled_wqebbs: Some(signal_interval),
                doorbell: DoorbellPolicy::Explicit,
            },
            cq_mode,
        };
        let qpn = Qpn::new(qpn).map_err(|e| GpuError::Invalid(e.to_string()))?;
        Ok(QueuePair::for_device(
            qpn, mem.sq, mem.cq, mem.state, config, scope,
        )?)
    }

    /// Launches `ibgda_<kernel>_<S>` of the device-library program for a typed queue: only
    /// a kernel instantiated for the queue's scope `S` can receive it.
    ///
    /// # Safety
    ///
    /// `rest` must be exactly the kernel's parameters after the descriptor, in order,
    /// every address a live device allocation large enough for the kernel's use, and those
    /// allocations must outlive the launched work; and the launched work must complete
    /// before the borrow `'q` of the queue pair ends (synchronize first): the queue pair's
    /// `&mut` methods (recovery, `QueuePair::recover_device`) and its drop rely on no
    /// kernel still posting once nothing borrows it.
    pub unsafe fn launch_scoped<'q, S>(
        &self,
        kernel: &str,
        q: KernelQueue<'q, Rc, S>,
        cfg: LaunchConfig,
        rest: &[KernelArg<'_>],
    ) -> Result<(), GpuError>
    where
        S: OrderingScope<Producer = GpuThread>,
    {
        let f = self.function(&format!("ibgda_{kernel}_{}", S::NAME))?;
        // SAFETY: forwarded: the caller's contract is `launch_with_queue`'s.
        unsafe { launch_with_queue(&self.stream, &f, q, cfg, rest) }
    }

    /// Launches a kernel of either program with raw arguments (`args` in the kernel's
    /// order; [`KernelArg::Queue`] for a descriptor by value).
    ///
    /// # Safety
    ///
    /// `args` must be exactly the parameters the named kernel declares, in order, every
    /// address a live device allocation (or mapped host memory) large enough for what the
    /// kernel does with it, kept alive until the work completes; a [`KernelArg::Queue`]'s
    /// borrow of its queue pair must last until the work completes too (recovery, through
    /// the queue pair's `&mut`, relies on it).
    pub unsafe fn launch_raw(
        &self,
        raw_program: bool,
        name: &str,
        cfg: LaunchConfig,
        side: bool,
        args: &[KernelArg<'_>],
    ) -> Result<(), GpuError> {
        let f = if raw_program {
            self.raw_function(name)?
        } else {
            self.function(name)?
        };
        let stream = if side {
            &self.side_stream
        } else {
            &self.stream
        };
        let mut b = stream.launch_builder(&f);
        push_args(&mut b, args);
        // SAFETY: the caller passes exactly the arguments (types and order) the named
        // extern "C" kernel declares, device addresses only of live allocations, and
        // synchronizes before freeing anything the kernel touches.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }
}

fn push_args<'a>(b: &mut cudarc::driver::LaunchArgs<'a>, args: &'a [KernelArg<'_>]) {
    for a in args {
        match a {
            KernelArg::U64(v) => b.arg(v),
            KernelArg::U32(v) => b.arg(v),
            KernelArg::Queue(q) => b.arg(q),
        };
    }
}

/// Launches `f(q, rest...)` on `stream`.
///
/// # Safety
///
/// `f`'s parameters must be a descriptor by value then exactly `rest`, in order, every
/// address in `rest` a live allocation large enough for the kernel's use, kept alive
/// (with the queue pair `q` borrows) until the launched work completes.
unsafe fn launch_with_queue<T, S: OrderingScope>(
    stream: &Arc<CudaStream>,
    f: &CudaFunction,
    q: KernelQueue<'_, T, S>,
    cfg: LaunchConfig,
    rest: &[KernelArg<'_>],
) -> Result<(), GpuError> {
    if q.raw().scope != S::KIND as u32 {
        return Err(GpuError::ScopeMismatch {
            kernel: S::KIND as u32,
            descriptor: q.raw().scope,
        });
    }
    let mut b = stream.launch_builder(f);
    b.arg(&q);
    push_args(&mut b, rest);
    // SAFETY: `f` takes the descriptor by value then the caller's arguments (this
    // function's contract); the descriptor names only memory of the queue pair, alive
    // while the caller keeps it until the work completes.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

// SAFETY: `read` and `write` copy exactly the bytes asked for, at `offset` of the device
// buffer given (checked to lie inside it), synchronously on the context, and keep nothing
// of the buffer; `ring` stores the 8-byte value to a doorbell in device memory (the CUDA
// software NIC's) and refuses a register doorbell, which only a GPU thread's MMIO store
// may ring (recovery rings a register the host maps too itself, and never calls `ring`
// for it).
unsafe impl ibgda::queue::DeviceQueueAccess<GpuPlaced> for Gpu {
    fn read(
        &self,
        buffer: &ibgda::memory::DeviceBuffer,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), String> {
        let at = checked_range(offset, dst.len(), buffer.len()).map_err(|e| e.to_string())?;
        self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
        // SAFETY: `buffer` is a live device allocation of `buffer.len()` bytes (a
        // `DeviceBuffer`'s contract) and `[offset, offset + dst.len())` lies inside it.
        unsafe { result::memcpy_dtoh_sync(dst, buffer.addr() + at) }.map_err(|e| format!("{e:?}"))
    }

    fn write(
        &self,
        buffer: &ibgda::memory::DeviceBuffer,
        offset: usize,
        src: &[u8],
    ) -> Result<(), String> {
        let at = checked_range(offset, src.len(), buffer.len()).map_err(|e| e.to_string())?;
        self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
        // SAFETY: as in `read`.
        unsafe { result::memcpy_htod_sync(buffer.addr() + at, src) }
            .map_err(|e| format!("{e:?}"))?;
        // From pageable memory, cuMemcpyHtoD returns once `src` is staged, before the DMA
        // to device memory need have completed; a copy back to pageable memory returns
        // only once it completed, and copies of the context's null stream run in order:
        // after it, a NIC reading the memory sees `src` (the trait's `write` contract,
        // which a doorbell rung from the host relies on). No context-wide synchronize: a
        // persistent kernel (a CUDA software NIC) may be running.
        let mut back = vec![0u8; src.len()];
        // SAFETY: as in `read`; `back` has the copied length.
        unsafe { result::memcpy_dtoh_sync(&mut back, buffer.addr() + at) }
            .map_err(|e| format!("{e:?}"))
    }

    fn ring(&self, doorbell: &ibgda::queue::GpuDoorbell, value: [u8; 8]) -> Result<(), String> {
        if doorbell.is_register() {
            return Err(
                "the doorbell is a NIC register only the GPU has mapped: only a GPU \
                 thread's MMIO store rings it (recovery rings a register the host maps too, \
                 as the mlx5 backend's UAR doorbells, itself, through the host's mapping)"
                    .into(),
            );
        }
        use ibgda::queue::QueueBuffer;
        self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
        // SAFETY: a memory doorbell is an 8-byte device allocation the queue pair owns.
        unsafe { result::memcpy_htod_sync(doorbell.addr(), &value) }.map_err(|e| format!("{e:?}"))
    }
}

/// A user's CUDA program, compiled against the device library and loaded by
/// [`Gpu::compile_program`], every kernel fully loaded.
///
/// Its kernels that post take the descriptor by value as their first parameter and are
/// instantiated once per scope with the C name `<kernel>_<Scope>`, where `<Scope>` is the
/// `NAME` of the [`OrderingScope`] marker (`my_put_GpuFence`); the device library traps
/// (`__trap()`, a launch failure) when a kernel posts through a descriptor of another
/// scope, so a kernel whose name lies about its instantiation fails loudly.
pub struct UserProgram {
    functions: HashMap<String, CudaFunction>,
    compiled: Compiled,
    stream: Arc<CudaStream>,
}

impl fmt::Debug for UserProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kernels: Vec<&String> = self.functions.keys().collect();
        kernels.sort();
        f.debug_struct("UserProgram")
            .field("name", &self.compiled.name)
            .field("kernels", &kernels)
            .finish()
    }
}

impl UserProgram {
    /// The compiled program (PTX, cubin, ptxas report).
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// Every kernel name of the program.
    pub fn kernel_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.functions.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    /// The instance of `kernel` for scope `S` (`<kernel>_<S::NAME>`) and transport `T`:
    /// it only launches with a [`DeviceQueue`] of that scope and transport.
    pub fn kernel<T, S: OrderingScope>(
        &self,
        kernel: &str,
    ) -> Result<UserKernel<'_, T, S>, GpuError> {
        let name = format!("{kernel}_{}", S::NAME);
        let f = self.functions.get(&name).ok_or_else(|| {
            GpuError::Invalid(format!(
                "{} has no kernel {name} (kernel {kernel} instantiated for scope {})",
                self.compiled.name,
                S::NAME
            ))
        })?;
        Ok(UserKernel {
            function: f.clone(),
            name,
            stream: &self.stream,
            _scope: PhantomData,
        })
    }
}

/// One kernel of a [`UserProgram`], instantiated for scope `S` and transport `T`.
pub struct UserKernel<'p, T, S> {
    function: CudaFunction,
    name: String,
    stream: &'p Arc<CudaStream>,
    _scope: PhantomData<fn(T, S)>,
}

impl<T, S: OrderingScope> fmt::Debug for UserKernel<'_, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserKernel")
            .field("name", &self.name)
            .field("scope", &S::NAME)
            .finish()
    }
}

impl<T, S: OrderingScope> UserKernel<'_, T, S> {
    /// The kernel's C name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Launches the kernel with the queue `q` (of this kernel's scope and transport, by
    /// type) as its first argument, then `rest`, on the GPU's main stream.
    ///
    /// # Safety
    ///
    /// The kernel is the user's code: its parameters must be a descriptor by value then
    /// exactly `rest`, in order; it must touch only memory the descriptor names (through
    /// the device library) and memory `rest` names, every address a live allocation
    /// large enough for its use; and the caller must keep those allocations alive, and
    /// the borrow of the queue pair `q` carries, until the work completes (synchronize
    /// first): the queue pair's `&mut` methods (recovery) and its drop rely on no kernel
    /// still posting once nothing borrows it.
    pub unsafe fn launch(
        &self,
        q: &DeviceQueue<'_, T, S>,
        cfg: LaunchConfig,
        rest: &[KernelArg<'_>],
    ) -> Result<(), GpuError> {
        // SAFETY: forwarded: this function's contract is `launch_with_queue`'s.
        unsafe { launch_with_queue(self.stream, &self.function, KernelQueue::new(q), cfg, rest) }
    }
}

/// One argument of [`Gpu::launch_raw`] and of the typed launchers' trailing arguments.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'q> {
    /// A 64-bit value or device address.
    U64(u64),
    /// A 32-bit value.
    U32(u32),
    /// A queue descriptor by value, borrowing its queue pair.
    Queue(QueueArg<'q>),
}

/// `offset` as a byte offset into a buffer of `buffer_len` bytes, if `len` bytes from it
/// stay inside (no overflow: a wrapped sum must not pass the bound).
fn checked_range(offset: usize, len: usize, buffer_len: usize) -> Result<u64, GpuError> {
    match offset.checked_add(len) {
        Some(end) if end <= buffer_len => Ok(offset as u64),
        _ => Err(GpuError::Invalid(format!(
            "{len} bytes at offset {offset} do not fit a {buffer_len}-byte buffer"
        ))),
    }
}

/// The most CQ entries a queue takes (the mlx5 limit, `log_cq_size` at most 22).
pub const MAX_CQ_ENTRIES: u32 = 1 << 22;

/// A CQ size as it enters: a power of two from 1 to [`MAX_CQ_ENTRIES`] (0 would make the
/// device's `log_cq_entries` 32 and its polls run past the ring).
pub fn check_cq_entries(entries: u32) -> Result<(), GpuError> {
    if entries == 0 || !entries.is_power_of_two() || entries > MAX_CQ_ENTRIES {
        return Err(GpuError::Invalid(format!(
            "{entries} CQ entries: a power of two from 1 to {MAX_CQ_ENTRIES} is needed"
        )));
    }
    Ok(())
}

/// The memory of a GPU-placed queue pair and its producer state.
#[derive(Debug)]
pub struct GpuQueueMemory {
    /// Send queue.
    pub sq: SendQueueMemory<GpuPlaced>,
    /// Completion queue.
    pub cq: CompletionQueueMemory<GpuPlaced>,
    /// The 64-byte [`ibgda::queue::DeviceProducerState`] (owned by the queue pair made
    /// over this memory).
    pub state: ProducerStateMemory<GpuPlaced>,
}

struct DeviceAlloc {
    ctx: Arc<CudaContext>,
    addr: cu::CUdeviceptr,
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by `malloc_sync` in this context and freed once.
            let _ = unsafe { result::free_sync(self.addr) };
        }
    }
}

struct PinnedAlloc {
    ctx: Arc<CudaContext>,
    ptr: *mut core::ffi::c_void,
}

// SAFETY: the pointer is only freed (once, on drop); the memory itself is accessed through
// `DmaBuffer`'s atomics, which are `Sync`.
unsafe impl Send for PinnedAlloc {}
// SAFETY: as above.
unsafe impl Sync for PinnedAlloc {}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by `malloc_host` and freed once.
            let _ = unsafe { result::free_host(self.ptr) };
        }
    }
}

/// An RAII registration of host memory with the CUDA driver (`cuMemHostRegister`), with
/// its device address. Dropping it unregisters exactly the range it registered, nothing
/// else. For a NIC doorbell (UAR) page, register with [`HostRegistration::IO_MEMORY`].
pub struct HostRegistration {
    ctx: Arc<CudaContext>,
    ptr: *mut core::ffi::c_void,
    len: usize,
    device_addr: u64,
}

// SAFETY: the registration only holds the address to unregister; it never reads or
// writes the memory.
unsafe impl Send for HostRegistration {}
// SAFETY: as above.
unsafe impl Sync for HostRegistration {}

impl fmt::Debug for HostRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostRegistration")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("device_addr", &format_args!("{:#x}", self.device_addr))
            .finish()
    }
}

impl HostRegistration {
    /// `CU_MEMHOSTREGISTER_PORTABLE`.
    pub const PORTABLE: u32 = cu::CU_MEMHOSTREGISTER_PORTABLE;
    /// `CU_MEMHOSTREGISTER_DEVICEMAP` (always added: the point is a device address).
    pub const DEVICE_MAP: u32 = cu::CU_MEMHOSTREGISTER_DEVICEMAP;
    /// `CU_MEMHOSTREGISTER_IOMEMORY`: the range is I/O memory (a mapped NIC BAR page).
    pub const IO_MEMORY: u32 = cu::CU_MEMHOSTREGISTER_IOMEMORY;
    /// `CU_MEMHOSTREGISTER_READ_ONLY`.
    pub const READ_ONLY: u32 = cu::CU_MEMHOSTREGISTER_READ_ONLY;

    /// Registers `len` bytes at `ptr` with `flags` (DEVICE_MAP is added).
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must be mapped in this process (ordinary memory, or an I/O page
    /// with [`Self::IO_MEMORY`]) and stay mapped until the registration is dropped; the
    /// range must not be registered already.
    pub unsafe fn register(
        gpu: &Gpu,
        ptr: *mut u8,
        len: usize,
        flags: u32,
    ) -> Result<Self, GpuError> {
        gpu.ctx.bind_to_thread()?;
        let p = ptr.cast::<core::ffi::c_void>();
        // SAFETY: the caller guarantees the range is mapped and not yet registered.
        unsafe { cu::cuMemHostRegister_v2(p, len, flags | Self::DEVICE_MAP) }.result()?;
        let mut dptr: cu::CUdeviceptr = 0;
        // SAFETY: the range was registered with DEVICEMAP just above.
        if let Err(e) = unsafe { cu::cuMemHostGetDevicePointer_v2(&mut dptr, p, 0) }.result() {
            // SAFETY: registered just above, unregistered once.
            let _ = unsafe { cu::cuMemHostUnregister(p) };
            return Err(e.into());
        }
        Ok(Self {
            ctx: gpu.ctx.clone(),
            ptr: p,
            len,
            device_addr: dptr,
        })
    }

    /// The address GPU threads use for the range.
    pub fn device_addr(&self) -> u64 {
        self.device_addr
    }
    /// The registered length.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the registration is empty (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` was registered by `register` and is unregistered once, here.
            let _ = unsafe { cu::cuMemHostUnregister(self.ptr) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_writes_are_bounded_without_overflow() {
        assert_eq!(checked_range(0, 64, 64), Ok(0));
        assert_eq!(checked_range(60, 4, 64), Ok(60));
        assert_eq!(checked_range(64, 0, 64), Ok(64));
        assert!(checked_range(61, 4, 64).is_err());
        // The sum wraps to 7 in release: it must not pass as "inside".
        assert!(checked_range(usize::MAX - 1, 9, 64).is_err());
        assert!(checked_range(usize::MAX, 1, usize::MAX).is_err());
    }

    #[test]
    fn cq_entries_are_validated_where_they_enter() {
        for ok in [1, 2, 64, MAX_CQ_ENTRIES] {
            assert_eq!(check_cq_entries(ok), Ok(()), "{ok}");
        }
        for bad in [0, 3, 96, MAX_CQ_ENTRIES * 2, u32::MAX] {
            assert!(
                matches!(check_cq_entries(bad), Err(GpuError::Invalid(ref m)) if m.contains(&bad.to_string())),
                "{bad}"
            );
        }
    }

    #[test]
    fn descriptor_bytes_follow_the_repr_c_layout() {
        use core::mem::offset_of;
        let d = DeviceQueueDescriptor {
            sq_ring: 0x1111,
            state: 0x6666,
            qpn: 0x77,
            scope: 0x88,
            signal_interval: 0x99,
            wait_ns: 0xaaaa_bbbb_cccc,
            ..Default::default()
        };
        let b = descriptor_bytes(&d);
        let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(u64_at(offset_of!(DeviceQueueDescriptor, sq_ring)), 0x1111);
        assert_eq!(u64_at(offset_of!(DeviceQueueDescriptor, state)), 0x6666);
        assert_eq!(u32_at(offset_of!(DeviceQueueDescriptor, qpn)), 0x77);
        assert_eq!(u32_at(offset_of!(DeviceQueueDescriptor, scope)), 0x88);
        assert_eq!(
            u32_at(offset_of!(DeviceQueueDescriptor, signal_interval)),
            0x99
        );
        assert_eq!(
            u64_at(offset_of!(DeviceQueueDescriptor, wait_ns)),
            0xaaaa_bbbb_cccc
        );
        assert_eq!(b.len(), core::mem::size_of::<DeviceQueueDescriptor>());
    }

    #[test]
    fn compile_options_are_a_closed_typed_set() {
        assert!(CompileOptions::new().nvrtc_options().is_empty());
        let o = CompileOptions::new()
            .spin_limit(Duration::from_millis(1500))
            .expect("valid");
        assert_eq!(o.nvrtc_options(), ["-DIBGDA_SPIN_LIMIT_NS=1500000000ull"]);
        assert!(CompileOptions::new().spin_limit(Duration::ZERO).is_err());
        assert!(CompileOptions::new().spin_limit(Duration::MAX).is_err());
    }
}
