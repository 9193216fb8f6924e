//! The CUDA software NIC on the GPU: engines' tables and scratch in device memory, the
//! persistent kernel `ibgda_softnic` (one engine per block), and the replay of the
//! differential streams over device memory.
//!
//! Everything is allocated and written by [`DeviceNic::new`], before any launch: an
//! allocation or a synchronous copy while a persistent kernel runs can wait for it and
//! deadlock. The stop flag is pinned host memory mapped into the GPU, written without a
//! copy.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use cudarc::driver::LaunchConfig;
use ibgda::memory::{DeviceBuffer, DmaBuffer};

use super::scenario::{engine_snapshot, FabricRun, Snapshot};
use super::tables::{
    record_bytes, records_from_bytes, NicCq, NicEngine, NicNode, NicQueue, NicRegion, NicResponder,
    NicTables, TableRecord,
};
use crate::gpu::{Gpu, GpuError, KernelArg};

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

/// Engines in device memory and the kernel that runs them.
pub struct DeviceNic {
    engines: Arc<DeviceBuffer>,
    memory: Vec<Arc<DeviceBuffer>>,
    placements: Vec<Placement>,
    counts: Vec<[usize; 5]>,
    stop: Arc<DmaBuffer>,
}

impl core::fmt::Debug for DeviceNic {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceNic")
            .field("engines", &self.placements.len())
            .finish()
    }
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

impl DeviceNic {
    /// Engines over `engines` (absolute device addresses), each checked to name only
    /// memory in `valid` (device address, length) ranges. Allocates and writes everything.
    pub fn new(gpu: &Gpu, engines: &[NicTables], valid: &[(u64, u64)]) -> Result<Self, GpuError> {
        if engines.is_empty() {
            return Err(GpuError::Invalid("no engine".into()));
        }
        let inside = |addr: u64, len: u64| {
            valid
                .iter()
                .any(|&(a, n)| addr >= a && len <= n && addr - a <= n - len)
        };
        let mut memory = Vec::new();
        let mut placements = Vec::new();
        let mut counts = Vec::new();
        let mut records = Vec::new();
        for t in engines {
            t.check(&inside)
                .map_err(|e| GpuError::Invalid(e.to_string()))?;
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
                n_nodes: t.nodes.len() as u32,
                n_regions: t.regions.len() as u32,
                n_cqs: t.cqs.len() as u32,
                n_responders: t.responders.len() as u32,
                n_queues: t.queues.len() as u32,
                ..Default::default()
            });
            counts.push([
                t.nodes.len(),
                t.regions.len(),
                t.cqs.len(),
                t.responders.len(),
                t.queues.len(),
            ]);
            memory.push(buf);
            placements.push(p);
        }
        let engines = gpu.device_buffer_from(&record_bytes(&records))?;
        let stop = gpu.mapped_host_buffer(8)?;
        Ok(Self {
            engines,
            memory,
            placements,
            counts,
            stop,
        })
    }

    fn launch(&self, gpu: &Gpu, exit_when_idle: bool, side: bool) -> Result<(), GpuError> {
        let stop = self
            .stop
            .device_addr()
            .ok_or_else(|| GpuError::Invalid("stop flag not mapped".into()))?;
        let args = [
            KernelArg::U64(self.engines.addr()),
            KernelArg::U32(self.placements.len() as u32),
            KernelArg::U64(stop),
            KernelArg::U32(u32::from(exit_when_idle)),
        ];
        let cfg = LaunchConfig {
            grid_dim: (self.placements.len() as u32, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: ibgda_softnic(NicEngine*, u32, const volatile u32*, u32): the engine array
        // of `placements.len()` records, their count, the mapped stop flag and the mode;
        // every table and scratch address in the records lies in `self.memory`, and every
        // queue, CQ and region address was checked by `NicTables::check` to lie in the
        // caller's `valid` ranges, whose memory the caller keeps alive until the kernel
        // has finished (`stop` or `run_until_idle` synchronizes).
        unsafe { gpu.launch_raw(false, "ibgda_softnic", cfg, side, &args) }
    }

    /// Starts the persistent kernel on the side stream: it runs until [`DeviceNic::stop`].
    /// Nothing may be allocated or copied synchronously until then.
    pub fn start(&self, gpu: &Gpu) -> Result<(), GpuError> {
        self.stop.words()[0].store(0, Ordering::Release);
        self.launch(gpu, false, true)
    }

    /// Sets the stop flag and waits for every kernel of the context to finish.
    pub fn stop(&self, gpu: &Gpu) -> Result<(), GpuError> {
        self.stop.words()[0].store(1, Ordering::Release);
        gpu.synchronize()
    }

    /// One launch that steps every engine until a step does nothing (the CPU NIC's
    /// `run_until_idle`), then waits for it.
    pub fn run_until_idle(&self, gpu: &Gpu) -> Result<(), GpuError> {
        self.launch(gpu, true, false)?;
        gpu.stream().synchronize()?;
        Ok(())
    }

    /// The engines' records and tables as the GPU left them (no kernel may be running).
    pub fn read(&self, gpu: &Gpu) -> Result<Vec<(NicEngine, NicTables)>, GpuError> {
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
                queues: records_from_bytes(cut(p.queues, c[4], 112)).ok_or_else(bad)?,
            };
            out.push((e, t));
        }
        Ok(out)
    }
}

/// Replays a run's trace on the GPU engine over a device copy of its arena (one launch
/// to idle per doorbell point); returns its snapshot after each point.
pub fn replay_on_device(gpu: &Gpu, run: &FabricRun) -> Result<Vec<Snapshot>, GpuError> {
    let arena = gpu.device_buffer_from(&run.arena)?;
    let tables = run.tables.relocated(arena.addr());
    let nic = DeviceNic::new(gpu, &[tables], &[(arena.addr(), arena.len() as u64)])?;
    let mut out = Vec::new();
    for writes in &run.trace {
        for (at, bytes) in writes {
            gpu.write_device(&arena, *at, bytes)?;
        }
        nic.run_until_idle(gpu)?;
        let (engine, tables) = nic
            .read(gpu)?
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
