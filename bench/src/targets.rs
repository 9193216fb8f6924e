//! The targets of the GPU path's issue (the paper's figure or better in every row, and
//! dormant code that costs the enclosing kernel nothing), each with the value this run
//! measured and whether it is reached. A target whose row did not run is missed, with
//! why: nothing is reached by absence.

use crate::gpu::{DormantRow, GpuResult, RateRow, RegisterRow, ShapeRow, SINK_BOUND_SHARE};
use crate::paper;
use crate::record::Report;

/// One target.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// What is measured.
    pub what: String,
    /// The value measured (with its unit), or why there is none.
    pub value: String,
    /// The goal.
    pub goal: String,
    /// Whether the value meets the goal.
    pub reached: bool,
}

fn target(what: impl Into<String>, value: String, goal: String, reached: bool) -> Target {
    Target {
        what: what.into(),
        value,
        goal,
        reached,
    }
}

fn missing(what: impl Into<String>, goal: String, why: &str) -> Target {
    target(what, format!("not measured: {why}"), goal, false)
}

/// Extra registers the dormant send may add, inlined (the issue's bound).
pub const DORMANT_EXTRA_REGISTERS: u32 = 4;
/// The dormant (0-message) loss the builds with code may show, either way (fraction).
pub const DORMANT_LOSS: f64 = 0.01;
/// The streaming caller's dormant loss at eight blocks per SM (fraction).
pub const DORMANT_WIDE_LOSS: f64 = 0.05;
/// Table 14: mini-gda's waiting loss (16 messages, waiting against not waiting).
pub const PAPER_WAITING_LOSS: f64 = 0.019;
/// One warp on one QP, M WQE/s.
pub const ONE_WARP_MWQE: f64 = 25.0;
/// 64 warps on 64 QPs, M WQE/s.
pub const SIXTY_FOUR_WARPS_MWQE: f64 = 1500.0;
/// The CUDA software NIC on every SM, each operation, M WQE/s.
pub const NIC_RATE_MWQE: f64 = 200.0;

/// The GpuFence rows (against the sink as it runs now) whose label starts with `row`
/// (a whole label, or followed by a note), best first.
fn rows_of<'a>(g: &'a GpuResult, row: &str) -> Vec<&'a RateRow> {
    let mut v: Vec<&RateRow> = g
        .rates
        .iter()
        .filter(|r| r.scope == "GpuFence" && r.sink_mode == "Retire")
        .filter(|r| {
            r.label.strip_prefix(row).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with(" (") || rest.starts_with(", ")
            })
        })
        .collect();
    v.sort_by(|a, b| b.mwqe_per_s.total_cmp(&a.mwqe_per_s));
    v
}

fn best_rate(what: &str, rows: &[&RateRow], goal: f64) -> Target {
    match rows.first() {
        Some(r) => target(
            what,
            format!("{:.2} M WQE/s ({})", r.mwqe_per_s, r.label),
            format!(">= {goal}"),
            r.mwqe_per_s >= goal,
        ),
        None => missing(what, format!(">= {goal}"), "no such row"),
    }
}

/// Every rate target: each Table 5 row of the issue at or above the paper's figure, one
/// warp on one QP and 64 warps on 64 QPs at the issue's figures, 128 warps never slower
/// than 64. A row's variants (reserve ahead) count: the best one is shown.
pub fn rate_targets(g: &GpuResult) -> Vec<Target> {
    let mut out = Vec::new();
    for (row, paper) in paper::TABLE5_P_IB {
        out.push(best_rate(
            &format!("Table 5: {row} (paper {paper})"),
            &rows_of(g, row),
            paper,
        ));
    }
    out.push(best_rate(
        "one warp on one QP (per-warp, batch 32)",
        &rows_of(g, "32 threads, 1 QP, per-warp, batch 32"),
        ONE_WARP_MWQE,
    ));
    out.push(best_rate(
        "64 warps on 64 QPs, 64 SMs (per-warp, batch 32)",
        &rows_of(g, "64 warps, 64 QPs, 64 SMs, per-warp, batch 32"),
        SIXTY_FOUR_WARPS_MWQE,
    ));
    let sixty_four = rows_of(g, "64 warps, 64 QPs, 64 SMs, per-warp, batch 32");
    let mut one_twenty_eight = rows_of(g, "placement: 128 warps, 128 QPs, 64 SMs x 2 warps");
    one_twenty_eight.extend(rows_of(
        g,
        "128 warps, 128 QPs, 64 SMs x 2 warps, per-warp, batch 32",
    ));
    one_twenty_eight.sort_by(|a, b| b.mwqe_per_s.total_cmp(&a.mwqe_per_s));
    let what = "128 warps on 128 QPs no slower than 64 warps on 64 QPs";
    out.push(match (one_twenty_eight.first(), sixty_four.first()) {
        (Some(a), Some(b)) => target(
            what,
            format!("{:.2} M WQE/s ({})", a.mwqe_per_s, a.label),
            format!(">= {:.2} ({})", b.mwqe_per_s, b.label),
            a.mwqe_per_s >= b.mwqe_per_s,
        ),
        _ => missing(what, "the 64-warp figure".into(), "a row is missing"),
    });
    out
}

/// Whether the report says, for every rate row, whether the sink's capacity bounds it:
/// the capacity was measured, and each row has its bound.
pub fn sink_targets(g: &GpuResult) -> Vec<Target> {
    let what = "every rate row's sink bound known (the sink capacity row)";
    let known = g
        .rates
        .iter()
        .filter(|r| r.sink_bound_mwqe_per_s.is_some())
        .count();
    // The one-launch rows run their own sink, which the capacity row does not measure.
    let applicable = g
        .rates
        .iter()
        .filter(|r| !r.label.starts_with("one launch"))
        .count();
    let mut out = vec![target(
        what,
        format!("{known} of {applicable} rows"),
        "all".into(),
        !g.sink_capacity.is_empty() && known >= applicable,
    )];
    let bounded: Vec<&RateRow> = g
        .rates
        .iter()
        .filter(|r| r.sink_mode == "Retire")
        .filter(|r| r.sink_share().is_some_and(|s| s >= SINK_BOUND_SHARE))
        .collect();
    out.push(target(
        "rate rows at the sink's capacity (reported, not a failure)",
        if bounded.is_empty() {
            "none".into()
        } else {
            bounded
                .iter()
                .map(|r| r.label.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        },
        format!(
            "listed when >= {:.0} % of the sink's bound",
            SINK_BOUND_SHARE * 100.0
        ),
        true,
    ));
    out
}

fn register_row<'a>(g: &'a GpuResult, caller: &str, build: &str) -> Option<&'a RegisterRow> {
    g.dormant_registers
        .iter()
        .find(|r| r.caller == caller && r.build == build)
}

fn dormant_row<'a>(
    g: &'a GpuResult,
    caller: &str,
    build: &str,
    messages: u32,
    wait: bool,
    wide: bool,
) -> Option<&'a DormantRow> {
    g.dormant.iter().find(|d| {
        d.caller == caller
            && d.build == build
            && d.messages == messages
            && d.wait == wait
            && (d.blocks > 528) == wide
    })
}

/// The dormant-cost targets: registers (inlined at most +4, no stack, blocks per SM
/// unchanged), the 0-message loss of both builds with code within +-1 %, the call build
/// no worse than the inlined one, the streaming caller at eight blocks per SM within
/// 5 %, and the waiting loss at or below the paper's.
pub fn dormant_targets(g: &GpuResult) -> Vec<Target> {
    let mut out = Vec::new();
    for caller in ["Compute", "Streaming"] {
        let (plain, inlined, call) = (
            register_row(g, caller, "Plain"),
            register_row(g, caller, "Inlined"),
            register_row(g, caller, "Call"),
        );
        let what = format!("{caller} caller: registers inlined, no stack");
        out.push(match (plain, inlined) {
            (Some(p), Some(i)) => target(
                what,
                format!(
                    "{} -> {} ({} B stack)",
                    p.registers, i.registers, i.stack_bytes
                ),
                format!("<= {} + {DORMANT_EXTRA_REGISTERS}, 0 B", p.registers),
                i.registers <= p.registers + DORMANT_EXTRA_REGISTERS && i.stack_bytes == 0,
            ),
            _ => missing(what, "+4".into(), "no ptxas report"),
        });
        let what = format!("{caller} caller: blocks/SM at 256 threads, inlined");
        out.push(match (plain, inlined) {
            (Some(p), Some(i)) => target(
                what,
                format!("{} -> {}", p.blocks_per_sm, i.blocks_per_sm),
                format!("{}", p.blocks_per_sm),
                i.blocks_per_sm == p.blocks_per_sm,
            ),
            _ => missing(what, "unchanged".into(), "no ptxas report"),
        });
        let what = format!("{caller} caller: registers behind a call no more than inlined");
        out.push(match (inlined, call) {
            (Some(i), Some(c)) => target(
                what,
                format!("{} (inlined {})", c.registers, i.registers),
                format!("<= {}", i.registers),
                c.registers <= i.registers,
            ),
            _ => missing(what, "<= inlined".into(), "no ptxas report"),
        });
        let loss = |build| dormant_row(g, caller, build, 0, false, false).map(|d| d.loss);
        for build in ["Inlined", "Call"] {
            let what = format!("{caller} caller: 0-message loss, {build}");
            out.push(match loss(build) {
                Some(l) => target(
                    what,
                    format!("{:+.2} %", l * 100.0),
                    format!("within +-{:.0} %", DORMANT_LOSS * 100.0),
                    l.abs() <= DORMANT_LOSS,
                ),
                None => missing(what, "+-1 %".into(), "the dormant run is missing"),
            });
        }
        let what = format!("{caller} caller: 0-message loss behind a call no worse than inlined");
        out.push(match (loss("Inlined"), loss("Call")) {
            (Some(i), Some(c)) => target(
                what,
                format!("{:+.2} % (inlined {:+.2} %)", c * 100.0, i * 100.0),
                format!("<= inlined + {:.0} % (noise)", DORMANT_LOSS * 100.0),
                c <= i + DORMANT_LOSS,
            ),
            _ => missing(what, "<= inlined".into(), "the dormant run is missing"),
        });
        let what = format!("{caller} caller: waiting loss, 16 messages, inlined");
        out.push(
            match (
                dormant_row(g, caller, "Inlined", 16, false, false),
                dormant_row(g, caller, "Inlined", 16, true, false),
            ) {
                (Some(send), Some(wait)) if wait.ns.p50 > 0.0 => {
                    let l = 1.0 - send.ns.p50 / wait.ns.p50;
                    target(
                        what,
                        format!("{:.2} %", l * 100.0),
                        format!("<= paper {:.1} %", PAPER_WAITING_LOSS * 100.0),
                        l <= PAPER_WAITING_LOSS,
                    )
                }
                _ => missing(what, "<= 1.9 %".into(), "the dormant run is missing"),
            },
        );
    }
    for build in ["Inlined", "Call"] {
        let what = format!("Streaming caller at 8 blocks/SM: 0-message loss, {build}");
        out.push(match dormant_row(g, "Streaming", build, 0, false, true) {
            Some(d) => target(
                what,
                format!("{:+.2} %", d.loss * 100.0),
                format!(
                    "within {:.0} % (paper: mini-gda loses 27 %)",
                    DORMANT_WIDE_LOSS * 100.0
                ),
                d.loss <= DORMANT_WIDE_LOSS,
            ),
            None => missing(what, "5 %".into(), "the wide launch is missing"),
        });
    }
    out
}

/// Typed over raw issue cycles within this of 1 (Table 4's rule).
pub const TYPED_OVER_RAW: f64 = 0.02;

fn shape<'a>(g: &'a GpuResult, kind: &str, bytes: u32) -> Option<&'a ShapeRow> {
    g.shapes.iter().find(|s| s.kind == kind && s.bytes == bytes)
}

/// The inline sweep's issue slope, ns per 16 B (least squares over the typed p50s).
pub fn inline_slope_ns_per_16b(g: &GpuResult) -> Option<f64> {
    let pts: Vec<(f64, f64)> = g
        .shapes
        .iter()
        .filter(|s| s.kind == "Inline")
        .map(|s| (f64::from(s.bytes), s.typed.issue_ns.p50))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| 16.0 * sxy / sxx)
}

/// Table 3's and Figure 3's rows: every shape typed within 2 % of raw; the 8 B inline and
/// pointer WRITEs at or under the paper's issue time; the inline slope at or under the
/// paper's 0.1 µs per 16 B; DC's issue cost over RC at or under the paper's 0.45 µs (its
/// figure through completion).
pub fn shape_targets(g: &GpuResult) -> Vec<Target> {
    let mut out = Vec::new();
    let what = "Table 3 / Figure 3 shapes: typed over raw issue cycles";
    out.push(if g.shapes.is_empty() {
        missing(what, "1.00 +- 0.02".into(), "the shape rows did not run")
    } else {
        let worst = g
            .shapes
            .iter()
            .max_by(|a, b| {
                (a.typed_over_raw - 1.0)
                    .abs()
                    .total_cmp(&(b.typed_over_raw - 1.0).abs())
            })
            .expect("not empty");
        target(
            what,
            format!("worst {:.3} ({})", worst.typed_over_raw, worst.label),
            format!("1.00 +- {TYPED_OVER_RAW:.2}"),
            (worst.typed_over_raw - 1.0).abs() <= TYPED_OVER_RAW,
        )
    });
    for (kind, paper_us) in [
        ("Inline", paper::TABLE3_MINI_GDA_INLINE.0),
        ("Pointer", paper::TABLE3_MINI_GDA_POINTER.0),
    ] {
        let what = format!("Table 3: 8 B {kind} WRITE issue, typed p50 [GpuFence]");
        out.push(match shape(g, kind, 8) {
            Some(s) => target(
                what,
                format!("{:.0} ns", s.typed.issue_ns.p50),
                format!("<= paper {:.0} ns", paper_us * 1e3),
                s.typed.issue_ns.p50 <= paper_us * 1e3,
            ),
            None => missing(what, format!("<= {paper_us} us"), "no such row"),
        });
    }
    let what = "Figure 3: inline issue slope";
    let goal = format!(
        "<= paper {:.0} ns per 16 B",
        paper::FIG3_INLINE_US_PER_16B * 1e3
    );
    out.push(match inline_slope_ns_per_16b(g) {
        Some(slope) => target(
            what,
            format!("{slope:.1} ns per 16 B"),
            goal,
            slope <= paper::FIG3_INLINE_US_PER_16B * 1e3,
        ),
        None => missing(what, goal, "fewer than two inline rows"),
    });
    for kind in ["DcCompact", "DcFull"] {
        let what = format!("DC ({kind}) issue over RC 8 B inline, typed p50");
        let goal = format!("<= paper's DC cost {:.0} ns", paper::DC_OVER_RC_US * 1e3);
        out.push(match (shape(g, kind, 8), shape(g, "Inline", 8)) {
            (Some(dc), Some(rc)) => {
                let d = dc.typed.issue_ns.p50 - rc.typed.issue_ns.p50;
                target(
                    what,
                    format!("{d:+.0} ns"),
                    goal,
                    d <= paper::DC_OVER_RC_US * 1e3,
                )
            }
            _ => missing(what, goal, "a row is missing"),
        });
    }
    out
}

/// The CUDA software NIC's throughput on every SM, per operation: at least
/// [`NIC_RATE_MWQE`]. The one-SM rows are reported beside it, without a goal.
pub fn nic_rate_targets(g: &GpuResult) -> Vec<Target> {
    [
        "8 B inline WRITE",
        "64 B WRITE (SGE)",
        "64 B READ",
        "8 B fetch-add",
    ]
    .iter()
    .map(|op| {
        let what = format!("CUDA software NIC on every SM: {op}");
        let goal = format!(">= {NIC_RATE_MWQE}");
        let widest = g
            .nic_rate
            .iter()
            .filter(|r| r.op == *op)
            .max_by_key(|r| r.engines);
        match widest {
            Some(r) if r.engines > 1 => target(
                what,
                format!("{:.2} M WQE/s ({} engines)", r.mwqe_per_s, r.engines),
                goal,
                r.mwqe_per_s >= NIC_RATE_MWQE,
            ),
            _ => missing(what, goal, "no such row"),
        }
    })
    .collect()
}

/// Every target of the report that has a GPU part (none without one).
pub fn all(report: &Report) -> Vec<Target> {
    let Some(g) = &report.gpu_sink else {
        return Vec::new();
    };
    let mut out = rate_targets(g);
    out.extend(shape_targets(g));
    out.extend(sink_targets(g));
    out.extend(nic_rate_targets(g));
    out.extend(dormant_targets(g));
    out
}

/// The targets as text, one per line, "reached" or "missed" at its end.
pub fn table(targets: &[Target]) -> String {
    let mut t = String::new();
    for x in targets {
        t.push_str(&format!(
            "  {:<74} {:<44} goal {:<32} {}\n",
            x.what,
            x.value,
            x.goal,
            if x.reached { "reached" } else { "missed" }
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuParams;
    use crate::stats::Percentiles;

    fn rate(label: &str, mwqe: f64) -> RateRow {
        RateRow {
            label: label.into(),
            scope: "GpuFence".into(),
            publication: "PerWarp".into(),
            blocks: 1,
            threads: 32,
            queues: 1,
            share: 1,
            batch: 32,
            wqes: 1,
            seconds: 1.0,
            mwqe_per_s: mwqe,
            sm_clock_mhz: 1980.0,
            stale_wqes: None,
            sink_doorbells: 1,
            sink_mode: "Retire".into(),
            sink_bound_mwqe_per_s: Some(100.0),
        }
    }

    fn result(rates: Vec<RateRow>) -> GpuResult {
        GpuResult {
            params: GpuParams::default(),
            sm_clock_mhz: 1980.0,
            issue: vec![],
            shapes: vec![],
            completion: vec![],
            rates,
            sink_capacity: vec![],
            nic_rate: vec![],
            dormant_registers: vec![],
            dormant: vec![],
            failed: vec![],
        }
    }

    fn find<'a>(t: &'a [Target], what: &str) -> &'a Target {
        t.iter()
            .find(|x| x.what.starts_with(what))
            .unwrap_or_else(|| panic!("no target {what}: {t:?}"))
    }

    #[test]
    fn only_rows_against_the_default_sink_meet_a_rate_target() {
        let mut tight = rate(
            "64 warps, 64 QPs, 64 SMs, per-warp, batch 32 (target 1500) (tight sink)",
            1600.0,
        );
        tight.sink_mode = "RetireTight".into();
        let g = result(vec![
            tight,
            rate(
                "64 warps, 64 QPs, 64 SMs, per-warp, batch 32 (target 1500)",
                1400.0,
            ),
        ]);
        let all = rate_targets(&g);
        let t = find(&all, "64 warps on 64 QPs");
        assert!(!t.reached && t.value.starts_with("1400.00"), "{t:?}");
    }

    #[test]
    fn the_nic_rate_target_takes_the_widest_row_of_each_operation() {
        let row = |op: &str, engines, mwqe| crate::gpu::NicRateRow {
            op: op.into(),
            engines,
            queues: 2 * engines,
            wqes: 8192 * u64::from(engines),
            mwqe_per_s: mwqe,
            sm_clock_mhz: 1980.0,
        };
        let mut g = result(vec![]);
        g.nic_rate = vec![
            row("8 B inline WRITE", 1, 900.0),
            row("8 B inline WRITE", 132, 250.0),
            row("64 B READ", 132, 150.0),
            row("8 B fetch-add", 1, 300.0),
        ];
        let t = nic_rate_targets(&g);
        assert_eq!(t.len(), 4);
        assert!(find(&t, "CUDA software NIC on every SM: 8 B inline WRITE").reached);
        assert!(!find(&t, "CUDA software NIC on every SM: 64 B READ").reached);
        let one_sm_only = find(&t, "CUDA software NIC on every SM: 8 B fetch-add");
        assert!(!one_sm_only.reached && one_sm_only.value.starts_with("not measured"));
        assert!(!find(&t, "CUDA software NIC on every SM: 64 B WRITE").reached);
    }

    #[test]
    fn a_row_is_met_by_its_best_variant_and_a_missing_row_is_missed() {
        let g = result(vec![
            rate("32 threads, 1 QP, per-warp, batch 32 (paper 21.6)", 22.0),
            rate("32 threads, 1 QP, per-warp, batch 32, reserve ahead", 30.0),
            rate(
                "64 warps, 64 QPs, 64 SMs, per-warp, batch 32 (target 1500)",
                1400.0,
            ),
            rate("placement: 128 warps, 128 QPs, 64 SMs x 2 warps", 1450.0),
        ]);
        let t = rate_targets(&g);
        let one = find(&t, "one warp on one QP");
        assert!(one.reached, "{one:?}");
        assert!(one.value.contains("reserve ahead"), "{one:?}");
        assert!(!find(&t, "64 warps on 64 QPs").reached);
        assert!(find(&t, "128 warps on 128 QPs no slower").reached);
        let absent = find(&t, "Table 5: 1 thread, 1 QP, batch 1 ");
        assert!(
            !absent.reached && absent.value.starts_with("not measured"),
            "{absent:?}"
        );
        // "batch 1" is not "batch 16".
        let g = result(vec![rate("1 thread, 1 QP, batch 16", 9.0)]);
        assert!(!find(&rate_targets(&g), "Table 5: 1 thread, 1 QP, batch 1 ").reached);
    }

    #[test]
    fn the_inline_slope_is_fitted_over_the_sweep_and_dc_compared_with_rc() {
        let side = |ns: f64| crate::gpu::IssueSide {
            issue_ns: Percentiles {
                p50: ns,
                ..Percentiles::default()
            },
            issue_cycles: Percentiles {
                p50: ns * 2.0,
                ..Percentiles::default()
            },
            put_c_ns: Percentiles::default(),
            sm_clock_mhz: 1980.0,
        };
        let row = |kind: &str, bytes: u32, ns: f64| ShapeRow {
            label: format!("{kind} {bytes}"),
            kind: kind.into(),
            bytes,
            typed: side(ns),
            raw: side(ns),
            typed_over_raw: 1.0,
        };
        let mut g = result(vec![]);
        // 300 ns at 8 B, +20 ns per 16 B.
        g.shapes = [8u32, 24, 56, 120, 248]
            .iter()
            .map(|&b| row("Inline", b, 300.0 + 20.0 * f64::from(b - 8) / 16.0))
            .collect();
        g.shapes.push(row("Pointer", 8, 320.0));
        g.shapes.push(row("DcCompact", 8, 330.0));
        let slope = inline_slope_ns_per_16b(&g).unwrap();
        assert!((slope - 20.0).abs() < 1e-9, "{slope}");
        let t = shape_targets(&g);
        assert!(find(&t, "Figure 3: inline issue slope").reached);
        assert!(find(&t, "Table 3: 8 B Pointer").reached);
        assert!(find(&t, "DC (DcCompact)").value.starts_with("+30 ns"));
        assert!(!find(&t, "DC (DcFull)").reached, "a missing row is missed");
        g.shapes[0].typed_over_raw = 1.05;
        assert!(!find(&shape_targets(&g), "Table 3 / Figure 3 shapes").reached);
    }

    #[test]
    fn dormant_targets_follow_the_registers_and_losses() {
        let mut g = result(vec![]);
        let reg = |caller: &str, build: &str, registers, blocks_per_sm| RegisterRow {
            caller: caller.into(),
            build: build.into(),
            registers,
            stack_bytes: 0,
            spill_stores: 0,
            spill_loads: 0,
            blocks_per_sm,
        };
        g.dormant_registers = vec![
            reg("Compute", "Plain", 29, 8),
            reg("Compute", "Inlined", 32, 8),
            reg("Compute", "Call", 40, 6),
            reg("Streaming", "Plain", 44, 5),
            reg("Streaming", "Inlined", 49, 4),
            reg("Streaming", "Call", 46, 5),
        ];
        let row = |build: &str, loss: f64| DormantRow {
            caller: "Compute".into(),
            build: build.into(),
            blocks: 528,
            registers: 0,
            messages: 0,
            wait: false,
            ns: Percentiles {
                p50: 100.0,
                ..Percentiles::default()
            },
            sm_mhz: Vec::new(),
            loss,
        };
        g.dormant = vec![row("Inlined", 0.004), row("Call", 0.03)];
        let t = dormant_targets(&g);
        assert!(find(&t, "Compute caller: registers inlined").reached);
        assert!(!find(&t, "Streaming caller: registers inlined").reached);
        assert!(!find(&t, "Streaming caller: blocks/SM").reached);
        assert!(!find(&t, "Compute caller: registers behind a call").reached);
        assert!(find(&t, "Compute caller: 0-message loss, Inlined").reached);
        assert!(!find(&t, "Compute caller: 0-message loss, Call").reached);
        assert!(!find(&t, "Compute caller: 0-message loss behind a call").reached);
        assert!(
            !find(
                &t,
                "Streaming caller at 8 blocks/SM: 0-message loss, Inlined"
            )
            .reached
        );
    }
}
