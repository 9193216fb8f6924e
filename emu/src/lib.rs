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
//! `emu/README.md` has the design (and the GPU-placed queues' path through the CUDA
//! software NIC, not built yet), what is implemented, and where each default comes from.

#![deny(unsafe_op_in_unsafe_fn)]

mod abi;
pub mod config;
mod dv;
mod emulator;
mod entry;
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
