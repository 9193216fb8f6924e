//! The GPU experiments of `ibgda_kernels::experiments` (against the doorbell sink, no NIC),
//! run in one process and turned into plain rows with hdrhistogram percentiles: issue per
//! scope typed and raw (Table 4), completion scope (Figure 4), message rate (Table 5, the
//! batch sweep, warp placement), dormant cost (Figure 9); and, in their own run since the
//! peer's waits are unbounded, DOCA GPUNetIO's issue loop beside ibgda's (`peers`). The
//! library's own results, raw samples included, are kept as they serialize
//! (`gpu-raw.json`, `peers-raw.json`).

use ibgda::order::{GpuFence, GpuReleaseStore, Unordered};
use ibgda_kernels::experiments::completion;
use ibgda_kernels::experiments::dormant;
use ibgda_kernels::experiments::issue::{self, IssueResult, IssueRun, IssueShape, ShapeResult};
use ibgda_kernels::experiments::nic_rate;
use ibgda_kernels::experiments::peers;
use ibgda_kernels::experiments::rate::{self, Publication, RateResult};
use ibgda_kernels::experiments::{bench_options, gpu_hung, progress, BenchProgram};
use ibgda_kernels::gpu::{Gpu, GpuError};
use ibgda_kernels::harness::{SinkMode, SINK_RETIRE, SINK_RETIRE_TIGHT};
use serde::{Deserialize, Serialize};

use crate::stats::{Durations, Percentiles};
use crate::BenchError;

/// Sizes of the GPU experiments.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct GpuParams {
    /// Issue-time iterations per scope and variant (and for the peers).
    pub issue_iters: u32,
    /// Iterations per completion-scope point.
    pub completion_iters: u32,
    /// Multiplier of the rate rows' WQE counts.
    pub rate_scale: u32,
    /// Issue iterations per shape and variant (Table 3, Figure 3).
    #[serde(default)]
    pub shape_iters: u32,
}

impl Default for GpuParams {
    fn default() -> Self {
        Self {
            issue_iters: 20_000,
            completion_iters: 2_000,
            rate_scale: 1,
            shape_iters: 5_000,
        }
    }
}

/// One issue loop's times.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IssueSide {
    /// Issue time from %globaltimer (ns).
    pub issue_ns: Percentiles,
    /// Issue time in SM cycles (clock64), in the "ns" fields.
    pub issue_cycles: Percentiles,
    /// Issue through the sink's completion (ns): put+c against a sink, not a NIC.
    pub put_c_ns: Percentiles,
    /// SM clock over the run: clock64 cycles / %globaltimer ns (MHz).
    pub sm_clock_mhz: f64,
}

/// What the sink read stale after a doorbell (the control segment of a WQE whose bytes
/// had not all arrived): only the `Unordered` scope (no fence between the WQE stores and
/// the doorbell) and `GpuFence` (the doorbell record unordered with the WQE stores) may,
/// see `ibgda_kernels::experiments::tolerates_stale_wqes`; a measured finding, reported
/// as "stale WQEs seen: N of M".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleWqes {
    /// Control segments found stale.
    pub seen: u64,
    /// WQEs posted in the run (the sink checked every WQE in the issue and completion
    /// runs, one control segment per doorbell in the rate runs).
    pub of: u64,
}

/// A row (or a whole experiment) that failed: the run went on with the others.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FailedRow {
    /// "issue", "completion", "rate", "dormant", "dormant_registers" or "peers".
    pub experiment: String,
    /// The row (scope, label or point).
    pub row: String,
    /// Why.
    pub error: String,
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
    /// `Unordered` and `GpuFence` only: stale WQEs the sink saw, typed and raw together.
    #[serde(default)]
    pub stale_wqes: Option<StaleWqes>,
}

/// One operation's shape (Table 3's pointer WRITE, Figure 3's inline sweep, DC), GpuFence,
/// typed and raw.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShapeRow {
    /// The shape's label.
    pub label: String,
    /// "Inline", "Pointer", "DcCompact" or "DcFull".
    pub kind: String,
    /// Payload bytes.
    pub bytes: u32,
    /// Through the device library.
    pub typed: IssueSide,
    /// Hand-written.
    pub raw: IssueSide,
    /// Typed over raw p50 cycles (target 1.00 +- 0.02).
    pub typed_over_raw: f64,
}

/// One completion-scope point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompletionRow {
    /// The scope.
    pub scope: String,
    /// Queues configured.
    pub queues: u32,
    /// "OneQueue" (wait for the queue posted to) or "AllQueues" (quiet).
    pub wait: String,
    /// put+completion per iteration (ns).
    pub put_c_ns: Percentiles,
    /// SM clock (MHz).
    pub sm_clock_mhz: f64,
}

/// One posting-rate row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RateRow {
    /// What runs (the library's label).
    pub label: String,
    /// The scope.
    pub scope: String,
    /// "Exclusive", "PerThread" or "PerWarp".
    pub publication: String,
    /// Blocks.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
    /// Queue pairs.
    pub queues: u32,
    /// Warps sharing a queue.
    pub share: u32,
    /// WQEs per doorbell.
    pub batch: u32,
    /// WQEs posted.
    pub wqes: u64,
    /// Seconds.
    pub seconds: f64,
    /// Millions of WQEs per second.
    pub mwqe_per_s: f64,
    /// SM clock (MHz).
    pub sm_clock_mhz: f64,
    /// `Unordered` and `GpuFence` only: stale WQEs the sink saw.
    #[serde(default)]
    pub stale_wqes: Option<StaleWqes>,
    /// Doorbells the sink acted on.
    #[serde(default)]
    pub sink_doorbells: u64,
    /// The sink mode the row ran against ("Retire", or "RetireTight" and its variants
    /// for the same-run comparison).
    #[serde(default)]
    pub sink_mode: String,
    /// The most M WQE/s that sink mode lets this row reach: its measured capacity
    /// (doorbells per second per queue, the sink capacity row) times the row's queues
    /// and WQEs per doorbell. `None` when not measured.
    #[serde(default)]
    pub sink_bound_mwqe_per_s: Option<f64>,
}

impl RateRow {
    /// The fraction of the sink's capacity the row used (`mwqe_per_s` over the bound).
    pub fn sink_share(&self) -> Option<f64> {
        self.sink_bound_mwqe_per_s
            .filter(|b| *b > 0.0)
            .map(|b| self.mwqe_per_s / b)
    }
}

/// A row is taken as bounded by the sink when it reaches this fraction of the sink's
/// capacity for its shape.
pub const SINK_BOUND_SHARE: f64 = 0.8;

/// The sink alone over pre-built WQEs and doorbells, no producer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SinkCapacityRow {
    /// "Retire" or "RetireTight".
    pub mode: String,
    /// Queues, one sink thread each (as the rate rows launch it).
    pub queues: u32,
    /// Doorbells per queue.
    pub doorbells: u32,
    /// Doorbells per second of the slowest queue's thread.
    pub doorbells_per_s_per_queue: f64,
    /// Doorbells per second over all queues.
    pub doorbells_per_s: f64,
    /// ns per doorbell of the slowest queue's thread.
    pub ns_per_doorbell: f64,
}

/// The CUDA software NIC over pre-posted rings: one operation on some engines.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NicRateRow {
    /// The operation's label.
    pub op: String,
    /// Engines (one block, on its own SM, each).
    pub engines: u32,
    /// Queues in all.
    pub queues: u32,
    /// WQEs executed.
    pub wqes: u64,
    /// Millions of WQEs executed per second (the slowest engine's time).
    pub mwqe_per_s: f64,
    /// SM clock of the slowest engine, MHz.
    pub sm_clock_mhz: f64,
}

/// ptxas's report for one dormant-cost variant.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RegisterRow {
    /// "Compute" or "Streaming".
    pub caller: String,
    /// "Plain", "Inlined" or "Call".
    pub build: String,
    /// Registers per thread.
    pub registers: u32,
    /// Stack bytes.
    pub stack_bytes: u32,
    /// Spill stores.
    pub spill_stores: u32,
    /// Spill loads.
    pub spill_loads: u32,
    /// Blocks per SM at the paper's launch shape.
    pub blocks_per_sm: u32,
}

/// One dormant-cost point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DormantRow {
    /// "Compute" or "Streaming".
    pub caller: String,
    /// "Plain", "Inlined" or "Call".
    pub build: String,
    /// Blocks launched (528, or eight per SM for the streaming caller's wide launch).
    #[serde(default)]
    pub blocks: u32,
    /// ptxas registers per thread of the build that ran (the run's compile options).
    #[serde(default)]
    pub registers: u32,
    /// Messages per block.
    pub messages: u32,
    /// Whether the kernel waits for its messages.
    pub wait: bool,
    /// Kernel time per repetition (ns).
    pub ns: Percentiles,
    /// Block 0's SM clock per repetition (MHz), in run order: the clock each time was
    /// taken at.
    #[serde(default)]
    pub sm_mhz: Vec<f64>,
    /// Loss against the plain kernel at the median repetition (fraction).
    pub loss: f64,
}

/// The GPU experiments' result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuResult {
    /// Sizes.
    pub params: GpuParams,
    /// Mean SM clock over the issue runs (MHz).
    pub sm_clock_mhz: f64,
    /// Table 4.
    pub issue: Vec<IssueRow>,
    /// Table 3's pointer WRITE, Figure 3's inline sweep, DC beside RC.
    #[serde(default)]
    pub shapes: Vec<ShapeRow>,
    /// Completion scope.
    pub completion: Vec<CompletionRow>,
    /// Table 5 and the sweeps.
    pub rates: Vec<RateRow>,
    /// The sink's own capacity (no producer), as the rate rows run it and in its tight mode.
    #[serde(default)]
    pub sink_capacity: Vec<SinkCapacityRow>,
    /// The CUDA software NIC's own throughput (no producer beside it).
    #[serde(default)]
    pub nic_rate: Vec<NicRateRow>,
    /// ptxas registers of the dormant-cost variants.
    pub dormant_registers: Vec<RegisterRow>,
    /// Dormant cost.
    pub dormant: Vec<DormantRow>,
    /// Rows that failed (each with why); the others ran.
    #[serde(default)]
    pub failed: Vec<FailedRow>,
}

/// The peers' side-by-side result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeersResult {
    /// Iterations per loop.
    pub iterations: u32,
    /// ibgda typed [GpuFence].
    pub ibgda_typed: IssueSide,
    /// ibgda raw [GpuFence].
    pub ibgda_raw: IssueSide,
    /// DOCA GPUNetIO's device verbs on the same queue memory and sink (absent when its
    /// run failed: see `doca_error`).
    pub doca: Option<IssueSide>,
    /// Why DOCA's run failed (compile, a timeout of its wait, a bad status), if it did.
    #[serde(default)]
    pub doca_error: Option<String>,
    /// DOCA's queue struct size (bytes).
    pub doca_qp_struct_bytes: u32,
    /// DOCA WQEs ibgda examined.
    pub doca_wqes_examined: usize,
    /// Of which ibgda's parser accepted.
    pub doca_wqes_parsed: usize,
    /// What the parser refused (findings to explain).
    pub doca_parse_errors: Vec<String>,
    /// Bytes where DOCA's WQEs differ from ibgda's encoding (findings to explain).
    pub doca_byte_differences: Vec<String>,
    /// NVSHMEM's IBGDA device path (compiled with nvcc), same queue memory (with a collapsed
    /// CQ, NVSHMEM's kind) and sink.
    #[serde(default)]
    pub nvshmem: Option<PeerRow>,
}

/// One peer's row of the side-by-side run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeerRow {
    /// Its issue loop (absent when its run failed: see `error`).
    pub run: Option<IssueSide>,
    /// Why its run failed (compile, a timeout of its wait, a bad status), if it did.
    pub error: Option<String>,
    /// Its queue struct size (bytes).
    pub qp_struct_bytes: u32,
    /// What the doorbell sink counted serving it (a bad WQE or doorbell is a finding).
    pub sink: String,
    /// Its WQEs ibgda examined.
    pub wqes_examined: usize,
    /// Of which ibgda's parser accepted.
    pub wqes_parsed: usize,
    /// What the parser refused (findings to explain).
    pub parse_errors: Vec<String>,
    /// Bytes where its WQEs differ from ibgda's encoding (findings to explain).
    pub byte_differences: Vec<String>,
}

fn peer_row(r: &Result<peers::PeerResult, GpuError>) -> Result<PeerRow, BenchError> {
    Ok(match r {
        Ok(p) => PeerRow {
            run: Some(side(&p.run)?),
            error: None,
            qp_struct_bytes: p.qp_struct_bytes,
            sink: format!("{:?}", p.sink),
            wqes_examined: p.wqes.examined,
            wqes_parsed: p.wqes.parsed,
            parse_errors: p.wqes.parse_errors.clone(),
            byte_differences: p
                .wqes
                .differences
                .iter()
                .map(|d| format!("{d:?}"))
                .collect(),
        },
        Err(e) => PeerRow {
            run: None,
            error: Some(e.to_string()),
            qp_struct_bytes: 0,
            sink: String::new(),
            wqes_examined: 0,
            wqes_parsed: 0,
            parse_errors: Vec::new(),
            byte_differences: Vec::new(),
        },
    })
}

fn summary(values: &[u64]) -> Result<Percentiles, BenchError> {
    let mut d = Durations::new();
    for &v in values {
        d.record_nanos(v as f64).map_err(BenchError::msg)?;
    }
    Ok(d.summary())
}

fn side(run: &IssueRun) -> Result<IssueSide, BenchError> {
    Ok(IssueSide {
        issue_ns: summary(&run.issue_ns)?,
        issue_cycles: summary(&run.issue_cycles)?,
        put_c_ns: summary(&run.put_c_ns)?,
        sm_clock_mhz: run.sm_mhz,
    })
}

fn issue_row(r: &IssueResult) -> Result<IssueRow, BenchError> {
    let (typed, raw) = (side(&r.typed)?, side(&r.raw)?);
    let posted = 2 * (u64::from(r.iterations) + u64::from(issue::WARMUP));
    Ok(IssueRow {
        scope: r.scope.into(),
        typed_over_raw: typed.issue_cycles.p50 / raw.issue_cycles.p50.max(1.0),
        typed,
        raw,
        stale_wqes: ibgda_kernels::experiments::scope_tolerates_stale_wqes(r.scope).then_some(
            StaleWqes {
                seen: r.typed.stale_wqes + r.raw.stale_wqes,
                of: posted,
            },
        ),
    })
}

fn rate_row(
    label: String,
    r: &RateResult,
    sink_mode: SinkMode,
    capacity: &[rate::SinkCapacityRow],
) -> RateRow {
    let c = &r.config;
    let mode = format!("{sink_mode:?}");
    RateRow {
        sink_doorbells: r.sink_doorbells,
        sink_bound_mwqe_per_s: rate::sink_bound_mwqe_per_s(
            r,
            capacity,
            &format!("{:?}", sink_mode.capacity_mode()),
        ),
        sink_mode: mode,
        label,
        scope: r.scope.into(),
        publication: format!("{:?}", c.publication),
        blocks: c.blocks,
        threads: c.threads,
        queues: c.queues,
        share: c.share,
        batch: c.batch,
        wqes: r.wqes,
        seconds: r.ns as f64 * 1e-9,
        mwqe_per_s: r.mwqe_per_s,
        sm_clock_mhz: r.sm_mhz,
        stale_wqes: ibgda_kernels::experiments::scope_tolerates_stale_wqes(r.scope).then_some(
            StaleWqes {
                seen: r.stale_wqes,
                of: r.wqes,
            },
        ),
    }
}

fn to_json<T: Serialize>(value: &T) -> Result<serde_json::Value, BenchError> {
    serde_json::to_value(value).map_err(BenchError::msg)
}

/// The rows of one GPU run: each row's result or error, in order.
struct Rows {
    failed: Vec<FailedRow>,
    /// A launch timed out with the kernel possibly still running: nothing more may run.
    hung: bool,
}

impl Rows {
    /// Runs `f` for row `row` of `experiment` unless the GPU is hung, printing progress;
    /// records its error and returns its value.
    fn run<T>(
        &mut self,
        experiment: &str,
        row: &str,
        f: impl FnOnce() -> Result<T, GpuError>,
    ) -> Option<T> {
        if self.hung {
            self.failed.push(FailedRow {
                experiment: experiment.into(),
                row: row.into(),
                error: "not run: an earlier launch timed out and may still run".into(),
            });
            return None;
        }
        progress(&format!("GPU: {experiment}: {row}"));
        self.outcome(experiment, row, f())
    }

    /// Records `result`'s error for row `row` of `experiment`.
    fn outcome<T>(
        &mut self,
        experiment: &str,
        row: &str,
        result: Result<T, GpuError>,
    ) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                progress(&format!("GPU: {experiment}: {row}: FAILED: {e}"));
                self.hung |= gpu_hung(&e);
                self.failed.push(FailedRow {
                    experiment: experiment.into(),
                    row: row.into(),
                    error: e.to_string(),
                });
                None
            }
        }
    }
}

/// The rate rows (label starts) also run against the tight sink (`SinkMode::RetireTight`:
/// its per-doorbell cost cut, the default before the H200 showed it slowing the producers
/// beside it), in the same run.
const SINK_TIGHT_ROWS: [&str; 5] = [
    "1 thread, 1 QP, batch 16",
    "32 threads, 1 QP, per-warp, batch 32 (paper 21.6)",
    "64 threads, 64 QPs, 64 SMs, batch 16",
    "64 warps, 64 QPs, 64 SMs, per-warp, batch 32 (target 1500)",
    "placement: 128 warps, 128 QPs, 64 SMs x 2 warps",
];

/// The rate rows (label starts) run again against each variant of the tight sink that
/// undoes one of its idle-pass properties: which one slows the producers beside it.
const SINK_VARIANT_ROWS: [&str; 2] = [
    "64 warps, 64 QPs, 64 SMs, per-warp, batch 32 (target 1500)",
    "no reuse: 64 warps, 64 QPs, 64 SMs, per-warp, batch 32",
];

/// The tight sink's variants and their row notes.
const SINK_VARIANTS: [(SinkMode, &str); 3] = [
    (SinkMode::TightPaused, "tight sink, idle polls paused"),
    (SinkMode::TightAcquire, "tight sink, acquire polls"),
    (
        SinkMode::TightTimedStop,
        "tight sink, stop flag read by time",
    ),
];

/// The pause of the frontier-backoff variant (ns).
const FRONTIER_BACKOFF_NS: u32 = 64;

/// The rate rows (label starts) run again with the frontier wait backing off.
const FRONTIER_BACKOFF_ROWS: [&str; 4] = [
    "32 threads, 1 QP, per-thread, batch 1",
    "256 threads, 1 QP, per-thread, batch 32",
    "256 threads, 1 QP, per-warp, batch 32",
    "4096 threads, 16 QPs, 16 SMs, per-warp, batch 32",
];

/// Runs every GPU experiment on GPU 0; returns the rows (a failing row is listed in
/// `failed` and the others still run) and the library's raw results. Only opening the
/// GPU and compiling the benchmark program fail the whole run.
pub fn run(
    params: GpuParams,
    progress_bar: &indicatif::ProgressBar,
) -> Result<(GpuResult, serde_json::Value), BenchError> {
    progress("GPU: opening GPU 0 and compiling the device library");
    let gpu = Gpu::open_with(0, &bench_options()?)?;
    progress("GPU: compiling bench_experiments.cu");
    let program = BenchProgram::load(&gpu)?;
    let configs = rate::table5(params.rate_scale);
    progress_bar.set_length(7 + configs.len() as u64 + 6);
    let mut rows = Rows {
        failed: Vec::new(),
        hung: false,
    };
    progress_bar.set_message("GPU: issue per scope, typed and raw (Table 4)");
    let mut issue: Vec<IssueResult> = Vec::new();
    for (scope, result) in issue::run_all(&gpu, params.issue_iters) {
        issue.extend(rows.outcome("issue", scope, result));
    }
    progress_bar.inc(1);
    progress_bar.set_message("GPU: one operation's shapes (Table 3, Figure 3)");
    let mut shapes: Vec<ShapeResult> = Vec::new();
    for shape in issue::shapes() {
        let label = shape.label();
        if let Some(r) = rows.run("shape", &label, || {
            issue::run_shape(&gpu, shape, params.shape_iters)
        }) {
            shapes.push(r);
        }
    }
    progress_bar.inc(1);
    progress_bar.set_message("GPU: completion scope");
    let mut completion = Vec::new();
    if rows.hung {
        rows.run("completion", "every point", || Ok(()));
    } else {
        for (queues, wait, result) in
            // SAFETY: the benchmark's throw-away queues, executed by the sink.
            completion::sweep(
                &gpu,
                &program,
                unsafe { GpuFence::new() },
                params.completion_iters,
            )
        {
            let row = format!("{queues} queues {wait:?}");
            completion.extend(rows.outcome("completion", &row, result));
        }
    }
    progress_bar.inc(1);

    progress_bar.set_message("GPU: sink capacity (no producer)");
    let capacity = rows
        .run(
            "sink capacity",
            "every queue count, both sink modes",
            || rate::sink_capacity_rows(&gpu, rate::SINK_CAPACITY_DOORBELLS),
        )
        .unwrap_or_default();
    progress_bar.inc(1);

    progress_bar.set_message("GPU: message rate (Table 5, sweeps)");
    let mut rates: Vec<(String, RateResult, SinkMode)> = Vec::new();
    for (label, c) in configs {
        let label = if label.starts_with("batch sweep") {
            format!("{label}, batch {}", c.batch)
        } else {
            label.to_string()
        };
        let row = format!("{label} [GpuFence]");
        // SAFETY: the benchmark's throw-away queues; the sink counts stale WQEs as a finding.
        let scope = unsafe { GpuFence::new() };
        if let Some(r) = rows.run("rate", &row, || rate::run(&gpu, &program, scope, c)) {
            rates.push((label.clone(), r, SINK_RETIRE));
        }
        // The same row against the tight sink (the A/B of the sink's own cost).
        if SINK_TIGHT_ROWS.iter().any(|p| label.starts_with(p)) {
            let label = format!("{label} (tight sink)");
            let row = format!("{label} [GpuFence]");
            if let Some(r) = rows.run("rate", &row, || {
                rate::run_with_sink(&gpu, &program, scope, c, SINK_RETIRE_TIGHT)
            }) {
                rates.push((label, r, SINK_RETIRE_TIGHT));
            }
        }
        if SINK_VARIANT_ROWS.iter().any(|p| label.starts_with(p)) {
            for (mode, note) in SINK_VARIANTS {
                let label = format!("{label} ({note})");
                let row = format!("{label} [GpuFence]");
                if let Some(r) = rows.run("rate", &row, || {
                    rate::run_with_sink(&gpu, &program, scope, c, mode)
                }) {
                    rates.push((label, r, mode));
                }
            }
        }
        progress_bar.inc(1);
    }
    // The shared rows whose threads wait for each other's publication, again with the
    // frontier wait pausing between polls (a program compiled with the pause).
    if let Some(backoff) = rows.outcome(
        "rate",
        "frontier backoff program",
        BenchProgram::load_with_frontier_backoff(&gpu, FRONTIER_BACKOFF_NS),
    ) {
        for (label, c) in rate::table5(params.rate_scale) {
            if !FRONTIER_BACKOFF_ROWS.iter().any(|p| label.starts_with(p)) {
                continue;
            }
            let label = format!("{label} (frontier backoff {FRONTIER_BACKOFF_NS} ns)");
            let row = format!("{label} [GpuFence]");
            // SAFETY: the benchmark's throw-away queues; the sink counts stale WQEs.
            let scope = unsafe { GpuFence::new() };
            if let Some(r) = rows.run("rate", &row, || rate::run(&gpu, &backoff, scope, c)) {
                rates.push((label, r, SINK_RETIRE));
            }
        }
    }
    let rounds = 20_000 * params.rate_scale.max(1);
    let coop_one = rate::config(Publication::PerWarp, 1, 32, 1, 1, 32, rounds);
    let coop_64 = rate::config(Publication::PerWarp, 64, 32, 64, 1, 32, rounds);
    // The cooperative rows in one launch (the sink in the last block): the profiler's form.
    for (c, what) in [(coop_one, "1 warp, 1 QP"), (coop_64, "64 warps, 64 QPs")] {
        let label = format!("one launch: {what}, per-warp, batch 32");
        let row = format!("{label} [GpuFence]");
        if let Some(r) = rows.run("rate", &row, || rate::run_one_launch(&gpu, &program, c)) {
            rates.push((label, r, SINK_RETIRE));
        }
        progress_bar.inc(1);
    }
    // The cooperative rows under two other scopes.
    for (c, what) in [(coop_one, "1 warp, 1 QP"), (coop_64, "64 warps, 64 QPs")] {
        let label = format!("{what}, per-warp, batch 32");
        let row = format!("{label} [GpuReleaseStore]");
        if let Some(r) = rows.run("rate", &row, || {
            rate::run(&gpu, &program, GpuReleaseStore, c)
        }) {
            rates.push((label.clone(), r, SINK_RETIRE));
        }
        progress_bar.inc(1);
        let row = format!("{label} [Unordered]");
        // SAFETY: benchmark queues on throw-away device memory read only by the sink.
        let unordered = unsafe { Unordered::new() };
        if let Some(r) = rows.run("rate", &row, || rate::run(&gpu, &program, unordered, c)) {
            rates.push((label, r, SINK_RETIRE));
        }
        progress_bar.inc(1);
    }

    progress_bar.set_message("GPU: CUDA software NIC throughput");
    let nic_rates = rows
        .run("nic rate", "every operation, one SM and all", || {
            nic_rate::run_all(&gpu)
        })
        .unwrap_or_default();
    progress_bar.inc(1);

    progress_bar.set_message("GPU: dormant cost (Figure 9)");
    // NVRTC only: runs even when the GPU is hung.
    progress("GPU: dormant_registers: ptxas reports of the three builds");
    let registers = rows
        .outcome("dormant_registers", "every build", dormant::registers())
        .unwrap_or_default();
    let dormant = rows
        .run("dormant", "every point", || {
            dormant::run(&gpu, dormant::Work::default())
        })
        .unwrap_or_default();
    progress_bar.inc(1);

    let raw = serde_json::json!({
        "issue": to_json(&issue)?,
        "completion": to_json(&completion)?,
        "shapes": to_json(&shapes)?,
        "rates": to_json(&rates.iter().map(|(l, r, _)| (l, r)).collect::<Vec<_>>())?,
        "sink_capacity": to_json(&capacity)?,
        "nic_rate": to_json(&nic_rates)?,
        "dormant_registers": to_json(&registers)?,
        "dormant": to_json(&dormant)?,
        "failed": to_json(&rows.failed)?,
    });
    let issue: Vec<IssueRow> = issue.iter().map(issue_row).collect::<Result<_, _>>()?;
    let shapes: Vec<ShapeRow> = shapes
        .iter()
        .map(|r| {
            let (typed, raw) = (side(&r.typed)?, side(&r.raw)?);
            let (kind, bytes) = match r.shape {
                IssueShape::Inline(n) => ("Inline", n),
                IssueShape::Pointer(n) => ("Pointer", n),
                IssueShape::DcCompact => ("DcCompact", 8),
                IssueShape::DcFull => ("DcFull", 8),
            };
            Ok(ShapeRow {
                label: r.shape.label(),
                kind: kind.into(),
                bytes,
                typed_over_raw: typed.issue_cycles.p50 / raw.issue_cycles.p50.max(1.0),
                typed,
                raw,
            })
        })
        .collect::<Result<_, BenchError>>()?;
    let clocks: Vec<f64> = issue
        .iter()
        .flat_map(|r| [r.typed.sm_clock_mhz, r.raw.sm_clock_mhz])
        .collect();
    let result = GpuResult {
        params,
        sm_clock_mhz: clocks.iter().sum::<f64>() / clocks.len().max(1) as f64,
        issue,
        shapes,
        completion: completion
            .iter()
            .map(|c| {
                Ok(CompletionRow {
                    scope: c.scope.into(),
                    queues: c.queues,
                    wait: format!("{:?}", c.wait),
                    put_c_ns: summary(&c.put_c_ns)?,
                    sm_clock_mhz: c.sm_mhz,
                })
            })
            .collect::<Result<_, BenchError>>()?,
        rates: rates
            .iter()
            .map(|(l, r, m)| rate_row(l.clone(), r, *m, &capacity))
            .collect(),
        sink_capacity: capacity
            .iter()
            .map(|c| SinkCapacityRow {
                mode: c.mode.clone(),
                queues: c.queues,
                doorbells: c.doorbells,
                doorbells_per_s_per_queue: c.doorbells_per_s_per_queue,
                doorbells_per_s: c.doorbells_per_s,
                ns_per_doorbell: c.ns_per_doorbell,
            })
            .collect(),
        nic_rate: nic_rates
            .iter()
            .map(|r| NicRateRow {
                op: r.op.label().into(),
                engines: r.engines,
                queues: r.queues,
                wqes: r.wqes,
                mwqe_per_s: r.mwqe_per_s,
                sm_clock_mhz: r.sm_mhz,
            })
            .collect(),
        dormant_registers: registers
            .iter()
            .map(|r| RegisterRow {
                caller: format!("{:?}", r.caller),
                build: format!("{:?}", r.build),
                registers: r.registers,
                stack_bytes: r.stack_bytes,
                spill_stores: r.spill_stores,
                spill_loads: r.spill_loads,
                blocks_per_sm: r.blocks_per_sm,
            })
            .collect(),
        dormant: dormant
            .iter()
            .map(|p| {
                Ok(DormantRow {
                    caller: format!("{:?}", p.caller),
                    build: format!("{:?}", p.build),
                    blocks: p.blocks,
                    registers: p.registers,
                    messages: p.messages,
                    wait: p.wait,
                    ns: summary(&p.ns)?,
                    sm_mhz: p.sm_mhz.clone(),
                    loss: p.loss,
                })
            })
            .collect::<Result<_, BenchError>>()?,
        failed: rows.failed,
    };
    if rows.hung {
        // A kernel may still run: destroying the context could wait for it forever.
        std::mem::forget(program);
        std::mem::forget(gpu);
    }
    Ok((result, raw))
}

/// Which peers `ibgda-bench peers` runs beside ibgda.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerSet {
    /// DOCA GPUNetIO, then NVSHMEM.
    Both,
    /// DOCA GPUNetIO only.
    Doca,
    /// NVSHMEM only.
    Nvshmem,
}

/// The peers of `set` (DOCA GPUNetIO's issue loop, NVSHMEM's) beside ibgda typed and raw,
/// same queue memory and sink. ibgda's rows fail the run; a peer's failure is recorded in
/// its row (the run then counts as failed, see [`PeersResult::failed`]) with ibgda's rows
/// kept. A peer not in `set` is absent from the result, not failed.
pub fn run_peers(
    iters: u32,
    progress_bar: &indicatif::ProgressBar,
    set: PeerSet,
) -> Result<(PeersResult, serde_json::Value), BenchError> {
    progress("peers: opening GPU 0 and compiling the device library");
    let gpu = Gpu::open_with(0, &bench_options()?)?;
    progress_bar.set_length(2);
    progress_bar.set_message("GPU: ibgda issue loop [GpuFence]");
    progress("peers: ibgda issue loop [GpuFence], typed and raw");
    // SAFETY: the peers' issue loop on throw-away queues, executed by the sink.
    let ibgda = issue::run(&gpu, unsafe { GpuFence::new() }, iters)?;
    for (what, r) in [("typed", &ibgda.typed), ("raw", &ibgda.raw)] {
        let s = side(r)?;
        progress(&format!(
            "peers: ibgda {what}: issue p50 {:.0} ns ({:.0} cycles), put+c p50 {:.0} ns, SM {:.0} MHz",
            s.issue_ns.p50, s.issue_cycles.p50, s.put_c_ns.p50, s.sm_clock_mhz
        ));
    }
    progress_bar.inc(1);
    let doca = (set != PeerSet::Nvshmem).then(|| {
        progress_bar.set_message("GPU: DOCA GPUNetIO issue loop");
        let doca = peers::run_doca(&gpu, iters);
        progress_bar.inc(1);
        doca
    });
    let doca_hung = doca
        .as_ref()
        .is_some_and(|d| d.as_ref().is_err_and(gpu_hung));
    // After a peer left a kernel running, nothing else may run on this context.
    let nvshmem = (set != PeerSet::Doca).then(|| {
        if doca_hung {
            Err(GpuError::Invalid(
                "not run: DOCA's kernel may still run".into(),
            ))
        } else {
            progress_bar.set_message("GPU: NVSHMEM IBGDA issue loop");
            peers::run_nvshmem(&gpu, iters)
        }
    });
    if let Some(Err(e)) = &nvshmem {
        progress(&format!("peers: NVSHMEM FAILED: {e}"));
    }
    let raw_of =
        |r: &Result<peers::PeerResult, GpuError>| -> Result<serde_json::Value, BenchError> {
            Ok(match r {
                Ok(d) => to_json(d)?,
                Err(e) => serde_json::json!({ "error": e.to_string() }),
            })
        };
    let not_run = serde_json::Value::Null;
    let raw = serde_json::json!({
        "ibgda": to_json(&ibgda)?,
        "doca": doca.as_ref().map_or(Ok(not_run.clone()), raw_of)?,
        "nvshmem": nvshmem.as_ref().map_or(Ok(not_run), raw_of)?,
    });
    let nvshmem_row = nvshmem.as_ref().map(peer_row).transpose()?;
    let hung = doca_hung
        || nvshmem
            .as_ref()
            .is_some_and(|n| n.as_ref().is_err_and(gpu_hung));
    let (doca, doca_error) = match doca {
        Some(Ok(d)) => (Some(d), None),
        Some(Err(e)) => {
            progress(&format!("peers: DOCA FAILED: {e}"));
            (None, Some(e.to_string()))
        }
        None => (None, None),
    };
    let result = PeersResult {
        iterations: iters,
        ibgda_typed: side(&ibgda.typed)?,
        ibgda_raw: side(&ibgda.raw)?,
        doca: doca.as_ref().map(|d| side(&d.run)).transpose()?,
        doca_error,
        doca_qp_struct_bytes: doca.as_ref().map_or(0, |d| d.qp_struct_bytes),
        doca_wqes_examined: doca.as_ref().map_or(0, |d| d.wqes.examined),
        doca_wqes_parsed: doca.as_ref().map_or(0, |d| d.wqes.parsed),
        doca_parse_errors: doca
            .as_ref()
            .map(|d| d.wqes.parse_errors.clone())
            .unwrap_or_default(),
        doca_byte_differences: doca
            .as_ref()
            .map(|d| {
                d.wqes
                    .differences
                    .iter()
                    .map(|d| format!("{d:?}"))
                    .collect()
            })
            .unwrap_or_default(),
        nvshmem: nvshmem_row,
    };
    if hung {
        // DOCA's kernel may still run: destroying the context could wait for it forever.
        std::mem::forget(gpu);
    }
    Ok((result, raw))
}

impl PeersResult {
    /// Whether a part of the run failed (a peer's).
    pub fn failed(&self) -> bool {
        self.doca_error.is_some() || self.nvshmem.as_ref().is_some_and(|n| n.error.is_some())
    }
}

impl GpuResult {
    /// Whether a row failed.
    pub fn failed(&self) -> bool {
        !self.failed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibgda::order::OrderingScope;

    #[test]
    fn a_failing_row_is_recorded_and_the_others_still_run() {
        let mut rows = Rows {
            failed: Vec::new(),
            hung: false,
        };
        let mut ran = Vec::new();
        for i in 0..3u32 {
            let v = rows.run("rate", &format!("row {i}"), || {
                ran.push(i);
                if i == 1 {
                    Err(GpuError::Invalid("status -5".into()))
                } else {
                    Ok(i * 10)
                }
            });
            assert_eq!(v, (i != 1).then_some(i * 10));
        }
        assert_eq!(ran, [0, 1, 2]);
        assert_eq!(rows.failed.len(), 1);
        assert_eq!(
            (
                rows.failed[0].experiment.as_str(),
                rows.failed[0].row.as_str()
            ),
            ("rate", "row 1")
        );
        assert!(rows.failed[0].error.contains("status -5"));
        assert!(!rows.hung);
    }

    #[test]
    fn after_a_launch_left_running_no_row_runs() {
        let mut rows = Rows {
            failed: Vec::new(),
            hung: false,
        };
        let timeout = GpuError::Timeout {
            what: "rate".into(),
            limit: std::time::Duration::from_secs(30),
            still_running: true,
        };
        assert_eq!(rows.run("rate", "a", || Err::<(), _>(timeout)), None);
        assert!(rows.hung);
        let mut ran = false;
        assert_eq!(
            rows.run("dormant", "b", || {
                ran = true;
                Ok(())
            }),
            None
        );
        assert!(!ran, "a row ran beside a kernel that may still run");
        assert_eq!(rows.failed.len(), 2);
        assert!(rows.failed[1].error.starts_with("not run"));
        // A wait the device-side watchdog ended leaves the GPU usable.
        let mut rows = Rows {
            failed: Vec::new(),
            hung: false,
        };
        let watchdog = GpuError::Timeout {
            what: "DOCA".into(),
            limit: std::time::Duration::from_secs(5),
            still_running: false,
        };
        assert_eq!(rows.run("peers", "doca", || Err::<(), _>(watchdog)), None);
        assert!(!rows.hung);
        assert_eq!(rows.run("rate", "next", || Ok(7)), Some(7));
    }

    #[test]
    fn stale_wqes_are_reported_only_for_unordered_and_gpu_fence() {
        let c = rate::config(Publication::PerWarp, 64, 32, 64, 1, 32, 20_000);
        let result = |scope: &'static str, stale_wqes| RateResult {
            scope,
            config: c,
            wqes: c.total_wqes(),
            ns: 1,
            mwqe_per_s: 1.0,
            sm_mhz: 1980.0,
            sink_doorbells: 1,
            sink_cqes: 1,
            sink_wqebbs: c.total_wqes(),
            never_wraps: false,
            stale_wqes,
        };
        let row = rate_row("x".into(), &result(Unordered::NAME, 2), SINK_RETIRE, &[]);
        assert_eq!(
            row.stale_wqes,
            Some(StaleWqes {
                seen: 2,
                of: 40_960_000
            })
        );
        assert_eq!(
            rate_row("x".into(), &result(GpuFence::NAME, 3), SINK_RETIRE, &[]).stale_wqes,
            Some(StaleWqes {
                seen: 3,
                of: 40_960_000
            })
        );
        assert_eq!(
            rate_row(
                "x".into(),
                &result(ibgda::order::GpuFencedDbrec::NAME, 0),
                SINK_RETIRE,
                &[]
            )
            .stale_wqes,
            None
        );
    }
}
