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

/// The paper's SM clock during its latency runs (MHz).
pub const SM_CLOCK_MHZ: f64 = 1970.0;

/// Table 5 rows that match one of our rate configurations: (our row key, paper row,
/// M msg/s).
pub const TABLE5_P_IB: [(&str, &str, f64); 4] = [
    ("batch1", "1 thread, 1 QP, batch 1", 1.79),
    ("batch16", "1 thread, 1 QP, batch 16", 4.70),
    ("warp1", "32 threads cooperative, 1 QP, ring every 32", 21.6),
    (
        "warp64",
        "nearest row: 64 threads, 64 QPs, 64 SMs, batch 16",
        260.0,
    ),
];

/// The paper's figure for a scope, if Table 4 has it.
pub fn table4(scope: &str) -> Option<(&'static str, f64, f64)> {
    TABLE4_P_IB
        .iter()
        .find(|(key, ..)| *key == scope)
        .map(|&(_, row, issue, put_c)| (row, issue, put_c))
}

/// The paper's rate for one of our rate rows, if Table 5 has it.
pub fn table5(key: &str) -> Option<(&'static str, f64)> {
    TABLE5_P_IB
        .iter()
        .find(|(k, ..)| *k == key)
        .map(|&(_, row, rate)| (row, rate))
}
