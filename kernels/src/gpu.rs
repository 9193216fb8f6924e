//! Host glue over cudarc 0.19 (driver API, loaded at run time): a GPU with the kernels
//! loaded, GPU-placed and host-mapped queue memory, an RAII host registration, and typed
//! launchers.
//!
//! Nothing here panics when the driver, NVRTC or a GPU is missing: [`Gpu::open`] checks
//! that the driver library is present before cudarc touches it (cudarc panics otherwise)
//! and returns a [`GpuError`].

use core::fmt;
use core::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::sys as cu;
use cudarc::driver::{result, CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

use ibgda::memory::{DeviceBuffer, DmaBuffer};
use ibgda::order::{GpuThread, OrderingScope};
use ibgda::queue::{
    CompletionQueueMemory, DeviceQueue, DeviceQueueDescriptor, DeviceQueueError, Gpu as GpuPlaced,
    SendQueueMemory, CQE_INIT_OP_OWN,
};
use ibgda::wqe::{Rc, RingSize};

use crate::nvrtc::{compile, Compiled, Program};

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
        }
    }
}

impl std::error::Error for GpuError {}

impl From<result::DriverError> for GpuError {
    fn from(e: result::DriverError) -> Self {
        Self::Driver(format!("{e:?}"))
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

/// A device descriptor as a kernel argument: the descriptor, by value.
///
/// Only [`KernelQueue::new`] makes one, from a [`DeviceQueue`] (itself only made from a
/// validated queue pair), so the scope it was made for stays in the launcher's type.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct KernelQueue(DeviceQueueDescriptor);

// SAFETY: `KernelQueue` is `#[repr(transparent)]` over `DeviceQueueDescriptor`, a
// `#[repr(C)]` struct of `u64` and `u32` fields (80 bytes, no padding, no pointers the
// host dereferences) whose layout the CUDA side takes from the generated header, where
// `static_assert`s pin every offset and the size. Passing it by value copies plain bytes.
unsafe impl DeviceRepr for KernelQueue {}

impl KernelQueue {
    /// The argument form of a typed device queue.
    pub fn new<T, S>(q: &DeviceQueue<'_, T, S>) -> Self {
        Self(*q.raw())
    }
    /// The descriptor.
    pub fn raw(&self) -> &DeviceQueueDescriptor {
        &self.0
    }
}

/// A GPU with the crate's programs compiled and loaded.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    side_stream: Arc<CudaStream>,
    kernels: Arc<CudaModule>,
    raw: Arc<CudaModule>,
    compiled: Vec<Compiled>,
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ctx.ordinal())
            .finish()
    }
}

impl Gpu {
    /// Opens GPU `ordinal`: checks the driver is present, makes a context, compiles the
    /// programs with NVRTC (sm_90) and loads them.
    pub fn open(ordinal: usize) -> Result<Self, GpuError> {
        Self::open_with(ordinal, &[])
    }

    /// As [`Gpu::open`], compiling with `options` added (e.g. `-DIBGDA_SPIN_LIMIT_NS=...`,
    /// which bounds every device wait loop: the tests use it so a hang becomes an error).
    pub fn open_with(ordinal: usize, options: &[&str]) -> Result<Self, GpuError> {
        if !driver_present() {
            return Err(GpuError::DriverMissing);
        }
        // Kernels of this crate run concurrently and wait on each other (a producer and the
        // sink, later the CUDA software NIC). With CUDA's default lazy module loading, the
        // first launch of a kernel may wait for the kernels already running to finish, which
        // deadlocks such pairs; load every kernel at module load instead. Read by the
        // driver at initialisation, so it must be set before the first driver call.
        if std::env::var_os("CUDA_MODULE_LOADING").is_none() {
            std::env::set_var("CUDA_MODULE_LOADING", "EAGER");
        }
        result::init()?;
        let count = result::device::get_count()?;
        if ordinal as i32 >= count {
            return Err(GpuError::Driver(format!(
                "no GPU {ordinal} ({count} present)"
            )));
        }
        let ctx = CudaContext::new(ordinal)?;
        let compiled: Vec<Compiled> = Program::ALL
            .iter()
            .map(|&p| compile(p, options))
            .collect::<Result<_, _>>()?;
        let kernels = ctx.load_module(Ptx::from_binary(compiled[0].cubin.clone()))?;
        let raw = ctx.load_module(Ptx::from_binary(compiled[1].cubin.clone()))?;
        let stream = ctx.new_stream()?;
        let side_stream = ctx.new_stream()?;
        Ok(Self {
            ctx,
            stream,
            side_stream,
            kernels,
            raw,
            compiled,
        })
    }

    /// The compiled programs (PTX, cubin, log).
    pub fn compiled(&self) -> &[Compiled] {
        &self.compiled
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// A kernel of the device-library program.
    pub fn function(&self, name: &str) -> Result<CudaFunction, GpuError> {
        Ok(self.kernels.load_function(name)?)
    }

    /// A kernel of the raw-baseline program.
    pub fn raw_function(&self, name: &str) -> Result<CudaFunction, GpuError> {
        Ok(self.raw.load_function(name)?)
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

    /// Zeroed device memory of `len` bytes (a `Gpu`-placed queue buffer).
    pub fn device_buffer(&self, len: usize) -> Result<Arc<DeviceBuffer>, GpuError> {
        Ok(Arc::new(self.owned_device_buffer(len)?))
    }

    /// Zeroed device memory of `len` bytes, owned (for queue memory, which has one owner).
    fn owned_device_buffer(&self, len: usize) -> Result<DeviceBuffer, GpuError> {
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

    /// Device memory holding `bytes`.
    pub fn device_buffer_from(&self, bytes: &[u8]) -> Result<Arc<DeviceBuffer>, GpuError> {
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
        if offset + bytes.len() > buf.len() {
            return Err(GpuError::Invalid(format!(
                "write of {} bytes at {offset} past a {}-byte buffer",
                bytes.len(),
                buf.len()
            )));
        }
        self.ctx.bind_to_thread()?;
        // SAFETY: the range lies inside the live device allocation (checked above).
        unsafe { result::memcpy_htod_sync(buf.addr() + offset as u64, bytes) }?;
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

    /// Copies `len` bytes of device memory at `addr` out (synchronous): for memory a
    /// descriptor names (a queue's producer state). A bad address is a driver error.
    pub fn read_device_at(&self, addr: u64, len: usize) -> Result<Vec<u8>, GpuError> {
        self.ctx.bind_to_thread()?;
        let mut out = vec![0u8; len];
        // SAFETY: `out` has `len` bytes; the driver validates the device range and fails
        // the copy (a returned error) if it is not mapped.
        unsafe { result::memcpy_dtoh_sync(&mut out, addr) }?;
        Ok(out)
    }

    /// Zeroed pinned host memory mapped into the GPU (a `Host`-placed queue buffer the GPU
    /// posts to).
    pub fn mapped_host_buffer(&self, len: usize) -> Result<Arc<DmaBuffer>, GpuError> {
        if len == 0 || len % 8 != 0 {
            return Err(GpuError::Invalid(format!(
                "length {len} not a multiple of 8"
            )));
        }
        self.ctx.bind_to_thread()?;
        let flags = cu::CU_MEMHOSTALLOC_DEVICEMAP | cu::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: a plain pinned allocation of `len` bytes.
        let ptr = unsafe { result::malloc_host(len, flags) }?;
        let owner = PinnedAlloc {
            ctx: self.ctx.clone(),
            ptr,
        };
        // SAFETY: `ptr` is `len` writable bytes just allocated.
        unsafe { core::ptr::write_bytes(ptr.cast::<u8>(), 0, len) };
        let mut dptr: cu::CUdeviceptr = 0;
        // SAFETY: `ptr` is a mapped pinned allocation; `dptr` a valid out-pointer.
        unsafe { cu::cuMemHostGetDevicePointer_v2(&mut dptr, ptr, 0) }.result()?;
        let nn = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| GpuError::Driver("cuMemHostAlloc returned null".into()))?;
        // SAFETY: `nn` is valid for `len` bytes, page aligned, until `owner` frees it; the
        // host only accesses it through the buffer's atomics; `dptr` maps the same memory.
        let buf = unsafe { DmaBuffer::from_raw_mapped(nn, len, dptr, Box::new(owner)) }
            .map_err(|e| GpuError::Invalid(e.to_string()))?;
        Ok(Arc::new(buf))
    }

    /// The memory of a GPU-placed RC queue pair: a send ring of `wqebbs`, a CQ of
    /// `cq_entries` (initialised invalid, hardware-owned), records, doorbell and state.
    pub fn gpu_queue_memory(
        &self,
        wqebbs: usize,
        cq_entries: u32,
    ) -> Result<GpuQueueMemory, GpuError> {
        let size = RingSize::new(wqebbs).map_err(|e| GpuError::Invalid(e.to_string()))?;
        if cq_entries == 0 || !cq_entries.is_power_of_two() {
            return Err(GpuError::Invalid(format!("{cq_entries} CQ entries")));
        }
        let mut cq = vec![0u8; cq_entries as usize * 64];
        for e in cq.chunks_mut(64) {
            e[63] = CQE_INIT_OP_OWN;
        }
        let invalid = |e: ibgda::queue::QueueMemoryError| GpuError::Invalid(e.to_string());
        let cq_ring = self.owned_device_buffer(cq.len())?;
        self.write_device(&cq_ring, 0, &cq)?;
        Ok(GpuQueueMemory {
            sq: SendQueueMemory::from_device(
                size,
                self.owned_device_buffer(size.bytes())?,
                self.owned_device_buffer(8)?,
                self.owned_device_buffer(8)?,
            )
            .map_err(invalid)?,
            cq: CompletionQueueMemory::from_device(
                cq_entries,
                cq_ring,
                self.owned_device_buffer(8)?,
            )
            .map_err(invalid)?,
            state: self.device_buffer(64)?,
        })
    }

    /// Launches `ibgda_<kernel>_<S>` for a typed queue: only a kernel instantiated for the
    /// queue's scope `S` can receive it.
    ///
    /// # Safety
    ///
    /// `rest` must be exactly the kernel's parameters after the descriptor, in order, every address a live device allocation large enough for the kernel's use,
    /// and the queue pair and those allocations must outlive the launched work.
    pub unsafe fn launch_scoped<S>(
        &self,
        kernel: &str,
        q: &DeviceQueue<'_, Rc, S>,
        cfg: LaunchConfig,
        rest: &[KernelArg],
    ) -> Result<(), GpuError>
    where
        S: OrderingScope<Producer = GpuThread>,
    {
        if q.raw().scope != S::KIND as u32 {
            return Err(GpuError::Invalid(
                "descriptor scope differs from its type".into(),
            ));
        }
        let f = self.function(&format!("ibgda_{kernel}_{}", S::NAME))?;
        let kq = KernelQueue::new(q);
        let mut b = self.stream.launch_builder(&f);
        b.arg(&kq);
        for a in rest {
            match a {
                KernelArg::U64(v) => b.arg(v),
                KernelArg::U32(v) => b.arg(v),
                KernelArg::Queue(q) => b.arg(q),
            };
        }
        // SAFETY: the kernels named `ibgda_<kernel>_<S>` take the descriptor by value,
        // then the caller's arguments, which this function's contract makes exactly the
        // kernel's remaining parameters; the caller keeps the queue pair (whose memory the
        // descriptor names) and every other allocation alive until the work completes.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// Launches a kernel of either program with raw `u64`/`u32` arguments (`args` in the
    /// kernel's order; `KernelArg::Queue` for a descriptor by value).
    ///
    /// # Safety
    ///
    /// `args` must be exactly the parameters the named kernel declares, in order, every
    /// address a live device allocation (or mapped host memory) large enough for what the
    /// kernel does with it, kept alive until the work completes.
    pub unsafe fn launch_raw(
        &self,
        raw_program: bool,
        name: &str,
        cfg: LaunchConfig,
        side: bool,
        args: &[KernelArg],
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
        for a in args {
            match a {
                KernelArg::U64(v) => b.arg(v),
                KernelArg::U32(v) => b.arg(v),
                KernelArg::Queue(q) => b.arg(q),
            };
        }
        // SAFETY: the caller passes exactly the arguments (types and order) the named
        // extern "C" kernel declares, device addresses only of live allocations, and
        // synchronizes before freeing anything the kernel touches.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }
}

/// One argument of [`Gpu::launch_raw`].
#[derive(Clone, Copy, Debug)]
pub enum KernelArg {
    /// A 64-bit value or device address.
    U64(u64),
    /// A 32-bit value.
    U32(u32),
    /// A queue descriptor by value.
    Queue(KernelQueue),
}

/// The memory of a GPU-placed queue pair and its producer state.
#[derive(Debug)]
pub struct GpuQueueMemory {
    /// Send queue.
    pub sq: SendQueueMemory<GpuPlaced>,
    /// Completion queue.
    pub cq: CompletionQueueMemory<GpuPlaced>,
    /// The 64-byte [`ibgda::queue::DeviceProducerState`].
    pub state: Arc<DeviceBuffer>,
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
