//! How a NIC backend reaches GPU memory and maps its doorbell into the GPU, without the
//! root crate depending on CUDA: the CUDA side (crate `ibgda-kernels`, over cudarc)
//! implements these traits, the mlx5 backend uses them.
//!
//! - [`DmaBufExporter`]: exports a GPU allocation as a DMA-BUF file descriptor
//!   (`cuMemGetHandleForAddressRange`), which the NIC registers as UMEM or as a memory
//!   region without the peer-memory kernel module.
//! - [`IoMemoryMapper`]: maps an I/O page (the NIC's UAR doorbell page) into the GPU's
//!   address space (`cuMemHostRegister` with the I/O-memory flag), so GPU threads ring the
//!   NIC directly.

use core::fmt;
use core::ptr::NonNull;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::memory::DeviceBuffer;

/// A DMA-BUF file descriptor covering a GPU buffer: the buffer starts `offset` bytes into
/// the DMA-BUF, which is `len` bytes long. Dropping it closes the descriptor; a backend does
/// so as soon as its registration call returns (the kernel keeps its own reference to the
/// DMA-BUF for the registration's life), so that descriptors do not pile up.
#[derive(Debug)]
pub struct DmaBufRange {
    fd: OwnedFd,
    offset: u64,
    len: u64,
}

impl DmaBufRange {
    /// A DMA-BUF export of GPU memory.
    ///
    /// # Safety
    ///
    /// `fd` must be a DMA-BUF of `len` bytes of GPU memory whose byte `offset` is the first
    /// byte of the buffer it was exported for, and that memory must stay allocated while
    /// the buffer lives (the DMA-BUF holds a reference to it).
    pub unsafe fn new(fd: OwnedFd, offset: u64, len: u64) -> Self {
        Self { fd, offset, len }
    }
    /// The file descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    /// Where the buffer starts in the DMA-BUF.
    pub fn offset(&self) -> u64 {
        self.offset
    }
    /// The DMA-BUF's length.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Whether the DMA-BUF is empty (never, for a real export).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Why a DMA-BUF export failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DmaBufExportError {
    /// The driver's error code (a `CUresult`), 0 if no driver call was made.
    pub code: i32,
    /// What failed.
    pub message: String,
}

impl fmt::Display for DmaBufExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DMA-BUF export failed: {} (code {})",
            self.message, self.code
        )
    }
}

impl std::error::Error for DmaBufExportError {}

/// Exports GPU buffers as DMA-BUF.
///
/// # Safety
///
/// An implementation must return only [`DmaBufRange`]s satisfying [`DmaBufRange::new`]'s
/// contract for the buffer it was given: the NIC reads and writes the memory it describes.
pub unsafe trait DmaBufExporter: Send + Sync + fmt::Debug {
    /// Exports the memory of `buffer`.
    fn export(&self, buffer: &DeviceBuffer) -> Result<DmaBufRange, DmaBufExportError>;
}

/// Why an I/O page could not be mapped into the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoMapError {
    /// The driver's error code (a `CUresult`: 800 is "not permitted").
    pub code: i32,
    /// The driver's message.
    pub message: String,
}

impl fmt::Display for IoMapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "I/O memory mapping failed: {} (code {})",
            self.message, self.code
        )
    }
}

impl std::error::Error for IoMapError {}

/// A mapping of I/O memory into the GPU; dropping it unmaps the range.
///
/// # Safety
///
/// [`IoMapping::device_addr`] must be the GPU address of the first byte of the mapped
/// range for as long as the mapping lives.
pub unsafe trait IoMapping: Send + Sync + fmt::Debug {
    /// The address GPU threads use for the first byte of the range.
    fn device_addr(&self) -> u64;
}

/// How a NIC's doorbell page was mapped into the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DoorbellMapping {
    /// As I/O memory (`cuMemHostRegister` with the I/O-memory flag): a NIC's BAR page.
    IoMemory,
    /// As ordinary host memory (`cuMemHostRegister` without it): a device whose doorbell
    /// page is memory, as the emulated ConnectX's is (a BAR page cannot take this).
    HostMemory,
}

/// Maps I/O pages into the GPU.
///
/// # Safety
///
/// An implementation must return only mappings of exactly the range it was given.
pub unsafe trait IoMemoryMapper: Send + Sync + fmt::Debug {
    /// Maps `len` bytes of I/O memory at `ptr` into the GPU.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must be mapped I/O memory of this process (a NIC BAR page) that
    /// stays mapped until the returned mapping is dropped, and not already registered.
    unsafe fn map_io(&self, ptr: NonNull<u8>, len: usize)
        -> Result<Box<dyn IoMapping>, IoMapError>;

    /// Maps `len` bytes of ordinary host memory at `ptr` into the GPU: for a device whose
    /// doorbell page is memory (the emulated ConnectX's), which the I/O-memory
    /// registration refuses. A mapper that maps I/O memory only refuses it (the default).
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must be ordinary memory of this process that stays mapped until
    /// the returned mapping is dropped, and not already registered.
    unsafe fn map_host_memory(
        &self,
        ptr: NonNull<u8>,
        len: usize,
    ) -> Result<Box<dyn IoMapping>, IoMapError> {
        let _ = (ptr, len);
        Err(IoMapError {
            code: 801,
            message: "this mapper maps I/O memory only".to_owned(),
        })
    }
}
