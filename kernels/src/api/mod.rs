//! The device API kernel authors write at (`cuda/ibgda_api.cuh`): windows and offsets
//! instead of addresses, `put` (inline when small, gathered otherwise), `put_value`, `get`,
//! `atomic_add`, `fetch_add`, `compare_swap`, `put_with_signal` and `signal`, the
//! receiver's `wait_signal`, local completion counters, `flush` of one queue pair or all,
//! every wait bounded by a run-time deadline, each operation in a per-thread and a
//! warp-cooperative form, for every ordering scope.
//!
//! This module holds what the device side reads, as `#[repr(C)]` layouts generated into
//! `ibgda_layout.h` ([`DeviceComm`], [`DeviceCounter`], [`DeviceCounterSlot`]), the status
//! codes every operation returns ([`DeviceStatus`]), and the host objects that make them:
//! [`GpuWindow`] (a [`Window`](ibgda::nic::Window)'s peer table in device memory) and
//! [`GpuComm`] (the queue pairs to every peer, counters and the atomic scratch word), whose
//! kernel arguments ([`KernelWindow`], [`KernelComm`]) borrow them.
//!
//! # Ordering of `put_with_signal`
//!
//! The data WRITE and the signal's 8-byte fetch-add go on the same RC queue pair, the
//! atomic right after the WRITE, both with fence mode 0 (none; `fm_ce_se` bits 7:5, the
//! mlx5 fence modes of `mlx5-facts` section 1.2). An RC responder executes a queue pair's
//! requests in order, so the atomic is executed after the WRITE's data is placed; the fence
//! modes (1 initiator small fence, 2 fence, 4 small and fence) make a WQE wait for earlier
//! READ and atomic *responses* at the requester, which a WRITE before an atomic does not
//! need (NVSHMEM's put-with-signal posts both with `fm_ce_se` 0 on one queue pair;
//! NVSHMEM's fence-mode-2 WQE is its consistency DUMP after READs). The receiver's
//! `wait_signal` loads the signal word with `ld.acquire.sys`, so the data loads that follow
//! it see what the NIC placed before the signal.

mod gpu;
#[cfg(feature = "test-support")]
pub mod host;
mod layouts;

pub use gpu::{
    status, CommArg, CommOptions, CommProgram, GpuComm, GpuWindow, KernelComm, KernelWindow,
};
pub use layouts::*;
