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
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod gpu;
pub mod harness;
pub mod layout;
pub mod nvrtc;
pub mod proxy;
pub mod ptx;
pub mod request;
pub mod softnic;
