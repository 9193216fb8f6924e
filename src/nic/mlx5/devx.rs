//! DEVX objects: PRM commands sent to the firmware (objects created, modified, queried and
//! destroyed; general commands), UMEM registrations of queue memory (host, or GPU by
//! DMA-BUF with the peer-memory path as fallback), and UAR doorbell pages (mapped into the
//! GPU for GPU producers). Every owner releases its object on `Drop`, before what it holds.

use core::ffi::c_void;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use std::sync::Arc;

use rdma_mummy_sys as sys;

use super::dv::errno;
use super::error::{Mlx5Error, EOPNOTSUPP};
use super::verbs::{Context, GpuPath};
use crate::memory::{DeviceBuffer, DeviceRegister, DmaBuffer, RegisterPage};
use crate::nic::gpu_access::{
    DmaBufExportError, DmaBufExporter, DoorbellMapping, IoMapping, IoMemoryMapper,
};

/// A command's input holds at least its 16-bit opcode, 16 reserved bits and the op_mod
/// word; its output at least the status byte, three reserved bytes and the syndrome.
pub const COMMAND_HEADER_BYTES: usize = 8;

/// `IBV_ACCESS_LOCAL_WRITE`: queue memory the NIC writes (CQs, doorbell records) needs it.
const ACCESS_LOCAL_WRITE: u32 = 1;
/// `MLX5DV_UMEM_MASK_DMABUF`.
const UMEM_MASK_DMABUF: u64 = 1;
/// Page sizes the NIC may use for a UMEM: every power of two from 4 KiB up (rdma-core's
/// default for `mlx5dv_devx_umem_reg`, `MLX5_ADAPTER_PAGE_SIZE` = 4096).
const UMEM_PAGE_SIZES: u64 = !(4096 - 1);

pub(super) fn check_buffers(input: &[u8], output: &[u8]) -> Result<(), Mlx5Error> {
    if input.len() < COMMAND_HEADER_BYTES {
        return Err(Mlx5Error::CommandBuffer {
            which: "input",
            len: input.len(),
            min: COMMAND_HEADER_BYTES,
        });
    }
    if output.len() < COMMAND_HEADER_BYTES {
        return Err(Mlx5Error::CommandBuffer {
            which: "output",
            len: output.len(),
            min: COMMAND_HEADER_BYTES,
        });
    }
    Ok(())
}

/// The error for a DEVX call that returned `rc` (an errno, as rdma-core's DEVX calls do).
fn call_result(
    call: &'static str,
    rc: core::ffi::c_int,
    input: &[u8],
    output: &[u8],
) -> Result<(), Mlx5Error> {
    if rc == 0 {
        return Ok(());
    }
    let e = if rc > 0 { rc } else { errno() };
    Err(Mlx5Error::from_devx(call, e, input, output))
}

pub(crate) fn general_command(
    ctx: &Context,
    input: &[u8],
    output: &mut [u8],
) -> Result<(), Mlx5Error> {
    check_buffers(input, output)?;
    let f = ctx.libs.general_cmd.get()?;
    // SAFETY: a live DEVX context; `input` and `output` are valid for their lengths and
    // the call writes at most `output.len()` bytes.
    let rc = unsafe {
        f(
            ctx.ctx.as_ptr(),
            input.as_ptr().cast(),
            input.len(),
            output.as_mut_ptr().cast(),
            output.len(),
        )
    };
    call_result("mlx5dv_devx_general_cmd", rc, input, output)
}

pub(crate) fn query_eqn(ctx: &Context, vector: u32) -> Result<u32, Mlx5Error> {
    let f = ctx.libs.query_eqn.get()?;
    let mut eqn = 0u32;
    // SAFETY: a live context and a valid out-pointer.
    let rc = unsafe { f(ctx.ctx.as_ptr(), vector, &mut eqn) };
    if rc != 0 {
        return Err(Mlx5Error::Verbs {
            call: "mlx5dv_devx_query_eqn",
            errno: if rc > 0 { rc } else { errno() },
        });
    }
    Ok(eqn)
}

/// Something a DEVX object depends on (a CQ for a QP, a UMEM, a UAR): kept alive until
/// the object is destroyed.
pub type Dependency = Arc<dyn Send + Sync>;

/// An object created by a DEVX command (CQ, QP, DCT). Dropping it destroys it (rdma-core
/// sends the DESTROY command the kernel recorded for it), then releases its dependencies.
pub struct DevxObject {
    obj: NonNull<sys::mlx5dv_devx_obj>,
    opcode: u16,
    ctx: Arc<Context>,
    // Released only once the object is destroyed: if destruction fails, the hardware may
    // still use them (a QP's UMEM), so they are leaked rather than freed.
    dependencies: ManuallyDrop<Vec<Dependency>>,
}

// SAFETY: DEVX objects are used through thread-safe ioctls and destroyed once, on drop.
unsafe impl Send for DevxObject {}
// SAFETY: as above.
unsafe impl Sync for DevxObject {}

impl core::fmt::Debug for DevxObject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DevxObject")
            .field("created_by", &super::error::command_name(self.opcode))
            .field("device", &self.ctx.name)
            .finish()
    }
}

impl Drop for DevxObject {
    fn drop(&mut self) {
        // A failure cannot be reported from `drop`; `destroy` reports it.
        let _ = self.release();
    }
}

impl DevxObject {
    pub(crate) fn create(
        ctx: &Arc<Context>,
        input: &[u8],
        output: &mut [u8],
        dependencies: Vec<Dependency>,
    ) -> Result<Self, Mlx5Error> {
        check_buffers(input, output)?;
        let create = ctx.libs.obj_create.get()?;
        // An object that cannot be destroyed must not be created.
        ctx.libs.obj_destroy.get()?;
        // SAFETY: a live DEVX context; buffers valid for their lengths.
        let obj = unsafe {
            create(
                ctx.ctx.as_ptr(),
                input.as_ptr().cast(),
                input.len(),
                output.as_mut_ptr().cast(),
                output.len(),
            )
        };
        let obj = NonNull::new(obj).ok_or_else(|| {
            Mlx5Error::from_devx("mlx5dv_devx_obj_create", errno(), input, output)
        })?;
        Ok(Self {
            obj,
            opcode: u16::from_be_bytes([input[0], input[1]]),
            ctx: ctx.clone(),
            dependencies: ManuallyDrop::new(dependencies),
        })
    }

    /// Destroys the object, then releases its dependencies; on failure they are leaked
    /// (the device may still use them) and the error is returned. Called once, by
    /// `destroy` or `drop`.
    fn release(&mut self) -> Result<(), Mlx5Error> {
        let rc = match self.ctx.libs.obj_destroy.get() {
            // SAFETY: created by `mlx5dv_devx_obj_create` and destroyed only here, once
            // (`release` runs from `destroy`, which then forgets `self`, or from `drop`);
            // the context is alive (a field, dropped after this).
            Ok(destroy) => unsafe { destroy(self.obj.as_ptr()) },
            Err(_) => EOPNOTSUPP,
        };
        if rc != 0 {
            // The DESTROY command the kernel recorded: each creating opcode's next
            // (CREATE_CQ 0x400 -> DESTROY_CQ 0x401, CREATE_QP, CREATE_DCT alike).
            return Err(Mlx5Error::DevxCall {
                call: "mlx5dv_devx_obj_destroy",
                command: super::error::command_name(self.opcode.wrapping_add(1)),
                errno: if rc > 0 { rc } else { errno() },
            });
        }
        // SAFETY: taken once, after the object that used them is gone; never used again.
        drop(unsafe { ManuallyDrop::take(&mut self.dependencies) });
        Ok(())
    }

    /// Destroys the object (rdma-core sends the DESTROY command the kernel recorded for
    /// it), reporting a failure, in which case the dependencies stay allocated.
    pub fn destroy(self) -> Result<(), Mlx5Error> {
        let mut this = ManuallyDrop::new(self);
        let result = this.release();
        // SAFETY: `this` is never used again; its context is dropped exactly once here
        // (its `Drop` does not run: `this` is `ManuallyDrop`).
        drop(unsafe { core::ptr::read(&this.ctx) });
        result
    }

    /// Sends a modify command (the QP and DCT state transitions) for this object.
    pub(crate) fn modify(&self, input: &[u8], output: &mut [u8]) -> Result<(), Mlx5Error> {
        check_buffers(input, output)?;
        let f = self.ctx.libs.obj_modify.get()?;
        // SAFETY: a live object; buffers valid for their lengths.
        let rc = unsafe {
            f(
                self.obj.as_ptr(),
                input.as_ptr().cast(),
                input.len(),
                output.as_mut_ptr().cast(),
                output.len(),
            )
        };
        call_result("mlx5dv_devx_obj_modify", rc, input, output)
    }
}

/// The memory a UMEM covers, kept alive as long as the registration. Not a DMA-BUF's
/// descriptor: the kernel holds its own reference to the DMA-BUF from the registration on,
/// so the descriptor is closed once `mlx5dv_devx_umem_reg_ex` returns (as NVSHMEM and UCX
/// close theirs: kept open, four per GPU-placed queue pair would exhaust the default 1,024
/// descriptors at about 250 queue pairs).
#[derive(Debug)]
enum UmemMemory {
    Host(#[allow(dead_code)] Arc<DmaBuffer>),
    Gpu(#[allow(dead_code)] Arc<DeviceBuffer>),
}

/// Queue memory registered with the NIC (CREATE_CQ and CREATE_QP name it by id).
pub struct Umem {
    umem: NonNull<sys::mlx5dv_devx_umem>,
    id: u32,
    len: usize,
    gpu_path: Option<GpuPath>,
    /// Why DMA-BUF was not used, when GPU memory was registered through peer memory.
    dmabuf_error: Option<DmaBufExportError>,
    ctx: Arc<Context>,
    // Released only once deregistered: if that fails the NIC may still access it.
    memory: ManuallyDrop<UmemMemory>,
}

// SAFETY: deregistered once, on drop; the id is a plain value.
unsafe impl Send for Umem {}
// SAFETY: as above.
unsafe impl Sync for Umem {}

impl core::fmt::Debug for Umem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Umem")
            .field("id", &self.id)
            .field("len", &self.len)
            .field("gpu_path", &self.gpu_path)
            .field("dmabuf_error", &self.dmabuf_error)
            .finish()
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        let rc = match self.ctx.libs.umem_dereg.get() {
            // SAFETY: registered by `mlx5dv_devx_umem_reg[_ex]`, deregistered once, here.
            Ok(dereg) => unsafe { dereg(self.umem.as_ptr()) },
            Err(_) => EOPNOTSUPP,
        };
        if rc == 0 {
            // SAFETY: taken once, after the NIC lost access to the memory.
            drop(unsafe { ManuallyDrop::take(&mut self.memory) });
        }
    }
}

impl Umem {
    fn finish(
        ctx: &Arc<Context>,
        umem: NonNull<sys::mlx5dv_devx_umem>,
        len: usize,
        gpu_path: Option<GpuPath>,
        memory: UmemMemory,
    ) -> Self {
        // SAFETY: `umem` is a live registration the driver filled.
        let id = unsafe { (*umem.as_ptr()).umem_id };
        Self {
            umem,
            id,
            len,
            gpu_path,
            dmabuf_error: None,
            ctx: ctx.clone(),
            memory: ManuallyDrop::new(memory),
        }
    }

    /// Registers host queue memory.
    pub(crate) fn register_host(
        ctx: &Arc<Context>,
        buffer: Arc<DmaBuffer>,
    ) -> Result<Self, Mlx5Error> {
        let reg = ctx.libs.umem_reg.get()?;
        ctx.libs.umem_dereg.get()?;
        let len = buffer.len();
        // SAFETY: a live context and `len` bytes of host memory the registration keeps
        // alive (`memory`) until it is deregistered.
        let umem = unsafe {
            reg(
                ctx.ctx.as_ptr(),
                buffer.as_ptr().cast::<c_void>(),
                len,
                ACCESS_LOCAL_WRITE,
            )
        };
        let umem = NonNull::new(umem).ok_or_else(|| Mlx5Error::UmemRegistration {
            errno: errno(),
            len,
        })?;
        Ok(Self::finish(ctx, umem, len, None, UmemMemory::Host(buffer)))
    }

    /// Registers GPU queue memory: by DMA-BUF (`mlx5dv_devx_umem_reg_ex` with the DMA-BUF
    /// mask, address = offset in the DMA-BUF) when `exporter` is given and that works, else
    /// through the peer-memory module by GPU address.
    pub(crate) fn register_gpu(
        ctx: &Arc<Context>,
        buffer: Arc<DeviceBuffer>,
        exporter: Option<&dyn DmaBufExporter>,
    ) -> Result<Self, Mlx5Error> {
        let reg = ctx.libs.umem_reg.get()?;
        ctx.libs.umem_dereg.get()?;
        let len = buffer.len();
        let mut dmabuf_error = DmaBufExportError {
            code: 0,
            message: "no DMA-BUF exporter given".to_owned(),
        };
        match (exporter, ctx.libs.umem_reg_ex.get()) {
            (None, _) => {}
            (Some(_), Err(_)) => {
                dmabuf_error = DmaBufExportError {
                    code: EOPNOTSUPP,
                    message: "libmlx5.so.1 has no mlx5dv_devx_umem_reg_ex (rdma-core < 35)"
                        .to_owned(),
                }
            }
            (Some(exporter), Ok(reg_ex)) => match exporter.export(&buffer) {
                Err(e) => dmabuf_error = e,
                Ok(range) => {
                    let mut umem_in = sys::mlx5dv_devx_umem_in {
                        // With the DMA-BUF mask, `addr` is the offset into the DMA-BUF.
                        addr: range.offset() as usize as *mut c_void,
                        size: len,
                        access: ACCESS_LOCAL_WRITE,
                        pgsz_bitmap: UMEM_PAGE_SIZES,
                        comp_mask: UMEM_MASK_DMABUF,
                        dmabuf_fd: range.fd(),
                    };
                    // SAFETY: a live context; the exporter's contract makes `range` a
                    // DMA-BUF of the buffer's memory from `offset`, which the registration
                    // keeps alive with the DMA-BUF itself.
                    let umem = unsafe { reg_ex(ctx.ctx.as_ptr(), &mut umem_in) };
                    let errno = errno();
                    // The registration holds the DMA-BUF itself: the descriptor closes now.
                    drop(range);
                    match NonNull::new(umem) {
                        Some(umem) => {
                            return Ok(Self::finish(
                                ctx,
                                umem,
                                len,
                                Some(GpuPath::DmaBuf),
                                UmemMemory::Gpu(buffer),
                            ))
                        }
                        None => {
                            dmabuf_error = DmaBufExportError {
                                code: errno,
                                message: if errno == EOPNOTSUPP || errno == libc::EINVAL {
                                    "mlx5dv_devx_umem_reg_ex with the DMA-BUF failed (errno in \
                                     code): DMA-BUF UMEM needs rdma-core >= 43 and a kernel \
                                     with DMA-BUF support in mlx5_ib (Linux >= 5.12)"
                                } else {
                                    "mlx5dv_devx_umem_reg_ex with the DMA-BUF failed (errno in \
                                     code)"
                                }
                                .to_owned(),
                            }
                        }
                    }
                }
            },
        }
        // SAFETY: a live context; the GPU range is kept alive by the registration; the
        // peer-memory module resolves the address (the host never dereferences it).
        let umem = unsafe {
            reg(
                ctx.ctx.as_ptr(),
                buffer.addr() as usize as *mut c_void,
                len,
                ACCESS_LOCAL_WRITE,
            )
        };
        let umem = NonNull::new(umem)
            .ok_or_else(|| Mlx5Error::gpu_registration(&dmabuf_error, errno()))?;
        let mut registered = Self::finish(
            ctx,
            umem,
            len,
            Some(GpuPath::PeerMemory),
            UmemMemory::Gpu(buffer),
        );
        // The fallback NVSHMEM also takes (its issue 67: DMA-BUF UMEM registration failing
        // with EFAULT for the control buffer): registered by peer memory, and the reason
        // DMA-BUF was not used is kept for the caller to report.
        if exporter.is_some() {
            registered.dmabuf_error = Some(dmabuf_error);
        }
        Ok(registered)
    }

    /// The UMEM id (CREATE_CQ's `cq_umem_id`, CREATE_QP's `wq_umem_id`, `dbr_umem_id`).
    pub fn id(&self) -> u32 {
        self.id
    }
    /// Registered length.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the registration is empty (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// For GPU memory, how it reached the NIC.
    pub fn gpu_path(&self) -> Option<GpuPath> {
        self.gpu_path
    }
    /// For GPU memory registered through peer memory although a DMA-BUF exporter was
    /// given: why the DMA-BUF path failed (the export, or `mlx5dv_devx_umem_reg_ex` with
    /// its errno), so that the fallback can be reported.
    pub fn dmabuf_error(&self) -> Option<&DmaBufExportError> {
        self.dmabuf_error.as_ref()
    }
}

/// The kind of UAR page allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UarKind {
    /// Non-cached, dedicated to this allocation (`MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED`,
    /// rdma-core >= 45; older ones refuse it and the next kind is tried).
    NonCachedDedicated,
    /// Non-cached (`MLX5DV_UAR_ALLOC_TYPE_NC`; rdma-core may share it per context).
    NonCached,
    /// BlueFlame (`MLX5DV_UAR_ALLOC_TYPE_BF`, write-combining).
    BlueFlame,
}

impl UarKind {
    /// The allocation flags, in the order they are tried.
    pub const TRIED: [(UarKind, u32); 3] = [
        (UarKind::NonCachedDedicated, 1 << 31),
        (UarKind::NonCached, 1),
        (UarKind::BlueFlame, 0),
    ];
}

/// A UAR page: the doorbell register queues ring.
pub struct Uar {
    uar: NonNull<sys::mlx5dv_devx_uar>,
    page_id: u32,
    kind: UarKind,
    ctx: Arc<Context>,
}

// SAFETY: freed once, on drop; the doorbell register is only written through mappings
// whose owners keep the `Uar` alive.
unsafe impl Send for Uar {}
// SAFETY: as above.
unsafe impl Sync for Uar {}

impl core::fmt::Debug for Uar {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Uar")
            .field("page_id", &self.page_id)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Drop for Uar {
    fn drop(&mut self) {
        if let Ok(free) = self.ctx.libs.free_uar.get() {
            // SAFETY: allocated by `mlx5dv_devx_alloc_uar`, freed once, after every
            // mapping of it (which hold an `Arc<Uar>`).
            unsafe { free(self.uar.as_ptr()) };
        }
    }
}

/// One page of the registry: its GPU mapping, what keeps the page mapped in the process
/// (the UAR it belongs to), and how many doorbells use it.
struct MappedPage {
    start: usize,
    users: usize,
    device_addr: u64,
    kind: DoorbellMapping,
    // Unmapped before the UAR is freed (fields drop in declaration order).
    _mapping: Box<dyn IoMapping>,
    _keep: Box<dyn Send + Sync>,
}

/// The pages of this process mapped into the GPU, by host address, each mapped once and
/// counted. rdma-core may hand the same page to several UAR allocations (its shared
/// non-cached page), and the driver registers a page once: later doorbells of the page
/// share the first mapping. Mapping, counting and unmapping all happen under the
/// registry's lock, so a page being unmapped is never mapped again before the driver has
/// forgotten it (which it would refuse as "already registered").
pub(crate) struct PageRegistry {
    pages: std::sync::Mutex<Vec<MappedPage>>,
}

impl PageRegistry {
    pub(crate) const fn new() -> Self {
        Self {
            pages: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<MappedPage>> {
        self.pages
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A use of the page at `start`: its live mapping, or one `map` makes (under the lock:
    /// `map` must not use the registry) with what keeps the page mapped until it is
    /// unmapped.
    pub(crate) fn acquire<E>(
        &'static self,
        start: usize,
        map: impl FnOnce() -> Result<Mapped, E>,
    ) -> Result<PageUse, E> {
        let mut pages = self.lock();
        let (device_addr, kind) = match pages.iter_mut().find(|p| p.start == start) {
            Some(page) => {
                page.users += 1;
                (page.device_addr, page.kind)
            }
            None => {
                let (mapping, keep, kind) = map()?;
                let device_addr = mapping.device_addr();
                pages.push(MappedPage {
                    start,
                    users: 1,
                    device_addr,
                    kind,
                    _mapping: mapping,
                    _keep: keep,
                });
                (device_addr, kind)
            }
        };
        Ok(PageUse {
            registry: self,
            start,
            device_addr,
            kind,
        })
    }

    /// How many pages are mapped.
    #[cfg(test)]
    pub(crate) fn mapped(&self) -> usize {
        self.lock().len()
    }
}

/// A page's new mapping: the mapping, what keeps the page mapped in the process, and how
/// it was mapped.
pub(crate) type Mapped = (Box<dyn IoMapping>, Box<dyn Send + Sync>, DoorbellMapping);

/// One use of a mapped page: the last one to go unmaps it, under the registry's lock.
pub(crate) struct PageUse {
    registry: &'static PageRegistry,
    start: usize,
    device_addr: u64,
    kind: DoorbellMapping,
}

impl PageUse {
    /// The GPU address of the page's first byte.
    pub(crate) fn device_addr(&self) -> u64 {
        self.device_addr
    }
    /// How the page was mapped.
    pub(crate) fn kind(&self) -> DoorbellMapping {
        self.kind
    }
}

impl Drop for PageUse {
    fn drop(&mut self) {
        let mut pages = self.registry.lock();
        if let Some(i) = pages.iter().position(|p| p.start == self.start) {
            pages[i].users -= 1;
            if pages[i].users == 0 {
                // Unmapped (then the UAR released) before the lock is left.
                drop(pages.swap_remove(i));
            }
        }
    }
}

/// The UAR pages of this process mapped into the GPU.
static MAPPED_PAGES: PageRegistry = PageRegistry::new();

/// The owner of a GPU doorbell buffer: its use of the page mapping it lies in.
struct GpuDoorbellOwner {
    _page: PageUse,
}

/// The host's view of the doorbell register: keeps the UAR allocated.
struct HostDoorbellOwner {
    _uar: Arc<Uar>,
}

/// The host page size (the unit the driver registers for the GPU), read, not assumed.
fn page_size() -> Result<usize, Mlx5Error> {
    crate::memory::host_page_size().ok_or(Mlx5Error::OutOfRange {
        what: "host page size (sysconf(_SC_PAGESIZE) gave no power of two)",
        value: 0,
        limit: 0,
    })
}

impl Uar {
    pub(crate) fn alloc(ctx: &Arc<Context>) -> Result<Arc<Self>, Mlx5Error> {
        let alloc = ctx.libs.alloc_uar.get()?;
        ctx.libs.free_uar.get()?;
        let mut last = 0;
        for (kind, flags) in UarKind::TRIED {
            // SAFETY: a live DEVX context.
            let uar = unsafe { alloc(ctx.ctx.as_ptr(), flags) };
            if let Some(uar) = NonNull::new(uar) {
                // SAFETY: a live UAR the driver filled.
                let page_id = unsafe { (*uar.as_ptr()).page_id };
                return Ok(Arc::new(Self {
                    uar,
                    page_id,
                    kind,
                    ctx: ctx.clone(),
                }));
            }
            last = errno();
        }
        Err(Mlx5Error::UarAllocation { errno: last })
    }

    /// The UAR page index (CREATE_CQ's and CREATE_QP's `uar_page`).
    pub fn page_id(&self) -> u32 {
        self.page_id
    }
    /// The kind of page allocated.
    pub fn kind(&self) -> UarKind {
        self.kind
    }

    fn register(&self) -> Result<NonNull<u8>, Mlx5Error> {
        // SAFETY: a live UAR.
        let reg = unsafe { (*self.uar.as_ptr()).reg_addr };
        NonNull::new(reg.cast::<u8>()).ok_or(Mlx5Error::UarAllocation { errno: 0 })
    }

    /// The 8-byte doorbell register for host producers, as a store-only register page
    /// (reads of a UAR register are not memory reads).
    pub(crate) fn host_register(self: &Arc<Self>) -> Result<RegisterPage, Mlx5Error> {
        let reg = self.register()?;
        let owner = HostDoorbellOwner { _uar: self.clone() };
        // SAFETY: `reg` is the UAR's mapped doorbell register (8 bytes, 8-aligned, inside
        // the mapped UAR page), which accepts aligned 64-bit stores, mapped until the UAR
        // is freed, which `owner` prevents while the page lives; a store to it changes no
        // memory of this process (the NIC then reads the queue through DMA).
        unsafe { RegisterPage::from_raw(reg, 8, Box::new(owner)) }.map_err(|_| {
            Mlx5Error::OutOfRange {
                what: "UAR doorbell register alignment",
                value: reg.as_ptr() as u64 % 8,
                limit: 0,
            }
        })
    }

    /// The 8-byte doorbell register mapped into the GPU through `mapper` (the page holding
    /// it is registered as I/O memory, once per page in the process), and how it was
    /// mapped. The driver's refusal is [`Mlx5Error::UarMappingRefused`].
    ///
    /// The emulated ConnectX's UAR pages are ordinary memory, which the I/O-memory
    /// registration does not take: the emulator says which pages are its own
    /// (`ibgda_emu_uar_page`, which rdma-core does not export), and those are registered
    /// as host memory ([`DoorbellMapping::HostMemory`]), or refused with the CUDA error
    /// the emulator is configured to give (`fault.uar_gpu_mapping`). This is the one
    /// emulator-only path of the backend.
    pub(crate) fn gpu_doorbell(
        self: &Arc<Self>,
        mapper: &dyn IoMemoryMapper,
    ) -> Result<(DeviceRegister, DoorbellMapping), Mlx5Error> {
        let reg = self.register()?;
        let page = page_size()?;
        let reg_addr = reg.as_ptr() as usize;
        let page_start = reg_addr & !(page - 1);
        let offset = (reg_addr - page_start) as u64;
        let start = NonNull::new(page_start as *mut u8).ok_or(Mlx5Error::OutOfRange {
            what: "UAR page address",
            value: 0,
            limit: 0,
        })?;
        let emulated = match self.ctx.libs.emu_uar_page.get() {
            // SAFETY: the emulator's query reads nothing at the address (it compares it
            // with the pages it allocated).
            Ok(query) => unsafe { query(page_start as *const core::ffi::c_void) },
            Err(_) => 0,
        };
        if emulated < 0 {
            return Err(Mlx5Error::UarMappingRefused {
                cuda_error: -emulated,
                message: "the emulated ConnectX is configured to refuse this mapping \
                          (fault.uar_gpu_mapping)"
                    .to_owned(),
            });
        }
        let mapped = MAPPED_PAGES.acquire(page_start, || {
            let (mapping, kind) = if emulated == 1 {
                // SAFETY: the emulator's UAR page is ordinary memory of this process,
                // allocated until the UAR is freed; the registry keeps this UAR alive
                // with the mapping and unmaps first, and holds every mapping this module
                // made (so none of this page exists yet).
                let m = unsafe { mapper.map_host_memory(start, page) };
                (m, DoorbellMapping::HostMemory)
            } else {
                // SAFETY: the page holding the doorbell register is the UAR's mapping of
                // the NIC's BAR, mapped until the UAR is freed; the registry keeps this
                // UAR alive with the mapping and unmaps first. No live mapping of this
                // page exists (the registry, under its lock, holds every mapping this
                // module made, and the page's address never leaves this module).
                let m = unsafe { mapper.map_io(start, page) };
                (m, DoorbellMapping::IoMemory)
            };
            let mapping = mapping.map_err(Mlx5Error::from_uar_mapping)?;
            Ok::<_, Mlx5Error>((
                mapping,
                Box::new(self.clone()) as Box<dyn Send + Sync>,
                kind,
            ))
        })?;
        let kind = mapped.kind();
        let device_addr =
            mapped
                .device_addr()
                .checked_add(offset)
                .ok_or(Mlx5Error::OutOfRange {
                    what: "UAR device address",
                    value: mapped.device_addr(),
                    limit: u64::MAX - offset,
                })?;
        let owner = GpuDoorbellOwner { _page: mapped };
        // SAFETY: `device_addr` is the GPU address of the 8-byte doorbell register inside
        // the mapped page (the mapping's contract plus the in-page offset, < the page size),
        // which accepts aligned 64-bit stores and stays mapped while `owner` lives; a store
        // to it changes no memory (the NIC then reads the queue through DMA).
        let register = unsafe { DeviceRegister::from_raw(device_addr, 8, Box::new(owner)) }
            .map_err(|_| Mlx5Error::OutOfRange {
                what: "UAR doorbell device address alignment",
                value: device_addr % 8,
                limit: 0,
            })?;
        Ok((register, kind))
    }
}
