//! The CUDA software NIC: an engine in portable C++ (`cuda/softnic.cuh`) that executes
//! WQEs with the CPU software NIC's semantics (`ibgda::softnic`, response delay 0), run on
//! the GPU by the persistent kernel `ibgda_softnic` over GPU-placed queues, and on the host
//! (compiled by `build.rs`) for the differential test against the CPU NIC.
//!
//! - [`tables`]: the `#[repr(C)]` tables the engine runs on (generated into
//!   `ibgda_layout.h`).
//! - [`host`]: the host engine over an arena of host memory.
//! - `scenario` (feature `test-support`): random WQE streams, run through the CPU NIC (`Fabric` step mode) with a
//!   trace of every host-written byte, and replayed on an engine; snapshots to compare.
//! - [`builder`]: the engines' tables, built by the library from typed queue pairs,
//!   regions and targets (exclusive executor claims on every queue).
//! - [`device`]: the GPU engine: tables in device memory, the persistent kernel.

pub mod builder;
pub mod device;
mod ffi;
pub mod host;
#[cfg(feature = "test-support")]
pub mod scenario;
pub mod tables;

pub use ffi::{parse as host_parse, ParsedFields};
pub use tables::*;
