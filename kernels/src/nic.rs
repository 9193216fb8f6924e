//! The CUDA side of the NIC backends' GPU access ([`ibgda::nic::gpu_access`]): DMA-BUF
//! export of GPU queue memory (`cuMemGetHandleForAddressRange`), so the NIC can register
//! it without the peer-memory module, and the mapping of a NIC doorbell (UAR) page into the
//! GPU with [`HostRegistration`] as I/O memory.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys as cu;

use ibgda::memory::DeviceBuffer;
use ibgda::nic::gpu_access::{
    DmaBufExportError, DmaBufExporter, DmaBufRange, IoMapError, IoMapping, IoMemoryMapper,
};
use ibgda::nic::{NicError, QueueAllocator, QueueFill};
use ibgda::queue::{Gpu as GpuPlaced, CQE_INIT_OP_OWN};

use crate::gpu::{Gpu, GpuError, HostRegistration};

/// GPU access for a NIC backend over an open [`Gpu`] (for the mlx5 backend's
/// `with_gpu`, as both the DMA-BUF exporter and the I/O mapper).
#[derive(Debug)]
pub struct CudaNicAccess {
    gpu: Arc<Gpu>,
    /// Whether DMA-BUF exports can be tried here (checked on the first export).
    dmabuf: OnceLock<Result<(), DmaBufExportError>>,
}

/// `CUDA_ERROR_NOT_SUPPORTED`: the code of an export this driver or device cannot make.
const NOT_SUPPORTED: i32 = 801;

/// Whether a DMA-BUF export can be tried, from what the device reports
/// (`CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`) and whether the driver has the entry point
/// (`cuMemGetHandleForAddressRange`, from CUDA 11.7 drivers on; cudarc's loader panics on
/// a missing one, so it is looked up first). Each refusal says what is missing; the NIC
/// backend then registers through peer memory and keeps the reason.
pub fn dmabuf_precheck(
    supported: Result<bool, GpuError>,
    entry_point: bool,
) -> Result<(), DmaBufExportError> {
    if !entry_point {
        return Err(export_error(
            NOT_SUPPORTED,
            "the CUDA driver has no cuMemGetHandleForAddressRange (DMA-BUF export needs a \
             CUDA 11.7 or later driver)",
        ));
    }
    match supported {
        Ok(true) => Ok(()),
        Ok(false) => Err(export_error(
            NOT_SUPPORTED,
            "the GPU reports no DMA-BUF support (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0: \
             it needs the NVIDIA open kernel modules and Linux >= 5.12)",
        )),
        Err(e) => Err(export_error(
            cuda_error_code(&e),
            format!("querying CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: {e}"),
        )),
    }
}

/// Whether the loaded driver library has `symbol` (without calling it).
fn driver_has(symbol: &str) -> bool {
    let mut name = symbol.as_bytes().to_vec();
    name.push(0);
    // SAFETY: a lookup in the driver library cudarc loaded for the open GPU; the symbol
    // is not called through this type.
    unsafe { cu::culib().get::<unsafe extern "C" fn()>(name.as_slice()) }.is_ok()
}

impl CudaNicAccess {
    /// Access through `gpu`.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        Self {
            gpu,
            dmabuf: OnceLock::new(),
        }
    }

    /// Whether DMA-BUF exports can be tried on this GPU and driver ([`dmabuf_precheck`]).
    pub fn dmabuf_available(&self) -> Result<(), DmaBufExportError> {
        self.dmabuf
            .get_or_init(|| {
                dmabuf_precheck(
                    self.dmabuf_supported(),
                    driver_has("cuMemGetHandleForAddressRange"),
                )
            })
            .clone()
    }

    /// Whether the device reports DMA-BUF support (`CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`):
    /// the NVIDIA open kernel modules on Linux >= 5.12.
    pub fn dmabuf_supported(&self) -> Result<bool, GpuError> {
        let v = self
            .gpu
            .context()
            .attribute(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)?;
        Ok(v != 0)
    }
}

/// The least alignment of GPU queue memory: 64 KiB, as NVSHMEM allocates it (every queue
/// buffer then starts its own DMA-BUF pages).
pub const GPU_QUEUE_ALIGN: usize = 64 << 10;

/// A CQE's size.
const CQE_BYTES: usize = 64;

fn gpu_error(e: GpuError) -> NicError {
    NicError::Unsupported {
        what: format!("GPU queue memory: {e}"),
    }
}

/// GPU queue memory for the control plane: device memory aligned to at least
/// [`GPU_QUEUE_ALIGN`], with `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` set (so the NIC's writes
/// and the GPU's copies stay ordered), zeroed or filled with invalid hardware-owned CQEs.
impl QueueAllocator<GpuPlaced> for CudaNicAccess {
    fn allocate(
        &self,
        len: usize,
        align: usize,
        fill: QueueFill,
    ) -> Result<DeviceBuffer, NicError> {
        if len == 0 || !align.is_power_of_two() {
            return Err(NicError::OutOfRange {
                what: "GPU queue memory length (or a non-power-of-two alignment)",
                value: len as u64,
                max: isize::MAX as u64,
            });
        }
        let align = align
            .max(GPU_QUEUE_ALIGN)
            .max(ibgda::memory::host_page_size().unwrap_or(0));
        // The length padded to the alignment (a multiple of the host page) as well: a
        // DMA-BUF export covers whole host pages, so the buffer's last page must lie in
        // the allocation too (an 8-byte doorbell record at the end of a `len + align`
        // allocation that the driver did not align would leave it).
        let total = len
            .checked_next_multiple_of(align)
            .and_then(|padded| padded.checked_add(align))
            .ok_or(NicError::OutOfRange {
                what: "GPU queue memory length",
                value: len as u64,
                max: (isize::MAX as usize - 2 * align) as u64,
            })?;
        let raw = self.gpu.device_buffer(total).map_err(gpu_error)?;
        let start = raw
            .addr()
            .checked_add(align as u64 - 1)
            .map(|a| a & !(align as u64 - 1))
            .ok_or(NicError::OutOfRange {
                what: "GPU allocation address",
                value: raw.addr(),
                max: u64::MAX - align as u64,
            })?;
        let sync: u32 = 1;
        self.gpu
            .context()
            .bind_to_thread()
            .map_err(|e| gpu_error(e.into()))?;
        // SAFETY: `sync` is a valid `unsigned int`; `raw` is a live allocation.
        unsafe {
            cu::cuPointerSetAttribute(
                (&sync as *const u32).cast(),
                cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                raw.addr(),
            )
        }
        .result()
        .map_err(|e| gpu_error(e.into()))?;
        // SAFETY: `start .. start + len` lies inside `raw` (`start - raw.addr() < align` and
        // `raw` has at least `len + align` bytes), which the new buffer owns.
        let buffer = unsafe { DeviceBuffer::from_raw(start, len, Box::new(raw)) };
        if fill == QueueFill::InvalidCqes {
            let mut cqes = vec![0u8; len];
            for entry in cqes.chunks_exact_mut(CQE_BYTES) {
                entry[CQE_BYTES - 1] = CQE_INIT_OP_OWN;
            }
            self.gpu
                .write_device(&buffer, 0, &cqes)
                .map_err(gpu_error)?;
        }
        Ok(buffer)
    }
}

/// The CUDA error codes the NIC path tells apart, by their driver names.
const KNOWN_ERRORS: [(cu::CUresult, i32); 6] = [
    (cu::CUresult::CUDA_ERROR_NOT_PERMITTED, 800),
    (cu::CUresult::CUDA_ERROR_NOT_SUPPORTED, 801),
    (cu::CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712),
    (cu::CUresult::CUDA_ERROR_INVALID_VALUE, 1),
    (cu::CUresult::CUDA_ERROR_OUT_OF_MEMORY, 2),
    (cu::CUresult::CUDA_ERROR_UNKNOWN, 999),
];

/// The `CUresult` code named in a driver error's text (the [`GpuError`] carries it as
/// text), or 999 (unknown) when it names none of the codes it tells apart (not permitted,
/// not supported, already registered, invalid value, out of memory, unknown).
pub fn cuda_error_code(e: &GpuError) -> i32 {
    let GpuError::Driver(text) = e else {
        return 999;
    };
    KNOWN_ERRORS
        .iter()
        .find(|(name, _)| {
            let name = format!("{name:?}");
            // Match the whole name (CUDA_ERROR_NOT_SUPPORTED must not match a longer one).
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|word| word == name)
        })
        .map_or(999, |&(_, code)| code)
}

fn export_error(code: i32, message: impl Into<String>) -> DmaBufExportError {
    DmaBufExportError {
        code,
        message: message.into(),
    }
}

// SAFETY: `export` returns a DMA-BUF exported by the driver for a page-aligned range of the
// one allocation holding the buffer (checked with `cuMemGetAddressRange`), with `offset`
// the buffer's distance from the range's start, so byte `offset` is the buffer's first.
unsafe impl DmaBufExporter for CudaNicAccess {
    fn export(&self, buffer: &DeviceBuffer) -> Result<DmaBufRange, DmaBufExportError> {
        self.dmabuf_available()?;
        let driver = |e: cudarc::driver::result::DriverError, what: &str| {
            let e = GpuError::from(e);
            export_error(cuda_error_code(&e), format!("{what}: {e}"))
        };
        self.gpu
            .context()
            .bind_to_thread()
            .map_err(|e| driver(e, "binding the context"))?;
        let addr = buffer.addr();
        let end = addr
            .checked_add(buffer.len() as u64)
            .ok_or_else(|| export_error(0, "buffer end overflows"))?;
        let mut base: cu::CUdeviceptr = 0;
        let mut size: usize = 0;
        // SAFETY: valid out-pointers; the driver validates `addr`.
        unsafe { cu::cuMemGetAddressRange_v2(&mut base, &mut size, addr) }
            .result()
            .map_err(|e| driver(e, "cuMemGetAddressRange"))?;
        // The range must start and end on host pages.
        let page = ibgda::memory::host_page_size()
            .ok_or_else(|| export_error(0, "the host page size is unknown (sysconf)"))?
            as u64;
        let start = addr & !(page - 1);
        let stop = end
            .checked_add(page - 1)
            .map(|e| e & !(page - 1))
            .ok_or_else(|| export_error(0, "buffer end overflows"))?;
        if start < base || stop > base + size as u64 {
            return Err(export_error(
                0,
                format!(
                    "the page-aligned range {start:#x}..{stop:#x} of the buffer leaves its \
                     allocation {base:#x}+{size:#x}: allocate queue memory page-aligned"
                ),
            ));
        }
        let mut fd: core::ffi::c_int = -1;
        // SAFETY: `fd` is a valid out-pointer for a DMA-BUF file descriptor; the range is
        // page-aligned and inside one live allocation (checked above).
        unsafe {
            cu::cuMemGetHandleForAddressRange(
                (&mut fd as *mut core::ffi::c_int).cast(),
                start,
                (stop - start) as usize,
                cu::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        }
        .result()
        .map_err(|e| driver(e, "cuMemGetHandleForAddressRange"))?;
        if fd < 0 {
            return Err(export_error(0, "the driver returned no file descriptor"));
        }
        // SAFETY: the driver just created `fd` for this process; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        tell_the_emulator(fd.as_raw_fd(), start, stop - start);
        // SAFETY: `fd` is a DMA-BUF of `stop - start` bytes starting at `start`, and the
        // buffer starts `addr - start` bytes in; the DMA-BUF references the allocation.
        Ok(unsafe { DmaBufRange::new(fd, addr - start, stop - start) })
    }
}

/// The emulated ConnectX's `ibgda_emu_register_dmabuf(fd, device_addr, len)`: the
/// emulator reaches GPU memory by its device address, which a DMA-BUF descriptor does not
/// tell it, so the exporter tells it what each export covers before any registration
/// names the descriptor.
type EmuRegisterDmabuf = unsafe extern "C" fn(core::ffi::c_int, u64, u64) -> core::ffi::c_int;

/// Tells the emulated ConnectX, if it is the `libibverbs.so.1` this process loaded, what
/// the DMA-BUF `fd` covers (the device range `start..start + len`). rdma-core's library
/// has no such entry point: then nothing happens. This is the one emulator-only path of
/// the exporter.
fn tell_the_emulator(fd: core::ffi::c_int, start: u64, len: u64) {
    static HOOK: OnceLock<Option<EmuRegisterDmabuf>> = OnceLock::new();
    let hook = HOOK.get_or_init(|| {
        // SAFETY: RTLD_NOLOAD opens only a library already loaded (running no
        // initialiser); the symbol's type is the emulator's documented prototype. The
        // handle is kept for the process, so the pointer stays valid.
        unsafe {
            let lib = libloading::os::unix::Library::open(
                Some("libibverbs.so.1"),
                libc::RTLD_NOLOAD | libc::RTLD_LAZY,
            )
            .ok()?;
            let f = lib
                .get::<EmuRegisterDmabuf>(b"ibgda_emu_register_dmabuf\0")
                .ok()
                .map(|s| *s);
            core::mem::forget(lib);
            f
        }
    });
    if let Some(register) = hook {
        // SAFETY: the emulator's entry point reads only its arguments.
        unsafe { register(fd, start, len) };
    }
}

/// A UAR page mapped into the GPU.
#[derive(Debug)]
struct MappedIo(HostRegistration);

// SAFETY: `HostRegistration::device_addr` is the GPU address of the registered range's
// first byte until the registration is dropped (it unregisters then).
unsafe impl IoMapping for MappedIo {
    fn device_addr(&self) -> u64 {
        self.0.device_addr()
    }
}

// SAFETY: both returned mappings register exactly `ptr..ptr + len`.
unsafe impl IoMemoryMapper for CudaNicAccess {
    unsafe fn map_host_memory(
        &self,
        ptr: core::ptr::NonNull<u8>,
        len: usize,
    ) -> Result<Box<dyn IoMapping>, IoMapError> {
        // SAFETY: the caller guarantees the range is ordinary memory, stays mapped until
        // the mapping is dropped, and is not registered already.
        let reg = unsafe {
            HostRegistration::register(&self.gpu, ptr.as_ptr(), len, HostRegistration::PORTABLE)
        }
        .map_err(|e| IoMapError {
            code: cuda_error_code(&e),
            message: e.to_string(),
        })?;
        Ok(Box::new(MappedIo(reg)))
    }

    unsafe fn map_io(
        &self,
        ptr: core::ptr::NonNull<u8>,
        len: usize,
    ) -> Result<Box<dyn IoMapping>, IoMapError> {
        // SAFETY: the caller guarantees the range is mapped I/O memory, stays mapped until
        // the mapping is dropped, and is not registered already.
        let reg = unsafe {
            HostRegistration::register(
                &self.gpu,
                ptr.as_ptr(),
                len,
                HostRegistration::PORTABLE | HostRegistration::IO_MEMORY,
            )
        }
        .map_err(|e| IoMapError {
            code: cuda_error_code(&e),
            message: e.to_string(),
        })?;
        Ok(Box::new(MappedIo(reg)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dmabuf_export_is_tried_only_where_the_driver_and_device_have_it() {
        assert_eq!(dmabuf_precheck(Ok(true), true), Ok(()));
        let no_entry = dmabuf_precheck(Ok(true), false).unwrap_err();
        assert_eq!(no_entry.code, NOT_SUPPORTED);
        assert!(
            no_entry.message.contains("cuMemGetHandleForAddressRange"),
            "{no_entry}"
        );
        // A driver without the entry point is refused whatever the attribute says.
        assert_eq!(dmabuf_precheck(Ok(false), false), Err(no_entry));
        let unsupported = dmabuf_precheck(Ok(false), true).unwrap_err();
        assert_eq!(unsupported.code, NOT_SUPPORTED);
        assert!(
            unsupported
                .message
                .contains("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0"),
            "{unsupported}"
        );
        let failed = dmabuf_precheck(
            Err(GpuError::Driver(
                "DriverError(CUDA_ERROR_INVALID_VALUE, \"message\")".into(),
            )),
            true,
        )
        .unwrap_err();
        assert_eq!(failed.code, 1);
    }

    #[test]
    fn driver_errors_are_classified_by_their_whole_name() {
        // The text `GpuError::from(DriverError)` holds: the driver's `Debug`, which names
        // the code then its message (building it here would need a driver).
        let e = |name: &str| GpuError::Driver(format!("DriverError({name}, \"message\")"));
        assert_eq!(cuda_error_code(&e("CUDA_ERROR_NOT_PERMITTED")), 800);
        assert_eq!(cuda_error_code(&e("CUDA_ERROR_NOT_SUPPORTED")), 801);
        assert_eq!(
            cuda_error_code(&e("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED")),
            712
        );
        assert_eq!(cuda_error_code(&e("CUDA_ERROR_INVALID_VALUE")), 1);
        // A name that only starts like a known one is not that one.
        assert_eq!(
            cuda_error_code(&e("CUDA_ERROR_NOT_PERMITTED_SOMETHING")),
            999
        );
        assert_eq!(cuda_error_code(&GpuError::DriverMissing), 999);
        // The names compared are cudarc's own spelling of the enum.
        assert_eq!(
            format!("{:?}", cu::CUresult::CUDA_ERROR_NOT_PERMITTED),
            "CUDA_ERROR_NOT_PERMITTED"
        );
    }
}
