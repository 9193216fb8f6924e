//! # ibgda
//!
//! Sound, typed GPU-initiated RDMA on mlx5 (ConnectX) NICs.
//!
//! - [`wqe`]: the send-WQE wire format: zerocopy segment layouts, typed builders whose
//!   misuse does not compile, a ring writer and a parser that never panics.
//! - [`cq`]: CQE views, syndromes and completion statuses.
//! - [`queue`] and [`order`]: typed queue handles and ordering scopes.
//! - [`nic`]: the control plane that creates queues, and the mlx5 PRM commands it sends.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod cq;
pub mod memory;
pub mod nic;
pub mod order;
pub mod proxy;
pub mod queue;
pub mod softnic;
mod sync;
pub mod wqe;
