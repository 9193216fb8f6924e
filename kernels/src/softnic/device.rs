//! The CUDA software NIC on the GPU: engines' tables and scratch in device memory, the
//! persistent kernel `ibgda_softnic` (one engine per block), and the replay of the
//! differential streams over device memory.
//!
//! Everything is allocated and written by [`DeviceNicBuilder::build`](super::builder::DeviceNicBuilder::build), before any launch: an
//! allocation or a synchronous copy while a persistent kernel runs can wait for it and
//! deadlock. The stop flag is pinned host memory mapped into the GPU, written without a
//! copy.

use core::marker::PhantomData;
use core::mem::size_of;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use cudarc::driver::LaunchConfig;
use ibgda::memory::{DeviceBuffer, DmaBuffer};
use ibgda::order::{GpuThread, OrderingScope, ValidFor};
use ibgda::queue::{
    CompletionQueueNicAccess, Executor, Gpu as GpuPlaced, QueuePair, SendQueueNicAccess,
};
use ibgda::wqe::TypedTransport;

#[cfg(feature = "test-support")]
use super::scenario::{engine_snapshot, FabricRun, Snapshot};
use super::tables::{
    record_bytes, records_from_bytes, NicCq, NicEngine, NicNode, NicQueue, NicRegion, NicResponder,
    NicTables, TableRecord,
};
use crate::gpu::{Gpu, GpuError, KernelArg};

/// The memory a [`DeviceNic`] may touch, derived from what is owned: data buffers its
/// regions lie in (it keeps a reference to each) and the queue memory of GPU-placed queue
/// pairs, under the NIC's exclusive executor claims (which also keep that memory alive, so
/// that even a leaked running NIC never touches freed memory). Made only by
/// [`DeviceNicBuilder`](super::builder::DeviceNicBuilder) from what it was given, and by
/// the test replay over its arena; the tables are checked against it once more before
/// anything reaches the device.
pub(crate) struct NicReach {
    pub(crate) data: Vec<Arc<DeviceBuffer>>,
    pub(crate) queues: Vec<QueueReach>,
    /// A test arena holding both (the replay of the differential streams): data and
    /// queue ranges may then overlap.
    #[cfg(feature = "test-support")]
    arena: Option<Arc<DeviceBuffer>>,
}

/// The NIC's capabilities to one queue pair's memory: its executor claims on the send
/// queue and the CQ, what keeps that memory alive while a NIC kernel may touch it, and
/// where it lies.
#[derive(Debug)]
pub(crate) struct QueueReach {
    sq: SendQueueNicAccess<GpuPlaced>,
    cq: CompletionQueueNicAccess<GpuPlaced>,
}

impl QueueReach {
    /// The capabilities of the NIC `executor` that executes `qp`'s WQEs: refused with
    /// [`GpuError::ExecutedElsewhere`] while another executor (another CUDA software NIC,
    /// a sink, a fabric, a backend) holds the queue.
    ///
    /// # Safety
    ///
    /// The caller is that NIC (a kernel that executes the queue's WQEs and writes its
    /// CQEs, nothing else), `executor` is its own identity, and it holds the capabilities
    /// only while it may run and `qp` lives (the callers borrow `qp` for as long as they
    /// hold them).
    pub(crate) unsafe fn of<T, S>(
        qp: &QueuePair<T, GpuPlaced, S>,
        executor: &Executor,
    ) -> Result<Self, GpuError>
    where
        T: TypedTransport,
        S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
    {
        // SAFETY: forwarded to this function's caller, who is the queue's NIC.
        let sq = unsafe { qp.sq_memory().nic_access_unchecked(executor) }?;
        // SAFETY: as above.
        let cq = unsafe { qp.cq_memory().nic_access_unchecked(executor) }?;
        Ok(Self { sq, cq })
    }

    /// Every buffer's (device address, length).
    pub(crate) fn spans(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.sq
            .spans()
            .into_iter()
            .chain(self.cq.spans())
            .map(|s| (s.addr, s.len as u64))
    }
}

impl core::fmt::Debug for NicReach {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NicReach")
            .field("data_buffers", &self.data.len())
            .field("queue_buffers", &self.queues.len())
            .finish()
    }
}

impl NicReach {
    /// Data buffers and queue capabilities.
    pub(crate) fn new(data: Vec<Arc<DeviceBuffer>>, queues: Vec<QueueReach>) -> Self {
        Self {
            data,
            queues,
            #[cfg(feature = "test-support")]
            arena: None,
        }
    }

    /// An arena that holds regions and queues alike (the replay of the differential
    /// streams, whose layout comes from the CPU software NIC's run).
    #[cfg(feature = "test-support")]
    fn arena(buffer: &Arc<DeviceBuffer>) -> Self {
        Self {
            data: vec![buffer.clone()],
            queues: Vec::new(),
            arena: Some(buffer.clone()),
        }
    }

    /// The (address, length) of every data buffer.
    fn data_spans(&self) -> Vec<(u64, u64)> {
        self.data
            .iter()
            .map(|b| (b.addr(), b.len() as u64))
            .collect()
    }

    /// The (address, length) of every buffer queue tables may name.
    fn queue_spans(&self) -> Vec<(u64, u64)> {
        let queues = self.queues.iter().flat_map(QueueReach::spans);
        #[cfg(feature = "test-support")]
        let queues = queues.chain(self.arena.iter().map(|b| (b.addr(), b.len() as u64)));
        queues.collect()
    }

    fn inside(spans: &[(u64, u64)], addr: u64, len: u64) -> bool {
        spans
            .iter()
            .any(|&(a, n)| addr >= a && len <= n && addr - a <= n - len)
    }

    /// What the NIC relies on, checked before anything reaches the device: at least one
    /// engine and no more than a launch holds, no data buffer overlapping queue memory,
    /// every engine's tables naming only this memory (regions inside data buffers; rings,
    /// records, doorbells and CQs inside queue memory) with valid sizes
    /// ([`NicTables::check`]), and one executor per queue (a send ring in one table entry
    /// of all engines) and per CQ (a CQ ring in one engine). The builder makes tables that
    /// pass; this is its second line.
    pub(crate) fn check(&self, engines: &[NicTables]) -> Result<(), GpuError> {
        if engines.is_empty() {
            return Err(GpuError::Invalid("no engine".into()));
        }
        // One block per engine.
        count_u32("engines", engines.len())?;
        self.check_disjoint()?;
        let (data_spans, queue_spans) = (self.data_spans(), self.queue_spans());
        let data = |addr: u64, len: u64| Self::inside(&data_spans, addr, len);
        let queue = |addr: u64, len: u64| Self::inside(&queue_spans, addr, len);
        for (i, t) in engines.iter().enumerate() {
            t.check(&data, &queue)
                .map_err(|e| GpuError::Invalid(format!("engine {i}: {e}")))?;
        }
        // One executor per queue and per CQ: a send queue in one table entry, a CQ in one
        // engine (engines run on different SMs and do not share state).
        let mut rings = std::collections::HashMap::new();
        let mut cqs = std::collections::HashMap::new();
        for (i, t) in engines.iter().enumerate() {
            for q in &t.queues {
                if let Some(j) = rings.insert(q.ring, i) {
                    return Err(GpuError::Invalid(format!(
                        "the send ring at {:#x} is in engine {j} and engine {i}",
                        q.ring
                    )));
                }
            }
            for c in &t.cqs {
                if let Some(j) = cqs.insert(c.ring, i).filter(|&j| j != i) {
                    return Err(GpuError::Invalid(format!(
                        "the CQ ring at {:#x} is in engine {j} and engine {i}",
                        c.ring
                    )));
                }
            }
        }
        Ok(())
    }

    /// Refuses a data buffer that overlaps queue memory (a region there would let WQEs
    /// write rings and CQs).
    pub(crate) fn check_disjoint(&self) -> Result<(), GpuError> {
        let queues: Vec<(u64, u64)> = self.queues.iter().flat_map(QueueReach::spans).collect();
        for (da, dn) in self.data_spans() {
            for &(qa, qn) in &queues {
                if da < qa.saturating_add(qn) && qa < da.saturating_add(dn) {
                    return Err(GpuError::Invalid(format!(
                        "data buffer {da:#x} (+{dn}) overlaps queue memory {qa:#x} (+{qn})"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Where one engine's tables lie in its device buffer.
#[derive(Clone, Copy, Debug, Default)]
struct Placement {
    nodes: usize,
    regions: usize,
    cqs: usize,
    responders: usize,
    queues: usize,
    scratch: usize,
    len: usize,
}

/// Engines in device memory and the kernel that runs them: a guard that stops the
/// persistent kernel and waits for it when dropped. Made by
/// [`DeviceNicBuilder`](super::builder::DeviceNicBuilder), whose tables are the library's
/// own, built from the queue pairs and buffers it was given.
///
/// It holds the executor claims on its queues (a second NIC, sink or fabric over them is
/// refused while it lives), keeps their memory and its data buffers referenced, and
/// borrows the queue pairs and the GPU for `'q`.
pub struct DeviceNic<'q> {
    gpu: &'q Gpu,
    engines: DeviceBuffer,
    memory: Vec<DeviceBuffer>,
    placements: Vec<Placement>,
    counts: Vec<[usize; 5]>,
    stop: DmaBuffer,
    running: bool,
    _reach: NicReach,
    _queues: PhantomData<&'q ()>,
}

impl core::fmt::Debug for DeviceNic<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceNic")
            .field("engines", &self.placements.len())
            .field("running", &self.running)
            .finish()
    }
}

fn count_u32(what: &str, n: usize) -> Result<u32, GpuError> {
    u32::try_from(n).map_err(|_| GpuError::Invalid(format!("{n} {what}: more than {}", u32::MAX)))
}

fn place<T>(at: &mut usize, n: usize) -> usize {
    let here = at.next_multiple_of(64);
    *at = here + n * core::mem::size_of::<T>();
    here
}

fn put<T: TableRecord>(bytes: &mut [u8], at: usize, records: &[T]) {
    let b = record_bytes(records);
    bytes[at..at + b.len()].copy_from_slice(&b);
}

impl<'q> DeviceNic<'q> {
    /// Engines over `engines` (absolute device addresses), each checked to name only
    /// memory of `memory`: regions inside its data buffers, queue rings, records,
    /// doorbells and CQs inside its queue memory. Allocates and writes everything (nothing
    /// may be allocated while the persistent kernel runs).
    pub(crate) fn from_tables(
        gpu: &'q Gpu,
        engines: &[NicTables],
        memory: NicReach,
    ) -> Result<Self, GpuError> {
        memory.check(engines)?;
        let mut buffers = Vec::new();
        let mut placements = Vec::new();
        let mut counts = Vec::new();
        let mut records = Vec::new();
        for t in engines {
            let mut at = 0usize;
            let p = Placement {
                nodes: place::<NicNode>(&mut at, t.nodes.len()),
                regions: place::<NicRegion>(&mut at, t.regions.len()),
                cqs: place::<NicCq>(&mut at, t.cqs.len()),
                responders: place::<NicResponder>(&mut at, t.responders.len()),
                queues: place::<NicQueue>(&mut at, t.queues.len()),
                scratch: place::<u8>(&mut at, 0).next_multiple_of(256),
                len: 0,
            };
            let scratch_len = t.scratch_len() as usize;
            let p = Placement {
                len: p.scratch + scratch_len,
                ..p
            };
            let mut bytes = vec![0u8; p.len];
            put(&mut bytes, p.nodes, &t.nodes);
            put(&mut bytes, p.regions, &t.regions);
            put(&mut bytes, p.cqs, &t.cqs);
            put(&mut bytes, p.responders, &t.responders);
            put(&mut bytes, p.queues, &t.queues);
            let buf = gpu.device_buffer_from(&bytes)?;
            let base = buf.addr();
            records.push(NicEngine {
                nodes: base + p.nodes as u64,
                regions: base + p.regions as u64,
                cqs: base + p.cqs as u64,
                responders: base + p.responders as u64,
                queues: base + p.queues as u64,
                scratch: base + p.scratch as u64,
                scratch_len: scratch_len as u64,
                n_nodes: count_u32("nodes", t.nodes.len())?,
                n_regions: count_u32("regions", t.regions.len())?,
                n_cqs: count_u32("CQs", t.cqs.len())?,
                n_responders: count_u32("responders", t.responders.len())?,
                n_queues: count_u32("queues", t.queues.len())?,
                ..Default::default()
            });
            counts.push([
                t.nodes.len(),
                t.regions.len(),
                t.cqs.len(),
                t.responders.len(),
                t.queues.len(),
            ]);
            buffers.push(buf);
            placements.push(p);
        }
        let engines = gpu.device_buffer_from(&record_bytes(&records))?;
        let stop = gpu.mapped_host_buffer(8)?;
        Ok(Self {
            gpu,
            engines,
            memory: buffers,
            placements,
            counts,
            stop,
            running: false,
            _reach: memory,
            _queues: PhantomData,
        })
    }

    fn launch(&self, exit_when_idle: bool, side: bool) -> Result<(), GpuError> {
        let stop = self
            .stop
            .device_addr()
            .ok_or_else(|| GpuError::Invalid("stop flag not mapped".into()))?;
        let n = count_u32("engines", self.placements.len())?;
        let args = [
            KernelArg::U64(self.engines.addr()),
            KernelArg::U32(n),
            KernelArg::U64(stop),
            KernelArg::U32(u32::from(exit_when_idle)),
        ];
        let cfg = LaunchConfig {
            grid_dim: (n, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: ibgda_softnic(NicEngine*, u32, const volatile u32*, u32): the engine array
        // of `n` records, their count, the mapped stop flag and the mode; every table and
        // scratch address in the records lies in `self.memory`, and every queue, CQ and
        // region address was checked by `NicTables::check` to lie in the buffers `_reach`
        // references (and, for queues, borrows for 'q); `self` keeps all of them alive, and
        // its `Drop` stops and waits for the kernel before any is released.
        unsafe {
            self.gpu
                .launch_raw(false, "ibgda_softnic", cfg, side, &args)
        }
    }

    /// Starts the persistent kernel on the side stream: it runs until [`DeviceNic::stop`]
    /// or the drop of the guard. Nothing may be allocated or copied synchronously until
    /// then (such calls can wait for the running kernel).
    pub fn start(&mut self) -> Result<(), GpuError> {
        if self.running {
            return Err(GpuError::Invalid(
                "the CUDA software NIC is already running".into(),
            ));
        }
        self.stop.words()[0].store(0, Ordering::Release);
        self.launch(false, true)?;
        self.running = true;
        Ok(())
    }

    /// Sets the stop flag and waits for every kernel of the context to finish.
    pub fn stop(&mut self) -> Result<(), GpuError> {
        self.stop.words()[0].store(1, Ordering::Release);
        self.running = false;
        self.gpu.synchronize()
    }

    /// Whether the persistent kernel was started and not stopped.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// One launch that steps every engine until a step does nothing (the CPU NIC's
    /// `run_until_idle`), then waits for it.
    pub fn run_until_idle(&mut self) -> Result<(), GpuError> {
        if self.running {
            return Err(GpuError::Invalid("the CUDA software NIC is running".into()));
        }
        self.launch(true, false)?;
        self.gpu.stream().synchronize()?;
        Ok(())
    }

    /// The engines' records and tables as the GPU left them (refused while running).
    pub fn read(&self) -> Result<Vec<(NicEngine, NicTables)>, GpuError> {
        if self.running {
            return Err(GpuError::Invalid("the CUDA software NIC is running".into()));
        }
        let gpu = self.gpu;
        let bad = || GpuError::Invalid("table bytes".into());
        let engines: Vec<NicEngine> =
            records_from_bytes(&gpu.read_device(&self.engines)?).ok_or_else(bad)?;
        let mut out = Vec::new();
        for (i, e) in engines.into_iter().enumerate() {
            let bytes = gpu.read_device(&self.memory[i])?;
            let p = self.placements[i];
            let c = self.counts[i];
            let cut = |at: usize, n: usize, size: usize| &bytes[at..at + n * size];
            let t = NicTables {
                nodes: records_from_bytes(cut(p.nodes, c[0], 8)).ok_or_else(bad)?,
                regions: records_from_bytes(cut(p.regions, c[1], 40)).ok_or_else(bad)?,
                cqs: records_from_bytes(cut(p.cqs, c[2], 40)).ok_or_else(bad)?,
                responders: records_from_bytes(cut(p.responders, c[3], 40)).ok_or_else(bad)?,
                queues: records_from_bytes(cut(p.queues, c[4], size_of::<NicQueue>()))
                    .ok_or_else(bad)?,
            };
            out.push((e, t));
        }
        Ok(out)
    }
}

impl Drop for DeviceNic<'_> {
    fn drop(&mut self) {
        if self.running {
            // Nothing the kernel touches may be released before it has stopped; a failed
            // synchronize (a dead context) has no kernel left running either.
            let _ = self.stop();
        }
    }
}

/// Replays a run's trace on the GPU engine over a device copy of its arena (one launch
/// to idle per doorbell point); returns its snapshot after each point.
#[cfg(feature = "test-support")]
pub fn replay_on_device(gpu: &Gpu, run: &FabricRun) -> Result<Vec<Snapshot>, GpuError> {
    let arena = Arc::new(gpu.device_buffer_from(&run.arena)?);
    let tables = run.tables.relocated(arena.addr());
    let mut nic = DeviceNic::from_tables(gpu, &[tables], NicReach::arena(&arena))?;
    let mut out = Vec::new();
    for writes in &run.trace {
        for (at, bytes) in writes {
            gpu.write_device(&arena, *at, bytes)?;
        }
        nic.run_until_idle()?;
        let (engine, tables) = nic
            .read()?
            .pop()
            .ok_or_else(|| GpuError::Invalid("no engine".into()))?;
        if engine.status != 0 {
            return Err(GpuError::Invalid(format!(
                "engine status {}",
                engine.status
            )));
        }
        let bytes = gpu.read_device(&arena)?;
        out.push(engine_snapshot(run, &bytes, &tables, engine.stats));
    }
    Ok(out)
}
