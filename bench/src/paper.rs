//! The seed paper's figures on its P-IB platform (4 x 4 H200, ConnectX-7, SM clock about
//! 1,970 MHz in latency runs), from shared/reference/paper-tables.md, drawn and tabulated
//! beside ours.

/// Table 4: mini-gda's ordering configurations, issue / put+completion p50 in µs on P-IB,
/// keyed by ibgda's scope name.
pub const TABLE4_P_IB: [(&str, &str, f64, f64); 7] = [
    ("Unordered", "None (unsafe control)", 0.19, 3.46),
    ("GpuFence", "GPU-scope fence (DOCA, GDAKI)", 0.70, 4.03),
    ("GpuFencedDbrec", "+ fenced doorbell record", 0.93, 4.26),
    (
        "GpuReleaseStore",
        "GPU-scope release store (DeepEP)",
        0.70,
        4.00,
    ),
    ("ThreadFence", "__threadfence() (NVSHMEM)", 1.22, 4.48),
    (
        "SystemReleaseStore",
        "System-scope release store",
        2.37,
        5.66,
    ),
    ("SystemFence", "System-scope fence", 2.62, 5.92),
];

/// Table 3: mini-gda on P-IB, one 8 B operation, issue and put+completion p50 (µs): the
/// inline form and the non-inline (pointer) form.
pub const TABLE3_MINI_GDA_INLINE: (f64, f64) = (0.70, 4.03);
/// Table 3: mini-gda's non-inline (pointer) 8 B WRITE on P-IB, issue / put+completion µs.
pub const TABLE3_MINI_GDA_POINTER: (f64, f64) = (0.70, 4.64);
/// Figure 3: each extra 16 B of inline payload adds about this much issue time (µs).
pub const FIG3_INLINE_US_PER_16B: f64 = 0.1;
/// Figure 3: inline stops paying past this payload (bytes).
pub const FIG3_INLINE_GAIN_ENDS_BYTES: u32 = 92;
/// Section 4.1: DC costs this much more than RC through completion in mini-gda (µs).
pub const DC_OVER_RC_US: f64 = 0.45;

/// The paper's issue time (µs) for an RC WRITE of `bytes` inline: Table 3's 8 B figure
/// plus Figure 3's slope.
pub fn fig3_inline_issue_us(bytes: u32) -> f64 {
    TABLE3_MINI_GDA_INLINE.0 + FIG3_INLINE_US_PER_16B * (f64::from(bytes.max(8)) - 8.0) / 16.0
}

/// The paper's SM clock during its latency runs (MHz).
pub const SM_CLOCK_MHZ: f64 = 1970.0;

/// Table 5 (and Table 13) rows on P-IB, keyed by the start of the label of the matching
/// configuration in `ibgda_kernels::experiments::rate::table5`: (label start, M msg/s).
pub const TABLE5_P_IB: [(&str, f64); 12] = [
    ("1 thread, 1 QP, batch 1", 1.79),
    ("1 thread, 1 QP, batch 16", 4.70),
    ("32 threads, 1 QP, per-thread, batch 1", 1.27),
    ("256 threads, 1 QP, per-thread, batch 32", 2.60),
    ("32 threads, 1 QP, per-warp, batch 32", 21.6),
    ("256 threads, 1 QP, per-warp, batch 32", 30.7),
    ("16 threads, 16 QPs, 16 SMs, batch 1", 27.9),
    ("16 threads, 16 QPs, 16 SMs, batch 16", 74.4),
    ("32 threads, 32 QPs, 1 SM, batch 16", 133.0),
    ("64 threads, 64 QPs, 1 SM, batch 16", 206.0),
    ("64 threads, 64 QPs, 64 SMs, batch 16", 260.0),
    ("4096 threads, 16 QPs, 16 SMs, per-warp, batch 32", 260.0),
];

/// The targets beyond the paper: one warp on one QP at 25 M WQE/s (the paper: 21.6),
/// and 64 warps on 64 QPs and 64 SMs at 1,500 M WQE/s (label start, M WQE/s).
pub const RATE_TARGETS: [(&str, f64); 2] = [
    ("32 threads, 1 QP, per-warp, batch 32", 25.0),
    ("64 warps, 64 QPs, 64 SMs, per-warp, batch 32", 1500.0),
];

/// Table 3: mini-proxy on P-IB by handoff (`Handoff::NAME`): enqueue (the GPU-side issue)
/// and put + completion p50 in µs (a ConnectX-7 behind the worker; completion is a
/// host-resident counter for the baseline, a GPU-resident one for the tuned protocol).
pub const PROXY_TABLE3_P_IB: [(&str, f64, f64); 2] =
    [("baseline", 2.27, 7.07), ("tuned", 0.13, 4.10)];

/// Table 10: mini-proxy 8 B message rate on P-IB with worker cores cold (base clock, as
/// in Figure 7), by (T workers, R rings, B batch): M msg/s. R = 32 from the text (at T=1,
/// R=32, B from 1 to 16 gives 5.5x).
pub const PROXY_TABLE10_P_IB: [(usize, usize, u32, f64); 2] = [(1, 32, 1, 2.6), (1, 32, 16, 14.4)];

/// Table 11: mini-proxy loaded RTT p50 on P-IB at T4/R32/B16 with 64 background CTAs, the
/// probe's ring (shared with the bulk traffic, or reserved): µs.
pub const PROXY_TABLE11_P_IB: [(bool, f64); 2] = [(false, 115.0), (true, 2190.0)];

/// A host thread ringing doorbells for GPU-built WQEs on P-IB (section 4.3.1): M msg/s.
pub const ASSISTED_P_IB_MMSG_PER_S: f64 = 258.0;

/// The paper's enqueue and put + completion (µs) for a handoff protocol, if Table 3 has it.
pub fn proxy_table3(handoff: &str) -> Option<(f64, f64)> {
    PROXY_TABLE3_P_IB
        .iter()
        .find(|(name, ..)| *name == handoff)
        .map(|&(_, enqueue, put_c)| (enqueue, put_c))
}

/// The paper's mini-proxy rate for T, R, B, if Table 10 has it.
pub fn proxy_table10(workers: usize, rings: usize, batch: u32) -> Option<f64> {
    PROXY_TABLE10_P_IB
        .iter()
        .find(|&&(t, r, b, _)| (t, r, b) == (workers, rings, batch))
        .map(|&(.., rate)| rate)
}

/// The paper's loaded RTT p50 (µs) for a probe ring, shared or reserved.
pub fn proxy_table11(shared: bool) -> Option<f64> {
    PROXY_TABLE11_P_IB
        .iter()
        .find(|(s, _)| *s == shared)
        .map(|&(_, us)| us)
}

/// The paper's figure for a scope, if Table 4 has it.
pub fn table4(scope: &str) -> Option<(&'static str, f64, f64)> {
    TABLE4_P_IB
        .iter()
        .find(|(key, ..)| *key == scope)
        .map(|&(_, row, issue, put_c)| (row, issue, put_c))
}

/// Whether `label` is the row `row`: equal, or `row` followed by a parenthesised note
/// ("1 thread, 1 QP, batch 1" is not "1 thread, 1 QP, batch 16").
fn is_row(label: &str, row: &str) -> bool {
    label
        .strip_prefix(row)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(" ("))
}

/// The paper's rate for one of our rate rows (by its label), if Table 5 has it.
pub fn table5(label: &str) -> Option<f64> {
    TABLE5_P_IB
        .iter()
        .find(|(row, _)| is_row(label, row))
        .map(|&(_, rate)| rate)
}

/// The issue's rate target for a row (by its label), if it has one.
pub fn rate_target(label: &str) -> Option<f64> {
    RATE_TARGETS
        .iter()
        .find(|(row, _)| is_row(label, row))
        .map(|&(_, rate)| rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_match_whole_labels_only() {
        assert_eq!(table5("1 thread, 1 QP, batch 1"), Some(1.79));
        assert_eq!(table5("1 thread, 1 QP, batch 16"), Some(4.70));
        assert_eq!(
            table5("32 threads, 1 QP, per-warp, batch 32 (paper 21.6)"),
            Some(21.6)
        );
        assert_eq!(table5("batch sweep: 1 thread, 1 QP, batch 16"), None);
        assert_eq!(
            rate_target("64 warps, 64 QPs, 64 SMs, per-warp, batch 32 (target 1500)"),
            Some(1500.0)
        );
        assert_eq!(table4("GpuFence").map(|t| t.1), Some(0.70));
        assert_eq!(proxy_table3("tuned"), Some((0.13, 4.10)));
        assert_eq!(proxy_table3("Tuned"), None);
        assert_eq!(proxy_table10(1, 32, 1), Some(2.6));
        assert_eq!(proxy_table10(1, 4, 1), None);
        assert_eq!(proxy_table11(true), Some(2190.0));
    }
}
