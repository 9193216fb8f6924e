//! The MoE dispatch and combine (`ibgda_kernels::experiments::moe`): 8 ranks emulated on
//! one GPU over the CUDA software NIC's control plane, the device API's kernels against
//! the same kernels written on the builders, BF16 and FP8, each checked against the CPU
//! reference before it is timed.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use ibgda_kernels::experiments::moe::{self, MoeParams, MoeResult};
use ibgda_kernels::experiments::{bench_options, progress, Summary};
use ibgda_kernels::gpu::Gpu;

use crate::BenchError;

/// One phase, p50 and p99 in µs.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct PhaseUs {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl PhaseUs {
    fn of(s: &Summary) -> Self {
        Self {
            p50: s.p50 as f64 / 1e3,
            p99: s.p99 as f64 / 1e3,
        }
    }
}

/// One variant's figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MoeVariant {
    /// `typed` (device API) or `raw` (builders).
    pub name: String,
    /// The FP8 cast kernel.
    pub quantize_us: PhaseUs,
    /// The dispatch kernel (send, then wait for this rank's tokens).
    pub dispatch_us: PhaseUs,
    /// Dispatch: until every rank had posted its tokens (stamps).
    pub dispatch_sent_us: PhaseUs,
    /// The combine kernel (send back, wait, reduce).
    pub combine_us: PhaseUs,
    /// Combine: until every rank had posted its outputs (stamps).
    pub combine_sent_us: PhaseUs,
    /// All kernels of an iteration.
    pub total_us: PhaseUs,
    /// Whether its checked iteration matched the CPU reference.
    pub checked: bool,
}

/// One payload format.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MoeRow {
    /// `BF16` or `FP8`.
    pub format: String,
    /// Ranks, tokens per rank, hidden, top-k, experts.
    pub shape: [usize; 5],
    /// Bytes dispatched per iteration, all ranks.
    pub dispatch_bytes: u64,
    /// Device API.
    pub typed: MoeVariant,
    /// Builders.
    pub raw: MoeVariant,
    /// typed / raw, p50 of the total.
    pub typed_over_raw: f64,
    /// Target band of that ratio.
    pub target: (f64, f64),
    /// What the figures are.
    pub note: String,
}

/// Both formats.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MoeBench {
    /// BF16, then FP8.
    pub rows: Vec<MoeRow>,
}

impl MoeBench {
    /// Whether a row missed its check or target.
    pub fn failed(&self) -> bool {
        self.rows.iter().any(|r| {
            !r.typed.checked
                || !r.raw.checked
                || r.typed_over_raw < r.target.0
                || r.typed_over_raw > r.target.1
        })
    }
}

fn variant(v: &moe::VariantResult) -> MoeVariant {
    MoeVariant {
        name: v.name.clone(),
        quantize_us: PhaseUs::of(&v.quantize_ns),
        dispatch_us: PhaseUs::of(&v.dispatch.kernel_ns),
        dispatch_sent_us: PhaseUs::of(&v.dispatch.sent_ns),
        combine_us: PhaseUs::of(&v.combine.kernel_ns),
        combine_sent_us: PhaseUs::of(&v.combine.sent_ns),
        total_us: PhaseUs::of(&v.total_ns),
        checked: v.checked,
    }
}

fn row(r: &MoeResult) -> MoeRow {
    let p = &r.params;
    MoeRow {
        format: if p.fp8 { "FP8" } else { "BF16" }.into(),
        shape: [p.ranks, p.tokens, p.hidden, p.topk, p.experts],
        dispatch_bytes: r.dispatch_bytes,
        typed: variant(&r.typed),
        raw: variant(&r.raw),
        typed_over_raw: r.typed_over_raw,
        target: r.target,
        note: r.note.clone(),
    }
}

/// Runs BF16 then FP8 (`iterations` timed of each variant); returns the rows and the
/// library's full results.
pub fn run(iterations: usize) -> Result<(MoeBench, serde_json::Value), BenchError> {
    let gpu = Arc::new(Gpu::open_with(0, &bench_options()?)?);
    let mut bench = MoeBench::default();
    let mut raw = Vec::new();
    for fp8 in [false, true] {
        let params = MoeParams {
            iterations,
            ..MoeParams::deepep(fp8)
        };
        let result = moe::run(gpu.clone(), params)?;
        progress(&format!(
            "MoE {}: typed {:.1} us, raw {:.1} us (p50 of dispatch + combine), ratio {:.3}",
            if fp8 { "FP8" } else { "BF16" },
            result.typed.total_ns.p50 as f64 / 1e3,
            result.raw.total_ns.p50 as f64 / 1e3,
            result.typed_over_raw
        ));
        bench.rows.push(row(&result));
        raw.push(serde_json::to_value(&result).map_err(BenchError::msg)?);
    }
    Ok((bench, serde_json::Value::Array(raw)))
}

/// The text table of the rows.
pub fn table(m: &MoeBench) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    for r in &m.rows {
        let [ranks, tokens, hidden, topk, experts] = r.shape;
        let _ = writeln!(
            t,
            "\nMoE dispatch + combine, {} ({ranks} ranks x {tokens} tokens, hidden {hidden}, top-{topk} of \
             {experts}; {:.1} MB dispatched), the CUDA software NIC's figures:",
            r.format,
            r.dispatch_bytes as f64 / 1e6
        );
        for v in [&r.typed, &r.raw] {
            let _ = writeln!(
                t,
                "  {:<6} quantize {:>8.1}  dispatch {:>8.1} (sent {:>8.1})  combine {:>8.1} (sent {:>8.1})  \
                 total {:>8.1} us p50, {:>8.1} p99  checked: {}",
                v.name,
                v.quantize_us.p50,
                v.dispatch_us.p50,
                v.dispatch_sent_us.p50,
                v.combine_us.p50,
                v.combine_sent_us.p50,
                v.total_us.p50,
                v.total_us.p99,
                v.checked
            );
        }
        let _ = writeln!(
            t,
            "  device API / builders: {:.3} (target {:.2} to {:.2}: {})",
            r.typed_over_raw,
            r.target.0,
            r.target.1,
            if (r.target.0..=r.target.1).contains(&r.typed_over_raw) {
                "met"
            } else {
                "MISSED"
            }
        );
    }
    t
}
