//! Message rate (section 4.3.1, Table 5): 8-byte inline RC WRITEs posted by `blocks` x
//! `threads` GPU threads to `queues` queue pairs in one of three publication modes, with
//! a doorbell every `batch` WQEBBs, against the sink (one sink thread per queue, retiring
//! only: one control segment read and at most one CQE per doorbell). The rate is WQEs over
//! the grid's first start to its last end (%globaltimer), the final drain included.
//!
//! With `ring_wqebbs` at least the WQEs each queue receives, no WQE slot is ever reused,
//! so the sink's retirement cannot hold the producers back: the same configuration run
//! both ways shows whether retirement is the limit.

use serde::Serialize;

use ibgda::cq::CqMode;
use ibgda::memory::DeviceBuffer;
use ibgda::order::{GpuFence, GpuThread, OrderingScope, ValidFor};
use ibgda::queue::{Gpu as GpuPlaced, QueuePair};
use ibgda::wqe::Rc;

use super::{
    launch, launch_config, sm_mhz, tolerates_stale_wqes, wait_stream, word32, word64, BenchProgram,
    HOST_WAIT_LIMIT,
};
use crate::gpu::{Gpu, GpuError, KernelArg};
use crate::harness::{
    descriptor_array, gpu_queue_pair, sink_capacity, Sink, SinkMode, SINK_CHECK, SINK_RETIRE,
};

/// How threads publish their WQEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Publication {
    /// One thread owns a queue (`Exclusive`): thread t posts to queue t.
    Exclusive,
    /// The shared protocol, one reservation and one in-order publication per WQE.
    PerThread,
    /// The shared protocol, one reservation and publication per warp of 32 WQEs.
    PerWarp,
    /// As [`Publication::PerThread`], the lanes of a warp calling together grouped
    /// (`post_write_inline8_thread_grouped`: one reservation and one hand-off per group, a
    /// doorbell at every multiple of the batch crossed).
    PerThreadGrouped,
    /// As [`Publication::PerWarp`], each round's reservation made one round ahead
    /// (`post_write_inline8_warp_ahead`: the atomic's round trip under the previous
    /// round's stores and doorbell).
    PerWarpAhead,
    /// One warp owns a queue (`WarpExclusive`): warp w posts to queue w, 32 WQEs per
    /// round built in lockstep, lane 0 ringing; no shared counter (the exclusive producer
    /// with a warp as the owner).
    WarpExclusive,
    /// One block owns a queue (`BlockExclusive`): block b posts to queue b, its warps
    /// sharing it through counters in the block's shared memory (a shared-memory atomic
    /// per round of 32 WQEs, the publication frontier handed on at CTA scope, lane 0 of
    /// each warp ringing in reservation order).
    BlockExclusive,
}

impl Publication {
    fn code(self) -> u32 {
        match self {
            Self::Exclusive => 0,
            Self::PerThread => 1,
            Self::PerWarp => 2,
            Self::PerWarpAhead => 3,
            Self::PerThreadGrouped => 4,
            Self::WarpExclusive => 5,
            Self::BlockExclusive => 6,
        }
    }

    fn shared(self) -> bool {
        !matches!(
            self,
            Self::Exclusive | Self::WarpExclusive | Self::BlockExclusive
        )
    }
}

/// One configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RateConfig {
    /// Publication mode.
    pub publication: Publication,
    /// Blocks (one SM each as long as blocks <= SMs and the sink leaves room).
    pub blocks: u32,
    /// Threads per block (a multiple of 32 in the shared modes).
    pub threads: u32,
    /// Queue pairs.
    pub queues: u32,
    /// Shared modes: warps per queue, in launch order (warp w posts to queue (w / share) %
    /// queues). Exclusive: ignored (threads x blocks must equal queues). WarpExclusive: 1
    /// (warps must equal queues). BlockExclusive: the warps of a block (blocks must equal
    /// queues).
    pub share: u32,
    /// WQEBBs per doorbell (shared modes: a doorbell when a publication crosses a multiple).
    pub batch: u32,
    /// WQEs per thread (Exclusive, PerThread) or rounds of 32 WQEs per warp (the warp
    /// modes).
    pub rounds: u32,
    /// Send-ring size of each queue, WQEBBs (a power of two, 64..=32768).
    pub ring_wqebbs: u32,
}

impl RateConfig {
    /// WQEs the configuration posts in all.
    pub fn total_wqes(&self) -> u64 {
        match self.publication {
            Publication::Exclusive => u64::from(self.queues) * u64::from(self.rounds),
            Publication::PerThread
            | Publication::PerThreadGrouped
            | Publication::PerWarp
            | Publication::PerWarpAhead
            | Publication::WarpExclusive
            | Publication::BlockExclusive => {
                u64::from(self.blocks) * u64::from(self.threads) * u64::from(self.rounds)
            }
        }
    }

    /// Whether no queue receives more WQEs than its ring holds (no slot reuse: the
    /// sink's retirement cannot limit the rate).
    pub fn never_wraps(&self) -> bool {
        let per_queue = self.total_wqes().div_ceil(u64::from(self.queues.max(1)));
        per_queue <= u64::from(self.ring_wqebbs)
    }

    fn check(&self) -> Result<(), GpuError> {
        let bad = |why: String| Err(GpuError::Invalid(format!("rate {self:?}: {why}")));
        let threads = u64::from(self.blocks) * u64::from(self.threads);
        if self.blocks == 0 || self.threads == 0 || self.threads > 1024 {
            return bad(format!("{} threads per block (1..=1024)", self.threads));
        }
        if self.queues == 0 || self.queues > 1024 {
            return bad(format!("{} queues (1..=1024)", self.queues));
        }
        if self.batch == 0 || self.rounds == 0 {
            return bad("batch and rounds must be > 0".into());
        }
        if !self.ring_wqebbs.is_power_of_two() || !(64..=32768).contains(&self.ring_wqebbs) {
            return bad(format!("ring of {} WQEBBs", self.ring_wqebbs));
        }
        match self.publication {
            Publication::Exclusive if threads != u64::from(self.queues) => bad(format!(
                "{threads} threads for {} exclusive queues",
                self.queues
            )),
            // Every mode but one thread per queue posts in whole warps.
            p if p != Publication::Exclusive && self.threads % 32 != 0 => bad(format!(
                "{} threads per block, not whole warps",
                self.threads
            )),
            Publication::WarpExclusive
                if self.share != 1 || threads / 32 != u64::from(self.queues) =>
            {
                bad(format!(
                    "{} warps sharing {} queues {} to a queue: a warp-exclusive queue has one warp",
                    threads / 32,
                    self.queues,
                    self.share
                ))
            }
            Publication::BlockExclusive
                if self.blocks != self.queues || self.share != self.threads / 32 =>
            {
                bad(format!(
                    "{} blocks sharing {} queues {} warps to a queue: a block-exclusive queue has one block ({} warps)",
                    self.blocks,
                    self.queues,
                    self.share,
                    self.threads / 32
                ))
            }
            p if p.shared() && self.share == 0 => bad("share 0".into()),
            _ => Ok(()),
        }
    }
}

/// One configuration's run.
#[derive(Clone, Debug, Serialize)]
pub struct RateResult {
    /// The ordering scope.
    pub scope: &'static str,
    /// What ran.
    pub config: RateConfig,
    /// WQEs posted and completed.
    pub wqes: u64,
    /// First start to last end, ns.
    pub ns: u64,
    /// Millions of WQEs per second.
    pub mwqe_per_s: f64,
    /// SM clock of block 0's thread 0 over its run, MHz.
    pub sm_mhz: f64,
    /// Doorbells the sink saw change (it samples: consecutive rings may merge).
    pub sink_doorbells: u64,
    /// CQEs the sink wrote.
    pub sink_cqes: u64,
    /// WQEBBs the sink consumed (the WQEs and any NOP the final waits posted).
    pub sink_wqebbs: u64,
    /// Whether no slot was reused (see [`RateConfig::never_wraps`]).
    pub never_wraps: bool,
    /// Control segments the sink read stale after the doorbell (wrong index), of the
    /// `sink_doorbells` it acted on: possible only for `Unordered` (no fence between the
    /// WQE stores and the doorbell), a measured finding there; any other scope's run
    /// with one is an error instead.
    pub stale_wqes: u64,
}

/// What a rate launch posts through and reports into.
struct RateQueues<S: OrderingScope + ValidFor<GpuPlaced>> {
    /// The queue pairs, alive until the launch is synchronized.
    qps: Vec<QueuePair<Rc, GpuPlaced, S>>,
    /// Their descriptors, in device memory.
    arr: DeviceBuffer,
    /// Clocks (4 words, the first start preset to all ones) and the status word.
    out: DeviceBuffer,
}

/// `config.queues` queue pairs of `config.ring_wqebbs` WQEBBs with scope `scope`, their
/// descriptor array and the clocks and status words.
fn rate_queues<S>(gpu: &Gpu, config: &RateConfig, scope: S) -> Result<RateQueues<S>, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    // A CQE at most every quarter ring: the sink's retirement never waits on a full CQ.
    let signal = (config.ring_wqebbs / 4).min(1024);
    let qps = (0..config.queues)
        .map(|i| {
            gpu_queue_pair(
                gpu,
                0x100 + i,
                config.ring_wqebbs as usize,
                1024,
                signal,
                CqMode::Ring,
                scope,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let descs: Vec<_> = qps.iter().map(|q| *q.device_queue().raw()).collect();
    let arr = descriptor_array(gpu, &descs)?;
    let mut init = vec![0u8; 40];
    init[..8].copy_from_slice(&u64::MAX.to_ne_bytes());
    let out = gpu.device_buffer_from(&init)?;
    Ok(RateQueues { qps, arr, out })
}

/// Runs one configuration against the sink's retire mode.
pub fn run<S>(
    gpu: &Gpu,
    program: &BenchProgram,
    scope: S,
    config: RateConfig,
) -> Result<RateResult, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    run_with_sink(gpu, program, scope, config, SINK_RETIRE)
}

/// Runs one configuration with the sink checking every WQE's control segment (index, QPN,
/// DS) as it consumes it, instead of one per doorbell, and, under a scope that orders the
/// WQE bytes before the doorbell record, every thread's payload sequence (complete and in
/// order): what the stale-WQE soak runs.
pub fn run_checked<S>(
    gpu: &Gpu,
    program: &BenchProgram,
    scope: S,
    config: RateConfig,
) -> Result<RateResult, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    run_with_sink(gpu, program, scope, config, SINK_CHECK)
}

/// Runs one configuration against the sink in `sink_mode`: [`SINK_RETIRE`] (what [`run`]
/// does), [`SINK_CHECK`] ([`run_checked`]), or a tight retire mode
/// (`SinkMode::RetireTight` and its variants) for a same-run comparison.
pub fn run_with_sink<S>(
    gpu: &Gpu,
    program: &BenchProgram,
    scope: S,
    config: RateConfig,
    sink_mode: SinkMode,
) -> Result<RateResult, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    config.check()?;
    let f = program.function(&format!("ibgda_bench_rate_{}", S::NAME))?;
    let RateQueues { qps, arr, out } = rate_queues(gpu, &config, scope)?;
    let refs: Vec<_> = qps.iter().collect();
    // The checking sink under a scope that orders the WQE bytes before the record also
    // checks every producer's payload sequence (thread id << 32 | its WQE number): each
    // must arrive complete and in order. Under the others a WQE fetched early may show
    // its previous lap's payload beside a current control segment, and one such fetch
    // puts the producer's sequence out of step for good, so only the control segments
    // are checked there.
    let check_payloads = sink_mode == SINK_CHECK && !tolerates_stale_wqes::<S>();
    let producers = if check_payloads {
        config.blocks.checked_mul(config.threads).ok_or_else(|| {
            GpuError::Invalid(format!("rate {config:?}: blocks x threads overflows"))
        })?
    } else {
        0
    };
    let sink = Sink::start(gpu, &refs, sink_mode, producers, config.queues, 1)?;
    let args = [
        KernelArg::U64(arr.addr()),
        KernelArg::U32(config.queues),
        KernelArg::U32(config.publication.code()),
        KernelArg::U32(config.share),
        KernelArg::U32(config.rounds),
        KernelArg::U32(config.batch),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(out.addr()),
        KernelArg::U64(out.addr() + 32),
    ];
    // SAFETY: ibgda_bench_rate_<S>(const DeviceQueueDescriptor*, u32 nq, u32 mode, u32
    // share, u32 rounds, u32 batch, u64, u32, u64* clocks, int* status): the arguments
    // above; `arr` holds `queues` descriptors of queue pairs alive to the end of this
    // function, clocks (4 words) and status lie in `out`; the sink's stop synchronizes the
    // context before anything is dropped.
    let launched = unsafe { launch(gpu, &f, launch_config(config.blocks, config.threads), &args) };
    let what = format!("rate {} {config:?}", S::NAME);
    let synced = launched.and_then(|()| wait_stream(gpu, &what, HOST_WAIT_LIMIT));
    if let Err(e) = &synced {
        if super::gpu_hung(e) {
            // The kernel may still run: leave everything it uses allocated.
            std::mem::forget(sink);
            std::mem::forget((qps, arr, out));
            return Err(e.clone());
        }
    }
    let (stats, expect) = sink.stop()?;
    synced?;
    if check_payloads {
        // Every thread of every mode posts `rounds` WQEs, numbered from 0.
        let behind = expect.iter().filter(|&&n| n != config.rounds).count();
        if stats.bad_payloads != 0 || behind != 0 {
            return Err(GpuError::Invalid(format!(
                "rate {} {config:?}: {} payloads out of sequence, {behind} of {producers} producers' sequences incomplete (sink {stats:?})",
                S::NAME,
                stats.bad_payloads
            )));
        }
    }
    let o = gpu.read_device(&out)?;
    let status = word32(&o, 32)?;
    let stale_wqes = if tolerates_stale_wqes::<S>() {
        stats.bad_wqes
    } else {
        0
    };
    if status != 0 || stats.bad_wqes - stale_wqes + stats.bad_doorbells != 0 {
        return Err(GpuError::Invalid(format!(
            "rate {} {config:?}: status {status}, sink {stats:?}",
            S::NAME
        )));
    }
    let (start, end) = (word64(&o, 0)?, word64(&o, 8)?);
    let ns = end.saturating_sub(start);
    let wqes = config.total_wqes();
    // The final waits may add signaled NOPs (one WQEBB each), never fewer WQEBBs.
    if stats.wqes < wqes {
        return Err(GpuError::Invalid(format!(
            "rate {} {config:?}: sink consumed {} WQEBBs of {wqes} WQEs",
            S::NAME,
            stats.wqes
        )));
    }
    Ok(RateResult {
        scope: S::NAME,
        config,
        wqes,
        ns,
        mwqe_per_s: million_per_s(wqes, ns),
        sm_mhz: sm_mhz(word64(&o, 16)?, word64(&o, 24)?),
        sink_doorbells: stats.doorbells,
        sink_cqes: stats.cqes,
        sink_wqebbs: stats.wqes,
        never_wraps: config.never_wraps(),
        stale_wqes,
    })
}

/// Millions of `count` per second over `ns` nanoseconds (0 over no time).
pub fn million_per_s(count: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        count as f64 * 1e3 / ns as f64
    }
}

/// Queue counts of the sink capacity row: every rate row's queue count is among them.
pub const SINK_CAPACITY_QUEUES: [u32; 5] = [1, 16, 32, 64, 128];
/// Doorbells per queue of the sink capacity row.
pub const SINK_CAPACITY_DOORBELLS: u32 = 20_000;

/// The sink alone (no producer) over `queues` queues of the rate rows' shape, one sink
/// thread per queue as the rate rows launch it: doorbells it processes per second.
#[derive(Clone, Debug, Serialize)]
pub struct SinkCapacityRow {
    /// "Retire" (as the rate rows run it) or "RetireTight" (the A/B rows' sink).
    pub mode: String,
    /// Queues (one sink thread each).
    pub queues: u32,
    /// Doorbells per queue.
    pub doorbells: u32,
    /// WQEBBs per doorbell (the retire mode's cost does not depend on it).
    pub batch: u32,
    /// Per queue's thread: doorbells per second, slowest queue.
    pub doorbells_per_s_per_queue: f64,
    /// Over all queues: doorbells per second (each queue's rate summed).
    pub doorbells_per_s: f64,
    /// ns per doorbell of the slowest queue.
    pub ns_per_doorbell: f64,
}

/// Measures the sink's capacity over `queues` fresh queues in `mode`.
pub fn sink_capacity_row(
    gpu: &Gpu,
    queues: u32,
    mode: SinkMode,
    doorbells: u32,
) -> Result<SinkCapacityRow, GpuError> {
    let config = config(Publication::Exclusive, queues, 1, queues, 1, 32, 1);
    // SAFETY: fresh benchmark queues on throw-away device memory, written and executed
    // only by the capacity kernel.
    let RateQueues { qps, .. } = rate_queues(gpu, &config, unsafe { GpuFence::new() })?;
    let c = sink_capacity(gpu, qps, mode, config.batch, doorbells)?;
    let expected = u64::from(doorbells) * u64::from(queues);
    if c.stats.doorbells != expected || c.stats.cqes != expected || c.stats.bad_wqes != 0 {
        return Err(GpuError::Invalid(format!(
            "sink capacity {mode:?} over {queues} queues: {:?}, {expected} doorbells expected",
            c.stats
        )));
    }
    let slowest = c.ns.iter().copied().max().unwrap_or(0).max(1);
    let per_queue: Vec<f64> =
        c.ns.iter()
            .map(|&ns| f64::from(doorbells) * 1e9 / ns.max(1) as f64)
            .collect();
    Ok(SinkCapacityRow {
        mode: format!("{mode:?}"),
        queues,
        doorbells,
        batch: config.batch,
        doorbells_per_s_per_queue: f64::from(doorbells) * 1e9 / slowest as f64,
        doorbells_per_s: per_queue.iter().sum(),
        ns_per_doorbell: slowest as f64 / f64::from(doorbells),
    })
}

/// The sink capacity rows: every queue count of [`SINK_CAPACITY_QUEUES`], the sink as the
/// rate rows run it and in its tight mode.
pub fn sink_capacity_rows(gpu: &Gpu, doorbells: u32) -> Result<Vec<SinkCapacityRow>, GpuError> {
    let mut rows = Vec::new();
    for mode in [SinkMode::Retire, SinkMode::RetireTight] {
        for q in SINK_CAPACITY_QUEUES {
            rows.push(sink_capacity_row(gpu, q, mode, doorbells)?);
        }
    }
    Ok(rows)
}

/// The most WQEs per second the sink (as `mode`, a capacity row's mode: see
/// `SinkMode::capacity_mode`) lets a rate row reach: its doorbells per
/// second per queue at the row's queue count (the next larger count measured), times the
/// row's queues and the WQEs per doorbell the row's sink saw. `None` without a matching
/// capacity row or doorbell count.
pub fn sink_bound_mwqe_per_s(
    r: &RateResult,
    capacity: &[SinkCapacityRow],
    mode: &str,
) -> Option<f64> {
    if r.sink_doorbells == 0 {
        return None;
    }
    let cap = capacity
        .iter()
        .filter(|c| c.mode == mode && c.queues >= r.config.queues)
        .min_by_key(|c| c.queues)?;
    let per_doorbell = r.wqes as f64 / r.sink_doorbells as f64;
    Some(cap.doorbells_per_s_per_queue * f64::from(r.config.queues) * per_doorbell / 1e6)
}

/// Runs one configuration with scope `GpuFence` in a single launch: the producer blocks
/// and, in one more block, a retire-only sink reading the doorbell records
/// (`ibgda_bench_rate_selfsink_GpuFence`). The form a profiler can run (Nsight Compute
/// serializes kernels, so the persistent sink beside a producer launch would hang).
/// `sink_doorbells`, `sink_cqes` and `sink_wqebbs` are 0 (not counted).
pub fn run_one_launch(
    gpu: &Gpu,
    program: &BenchProgram,
    config: RateConfig,
) -> Result<RateResult, GpuError> {
    config.check()?;
    if config.blocks >= 1024 {
        return Err(GpuError::Invalid(format!(
            "one-launch rate: {} producer blocks (< 1024)",
            config.blocks
        )));
    }
    let f = program.function("ibgda_bench_rate_selfsink_GpuFence")?;
    // SAFETY: the rate experiment's throw-away queues; the self-sink counts stale WQEs as a
    // finding of the experiment (GpuFence is measured, not trusted).
    let RateQueues { qps, arr, out } = rate_queues(gpu, &config, unsafe { GpuFence::new() })?;
    let scratch = gpu.device_buffer(16 * config.queues as usize + 8)?;
    let args = [
        KernelArg::U64(arr.addr()),
        KernelArg::U32(config.queues),
        KernelArg::U32(config.publication.code()),
        KernelArg::U32(config.share),
        KernelArg::U32(config.rounds),
        KernelArg::U32(config.batch),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(out.addr()),
        KernelArg::U64(scratch.addr()),
        KernelArg::U64(out.addr() + 32),
    ];
    // SAFETY: ibgda_bench_rate_selfsink_GpuFence(const DeviceQueueDescriptor*, u32 nq,
    // u32 mode, u32 share, u32 rounds, u32 batch, u64, u32, u64* clocks, u64* scratch,
    // int* status): the arguments above; `arr` holds `queues` descriptors of queue pairs
    // alive to the end of this function, `scratch` 2 words per queue and the done counter,
    // clocks and status lie in `out`; synchronized before anything is dropped.
    unsafe {
        launch(
            gpu,
            &f,
            launch_config(config.blocks + 1, config.threads),
            &args,
        )
    }?;
    let what = format!("one-launch rate {config:?}");
    if let Err(e) = wait_stream(gpu, &what, HOST_WAIT_LIMIT) {
        if super::gpu_hung(&e) {
            // The kernel may still run: leave everything it uses allocated.
            std::mem::forget((qps, arr, out, scratch));
        }
        return Err(e);
    }
    let o = gpu.read_device(&out)?;
    let status = word32(&o, 32)?;
    if status != 0 {
        return Err(GpuError::Invalid(format!(
            "one-launch rate {config:?}: status {status}"
        )));
    }
    let ns = word64(&o, 8)?.saturating_sub(word64(&o, 0)?);
    let wqes = config.total_wqes();
    Ok(RateResult {
        scope: GpuFence::NAME,
        config,
        wqes,
        ns,
        mwqe_per_s: million_per_s(wqes, ns),
        sm_mhz: sm_mhz(word64(&o, 16)?, word64(&o, 24)?),
        sink_doorbells: 0,
        sink_cqes: 0,
        sink_wqebbs: 0,
        never_wraps: config.never_wraps(),
        stale_wqes: 0,
    })
}

/// A configuration in the paper's terms.
pub fn config(
    publication: Publication,
    blocks: u32,
    threads: u32,
    queues: u32,
    share: u32,
    batch: u32,
    rounds: u32,
) -> RateConfig {
    RateConfig {
        publication,
        blocks,
        threads,
        queues,
        share,
        batch,
        rounds,
        ring_wqebbs: 4096,
    }
}

/// The stale-WQE soak of one scope: WQEs checked, and what was found.
#[derive(Clone, Debug, Serialize)]
pub struct SoakResult {
    /// The ordering scope.
    pub scope: &'static str,
    /// The configuration of every launch.
    pub config: RateConfig,
    /// Launches run.
    pub launches: u32,
    /// WQEs posted, every one's control segment checked by the sink as it consumed it.
    pub wqes_checked: u64,
    /// Control segments found stale (a WQE fetched before its bytes were visible).
    pub stale_wqes: u64,
    /// The rate over the launches' GPU time, millions of WQEs per second.
    pub mwqe_per_s: f64,
    /// SM clock over the last launch, MHz.
    pub sm_mhz: f64,
}

/// The soak's configuration: 64 single-warp queues on 64 SMs, per-warp publication, a
/// doorbell per warp (32 WQEBBs), the ring wrapping often (4,096 WQEBBs): the row where
/// `GpuFence` let the sink, following the doorbell record as an mlx5 NIC may, fetch stale
/// WQEs. 40,960,000 WQEs a launch.
pub fn soak_config() -> RateConfig {
    config(Publication::PerWarp, 64, 32, 64, 1, 32, 20_000)
}

/// Posts at least `min_wqes` WQEs under `scope` in launches of [`soak_config`], the sink
/// checking every WQE. A stale WQE under a scope that must never show one is an error of
/// the launch that saw it ([`run_checked`] refuses it); under `GpuFence` or `Unordered` it
/// is counted.
pub fn soak<S>(
    gpu: &Gpu,
    program: &BenchProgram,
    scope: S,
    min_wqes: u64,
) -> Result<SoakResult, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    let config = soak_config();
    let (mut launches, mut wqes, mut stale, mut ns, mut sm_mhz) = (0u32, 0u64, 0u64, 0u64, 0.0);
    while wqes < min_wqes.max(1) {
        let r = run_checked(gpu, program, scope, config)?;
        launches += 1;
        wqes += r.wqes;
        stale += r.stale_wqes;
        ns += r.ns;
        sm_mhz = r.sm_mhz;
    }
    Ok(SoakResult {
        scope: S::NAME,
        config,
        launches,
        wqes_checked: wqes,
        stale_wqes: stale,
        mwqe_per_s: million_per_s(wqes, ns),
        sm_mhz,
    })
}

/// Table 5's rows (and the paper's targets), then the batch sweep of one thread and the
/// placement of 64 single-warp queues on 64, 16 and 8 SMs, then the no-reuse controls.
/// `scale` multiplies the WQE counts (1 for the full run).
pub fn table5(scale: u32) -> Vec<(&'static str, RateConfig)> {
    use Publication::{Exclusive as X, PerThread as T, PerWarp as W};
    let s = scale.max(1);
    let mut v = vec![
        (
            "1 thread, 1 QP, batch 1",
            config(X, 1, 1, 1, 1, 1, 20_000 * s),
        ),
        (
            "1 thread, 1 QP, batch 16",
            config(X, 1, 1, 1, 1, 16, 160_000 * s),
        ),
        (
            "32 threads, 1 QP, per-thread, batch 1",
            config(T, 1, 32, 1, 1, 1, 1_000 * s),
        ),
        (
            "256 threads, 1 QP, per-thread, batch 32",
            config(T, 1, 256, 1, 8, 32, 500 * s),
        ),
        (
            "32 threads, 1 QP, per-warp, batch 32 (paper 21.6)",
            config(W, 1, 32, 1, 1, 32, 20_000 * s),
        ),
        (
            "32 threads, 1 QP, per-warp, batch 32 (ring 16,384; paper 21.6)",
            RateConfig {
                ring_wqebbs: 16384,
                ..config(W, 1, 32, 1, 1, 32, 20_000 * s)
            },
        ),
        (
            "256 threads, 1 QP, per-warp, batch 32 (paper 30.7)",
            config(W, 1, 256, 1, 8, 32, 4_000 * s),
        ),
        (
            "16 threads, 16 QPs, 16 SMs, batch 1",
            config(X, 16, 1, 16, 1, 1, 20_000 * s),
        ),
        (
            "16 threads, 16 QPs, 16 SMs, batch 16",
            config(X, 16, 1, 16, 1, 16, 80_000 * s),
        ),
        (
            "32 threads, 32 QPs, 1 SM, batch 16",
            config(X, 1, 32, 32, 1, 16, 40_000 * s),
        ),
        (
            "64 threads, 64 QPs, 1 SM, batch 16",
            config(X, 1, 64, 64, 1, 16, 40_000 * s),
        ),
        (
            "64 threads, 64 QPs, 64 SMs, batch 16",
            config(X, 64, 1, 64, 1, 16, 40_000 * s),
        ),
        (
            "4096 threads, 16 QPs, 16 SMs, per-warp, batch 32",
            config(W, 16, 256, 16, 8, 32, 2_000 * s),
        ),
        (
            "64 warps, 64 QPs, 64 SMs, per-warp, batch 32 (target 1500)",
            config(W, 64, 32, 64, 1, 32, 20_000 * s),
        ),
    ];
    // Per thread, the lanes calling together grouped (a doorbell at every multiple of the
    // batch: with batch 1, one per WQE).
    use Publication::PerThreadGrouped as G;
    v.push((
        "32 threads, 1 QP, per-thread, batch 1, grouped",
        config(G, 1, 32, 1, 1, 1, 1_000 * s),
    ));
    v.push((
        "256 threads, 1 QP, per-thread, batch 32, grouped",
        config(G, 1, 256, 1, 8, 32, 500 * s),
    ));
    // Each round's reservation one round ahead (the atomic under the previous round).
    use Publication::PerWarpAhead as A;
    v.push((
        "32 threads, 1 QP, per-warp, batch 32, reserve ahead",
        config(A, 1, 32, 1, 1, 32, 20_000 * s),
    ));
    v.push((
        "256 threads, 1 QP, per-warp, batch 32, reserve ahead",
        config(A, 1, 256, 1, 8, 32, 4_000 * s),
    ));
    v.push((
        "64 warps, 64 QPs, 64 SMs, per-warp, batch 32, reserve ahead",
        config(A, 64, 32, 64, 1, 32, 20_000 * s),
    ));
    v.push((
        "128 warps, 128 QPs, 64 SMs x 2 warps, per-warp, batch 32, reserve ahead",
        config(A, 64, 64, 128, 1, 32, 10_000 * s),
    ));
    // One warp owns each queue: no shared counter between the warp's rounds.
    use Publication::WarpExclusive as WX;
    v.push((
        "32 threads, 1 QP, per-warp, batch 32, warp-exclusive",
        config(WX, 1, 32, 1, 1, 32, 20_000 * s),
    ));
    v.push((
        "64 warps, 64 QPs, 64 SMs, per-warp, batch 32, warp-exclusive",
        config(WX, 64, 32, 64, 1, 32, 20_000 * s),
    ));
    v.push((
        "128 warps, 128 QPs, 64 SMs x 2 warps, per-warp, batch 32, warp-exclusive",
        config(WX, 64, 64, 128, 1, 32, 10_000 * s),
    ));
    // One block owns each queue: its warps share it through shared memory.
    use Publication::BlockExclusive as BX;
    v.push((
        "256 threads, 1 QP, per-warp, batch 32, block-exclusive",
        config(BX, 1, 256, 1, 8, 32, 4_000 * s),
    ));
    v.push((
        "4096 threads, 16 QPs, 16 SMs, per-warp, batch 32, block-exclusive",
        config(BX, 16, 256, 16, 8, 32, 2_000 * s),
    ));
    for b in [1u32, 2, 4, 8, 32, 64] {
        v.push((
            "batch sweep: 1 thread, 1 QP",
            config(X, 1, 1, 1, 1, b, 10_000 * b.min(16) * s),
        ));
    }
    v.push((
        "placement: 64 warps, 64 QPs, 16 SMs x 4 warps",
        config(W, 16, 128, 64, 1, 32, 20_000 * s),
    ));
    v.push((
        "placement: 64 warps, 64 QPs, 8 SMs x 8 warps",
        config(W, 8, 256, 64, 1, 32, 20_000 * s),
    ));
    v.push((
        "placement: 128 warps, 128 QPs, 64 SMs x 2 warps",
        config(W, 64, 64, 128, 1, 32, 10_000 * s),
    ));
    // No slot reuse: whether the sink's retirement limits the per-warp rates.
    let mut one = config(W, 1, 32, 1, 1, 32, 1024);
    one.ring_wqebbs = 32768;
    v.push(("no reuse: 32 threads, 1 QP, per-warp, batch 32", one));
    let mut many = config(W, 64, 32, 64, 1, 32, 1024);
    many.ring_wqebbs = 32768;
    v.push((
        "no reuse: 64 warps, 64 QPs, 64 SMs, per-warp, batch 32",
        many,
    ));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_planned_configuration_is_valid_and_only_the_controls_never_wrap() {
        let rows = table5(1);
        assert!(rows.len() >= 20);
        for (label, c) in &rows {
            c.check().unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(
                c.never_wraps(),
                label.starts_with("no reuse"),
                "{label}: {c:?}"
            );
        }
        // The two targets are among the rows.
        assert!(rows.iter().any(|(l, c)| l.contains("paper 21.6")
            && c.publication == Publication::PerWarp
            && (c.blocks, c.threads, c.queues) == (1, 32, 1)));
        assert!(rows
            .iter()
            .any(|(l, c)| l.contains("target 1500")
                && (c.blocks, c.threads, c.queues) == (64, 32, 64)));
    }

    #[test]
    fn bad_configurations_are_typed_errors_naming_the_value() {
        let ok = config(Publication::PerWarp, 1, 32, 1, 1, 32, 10);
        let cases = [
            (RateConfig { threads: 0, ..ok }, "0 threads"),
            (
                RateConfig { threads: 48, ..ok },
                "48 threads per block, not whole warps",
            ),
            (RateConfig { queues: 0, ..ok }, "0 queues"),
            (
                RateConfig {
                    ring_wqebbs: 100,
                    ..ok
                },
                "ring of 100",
            ),
            (RateConfig { share: 0, ..ok }, "share 0"),
            (
                config(Publication::Exclusive, 2, 1, 1, 1, 1, 10),
                "2 threads for 1 exclusive queues",
            ),
            (
                config(Publication::WarpExclusive, 2, 32, 1, 1, 32, 10),
                "2 warps sharing 1 queues 1 to a queue",
            ),
            (
                config(Publication::WarpExclusive, 1, 64, 2, 2, 32, 10),
                "2 warps sharing 2 queues 2 to a queue",
            ),
            (
                config(Publication::WarpExclusive, 1, 48, 1, 1, 32, 10),
                "48 threads per block, not whole warps",
            ),
            (
                config(Publication::BlockExclusive, 2, 256, 1, 8, 32, 10),
                "2 blocks sharing 1 queues 8 warps to a queue",
            ),
            (
                config(Publication::BlockExclusive, 1, 256, 1, 1, 32, 10),
                "1 blocks sharing 1 queues 1 warps to a queue",
            ),
            (
                config(Publication::BlockExclusive, 1, 80, 1, 2, 32, 10),
                "80 threads per block, not whole warps",
            ),
        ];
        for (c, want) in cases {
            match c.check() {
                Err(GpuError::Invalid(m)) => assert!(m.contains(want), "{m} lacks {want}"),
                other => panic!("{c:?}: {other:?}"),
            }
        }
        assert_eq!(ok.total_wqes(), 320);
        assert_eq!(
            config(Publication::Exclusive, 4, 16, 64, 1, 16, 10).total_wqes(),
            640
        );
    }
}
