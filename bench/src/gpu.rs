//! GPU experiments on one GPU against the doorbell sink (no NIC): issue time per ordering
//! scope, typed and raw in the same run (Table 4), and posting rates (Table 5). Every
//! device wait is bounded (5 s); everything is allocated before the sink starts.

use std::time::Instant;

use cudarc::driver::LaunchConfig;
use ibgda::cq::CqMode;
use ibgda::order::{
    GpuFence, GpuFencedDbrec, GpuReleaseStore, GpuThread, OrderingScope, SystemFence,
    SystemReleaseStore, ThreadFence, Unordered, ValidFor,
};
use ibgda::queue::Gpu as GpuPlaced;
use ibgda_kernels::gpu::{CompileOptions, Gpu, GpuError, KernelArg, KernelQueue};
use ibgda_kernels::harness::{descriptor_array, gpu_queue_pair, Sink, SINK_CHECK, SINK_RETIRE};
use serde::{Deserialize, Serialize};

use crate::stats::{Durations, Percentiles};
use crate::BenchError;

/// Sizes of the GPU experiments.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct GpuParams {
    /// Issue-time iterations per scope and variant.
    pub issue_iters: u32,
    /// Rounds of 32 WQEs per warp in the rate rows.
    pub rate_iters: u32,
}

impl Default for GpuParams {
    fn default() -> Self {
        Self {
            issue_iters: 20_000,
            rate_iters: 20_000,
        }
    }
}

/// One scope's issue time, typed or raw.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IssueSide {
    /// Issue time from %globaltimer (ns).
    pub issue_ns: Percentiles,
    /// Issue time in SM cycles (clock64), as "ns" fields holding cycles.
    pub issue_cycles: Percentiles,
    /// Issue through the sink's completion (ns): put+c against a sink, not a NIC.
    pub put_c_ns: Percentiles,
    /// SM clock over the run: clock64 cycles / %globaltimer ns (MHz).
    pub sm_clock_mhz: f64,
}

/// One scope's row of Table 4.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IssueRow {
    /// The scope's name (`OrderingScope::NAME`).
    pub scope: String,
    /// Through ibgda's typed device library.
    pub typed: IssueSide,
    /// Through the hand-written raw baseline.
    pub raw: IssueSide,
    /// Typed over raw p50 cycles (target 1.00 +- 0.02).
    pub typed_over_raw: f64,
}

/// One posting-rate row (Table 5).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RateRow {
    /// Key matching `paper::TABLE5_P_IB` where the paper has the row.
    pub key: String,
    /// What runs.
    pub description: String,
    /// The scope.
    pub scope: String,
    /// Threads per block.
    pub threads: u32,
    /// Blocks (one per SM).
    pub blocks: u32,
    /// Queue pairs.
    pub qps: u32,
    /// WQEs per doorbell.
    pub batch: u32,
    /// WQEs posted.
    pub wqes: u64,
    /// Seconds.
    pub seconds: f64,
    /// Millions of WQEs per second.
    pub mwqe_per_s: f64,
}

/// The GPU experiments' result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuResult {
    /// Sizes.
    pub params: GpuParams,
    /// Table 4, one row per scope.
    pub issue: Vec<IssueRow>,
    /// Table 5 rows.
    pub rates: Vec<RateRow>,
    /// Mean SM clock over the issue runs (MHz).
    pub sm_clock_mhz: f64,
}

fn cfg(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn summary(values: impl Iterator<Item = u64>) -> Result<Percentiles, BenchError> {
    let mut d = Durations::new();
    for v in values {
        d.record_nanos(v as f64).map_err(BenchError::msg)?;
    }
    Ok(d.summary())
}

fn issue<S>(gpu: &Gpu, scope: S, raw: bool, iters: u32) -> Result<IssueSide, BenchError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let qp = gpu_queue_pair(gpu, 0x77, 64, 64, 32, CqMode::Ring, scope)?;
    let q = qp.device_queue();
    let n = 8 * u64::from(iters);
    // Everything is allocated before the sink starts: allocation and synchronous copies
    // may wait for running kernels, and the sink runs until it is stopped.
    let out = gpu.device_buffer((3 * n + 16 + 8) as usize)?;
    let sink = Sink::start(gpu, &[&qp], SINK_CHECK, 0, 1, 1)?;
    let base = out.addr();
    let args = [
        KernelArg::Queue(KernelQueue::new(&q).into()),
        KernelArg::U32(1000),
        KernelArg::U32(iters),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(base),
        KernelArg::U64(base + n),
        KernelArg::U64(base + 2 * n),
        KernelArg::U64(base + 3 * n),
        KernelArg::U64(base + 3 * n + 16),
    ];
    let name = format!(
        "ibgda_{}_{}",
        if raw { "raw_issue" } else { "issue_bench" },
        S::NAME
    );
    // SAFETY: (DeviceQueueDescriptor, u32, u32, u64, u32, u64*, u64*, u64*, u64*, int*):
    // the arguments above, all inside `out`, alive past the sink's synchronize.
    unsafe { gpu.launch_raw(raw, &name, cfg(1, 1), false, &args) }?;
    gpu.stream().synchronize().map_err(GpuError::from)?;
    let (stats, _) = sink.stop()?;
    let o = gpu.read_device(&out)?;
    let word = |at: usize| u64::from_ne_bytes(o[at..at + 8].try_into().expect("8 bytes"));
    let col = |k: u64| (0..iters as usize).map(move |i| (k * n) as usize + 8 * i);
    let status = i32::from_ne_bytes(o[(3 * n + 16) as usize..][..4].try_into().expect("4"));
    if status != 0 || stats.bad_wqes + stats.bad_doorbells != 0 {
        return Err(BenchError::Invalid(format!(
            "{name}: status {status}, sink {stats:?}"
        )));
    }
    let (cycles, ns) = (word(3 * n as usize), word(3 * n as usize + 8));
    Ok(IssueSide {
        issue_ns: summary(col(0).map(word))?,
        issue_cycles: summary(col(1).map(word))?,
        put_c_ns: summary(col(2).map(word))?,
        sm_clock_mhz: cycles as f64 * 1e3 / ns.max(1) as f64,
    })
}

fn issue_row<S>(gpu: &Gpu, scope: S, iters: u32) -> Result<IssueRow, BenchError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    let typed = issue(gpu, scope, false, iters)?;
    let raw = issue(gpu, scope, true, iters)?;
    Ok(IssueRow {
        scope: S::NAME.into(),
        typed_over_raw: typed.issue_cycles.p50 / raw.issue_cycles.p50.max(1.0),
        typed,
        raw,
    })
}

/// `blocks` blocks of one warp each, block b posting to QP b % nq cooperatively, `iters`
/// rounds of 32 WQEs, batch 32; the sink only retires.
fn warp_rate<S>(
    gpu: &Gpu,
    key: &str,
    scope: S,
    nq: u32,
    blocks: u32,
    iters: u32,
) -> Result<RateRow, BenchError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    let qps = (0..nq)
        .map(|i| gpu_queue_pair(gpu, 0x100 + i, 4096, 1024, 1024, CqMode::Ring, scope))
        .collect::<Result<Vec<_>, _>>()?;
    let descs: Vec<_> = qps.iter().map(|q| *q.device_queue().raw()).collect();
    let arr = descriptor_array(gpu, &descs)?;
    let status = gpu.device_buffer(4)?;
    let sink = Sink::start(gpu, &qps.iter().collect::<Vec<_>>(), SINK_RETIRE, 0, nq, 1)?;
    let args = [
        KernelArg::U64(arr.addr()),
        KernelArg::U32(nq),
        KernelArg::U32(iters),
        KernelArg::U32(32),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(status.addr()),
    ];
    let name = format!("ibgda_post_warp_{}", S::NAME);
    let t = Instant::now();
    // SAFETY: (const DeviceQueueDescriptor*, u32, u32, u32, u64, u32, int*): the arguments
    // above; the queue pairs, array and status live past the sink's synchronize.
    unsafe { gpu.launch_raw(false, &name, cfg(blocks, 32), false, &args) }?;
    gpu.stream().synchronize().map_err(GpuError::from)?;
    let seconds = t.elapsed().as_secs_f64();
    let (stats, _) = sink.stop()?;
    let st = gpu.read_device(&status)?;
    let status = i32::from_ne_bytes(st[..4].try_into().expect("4"));
    if status != 0 || stats.bad_wqes + stats.bad_doorbells != 0 {
        return Err(BenchError::Invalid(format!(
            "{name}: status {status}, sink {stats:?}"
        )));
    }
    let wqes = u64::from(blocks) * 32 * u64::from(iters);
    Ok(RateRow {
        key: key.into(),
        description: format!(
            "{blocks} warp(s) x 32 lanes, {nq} QP(s), {blocks} SM(s), cooperative, batch 32"
        ),
        scope: S::NAME.into(),
        threads: 32,
        blocks,
        qps: nq,
        batch: 32,
        wqes,
        seconds,
        mwqe_per_s: wqes as f64 / seconds / 1e6,
    })
}

/// One thread, exclusive producer, `batch` WQEs per doorbell.
fn batch_rate<S>(
    gpu: &Gpu,
    key: &str,
    scope: S,
    batch: u32,
    rounds: u32,
) -> Result<RateRow, BenchError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let qp = gpu_queue_pair(gpu, 0x55, 4096, 1024, 1024, CqMode::Ring, scope)?;
    let q = qp.device_queue();
    let out = gpu.device_buffer(16)?;
    let sink = Sink::start(gpu, &[&qp], SINK_RETIRE, 0, 1, 1)?;
    let args = [
        KernelArg::Queue(KernelQueue::new(&q).into()),
        KernelArg::U32(rounds),
        KernelArg::U32(batch),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(out.addr()),
        KernelArg::U64(out.addr() + 8),
    ];
    let name = format!("ibgda_post_batch_{}", S::NAME);
    // SAFETY: (DeviceQueueDescriptor, u32, u32, u64, u32, u64*, int*): the arguments above.
    unsafe { gpu.launch_raw(false, &name, cfg(1, 1), false, &args) }?;
    gpu.stream().synchronize().map_err(GpuError::from)?;
    let (stats, _) = sink.stop()?;
    let o = gpu.read_device(&out)?;
    let ns = u64::from_ne_bytes(o[..8].try_into().expect("8"));
    let status = i32::from_ne_bytes(o[8..12].try_into().expect("4"));
    if status != 0 || stats.bad_wqes + stats.bad_doorbells != 0 {
        return Err(BenchError::Invalid(format!(
            "{name}: status {status}, sink {stats:?}"
        )));
    }
    let wqes = u64::from(batch) * u64::from(rounds);
    let seconds = ns as f64 * 1e-9;
    Ok(RateRow {
        key: key.into(),
        description: format!("1 thread, 1 QP, batch {batch} (exclusive)"),
        scope: S::NAME.into(),
        threads: 1,
        blocks: 1,
        qps: 1,
        batch,
        wqes,
        seconds,
        mwqe_per_s: wqes as f64 / seconds / 1e6,
    })
}

/// Runs every GPU experiment on GPU 0.
pub fn run(params: GpuParams, progress: &indicatif::ProgressBar) -> Result<GpuResult, BenchError> {
    // Every device wait gives up after 5 s instead of hanging; the bound costs one
    // %globaltimer read per wait-loop turn, never on the issue path.
    let options = CompileOptions::new().spin_limit(std::time::Duration::from_secs(5))?;
    let gpu = Gpu::open_with(0, &options)?;
    let iters = params.issue_iters;
    progress.set_length(14);
    progress.set_message("GPU: issue time per scope (typed and raw)");
    let mut issue = Vec::new();
    macro_rules! row {
        ($s:expr) => {
            issue.push(issue_row(&gpu, $s, iters)?);
            progress.inc(1);
        };
    }
    // SAFETY: benchmark queues on throw-away device memory read only by the sink.
    row!(unsafe { Unordered::new() });
    row!(GpuFence);
    row!(GpuFencedDbrec);
    row!(GpuReleaseStore);
    row!(ThreadFence);
    row!(SystemReleaseStore);
    row!(SystemFence);
    progress.set_message("GPU: posting rates");
    let r = params.rate_iters;
    let mut rates = Vec::new();
    rates.push(batch_rate(&gpu, "batch1", GpuFence, 1, r)?);
    progress.inc(1);
    rates.push(batch_rate(&gpu, "batch16", GpuFence, 16, r)?);
    progress.inc(1);
    rates.push(warp_rate(&gpu, "warp1", GpuFence, 1, 1, r)?);
    progress.inc(1);
    rates.push(warp_rate(&gpu, "warp64", GpuFence, 64, 64, r)?);
    progress.inc(1);
    rates.push(warp_rate(&gpu, "warp1_release", GpuReleaseStore, 1, 1, r)?);
    progress.inc(1);
    rates.push(warp_rate(
        &gpu,
        "warp64_release",
        GpuReleaseStore,
        64,
        64,
        r,
    )?);
    progress.inc(1);
    rates.push(warp_rate(&gpu, "warp8_qp1", GpuFence, 1, 8, r / 4)?);
    progress.inc(1);
    let clocks: Vec<f64> = issue
        .iter()
        .flat_map(|r| [r.typed.sm_clock_mhz, r.raw.sm_clock_mhz])
        .collect();
    Ok(GpuResult {
        params,
        sm_clock_mhz: clocks.iter().sum::<f64>() / clocks.len().max(1) as f64,
        issue,
        rates,
    })
}
