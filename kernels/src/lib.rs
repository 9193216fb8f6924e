//! # ibgda-kernels
//!
//! The CUDA side of ibgda: a device library (`cuda/ibgda.cuh`) whose every layout comes
//! from the generated header `cuda/ibgda_layout.h` ([`layout`]), the kernels that use it
//! (`cuda/kernels.cu`), a hand-written baseline (`cuda/raw_baseline.cu`), and their host
//! glue over cudarc ([`gpu`]): run-time compilation to an sm_90 cubin with NVRTC
//! ([`nvrtc`]), GPU-placed and host-mapped queue memory, an RAII host registration, and
//! launchers that take a [`ibgda::queue::DeviceQueue`] only for a kernel instantiated for
//! its scope. [`ptx`] reads the ordering instructions out of the compiled PTX.
//!
//! Nothing CUDA is needed to build this crate; without a driver, NVRTC or a GPU every entry
//! point returns a typed [`gpu::GpuError`].
//!
//! # Your own CUDA kernels
//!
//! The device library is header-only: [`include_dir`] is the directory holding
//! `ibgda.cuh` and the generated `ibgda_layout.h` it includes (for `nvcc -I`), and a
//! dependent's build script gets the same path as `DEP_IBGDA_INCLUDE` (this crate declares
//! `links = "ibgda"`). At run time, [`gpu::Gpu::compile_program`] compiles a source that
//! includes `"ibgda.cuh"` with NVRTC and [`gpu::UserProgram::kernel`] picks the instance of
//! a kernel for a queue's scope; see `examples/user_kernel/`.
//!
//! The `test-support` feature adds the scaffolding of the crate's own tests and benchmark
//! (`harness`, `softnic::scenario`, the replay of the differential streams): not API.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

/// The directory holding the device library's headers: `ibgda.cuh` (the library) and
/// `ibgda_layout.h` (the layouts it includes, generated from the Rust types), plus
/// `softnic.cuh` (the CUDA software NIC's engine). Pass it to `nvcc -I`; build scripts of
/// dependents also get it as `DEP_IBGDA_INCLUDE`.
pub fn include_dir() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/cuda"))
}

pub mod api;
pub mod cudanic;
#[cfg(feature = "test-support")]
pub mod experiments;
pub mod gpu;
#[cfg(feature = "test-support")]
pub mod harness;
pub mod ipc;
pub mod layout;
pub mod multiprocess;
pub mod nic;
pub mod nvrtc;
pub mod proxy;
pub mod ptx;
pub mod request;
pub mod softnic;
