//! The mlx5 hardware backend: a ConnectX (or BlueField) driven through rdma-core.
//!
//! - Verbs (device list, context, protection domain, port and GID queries, memory regions
//!   including DMA-BUF ones) come from `rdma-mummy-sys`, which loads `libibverbs.so.1` at
//!   run time.
//! - The mlx5dv and DEVX entry points it does not bind (`mlx5dv_open_device`,
//!   `mlx5dv_devx_obj_create/modify/query/destroy`, `mlx5dv_devx_general_cmd`,
//!   `mlx5dv_devx_umem_reg` and `_reg_ex`, `mlx5dv_devx_alloc_uar`/`free_uar`,
//!   `mlx5dv_devx_query_eqn`, `mlx5dv_init_obj`, `mlx5dv_is_supported`) are looked up in
//!   `libmlx5.so.1` at run time; a missing one is [`Mlx5Error::Unsupported`] naming it, a
//!   missing library [`Mlx5Error::LibraryMissing`] naming it.
//! - Queue memory in the GPU is registered as UMEM by DMA-BUF (through a
//!   [`DmaBufExporter`], which the CUDA side implements), with the peer-memory module as
//!   the fallback; the UAR doorbell page is mapped into the GPU through an
//!   [`IoMemoryMapper`].
//!
//! Every object is an owner: dropping it releases the object, then what it depends on (a
//! memory region its PD, every object the device context), so teardown runs in the order
//! the driver needs whatever order the caller drops things in. No owner is `Clone`, and no
//! raw pointer leaves this module.
//!
//! The PRM command bytes sent here are built by the control plane's encoders; this module
//! only carries them to the device and turns failures into typed errors (a command the
//! firmware failed reports its status and syndrome).
//!
//! Owners cannot be duplicated (a second owner would release the object twice):
//!
//! ```compile_fail,E0599
//! fn twice(device: ibgda::nic::mlx5::Mlx5Device) {
//!     let _copy = device.clone();
//! }
//! ```
//!
//! ```compile_fail,E0599
//! fn twice(pd: ibgda::nic::mlx5::ProtectionDomain) {
//!     let _copy = pd.clone();
//! }
//! ```
//!
//! ```compile_fail,E0599
//! fn twice(object: ibgda::nic::mlx5::DevxObject) {
//!     let _copy = object.clone();
//! }
//! ```
//!
//! ```compile_fail,E0599
//! fn twice(umem: ibgda::nic::mlx5::Umem) {
//!     let _copy = umem.clone();
//! }
//! ```
//!
//! and an object destroyed explicitly cannot be used again:
//!
//! ```compile_fail,E0382
//! fn destroy_then_modify(object: ibgda::nic::mlx5::DevxObject) {
//!     let _ = object.destroy();
//!     let _ = object.modify(&[0; 8], &mut [0; 8]);
//! }
//! ```
//!
//! [`DmaBufExporter`]: crate::nic::gpu_access::DmaBufExporter
//! [`IoMemoryMapper`]: crate::nic::gpu_access::IoMemoryMapper

mod backend;
mod devx;
mod dv;
mod error;
mod verbs;

use std::sync::Arc;

pub use backend::{Mlx5Backend, Mlx5Uar, UmemPaths};
pub use devx::{Dependency, DevxObject, Uar, UarKind, Umem, COMMAND_HEADER_BYTES};
pub use dv::{IBVERBS, MLX5};
pub use error::{
    command_name, errno_name, Mlx5Error, CUDA_ERROR_NOT_PERMITTED, CUDA_ERROR_NOT_SUPPORTED,
    EFAULT, ENOSYS, EOPNOTSUPP, EPERM, EREMOTEIO,
};
pub use verbs::{
    devices, DeviceInfo, GpuPath, LinkLayer, MemoryRegion, PortInfo, ProtectionDomain,
    SharedReceiveQueue, NIC_ENV,
};

use crate::memory::{DeviceBuffer, DmaBuffer};
use crate::nic::gpu_access::DmaBufExporter;
use crate::nic::DeviceCaps;

/// An open mlx5 device (a verbs context with DEVX).
///
/// Its raw DEVX command entry points are crate-private: command bytes can name any address
/// for the NIC to DMA to, so outside the crate commands go through the typed control plane
/// ([`Device`](crate::nic::Device)) or the `unsafe` [`Backend`](crate::nic::Backend) methods.
///
/// ```compile_fail,E0624
/// # use ibgda::nic::mlx5::Mlx5Device;
/// fn forge(device: &Mlx5Device, forged_create_qp: &[u8]) {
///     let mut output = [0u8; 256];
///     let _ = device.create_object(forged_create_qp, &mut output, Vec::new());
/// }
/// ```
pub struct Mlx5Device {
    ctx: Arc<verbs::Context>,
}

impl core::fmt::Debug for Mlx5Device {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Mlx5Device")
            .field("name", &self.ctx.name)
            .finish()
    }
}

impl Mlx5Device {
    /// Loads the libraries and opens the device named `name` (or, with `None`, the first
    /// mlx5 device). A machine without an RDMA device is [`Mlx5Error::NoDevice`].
    pub fn open(name: Option<&str>) -> Result<Self, Mlx5Error> {
        Ok(Self {
            ctx: verbs::Context::open(name)?,
        })
    }

    /// Opens the device named by `IBGDA_NIC` (or the first mlx5 device if it is unset).
    pub fn from_env() -> Result<Self, Mlx5Error> {
        let name = std::env::var(NIC_ENV).ok().filter(|n| !n.is_empty());
        Self::open(name.as_deref())
    }

    /// Checks that the libraries load and have every entry point the backend uses; the
    /// first missing one is [`Mlx5Error::Unsupported`].
    pub fn check_libraries() -> Result<(), Mlx5Error> {
        let libs = dv::Libraries::get()?;
        match libs.missing().first() {
            None => Ok(()),
            Some(symbol) => Err(Mlx5Error::Unsupported {
                symbol,
                library: MLX5,
            }),
        }
    }

    /// Every entry point the backend looks up that the loaded `libmlx5.so.1` lacks (empty
    /// when it has them all). Only `mlx5dv_devx_umem_reg_ex` is optional: without it GPU
    /// memory is registered through peer memory, never by DMA-BUF.
    pub fn missing_entry_points() -> Result<Vec<&'static str>, Mlx5Error> {
        Ok(dv::Libraries::get()?.missing())
    }

    /// The device's name (`mlx5_0`).
    pub fn name(&self) -> &str {
        &self.ctx.name
    }

    /// The attributes of port `port` (1-based).
    pub fn query_port(&self, port: u8) -> Result<PortInfo, Mlx5Error> {
        verbs::query_port(&self.ctx, port)
    }

    /// Entry `index` of port `port`'s GID table.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<[u8; 16], Mlx5Error> {
        verbs::query_gid(&self.ctx, port, index)
    }

    /// Entry `index` of port `port`'s GID table and its type.
    pub fn query_gid_entry(
        &self,
        port: u8,
        index: u32,
    ) -> Result<([u8; 16], verbs::VerbsGidType), Mlx5Error> {
        verbs::query_gid_entry(&self.ctx, port, index)
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain, Mlx5Error> {
        ProtectionDomain::alloc(&self.ctx)
    }

    /// Runs a command that creates no object (QUERY_HCA_CAP, ...). A command the firmware
    /// failed is [`Mlx5Error::Command`] with its status and syndrome.
    pub(crate) fn general_command(&self, input: &[u8], output: &mut [u8]) -> Result<(), Mlx5Error> {
        devx::general_command(&self.ctx, input, output)
    }

    /// Runs a command that creates an object (CREATE_CQ, CREATE_QP, CREATE_DCT); the object
    /// keeps `dependencies` alive until it is destroyed.
    pub(crate) fn create_object(
        &self,
        input: &[u8],
        output: &mut [u8],
        dependencies: Vec<Dependency>,
    ) -> Result<DevxObject, Mlx5Error> {
        DevxObject::create(&self.ctx, input, output, dependencies)
    }

    /// The event queue number of completion vector `vector` (CREATE_CQ's `c_eqn`).
    pub fn query_eqn(&self, vector: u32) -> Result<u32, Mlx5Error> {
        devx::query_eqn(&self.ctx, vector)
    }

    /// Allocates a UAR page: non-cached dedicated, else non-cached, else BlueFlame.
    pub fn alloc_uar(&self) -> Result<Arc<Uar>, Mlx5Error> {
        Uar::alloc(&self.ctx)
    }

    /// Registers host queue memory as UMEM.
    pub fn register_host_umem(&self, buffer: Arc<DmaBuffer>) -> Result<Umem, Mlx5Error> {
        Umem::register_host(&self.ctx, buffer)
    }

    /// Registers GPU queue memory as UMEM: DMA-BUF through `exporter` first, then the
    /// peer-memory path.
    pub fn register_gpu_umem(
        &self,
        buffer: Arc<DeviceBuffer>,
        exporter: Option<&dyn DmaBufExporter>,
    ) -> Result<Umem, Mlx5Error> {
        Umem::register_gpu(&self.ctx, buffer, exporter)
    }
}

/// Checks the atomic capabilities atomic WQEs rely on: RDMA atomics with 8-byte operands
/// on RC QPs. Each shortfall is its typed error. (The CQE version is checked once, for
/// every backend, by [`Device::open`](crate::nic::Device::open).)
pub fn check_atomic_capabilities(caps: &DeviceCaps) -> Result<(), Mlx5Error> {
    if !caps.atomic {
        return Err(Mlx5Error::MissingAtomics {
            missing: "RDMA atomics (HCA capability `atomic` is 0)".to_owned(),
        });
    }
    /// `atomic_size_qp` bit 3: 8-byte operands.
    const EIGHT_BYTES: u16 = 1 << 3;
    if caps.atomic_sizes & EIGHT_BYTES == 0 {
        return Err(Mlx5Error::MissingAtomics {
            missing: format!(
                "8-byte atomics on RC QPs (atomic_size_qp is {:#x}, bit 3 clear)",
                caps.atomic_sizes
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod registry_tests;
#[cfg(test)]
mod tests;
