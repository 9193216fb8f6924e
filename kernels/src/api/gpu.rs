//! The device API's host objects on a GPU: a window's peer table in device memory, a
//! communicator (queue pairs to every peer, counters, scratch word), their kernel
//! arguments, and programs whose kernels take a communicator first.

use core::fmt;
use core::marker::PhantomData;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};

use ibgda::memory::DeviceBuffer;
use ibgda::nic::{Backend, DeviceWindow, MemoryRegion, Window};
use ibgda::order::{GpuThread, OrderingScope, ValidFor};
use ibgda::queue::{DeviceQueueDescriptor, Gpu as GpuPlaced, QueuePair, Registered};
use ibgda::wqe::Rc;

use super::layouts::{DeviceComm, DeviceCounter, DeviceCounterSlot, DeviceStatus, PUT_INLINE_MAX};
use crate::gpu::{descriptor_bytes, Gpu, GpuError, DESCRIPTOR_BYTES};
use crate::nvrtc::{compile_source, Compiled};

/// A [`Window`]'s peer table in device memory and the descriptor kernels take, borrowing
/// the window (which keeps the local registration alive).
pub struct GpuWindow<'w> {
    _table: DeviceBuffer,
    device: DeviceWindow,
    _window: PhantomData<&'w Window>,
}

impl fmt::Debug for GpuWindow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuWindow")
            .field("device", &self.device)
            .finish()
    }
}

fn records_bytes<T: Copy>(records: &[T]) -> Vec<u8> {
    let mut out = vec![0u8; core::mem::size_of_val(records)];
    // SAFETY: `T` is one of this crate's `#[repr(C)]` plain-data records (integer fields,
    // explicit reserved words: no padding), so its bytes are initialised; `out` has
    // exactly their length.
    unsafe {
        core::ptr::copy_nonoverlapping(records.as_ptr().cast::<u8>(), out.as_mut_ptr(), out.len());
    }
    out
}

impl<'w> GpuWindow<'w> {
    /// Uploads `window`'s peer table.
    pub fn new(gpu: &Gpu, window: &'w Window) -> Result<Self, GpuError> {
        let peers = window.device_peers();
        let table = gpu.device_buffer_from(&records_bytes(&peers))?;
        let device = window.device_window(table.addr());
        Ok(Self {
            _table: table,
            device,
            _window: PhantomData,
        })
    }

    /// The descriptor.
    pub fn device(&self) -> &DeviceWindow {
        &self.device
    }

    /// The kernel argument, borrowing this window.
    pub fn arg(&self) -> KernelWindow<'_> {
        KernelWindow {
            raw: self.device,
            _window: PhantomData,
        }
    }
}

/// A window as a kernel argument (by value), borrowing its [`GpuWindow`].
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct KernelWindow<'a> {
    raw: DeviceWindow,
    _window: PhantomData<&'a ()>,
}

// SAFETY: transparent over `DeviceWindow`, a `#[repr(C)]` struct of `u64` and `u32`
// fields (40 bytes, no padding) whose C form is generated into the layout header.
unsafe impl DeviceRepr for KernelWindow<'_> {}

impl KernelWindow<'_> {
    /// The descriptor.
    pub fn raw(&self) -> &DeviceWindow {
        &self.raw
    }
}

/// How a communicator is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommOptions {
    /// Every device wait gives up after this long with [`DeviceStatus::Deadline`].
    pub wait: Duration,
    /// Local completion counters.
    pub counters: u32,
    /// Operations a counter tracks in flight (a power of two).
    pub counter_capacity: u32,
    /// Puts of at most this many bytes go inline (at most [`PUT_INLINE_MAX`] and every
    /// queue's inline limit; 0: every put gathers).
    pub inline_max: u32,
    /// WQEBBs a doorbell may cover before it is rung (see
    /// [`DeviceComm::doorbell_batch`]).
    pub doorbell_batch: u32,
}

impl Default for CommOptions {
    fn default() -> Self {
        Self {
            wait: Duration::from_secs(5),
            counters: 0,
            counter_capacity: 256,
            inline_max: PUT_INLINE_MAX as u32,
            doorbell_batch: 1,
        }
    }
}

/// A communicator on a GPU: the RC queue pair to every peer (borrowed for `'q`), the
/// counters, and the scratch word; its kernel argument is [`GpuComm::arg`].
pub struct GpuComm<'q, S> {
    _queues: DeviceBuffer,
    _counters: DeviceBuffer,
    _slots: DeviceBuffer,
    _scratch: Arc<dyn Registered>,
    device: DeviceComm,
    _borrow: PhantomData<(&'q (), S)>,
}

impl<S> fmt::Debug for GpuComm<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuComm")
            .field("device", &self.device)
            .finish()
    }
}

fn invalid(what: String) -> GpuError {
    GpuError::Invalid(what)
}

impl<'q, S> GpuComm<'q, S>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    /// A communicator for `rank` over `queues` (the queue pair to peer `i` at index `i`,
    /// the rank's own loopback queue pair included), with `scratch` (at least 8 bytes,
    /// 8-byte aligned, registered for local writes in the queues' protection domain) for
    /// the results nobody reads.
    pub fn new<B: Backend>(
        gpu: &Gpu,
        rank: usize,
        queues: &[&'q QueuePair<Rc, GpuPlaced, S>],
        scratch: &'q MemoryRegion<B>,
        options: CommOptions,
    ) -> Result<Self, GpuError> {
        let n_peers = u32::try_from(queues.len())
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                invalid(format!(
                    "{} queue pairs: 1 to {} needed",
                    queues.len(),
                    u32::MAX
                ))
            })?;
        if rank >= queues.len() {
            return Err(invalid(format!("rank {rank} of {n_peers} peers")));
        }
        if scratch.len() < 8 || scratch.addr() % 8 != 0 {
            return Err(invalid(format!(
                "scratch region {:#x} (+{}): 8 aligned bytes needed",
                scratch.addr(),
                scratch.len()
            )));
        }
        let capacity = options.counter_capacity;
        if !capacity.is_power_of_two() {
            return Err(invalid(format!(
                "counter capacity {capacity}: a power of two needed"
            )));
        }
        if options.doorbell_batch == 0 {
            return Err(invalid("doorbell batch 0".into()));
        }
        let wait_ns = u64::try_from(options.wait.as_nanos())
            .ok()
            .filter(|&ns| ns > 0)
            .ok_or_else(|| invalid(format!("wait bound {:?}: 1 ns to 2^64 ns", options.wait)))?;
        let mut table = Vec::with_capacity(queues.len() * DESCRIPTOR_BYTES);
        let mut inline_max = options.inline_max.min(PUT_INLINE_MAX as u32);
        for qp in queues {
            // The communicator's bound is every wait's it does, its queue pairs' included.
            let d = DeviceQueueDescriptor {
                wait_ns,
                ..*qp.device_queue().raw()
            };
            inline_max = inline_max.min(d.max_inline);
            table.extend_from_slice(&descriptor_bytes(&d));
        }
        let slots = (options.counters as usize)
            .checked_mul(capacity as usize)
            .ok_or_else(|| invalid("counter slots overflow".into()))?;
        let queues_buf = gpu.device_buffer_from(&table)?;
        let counters = gpu.device_buffer(
            (options.counters as usize * core::mem::size_of::<DeviceCounter>()).max(1),
        )?;
        let slots_buf =
            gpu.device_buffer((slots * core::mem::size_of::<DeviceCounterSlot>()).max(1))?;
        let device = DeviceComm {
            queues: queues_buf.addr(),
            counters: counters.addr(),
            counter_slots: slots_buf.addr(),
            scratch: scratch.addr(),
            wait_ns,
            n_peers,
            // Checked above: below n_peers.
            rank: rank as u32,
            scope: S::KIND as u32,
            scratch_lkey: scratch.lkey().0,
            n_counters: options.counters,
            counter_capacity: capacity,
            inline_max,
            doorbell_batch: options.doorbell_batch,
        };
        Ok(Self {
            _queues: queues_buf,
            _counters: counters,
            _slots: slots_buf,
            _scratch: scratch.registered(),
            device,
            _borrow: PhantomData,
        })
    }
}

impl<S> GpuComm<'_, S> {
    /// The descriptor.
    pub fn device(&self) -> &DeviceComm {
        &self.device
    }

    /// The kernel argument, borrowing this communicator.
    pub fn arg(&self) -> KernelComm<'_, S> {
        KernelComm {
            raw: self.device,
            _comm: PhantomData,
        }
    }
}

/// A communicator as a kernel argument (by value), of scope `S`, borrowing its
/// [`GpuComm`].
#[repr(transparent)]
pub struct KernelComm<'a, S> {
    raw: DeviceComm,
    _comm: PhantomData<(&'a (), S)>,
}

impl<S> Clone for KernelComm<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for KernelComm<'_, S> {}

impl<S> fmt::Debug for KernelComm<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelComm")
            .field("raw", &self.raw)
            .finish()
    }
}

// SAFETY: transparent over `DeviceComm`, a `#[repr(C)]` struct of `u64` and `u32` fields
// (72 bytes, no padding) whose C form is generated into the layout header.
unsafe impl<S> DeviceRepr for KernelComm<'_, S> {}

impl<S> KernelComm<'_, S> {
    /// The descriptor.
    pub fn raw(&self) -> &DeviceComm {
        &self.raw
    }
}

/// One argument after the communicator.
#[derive(Clone, Copy, Debug)]
pub enum CommArg<'a> {
    /// A 64-bit value or device address.
    U64(u64),
    /// A 32-bit value.
    U32(u32),
    /// A window, borrowing its [`GpuWindow`].
    Window(KernelWindow<'a>),
}

/// A program on the device API (`#include "ibgda_api.cuh"`), compiled with NVRTC and
/// loaded with every kernel fully loaded. Its kernels take a [`DeviceComm`] by value
/// first and are instantiated once per scope as `<kernel>_<Scope>`.
pub struct CommProgram<'g> {
    functions: HashMap<String, CudaFunction>,
    compiled: Compiled,
    stream: &'g Arc<CudaStream>,
}

impl fmt::Debug for CommProgram<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommProgram")
            .field("name", &self.compiled.name)
            .finish()
    }
}

impl<'g> CommProgram<'g> {
    /// Compiles `source` (named `name`) for `gpu` (its compile options) and loads it.
    pub fn compile(gpu: &'g Gpu, name: &str, source: &str) -> Result<Self, GpuError> {
        Self::load(gpu, compile_source(name, source, gpu.options())?)
    }

    /// Loads a program compiled elsewhere (with more headers or options).
    pub fn load(gpu: &'g Gpu, compiled: Compiled) -> Result<Self, GpuError> {
        let functions = gpu.load_compiled(&compiled)?;
        Ok(Self {
            functions,
            compiled,
            stream: gpu.stream(),
        })
    }

    /// The compiled program.
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// Launches `<kernel>_<S::NAME>` with `comm` first, then `rest`, on the GPU's main
    /// stream.
    ///
    /// # Safety
    ///
    /// The kernel is the caller's code: its parameters must be a `DeviceComm` by value
    /// then exactly `rest`, in order; it must reach memory only through the device API
    /// (the communicator's queues, the windows in `rest`) and the addresses `rest` names,
    /// each a live allocation large enough for its use; and the caller must keep every
    /// borrowed object alive until the work completes (synchronize first).
    pub unsafe fn launch<S: OrderingScope>(
        &self,
        kernel: &str,
        comm: &KernelComm<'_, S>,
        cfg: LaunchConfig,
        rest: &[CommArg<'_>],
    ) -> Result<(), GpuError> {
        let name = format!("{kernel}_{}", S::NAME);
        let f = self
            .functions
            .get(&name)
            .ok_or_else(|| invalid(format!("{} has no kernel {name}", self.compiled.name)))?;
        if comm.raw.scope != S::KIND as u32 {
            return Err(GpuError::ScopeMismatch {
                kernel: S::KIND as u32,
                descriptor: comm.raw.scope,
            });
        }
        let mut b = self.stream.launch_builder(f);
        b.arg(comm);
        for a in rest {
            match a {
                CommArg::U64(v) => b.arg(v),
                CommArg::U32(v) => b.arg(v),
                CommArg::Window(w) => b.arg(w),
            };
        }
        // SAFETY: the caller's contract: the kernel takes the communicator by value then
        // exactly `rest`, and everything they name lives until the work completes.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }
}

/// A device status code as its typed value.
pub fn status(code: i32) -> DeviceStatus {
    DeviceStatus::from_code(code)
}
