//! The host build of the CUDA software NIC's engine over an arena of host memory: what
//! the differential test runs without a GPU.

use zerocopy::IntoBytes;

use super::ffi;
use super::tables::{
    NicCq, NicEngine, NicNode, NicQueue, NicRegion, NicResponder, NicStats, NicTables, TableError,
};

/// Most steps [`HostNic::run_until_idle`] takes before it reports a livelock.
pub const MAX_STEPS_TO_IDLE: u64 = 100_000;

/// An engine over an arena of host memory. Every address its tables hold lies in the
/// arena (checked at construction), so stepping it is safe.
pub struct HostNic {
    arena: Vec<u64>,
    scratch: Vec<u64>,
    nodes: Vec<NicNode>,
    regions: Vec<NicRegion>,
    cqs: Vec<NicCq>,
    responders: Vec<NicResponder>,
    queues: Vec<NicQueue>,
    engine: NicEngine,
}

impl core::fmt::Debug for HostNic {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HostNic")
            .field("arena_bytes", &(self.arena.len() * 8))
            .field("queues", &self.queues.len())
            .finish()
    }
}

impl HostNic {
    /// An engine over a copy of `arena` with `tables` whose addresses are offsets into it.
    pub fn new(tables: &NicTables, arena: &[u8]) -> Result<Self, TableError> {
        if !ffi::BUILT {
            return Err(TableError(
                "the host engine was left out of this build (IBGDA_SKIP_HOST_ENGINE=1)".into(),
            ));
        }
        let mut words = vec![0u64; arena.len().div_ceil(8)];
        words.as_mut_bytes()[..arena.len()].copy_from_slice(arena);
        let base = words.as_ptr() as u64;
        let len = arena.len() as u64;
        let placed = tables.relocated(base);
        let in_arena = |addr: u64, n: u64| addr >= base && n <= len && addr - base <= len - n;
        placed.check(&in_arena, &in_arena)?;
        let scratch_len = placed.scratch_len();
        let scratch = vec![0u64; (scratch_len as usize).div_ceil(8)];
        let mut nic = Self {
            arena: words,
            scratch,
            nodes: placed.nodes,
            regions: placed.regions,
            cqs: placed.cqs,
            responders: placed.responders,
            queues: placed.queues,
            engine: NicEngine::default(),
        };
        nic.engine.scratch_len = scratch_len;
        Ok(nic)
    }

    /// The arena's bytes.
    pub fn arena(&self) -> &[u8] {
        self.arena.as_bytes()
    }

    /// Writes host-side bytes (WQEs, records, doorbells, CQ consumer indices) into the
    /// arena at `offset`.
    pub fn write(&mut self, offset: usize, bytes: &[u8]) -> Result<(), TableError> {
        let arena = self.arena.as_mut_bytes();
        let end = offset
            .checked_add(bytes.len())
            .filter(|&e| e <= arena.len())
            .ok_or_else(|| TableError(format!("write of {} bytes at {offset}", bytes.len())))?;
        arena[offset..end].copy_from_slice(bytes);
        Ok(())
    }

    /// One step; returns its progress count (0: nothing happened).
    pub fn step(&mut self) -> u64 {
        let e = &mut self.engine;
        e.nodes = self.nodes.as_mut_ptr() as u64;
        e.regions = self.regions.as_mut_ptr() as u64;
        e.cqs = self.cqs.as_mut_ptr() as u64;
        e.responders = self.responders.as_mut_ptr() as u64;
        e.queues = self.queues.as_mut_ptr() as u64;
        e.scratch = self.scratch.as_mut_ptr() as u64;
        e.n_nodes = self.nodes.len() as u32;
        e.n_regions = self.regions.len() as u32;
        e.n_cqs = self.cqs.len() as u32;
        e.n_responders = self.responders.len() as u32;
        e.n_queues = self.queues.len() as u32;
        // SAFETY: the engine's table pointers were just taken from the vectors this `HostNic`
        // owns exclusively (`&mut self`), with their lengths; every address in the tables
        // lies in `self.arena`, whose heap buffer never moves or resizes after `new` (it
        // is only written through `as_mut_bytes`), with the alignment `NicTables::check`
        // verified; the scratch vector holds `scratch_len` bytes. Nothing else accesses
        // this memory during the call.
        unsafe { ffi::step(&mut self.engine) }
    }

    /// Steps until a step does nothing; returns the steps that did something, or an error
    /// after [`MAX_STEPS_TO_IDLE`].
    pub fn run_until_idle(&mut self) -> Result<u64, TableError> {
        for n in 0..MAX_STEPS_TO_IDLE {
            if self.step() == 0 {
                return Ok(n);
            }
        }
        Err(TableError(format!(
            "no idle after {MAX_STEPS_TO_IDLE} steps"
        )))
    }

    /// The tables as the engine left them (absolute addresses).
    pub fn tables(&self) -> NicTables {
        NicTables {
            nodes: self.nodes.clone(),
            regions: self.regions.clone(),
            cqs: self.cqs.clone(),
            responders: self.responders.clone(),
            queues: self.queues.clone(),
        }
    }

    /// The engine's totals.
    pub fn stats(&self) -> NicStats {
        self.engine.stats
    }
}
