//! The control plane: how queues come to exist on a NIC.

pub mod gpu_access;
#[cfg(feature = "mlx5")]
pub mod mlx5;
