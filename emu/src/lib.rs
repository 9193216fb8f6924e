//! # The emulated ConnectX
//!
//! `libibverbs.so.1` and `libmlx5.so.1` whose verbs, mlx5dv and DEVX entry points drive
//! ibgda's software NIC, so that a program written for a ConnectX (ibgda's own mlx5
//! backend, rdma-core's `ibv_devinfo`, NVSHMEM's IBGDA transport) runs on a machine
//! without one: `scripts/with-emulated-nic CMD...` runs a command with them first on the
//! loader path.
//!
//! - **One library, two names.** `scripts/build-emulated-nic` links this crate's static
//!   library into one shared object with `emu/exports.map` (every symbol at the version
//!   rdma-core 56.1 gives it, so `dlvsym` finds it) and installs it as
//!   `target/emu/lib/libibverbs.so.1`, with `libmlx5.so.1` a symbolic link to it. The
//!   loader maps a file once, whatever name opens it, so both names share one state (as
//!   rdma-core's libmlx5 shares libibverbs' contexts).
//! - **Commands.** Every DEVX command is executed by the PRM executor of
//!   [`ibgda::nic::SoftNic`], the one the control plane's software backend runs: the same
//!   decoders, table checks, state machine and output encoders.
//! - **Queues.** UMEMs are the caller's memory, seen through [`ibgda::memory::DmaBuffer`]
//!   views; UAR pages are 4 KiB pages whose doorbell (offset 0x800) the CPU software NIC's
//!   engine watches; one engine thread executes every host-placed queue.
//! - **Configuration and faults**: [`config`]; the command log (`IBGDA_EMU_LOG=<file>`):
//!   [`ibgda::nic::prm::log`].
//!
//! `emu/README.md` has the design (and the GPU build's path for GPU-placed queues through
//! the CUDA software NIC, feature `cuda`, `src/gpu.rs`), what is implemented, every
//! emulator-only path in the library, and where each default comes from.

#![deny(unsafe_op_in_unsafe_fn)]

mod abi;
pub mod config;
mod dv;
mod emulator;
mod entry;
#[cfg(feature = "cuda")]
mod gpu;
mod queues;
mod stubs;
mod verbs;

pub use dv::{RETRY_EXCEEDED_VENDOR_SYNDROME, UNDECODABLE_SYNDROME};
pub use emulator::LOG_ENV;

/// The emulator's identity (`ibgda-emu <version>`): a program can `dlsym` it to tell the
/// emulated libraries from rdma-core's.
#[no_mangle]
pub extern "C" fn ibgda_emu_version() -> *const core::ffi::c_char {
    concat!("ibgda-emu ", env!("CARGO_PKG_VERSION"), "\0")
        .as_ptr()
        .cast()
}

/// Announces a DMA-BUF: `fd` covers `len` bytes of device memory from `device_addr`. A
/// DMA-BUF exporter that knows the emulator may be the `libibverbs.so.1` it runs over
/// (ibgda-kernels' `CudaNicAccess`) calls this after each export, before any registration
/// names the descriptor: the emulator reaches GPU memory by address, which a descriptor
/// does not tell. Returns 0, or an errno (`EBADF`: `fd` is not open; `EINVAL`: an empty or
/// wrapping range).
#[no_mangle]
pub extern "C" fn ibgda_emu_register_dmabuf(
    fd: core::ffi::c_int,
    device_addr: u64,
    len: u64,
) -> core::ffi::c_int {
    entry::run(
        "ibgda_emu_register_dmabuf",
        |e| e,
        |emulator| {
            if len == 0 || device_addr.checked_add(len).is_none() {
                return Err(entry::Failure::invalid(format!(
                    "{len} bytes at {device_addr:#x}"
                )));
            }
            let inode = emulator::inode_of(fd)
                .ok_or_else(|| entry::Failure::new(libc::EBADF, format!("descriptor {fd}")))?;
            emulator.dmabufs().insert(
                fd,
                emulator::DmabufExport {
                    inode,
                    start: device_addr,
                    len,
                },
            );
            Ok(0)
        },
    )
}

/// Whether `addr` lies in a UAR page of an emulated device (ordinary memory, where a
/// ConnectX has a BAR page): 1 if it does, 0 if not, and minus the CUDA error configured
/// for its GPU mapping (`fault.uar_gpu_mapping`, 800: not permitted) if one is. The mlx5
/// backend asks before mapping a doorbell page into the GPU: a page of the emulator takes
/// the host-memory registration, not the I/O-memory one.
#[no_mangle]
pub extern "C" fn ibgda_emu_uar_page(addr: *const core::ffi::c_void) -> core::ffi::c_int {
    entry::run(
        "ibgda_emu_uar_page",
        |_| 0,
        |emulator| {
            let addr = addr as u64;
            let pages = emulator.uar_pages();
            let hit = pages.iter().find(|(_, page)| {
                let start = page.as_ptr() as u64;
                addr >= start && addr - start < page.len() as u64
            });
            Ok(match hit {
                None => 0,
                Some(((device, _), _)) => {
                    match emulator.devices[*device].config.faults.uar_gpu_mapping {
                        Some(code) => -code.abs(),
                        None => 1,
                    }
                }
            })
        },
    )
}

/// The RoCE v2 UDP source port an RC queue pair of an emulated device was connected with
/// (its INIT2RTR's `udp_sport`, as the device holds it), read back as QUERY_QP would on a
/// ConnectX: the port (0 to 65535), or minus an errno (`ENOENT`: no queue pair `qpn`;
/// `EINVAL`: it is not connected over a RoCE path).
#[no_mangle]
pub extern "C" fn ibgda_emu_udp_source_port(qpn: u32) -> core::ffi::c_int {
    entry::run(
        "ibgda_emu_udp_source_port",
        |e| -e,
        |emulator| {
            let status = ibgda::wqe::Qpn::new(qpn)
                .ok()
                .and_then(|q| emulator.fabric.qp_status(q))
                .ok_or_else(|| entry::Failure::new(libc::ENOENT, format!("queue pair {qpn:#x}")))?;
            match status.peer_path {
                Some(ibgda::softnic::PeerPath::Roce(path)) => {
                    Ok(core::ffi::c_int::from(path.udp_source_port))
                }
                other => Err(entry::Failure::invalid(format!(
                    "queue pair {qpn:#x} is not connected over a RoCE path ({other:?})"
                ))),
            }
        },
    )
}

/// What is still allocated, over every context of every emulated device: writes
/// `pds=N mrs=N ahs=N umems=N uars=N devx=N cqs=N srqs=N qps=N` (NUL-terminated, cut to
/// `len`) to `buf` and returns the total, so that a test can check that a teardown released
/// everything (contexts themselves are not counted). -1 when the emulator is unusable.
///
/// # Safety
///
/// `buf` must be null or valid for writes of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ibgda_emu_outstanding(
    buf: *mut core::ffi::c_char,
    len: usize,
) -> core::ffi::c_int {
    entry::run(
        "ibgda_emu_outstanding",
        |_| -1,
        |emulator| {
            let o = emulator.objects();
            let counts = [
                ("pds", o.pds.len()),
                ("mrs", o.mrs.len()),
                ("ahs", o.ahs.len()),
                ("umems", o.umems.len()),
                ("uars", o.uars.len()),
                ("devx", o.devx.len()),
                ("cqs", o.cqs.len()),
                ("srqs", o.srqs.len()),
                ("qps", o.qps.len()),
            ];
            let text = counts
                .iter()
                .map(|(name, n)| format!("{name}={n}"))
                .collect::<Vec<_>>()
                .join(" ");
            if !buf.is_null() && len > 0 {
                let n = text.len().min(len - 1);
                // SAFETY: `buf` holds `len` bytes (the caller's contract); `n + 1 <= len`.
                unsafe {
                    core::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
                    *buf.add(n) = 0;
                }
            }
            Ok(counts.iter().map(|(_, n)| n).sum::<usize>() as core::ffi::c_int)
        },
    )
}
