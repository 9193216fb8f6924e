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
use ibgda_kernels::experiments::issue::{self, IssueResult, IssueRun};
use ibgda_kernels::experiments::peers;
use ibgda_kernels::experiments::rate::{self, Publication, RateResult};
use ibgda_kernels::experiments::{bench_options, BenchProgram};
use ibgda_kernels::gpu::Gpu;
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
}

impl Default for GpuParams {
    fn default() -> Self {
        Self {
            issue_iters: 20_000,
            completion_iters: 2_000,
            rate_scale: 1,
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
    /// Messages per block.
    pub messages: u32,
    /// Whether the kernel waits for its messages.
    pub wait: bool,
    /// Kernel time per repetition (ns).
    pub ns: Percentiles,
    /// Loss against the plain kernel (fraction).
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
    /// Completion scope.
    pub completion: Vec<CompletionRow>,
    /// Table 5 and the sweeps.
    pub rates: Vec<RateRow>,
    /// ptxas registers of the dormant-cost variants.
    pub dormant_registers: Vec<RegisterRow>,
    /// Dormant cost.
    pub dormant: Vec<DormantRow>,
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
    /// DOCA GPUNetIO's device verbs on the same queue memory and sink.
    pub doca: IssueSide,
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
    Ok(IssueRow {
        scope: r.scope.into(),
        typed_over_raw: typed.issue_cycles.p50 / raw.issue_cycles.p50.max(1.0),
        typed,
        raw,
    })
}

fn rate_row(label: String, r: &RateResult) -> RateRow {
    let c = &r.config;
    RateRow {
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
    }
}

fn to_json<T: Serialize>(value: &T) -> Result<serde_json::Value, BenchError> {
    serde_json::to_value(value).map_err(BenchError::msg)
}

/// Runs every GPU experiment on GPU 0; returns the rows and the library's raw results.
pub fn run(
    params: GpuParams,
    progress: &indicatif::ProgressBar,
) -> Result<(GpuResult, serde_json::Value), BenchError> {
    let gpu = Gpu::open_with(0, &bench_options()?)?;
    let program = BenchProgram::load(&gpu)?;
    let configs = rate::table5(params.rate_scale);
    progress.set_length(4 + configs.len() as u64 + 6);
    progress.set_message("GPU: issue per scope, typed and raw (Table 4)");
    let issue = issue::run_all(&gpu, params.issue_iters)?;
    progress.inc(1);
    progress.set_message("GPU: completion scope");
    let completion = completion::sweep(&gpu, &program, GpuFence, params.completion_iters)?;
    progress.inc(1);

    progress.set_message("GPU: message rate (Table 5, sweeps)");
    let mut rates: Vec<(String, RateResult)> = Vec::new();
    for (label, c) in configs {
        let label = if label.starts_with("batch sweep") {
            format!("{label}, batch {}", c.batch)
        } else {
            label.to_string()
        };
        rates.push((label, rate::run(&gpu, &program, GpuFence, c)?));
        progress.inc(1);
    }
    let rounds = 20_000 * params.rate_scale.max(1);
    let coop_one = rate::config(Publication::PerWarp, 1, 32, 1, 1, 32, rounds);
    let coop_64 = rate::config(Publication::PerWarp, 64, 32, 64, 1, 32, rounds);
    // The cooperative rows in one launch (the sink in the last block): the profiler's form.
    for (c, what) in [(coop_one, "1 warp, 1 QP"), (coop_64, "64 warps, 64 QPs")] {
        let label = format!("one launch: {what}, per-warp, batch 32");
        rates.push((label, rate::run_one_launch(&gpu, &program, c)?));
        progress.inc(1);
    }
    // The cooperative rows under two other scopes.
    for (c, what) in [(coop_one, "1 warp, 1 QP"), (coop_64, "64 warps, 64 QPs")] {
        let label = format!("{what}, per-warp, batch 32");
        rates.push((
            label.clone(),
            rate::run(&gpu, &program, GpuReleaseStore, c)?,
        ));
        progress.inc(1);
        // SAFETY: benchmark queues on throw-away device memory read only by the sink.
        let unordered = unsafe { Unordered::new() };
        rates.push((label, rate::run(&gpu, &program, unordered, c)?));
        progress.inc(1);
    }

    progress.set_message("GPU: dormant cost (Figure 9)");
    let registers = dormant::registers()?;
    let dormant = dormant::run(&gpu, dormant::Work::default())?;
    progress.inc(1);

    let raw = serde_json::json!({
        "issue": to_json(&issue)?,
        "completion": to_json(&completion)?,
        "rates": to_json(&rates)?,
        "dormant_registers": to_json(&registers)?,
        "dormant": to_json(&dormant)?,
    });
    let issue: Vec<IssueRow> = issue.iter().map(issue_row).collect::<Result<_, _>>()?;
    let clocks: Vec<f64> = issue
        .iter()
        .flat_map(|r| [r.typed.sm_clock_mhz, r.raw.sm_clock_mhz])
        .collect();
    let result = GpuResult {
        params,
        sm_clock_mhz: clocks.iter().sum::<f64>() / clocks.len().max(1) as f64,
        issue,
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
        rates: rates.iter().map(|(l, r)| rate_row(l.clone(), r)).collect(),
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
                    messages: p.messages,
                    wait: p.wait,
                    ns: summary(&p.ns)?,
                    loss: p.loss,
                })
            })
            .collect::<Result<_, BenchError>>()?,
    };
    Ok((result, raw))
}

/// DOCA GPUNetIO's issue loop beside ibgda typed and raw, same queue memory and sink.
pub fn run_peers(
    iters: u32,
    progress: &indicatif::ProgressBar,
) -> Result<(PeersResult, serde_json::Value), BenchError> {
    let gpu = Gpu::open_with(0, &bench_options()?)?;
    progress.set_length(2);
    progress.set_message("GPU: ibgda issue loop [GpuFence]");
    let ibgda = issue::run(&gpu, GpuFence, iters)?;
    progress.inc(1);
    progress.set_message("GPU: DOCA GPUNetIO issue loop");
    let doca = peers::run_doca(&gpu, iters)?;
    progress.inc(1);
    let raw = serde_json::json!({ "ibgda": to_json(&ibgda)?, "doca": to_json(&doca)? });
    let result = PeersResult {
        iterations: iters,
        ibgda_typed: side(&ibgda.typed)?,
        ibgda_raw: side(&ibgda.raw)?,
        doca: side(&doca.run)?,
        doca_qp_struct_bytes: doca.qp_struct_bytes,
        doca_wqes_examined: doca.wqes.examined,
        doca_wqes_parsed: doca.wqes.parsed,
        doca_parse_errors: doca.wqes.parse_errors.clone(),
        doca_byte_differences: doca
            .wqes
            .differences
            .iter()
            .map(|d| format!("{d:?}"))
            .collect(),
    };
    Ok((result, raw))
}
