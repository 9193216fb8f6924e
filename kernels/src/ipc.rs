//! GPU memory shared between processes (CUDA IPC): what a process that owns one rank
//! hands its peers so that their CUDA software NICs can write its windows, and the guard
//! that keeps a peer's memory mapped in this process.
//!
//! The exporter describes a device buffer with [`export`]: the IPC handle of the
//! allocation it lies in (`cuIpcGetMemHandle`), where the buffer starts in it and its
//! length ([`IpcExport`], a fixed encoding of [`IpcExport::LEN`] bytes for any bootstrap).
//! An importer maps it with [`Imports::import`] (`cuIpcOpenMemHandle`, with peer access
//! enabled lazily when the exporter's GPU is another one): a [`DeviceBuffer`] over the
//! peer's bytes, whose owner closes the mapping (`cuIpcCloseMemHandle`) when the last
//! buffer over it is dropped. Each allocation is opened once per importing process (the
//! driver allows one mapping of a handle per context), however many buffers lie in it.
//!
//! Lifetime across processes is a contract no type can carry: the exporter must keep the
//! allocation until every importer has closed its mapping (freeing it first is undefined
//! behaviour for the importer's accesses). [`Imports::import`] is `unsafe` for that
//! reason; the multi-process MoE run keeps it with a teardown barrier
//! ([`crate::multiprocess`]).

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::sys as cu;
use cudarc::driver::CudaContext;
use ibgda::memory::DeviceBuffer;

use crate::gpu::{Gpu, GpuError};

/// Bytes of a CUDA IPC memory handle.
pub const HANDLE_BYTES: usize = 64;

/// What another process needs to map a device buffer: the IPC handle of the allocation
/// the buffer lies in, the buffer's offset in that allocation and its length, and the GPU
/// (ordinal) the allocation is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpcExport {
    /// The allocation's `CUipcMemHandle`.
    pub handle: [u8; HANDLE_BYTES],
    /// Where the buffer starts in the allocation.
    pub offset: u64,
    /// The buffer's length in bytes.
    pub len: u64,
    /// The exporter's GPU ordinal.
    pub gpu: u32,
}

/// Why bytes are not an [`IpcExport`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IpcDecodeError {
    /// Not [`IpcExport::LEN`] bytes.
    Length {
        /// Bytes given.
        len: usize,
        /// Bytes an export has.
        expected: usize,
    },
    /// The buffer's end (offset + length) overflows.
    Range {
        /// The offset.
        offset: u64,
        /// The length.
        len: u64,
    },
}

impl core::fmt::Display for IpcDecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Length { len, expected } => {
                write!(f, "an IPC export of {len} bytes ({expected} expected)")
            }
            Self::Range { offset, len } => {
                write!(
                    f,
                    "an IPC export of {len} bytes at offset {offset:#x}: past 2^64"
                )
            }
        }
    }
}

impl std::error::Error for IpcDecodeError {}

impl IpcExport {
    /// Encoded length: the handle, then offset and length (8 bytes each) and the GPU
    /// ordinal (4), big-endian.
    pub const LEN: usize = HANDLE_BYTES + 8 + 8 + 4;

    /// The encoding.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..HANDLE_BYTES].copy_from_slice(&self.handle);
        out[HANDLE_BYTES..HANDLE_BYTES + 8].copy_from_slice(&self.offset.to_be_bytes());
        out[HANDLE_BYTES + 8..HANDLE_BYTES + 16].copy_from_slice(&self.len.to_be_bytes());
        out[HANDLE_BYTES + 16..].copy_from_slice(&self.gpu.to_be_bytes());
        out
    }

    /// Decodes [`encode`](Self::encode)'s bytes: exactly [`LEN`](Self::LEN) of them, with
    /// an offset and length whose sum fits 64 bits.
    pub fn decode(bytes: &[u8]) -> Result<Self, IpcDecodeError> {
        let bytes: &[u8; Self::LEN] = bytes.try_into().map_err(|_| IpcDecodeError::Length {
            len: bytes.len(),
            expected: Self::LEN,
        })?;
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[at..at + 8]);
            u64::from_be_bytes(w)
        };
        let mut handle = [0u8; HANDLE_BYTES];
        handle.copy_from_slice(&bytes[..HANDLE_BYTES]);
        let (offset, len) = (word(HANDLE_BYTES), word(HANDLE_BYTES + 8));
        if offset.checked_add(len).is_none() {
            return Err(IpcDecodeError::Range { offset, len });
        }
        let mut gpu = [0u8; 4];
        gpu.copy_from_slice(&bytes[HANDLE_BYTES + 16..]);
        Ok(Self {
            handle,
            offset,
            len,
            gpu: u32::from_be_bytes(gpu),
        })
    }
}

fn driver(call: &str, r: cu::CUresult) -> Result<(), GpuError> {
    if r == cu::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(GpuError::Driver(format!("{call}: {r:?}")))
    }
}

/// The allocation `addr` lies in: its base and size (`cuMemGetAddressRange`), in the
/// current context.
fn allocation_of(addr: u64) -> Result<(u64, usize), GpuError> {
    let (mut base, mut size) = (0u64, 0usize);
    // SAFETY: a query of the driver's allocation table; it writes the two out-parameters,
    // which are live locals, and dereferences nothing at `addr`.
    let r = unsafe { cu::cuMemGetAddressRange_v2(&mut base, &mut size, addr) };
    driver("cuMemGetAddressRange", r)?;
    Ok((base, size))
}

/// The export of `buffer` (device memory of `gpu`'s context, allocated with `cuMemAlloc`,
/// as [`Gpu::device_buffer`] allocates): the IPC handle of its allocation, its offset
/// there and its length. Memory the driver cannot export (another context's, a VMM or
/// pinned allocation) is a driver error.
///
/// # Safety
///
/// An importer reaches the buffer's bytes as data (reads, writes, a NIC's transfers), which
/// nothing here can see. Until every process that may import the export has closed its
/// import, the caller keeps `buffer` out of every owner that relies on being its only
/// writer: it is not, and does not become, queue memory (a send ring, a CQ, doorbell
/// records, producer state), a proxy ring or an index slot. A data region (a registration
/// with remote rights, whose sharing is the point) is what may be exported.
pub unsafe fn export(gpu: &Gpu, buffer: &DeviceBuffer) -> Result<IpcExport, GpuError> {
    gpu.context().bind_to_thread()?;
    let (base, size) = allocation_of(buffer.addr())?;
    let offset = buffer.addr() - base;
    if offset.saturating_add(buffer.len() as u64) > size as u64 {
        return Err(GpuError::Invalid(format!(
            "a {}-byte buffer at offset {offset:#x} of a {size}-byte allocation",
            buffer.len()
        )));
    }
    let mut handle = cu::CUipcMemHandle_st {
        reserved: [0; HANDLE_BYTES],
    };
    // SAFETY: a query that writes the handle (a live local) for the allocation at `base`,
    // which `buffer` keeps allocated during the call; it does not touch the memory.
    let r = unsafe { cu::cuIpcGetMemHandle(&mut handle, base) };
    driver("cuIpcGetMemHandle", r)?;
    Ok(IpcExport {
        handle: handle.reserved.map(|c| c as u8),
        offset,
        len: buffer.len() as u64,
        gpu: u32::try_from(gpu.context().ordinal()).map_err(|_| {
            GpuError::Invalid(format!(
                "GPU ordinal {}: more than 2^32",
                gpu.context().ordinal()
            ))
        })?,
    })
}

/// One peer allocation mapped into this process: closed when dropped (after every
/// buffer over it, each of which holds an `Arc` of it).
struct Mapping {
    ctx: Arc<CudaContext>,
    base: u64,
    size: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `base` was returned by `cuIpcOpenMemHandle` in this context and is
            // closed once, here; every buffer over it has been dropped (each holds an
            // `Arc` of this mapping), and with them every NIC that reached it (a NIC keeps
            // its buffers until its kernel has stopped).
            let _ = unsafe { cu::cuIpcCloseMemHandle(self.base) };
        }
    }
}

/// Peer allocations mapped into this process, by handle: each opened once.
pub struct Imports {
    ctx: Arc<CudaContext>,
    mappings: HashMap<[u8; HANDLE_BYTES], Arc<Mapping>>,
}

impl core::fmt::Debug for Imports {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Imports")
            .field("gpu", &self.ctx.ordinal())
            .field("mappings", &self.mappings.len())
            .finish()
    }
}

impl Imports {
    /// No mapping yet, for `gpu`'s context.
    pub fn new(gpu: &Gpu) -> Self {
        Self {
            ctx: gpu.context().clone(),
            mappings: HashMap::new(),
        }
    }

    /// Mappings open.
    pub fn len(&self) -> usize {
        self.mappings.len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.mappings.is_empty()
    }

    /// The buffer `export` describes, mapped into this process: its allocation opened
    /// (once for all buffers in it) with lazy peer access when it is on another GPU,
    /// which must be able to reach it (`cuDeviceCanAccessPeer`). Refused when the
    /// buffer's range does not lie in the allocation the handle maps. The mapping stays
    /// open while any buffer over it lives.
    ///
    /// # Safety
    ///
    /// `export` comes from [`export`] in another process under its contract (the buffer
    /// is data memory, never a unique owner's), and that process keeps the
    /// allocation allocated (does not free it nor exit) until every buffer this returns
    /// over it, and every clone, NIC and kernel holding or reaching one, has been dropped
    /// or has ended in this process: the driver's mapping does not keep the exporter's
    /// memory, and an access after the exporter freed it is undefined behaviour. (A
    /// handle of this process's own allocation is refused by the driver.)
    pub unsafe fn import(&mut self, export: &IpcExport) -> Result<Arc<DeviceBuffer>, GpuError> {
        self.ctx.bind_to_thread()?;
        let mapping = match self.mappings.get(&export.handle) {
            Some(m) => m.clone(),
            None => {
                self.check_peer(export.gpu)?;
                let handle = cu::CUipcMemHandle_st {
                    reserved: export.handle.map(|b| b as core::ffi::c_char),
                };
                let mut base = 0u64;
                // SAFETY: opens the handle in this (current) context and writes the mapped
                // address to a live local; the exporter keeps the allocation (this
                // function's contract). Lazy peer access is what a mapping of another
                // GPU's memory needs.
                let r = unsafe {
                    cu::cuIpcOpenMemHandle_v2(
                        &mut base,
                        handle,
                        cu::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
                    )
                };
                driver("cuIpcOpenMemHandle", r)?;
                // The mapping is owned from here: closed on every path below.
                let mut opened = Mapping {
                    ctx: self.ctx.clone(),
                    base,
                    size: 0,
                };
                opened.size = allocation_of(base)?.1;
                let m = Arc::new(opened);
                self.mappings.insert(export.handle, m.clone());
                m
            }
        };
        let in_range = export
            .offset
            .checked_add(export.len)
            .is_some_and(|end| end <= mapping.size as u64);
        if !in_range || export.len == 0 {
            return Err(GpuError::Invalid(format!(
                "an imported buffer of {} bytes at offset {:#x} of a {}-byte allocation",
                export.len, export.offset, mapping.size
            )));
        }
        let len = usize::try_from(export.len).map_err(|_| {
            GpuError::Invalid(format!("an imported buffer of {} bytes", export.len))
        })?;
        let owner: Arc<Mapping> = mapping.clone();
        // SAFETY: `[base + offset, + len)` lies in the mapped allocation (checked above);
        // the owner keeps the mapping open for as long as the buffer lives, and the
        // exporter keeps the allocation behind it (this function's contract).
        Ok(Arc::new(unsafe {
            DeviceBuffer::from_raw(mapping.base + export.offset, len, Box::new(owner))
        }))
    }

    /// Refuses a peer GPU this one cannot reach by peer access, or on which it has no
    /// native atomics: the CUDA software NIC's atomics (signals) are 64-bit system-scope
    /// CAS on the peer's memory.
    fn check_peer(&self, peer: u32) -> Result<(), GpuError> {
        let me = self.ctx.ordinal();
        if peer as usize == me {
            return Ok(());
        }
        let peer_dev = crate::gpu::device(peer as usize)?;
        let mut can = 0i32;
        // SAFETY: a query writing a live local.
        let r = unsafe { cu::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), peer_dev) };
        driver("cuDeviceCanAccessPeer", r)?;
        if can == 0 {
            return Err(GpuError::Invalid(format!(
                "GPU {me} cannot reach GPU {peer}'s memory by peer access"
            )));
        }
        let mut atomics = 0i32;
        // SAFETY: a query writing a live local.
        let r = unsafe {
            cu::cuDeviceGetP2PAttribute(
                &mut atomics,
                cu::CUdevice_P2PAttribute::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
                self.ctx.cu_device(),
                peer_dev,
            )
        };
        driver("cuDeviceGetP2PAttribute", r)?;
        if atomics == 0 {
            return Err(GpuError::Invalid(format!(
                "GPU {me} has no native atomics on GPU {peer}'s memory (the NIC's signals \
                 are atomics there)"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_round_trip_and_bad_bytes_are_typed_errors() {
        let e = IpcExport {
            handle: core::array::from_fn(|i| i as u8 * 3),
            offset: 0x1200,
            len: 4096,
            gpu: 7,
        };
        let bytes = e.encode();
        assert_eq!(bytes.len(), IpcExport::LEN);
        assert_eq!(IpcExport::decode(&bytes), Ok(e));
        assert_eq!(
            IpcExport::decode(&bytes[1..]),
            Err(IpcDecodeError::Length {
                len: IpcExport::LEN - 1,
                expected: IpcExport::LEN
            })
        );
        let mut far = bytes;
        far[HANDLE_BYTES..HANDLE_BYTES + 8].copy_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(
            IpcExport::decode(&far),
            Err(IpcDecodeError::Range {
                offset: u64::MAX,
                len: 4096
            })
        );
    }
}
