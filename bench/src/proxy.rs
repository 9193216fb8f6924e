//! The proxy experiments of `ibgda_kernels::experiments::proxy` (section 4.2): enqueue per
//! handoff protocol and put + completion (Table 3), message rate over T workers x R rings
//! x B requests per doorbell (Table 10, Figure 7), a probe on a private ring against one
//! shared with bulk traffic (Table 11), and the CPU-assisted doorbell with 1 and 4
//! forwarders. A software NIC (one CPU engine per worker) executes, so these are the
//! proxy's own costs, not a ConnectX's. GPU producers on a GPU; CPU threads standing in
//! for them anywhere (what `--quick` runs). The library's results, raw samples included,
//! are kept as they serialize (`proxy-raw.json`).

use ibgda::proxy::{Baseline, Tuned};
use ibgda_kernels::experiments::progress;
use ibgda_kernels::experiments::proxy::{
    cpu, AssistedConfig, AssistedResult, EnqueueConfig, EnqueueResult, ProbeConfig, ProbeResult,
    ProxyGpu, RateConfig, RateResult, WorkerPinning,
};
use ibgda_kernels::gpu::GpuError;
use serde::{Deserialize, Serialize};

use crate::gpu::FailedRow;
use crate::paper;
use crate::stats::{Durations, Percentiles};
use crate::BenchError;

/// Who produces the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Producers {
    /// CPU threads stand in for the GPU (`Instant` timing): runs anywhere.
    Cpu,
    /// GPU threads (`%globaltimer` timing, the SM clock measured): needs a GPU.
    Gpu,
}

/// Sizes of the proxy experiments: every parameter of the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProxyParams {
    /// Who produces.
    pub producers: Producers,
    /// Enqueue: requests pushed and waited for before the timed ones.
    pub enqueue_warmup: u32,
    /// Enqueue: timed requests per handoff protocol.
    pub enqueue_iters: u32,
    /// Rate: worker counts (T).
    pub rate_workers: Vec<usize>,
    /// Rate: ring counts (R).
    pub rate_rings: Vec<usize>,
    /// Rate: requests chained per doorbell (B).
    pub rate_batches: Vec<u32>,
    /// Rate: requests per configuration, split evenly over the rings.
    pub rate_messages: u64,
    /// Probe: probes per ring placement.
    pub probe_iters: u32,
    /// CPU-assisted doorbell: forwarder counts.
    pub assisted_forwarders: Vec<usize>,
    /// CPU-assisted doorbell: queues (one producer each).
    pub assisted_queues: usize,
    /// CPU-assisted doorbell: rounds of 16 WQEs per queue.
    pub assisted_rounds: u32,
}

impl ProxyParams {
    /// The full or the quick sizes for `producers`.
    pub fn new(producers: Producers, quick: bool) -> Self {
        let full_grid = (vec![1, 2, 4, 8], vec![1, 4, 32], vec![1, 4, 16]);
        let (rate_workers, rate_rings, rate_batches) = if quick {
            (vec![1, 4], vec![1, 32], vec![1, 16])
        } else {
            full_grid
        };
        match producers {
            Producers::Cpu => Self {
                producers,
                enqueue_warmup: 100,
                enqueue_iters: if quick { 2_000 } else { 20_000 },
                rate_workers: if quick { vec![1, 2] } else { rate_workers },
                rate_rings,
                rate_batches,
                rate_messages: if quick { 1 << 14 } else { 1 << 17 },
                probe_iters: if quick { 200 } else { 2_000 },
                assisted_forwarders: vec![1, 4],
                assisted_queues: 4,
                assisted_rounds: if quick { 500 } else { 5_000 },
            },
            Producers::Gpu => Self {
                producers,
                enqueue_warmup: 1_000,
                enqueue_iters: if quick { 2_000 } else { 10_000 },
                rate_workers,
                rate_rings,
                rate_batches,
                rate_messages: 1 << 17,
                probe_iters: if quick { 100 } else { 300 },
                assisted_forwarders: vec![1, 4],
                assisted_queues: 8,
                assisted_rounds: if quick { 200 } else { 2_000 },
            },
        }
    }

    fn rate_configs(&self) -> Vec<RateConfig> {
        let mut out = Vec::new();
        for &t in &self.rate_workers {
            for &r in &self.rate_rings {
                for &b in &self.rate_batches {
                    out.push(match self.producers {
                        Producers::Cpu => RateConfig::cpu(t, r, b, self.rate_messages),
                        Producers::Gpu => RateConfig::gpu(t, r, b, self.rate_messages),
                    });
                }
            }
        }
        out
    }
}

/// One handoff protocol's enqueue and put + completion.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EnqueueRow {
    /// "baseline" or "tuned".
    pub handoff: String,
    /// Enqueue time per request (ns).
    pub enqueue_ns: Percentiles,
    /// Push start to the completion counter passing the request (ns): through a software
    /// NIC and a host-resident counter.
    pub put_completion_ns: Percentiles,
    /// GPU producers: the SM clock over the timed pushes (MHz).
    pub sm_clock_mhz: Option<f64>,
    /// Workers pinned / workers.
    pub pinned: String,
    /// The paper's enqueue p50 on P-IB (µs, Table 3).
    pub paper_enqueue_us: Option<f64>,
    /// The paper's put + completion p50 on P-IB (µs, Table 3; a ConnectX-7).
    pub paper_put_completion_us: Option<f64>,
}

/// One T x R x B message-rate point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProxyRateRow {
    /// Workers (T).
    pub workers: usize,
    /// Rings (R).
    pub rings: usize,
    /// Requests chained per doorbell (B).
    pub batch: u32,
    /// Slots per ring.
    pub ring_slots: u64,
    /// Producer threads (GPU: one per ring).
    pub producer_threads: usize,
    /// Requests pushed and completed.
    pub messages: u64,
    /// Seconds from the first push to the last completion.
    pub seconds: f64,
    /// Millions of requests per second.
    pub mmsg_per_s: f64,
    /// WQEs posted over doorbells rung: the batch the workers achieved.
    pub wqes_per_doorbell: f64,
    /// Workers pinned / workers.
    pub pinned: String,
    /// The paper's mini-proxy rate for this T, R, B on P-IB, cold (Table 10), if it has one.
    pub paper_mmsg_per_s: Option<f64>,
}

/// A probe's put + completion under bulk load.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProbeRow {
    /// "private" or "shared" (with bulk ring 0).
    pub ring: String,
    /// Workers (T).
    pub workers: usize,
    /// Bulk rings (R).
    pub bulk_rings: usize,
    /// Requests chained per doorbell (B).
    pub batch: u32,
    /// Bulk producer threads.
    pub bulk_producers: u32,
    /// Probe put + completion (ns).
    pub probe_ns: Percentiles,
    /// Bulk millions of requests per second carried meanwhile.
    pub bulk_mmsg_per_s: f64,
    /// Workers pinned / workers.
    pub pinned: String,
    /// The paper's loaded RTT p50 for this ring placement (µs, Table 11: T4/R32/B16, 64
    /// background CTAs, a request-reply on a ConnectX-7).
    pub paper_rtt_p50_us: Option<f64>,
}

/// The CPU-assisted doorbell's rate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AssistedRow {
    /// Forwarding threads.
    pub forwarders: usize,
    /// Queues (one producer each).
    pub queues: usize,
    /// WQEs per published index.
    pub batch: u32,
    /// Rounds per queue.
    pub rounds: u32,
    /// WQEs posted and completed.
    pub wqes: u64,
    /// Seconds of the run.
    pub seconds: f64,
    /// Millions of WQEs per second.
    pub mwqe_per_s: f64,
    /// Per queue: ns from its first WQE to its last completion.
    pub queue_ns: Percentiles,
    /// Doorbells the forwarders rang.
    pub doorbells_forwarded: u64,
    /// Indices the producers published.
    pub indices_published: u64,
}

/// The proxy experiments' result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProxyResult {
    /// Sizes.
    pub params: ProxyParams,
    /// Logical CPUs of the host (the workers, engines and forwarders share them).
    pub cores: usize,
    /// GPU producers: mean SM clock over the enqueue runs (MHz).
    pub sm_clock_mhz: Option<f64>,
    /// Enqueue per handoff protocol.
    pub enqueue: Vec<EnqueueRow>,
    /// Message rate over T x R x B.
    pub rates: Vec<ProxyRateRow>,
    /// Private and shared probe.
    pub probes: Vec<ProbeRow>,
    /// CPU-assisted doorbell.
    pub assisted: Vec<AssistedRow>,
    /// The baseline within the run: baseline over tuned enqueue p50 (the paper on P-IB:
    /// 2.27 / 0.13 µs, 17.5x).
    #[serde(default)]
    pub baseline_over_tuned_enqueue_p50: Option<f64>,
    /// The baseline within the run: shared over private probe p50 (the paper's loaded RTT
    /// on P-IB: 2,190 / 115 µs, 19.0x).
    #[serde(default)]
    pub shared_over_private_probe_p50: Option<f64>,
    /// Rows that failed (each with why); the others ran.
    #[serde(default)]
    pub failed: Vec<FailedRow>,
}

impl ProxyResult {
    /// Whether a row failed.
    pub fn failed(&self) -> bool {
        !self.failed.is_empty()
    }
}

/// `numerator / denominator` when both ran and the denominator is positive.
fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> Option<f64> {
    match (numerator, denominator) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d),
        _ => None,
    }
}

/// Baseline over tuned enqueue p50, and shared over private probe p50.
fn ratios(enqueue: &[EnqueueRow], probes: &[ProbeRow]) -> (Option<f64>, Option<f64>) {
    let enqueue_p50 = |handoff: &str| {
        enqueue
            .iter()
            .find(|r| r.handoff == handoff)
            .map(|r| r.enqueue_ns.p50)
    };
    let probe_p50 = |ring: &str| {
        probes
            .iter()
            .find(|r| r.ring == ring)
            .map(|r| r.probe_ns.p50)
    };
    (
        ratio(enqueue_p50("baseline"), enqueue_p50("tuned")),
        ratio(probe_p50("shared"), probe_p50("private")),
    )
}

fn percentiles(values: &[u64]) -> Result<Percentiles, BenchError> {
    let mut d = Durations::new();
    for &v in values {
        d.record_nanos(v as f64).map_err(BenchError::msg)?;
    }
    Ok(d.summary())
}

fn pinned(p: WorkerPinning) -> String {
    format!("{}/{}", p.pinned, p.workers)
}

fn enqueue_row(r: &EnqueueResult) -> Result<EnqueueRow, BenchError> {
    let paper = paper::proxy_table3(r.handoff);
    Ok(EnqueueRow {
        handoff: r.handoff.into(),
        enqueue_ns: percentiles(&r.enqueue_ns)?,
        put_completion_ns: percentiles(&r.put_completion_ns)?,
        sm_clock_mhz: r.sm_mhz,
        pinned: pinned(r.pinning),
        paper_enqueue_us: paper.map(|(enqueue, _)| enqueue),
        paper_put_completion_us: paper.map(|(_, put_c)| put_c),
    })
}

/// One row builder for the CPU and the GPU producers' rate results alike.
fn rate_row(r: &RateResult) -> ProxyRateRow {
    let c = &r.config;
    ProxyRateRow {
        workers: c.workers,
        rings: c.rings,
        batch: c.batch,
        ring_slots: c.ring_slots,
        producer_threads: match r.producer {
            ibgda_kernels::experiments::proxy::Producer::Cpu => c.cpu_threads,
            ibgda_kernels::experiments::proxy::Producer::Gpu => c.rings,
        },
        messages: r.messages,
        seconds: r.ns as f64 * 1e-9,
        mmsg_per_s: r.mmsg_per_s,
        wqes_per_doorbell: r.wqes_per_doorbell,
        pinned: pinned(r.pinning),
        paper_mmsg_per_s: paper::proxy_table10(c.workers, c.rings, c.batch),
    }
}

fn probe_row(r: &ProbeResult) -> Result<ProbeRow, BenchError> {
    let c = &r.config;
    Ok(ProbeRow {
        ring: if c.shared { "shared" } else { "private" }.into(),
        workers: c.workers,
        bulk_rings: c.bulk_rings,
        batch: c.batch,
        bulk_producers: c.bulk_producers,
        probe_ns: percentiles(&r.probe_ns)?,
        bulk_mmsg_per_s: r.bulk_mmsg_per_s,
        pinned: pinned(r.pinning),
        paper_rtt_p50_us: paper::proxy_table11(c.shared),
    })
}

fn assisted_row(r: &AssistedResult) -> Result<AssistedRow, BenchError> {
    let c = &r.config;
    Ok(AssistedRow {
        forwarders: c.forwarders,
        queues: c.queues,
        batch: c.batch,
        rounds: c.rounds,
        wqes: r.wqes,
        seconds: r.ns as f64 * 1e-9,
        mwqe_per_s: r.mwqe_per_s,
        queue_ns: percentiles(&r.queue_ns)?,
        doorbells_forwarded: r.doorbells_forwarded,
        indices_published: r.indices_published,
    })
}

/// Who runs the experiments: CPU threads, or the proxy program on GPU 0.
enum Runner {
    Cpu,
    Gpu(Box<ProxyGpu>),
}

impl Runner {
    fn enqueue_baseline(&self, c: EnqueueConfig) -> Result<EnqueueResult, GpuError> {
        match self {
            Self::Cpu => cpu::enqueue::<Baseline>(c),
            Self::Gpu(g) => g.enqueue::<Baseline>(c),
        }
    }

    fn enqueue_tuned(&self, c: EnqueueConfig) -> Result<EnqueueResult, GpuError> {
        match self {
            Self::Cpu => cpu::enqueue::<Tuned>(c),
            Self::Gpu(g) => g.enqueue::<Tuned>(c),
        }
    }

    fn rate(&self, c: RateConfig) -> Result<RateResult, GpuError> {
        match self {
            Self::Cpu => cpu::rate(c),
            Self::Gpu(g) => g.rate(c),
        }
    }

    fn probe(&self, c: ProbeConfig) -> Result<ProbeResult, GpuError> {
        match self {
            Self::Cpu => cpu::probe(c),
            Self::Gpu(g) => g.probe(c),
        }
    }

    fn assisted(&self, c: AssistedConfig) -> Result<AssistedResult, GpuError> {
        match self {
            Self::Cpu => cpu::assisted(c),
            Self::Gpu(g) => g.assisted(c),
        }
    }
}

/// The rows of one run: a failing row is recorded with why and the others still run.
struct Rows<'a> {
    failed: Vec<FailedRow>,
    bar: &'a indicatif::ProgressBar,
}

impl Rows<'_> {
    fn run<T>(
        &mut self,
        experiment: &str,
        row: &str,
        f: impl FnOnce() -> Result<T, GpuError>,
    ) -> Option<T> {
        progress(&format!("proxy: {experiment}: {row}"));
        self.bar.set_message(format!("proxy: {experiment}: {row}"));
        let out = match f() {
            Ok(v) => Some(v),
            Err(e) => {
                progress(&format!("proxy: {experiment}: {row}: FAILED: {e}"));
                self.failed.push(FailedRow {
                    experiment: format!("proxy {experiment}"),
                    row: row.into(),
                    error: e.to_string(),
                });
                None
            }
        };
        self.bar.inc(1);
        out
    }
}

/// Runs the proxy experiments; returns the rows (a failing row is listed in `failed` and
/// the others still run) and the library's raw results. Only opening the GPU and compiling
/// the proxy program fail the whole run.
pub fn run(
    params: ProxyParams,
    progress_bar: &indicatif::ProgressBar,
) -> Result<(ProxyResult, serde_json::Value), BenchError> {
    let runner = match params.producers {
        Producers::Cpu => {
            progress("proxy: CPU producers stand in for the GPU; software NICs execute");
            Runner::Cpu
        }
        Producers::Gpu => {
            progress("proxy: opening GPU 0 and compiling the proxy program");
            Runner::Gpu(Box::new(ProxyGpu::open()?))
        }
    };
    let rate_configs = params.rate_configs();
    let steps = 2 + rate_configs.len() + 2 + params.assisted_forwarders.len();
    progress_bar.set_position(0);
    progress_bar.set_length(steps as u64);
    let mut rows = Rows {
        failed: Vec::new(),
        bar: progress_bar,
    };
    let e = EnqueueConfig::new(params.enqueue_warmup, params.enqueue_iters);
    let mut enqueue = Vec::new();
    enqueue.extend(rows.run("enqueue", "baseline", || runner.enqueue_baseline(e)));
    enqueue.extend(rows.run("enqueue", "tuned", || runner.enqueue_tuned(e)));
    let mut rates = Vec::new();
    for c in rate_configs {
        let row = format!("T={} R={} B={}", c.workers, c.rings, c.batch);
        rates.extend(rows.run("rate", &row, || runner.rate(c)));
    }
    let mut probes = Vec::new();
    for shared in [false, true] {
        let c = match params.producers {
            Producers::Cpu => ProbeConfig::cpu(shared, params.probe_iters),
            Producers::Gpu => ProbeConfig::gpu(shared, params.probe_iters),
        };
        let row = if shared {
            "shared ring"
        } else {
            "private ring"
        };
        probes.extend(rows.run("probe", row, || runner.probe(c)));
    }
    let mut assisted = Vec::new();
    for &forwarders in &params.assisted_forwarders {
        let c = AssistedConfig::new(forwarders, params.assisted_queues, params.assisted_rounds);
        let row = format!("{forwarders} forwarder(s), {} queues", c.queues);
        assisted.extend(rows.run("assisted", &row, || runner.assisted(c)));
    }
    let raw = serde_json::json!({
        "enqueue": serde_json::to_value(&enqueue).map_err(BenchError::msg)?,
        "rates": serde_json::to_value(&rates).map_err(BenchError::msg)?,
        "probes": serde_json::to_value(&probes).map_err(BenchError::msg)?,
        "assisted": serde_json::to_value(&assisted).map_err(BenchError::msg)?,
        "failed": serde_json::to_value(&rows.failed).map_err(BenchError::msg)?,
    });
    let clocks: Vec<f64> = enqueue.iter().filter_map(|r| r.sm_mhz).collect();
    let enqueue: Vec<EnqueueRow> = enqueue.iter().map(enqueue_row).collect::<Result<_, _>>()?;
    let probes: Vec<ProbeRow> = probes.iter().map(probe_row).collect::<Result<_, _>>()?;
    let (baseline_over_tuned_enqueue_p50, shared_over_private_probe_p50) =
        ratios(&enqueue, &probes);
    let result = ProxyResult {
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        sm_clock_mhz: (!clocks.is_empty())
            .then(|| clocks.iter().sum::<f64>() / clocks.len() as f64),
        enqueue,
        rates: rates.iter().map(rate_row).collect(),
        probes,
        assisted: assisted
            .iter()
            .map(assisted_row)
            .collect::<Result<_, _>>()?,
        baseline_over_tuned_enqueue_p50,
        shared_over_private_probe_p50,
        failed: rows.failed,
        params,
    };
    Ok((result, raw))
}

fn paper_us(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v} µs"))
}

/// The text table of a proxy result.
pub fn table(p: &ProxyResult) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let who = match p.params.producers {
        Producers::Cpu => "CPU producers standing in for the GPU".to_string(),
        Producers::Gpu => match p.sm_clock_mhz {
            Some(mhz) => format!("GPU producers, SM clock {mhz:.0} MHz"),
            None => "GPU producers".to_string(),
        },
    };
    let _ = writeln!(
        t,
        "\nProxy (section 4.2): {who}; software NICs execute (one engine per worker), {} cores",
        p.cores
    );
    let _ = writeln!(
        t,
        "  enqueue, 1 producer, {} requests (paper P-IB: enqueue / put+c on a ConnectX-7)",
        p.params.enqueue_iters
    );
    for r in &p.enqueue {
        let _ = writeln!(
            t,
            "  {:<9} enqueue p50 {:>7.0} ns p99 {:>7.0} ns | put+c p50 {:>8.0} ns p99 {:>8.0} ns ({} pinned)  paper {} / {}",
            r.handoff,
            r.enqueue_ns.p50,
            r.enqueue_ns.p99,
            r.put_completion_ns.p50,
            r.put_completion_ns.p99,
            r.pinned,
            paper_us(r.paper_enqueue_us),
            paper_us(r.paper_put_completion_us)
        );
    }
    if let Some(r) = p.baseline_over_tuned_enqueue_p50 {
        let paper = ratio(
            paper::proxy_table3("baseline").map(|p| p.0),
            paper::proxy_table3("tuned").map(|p| p.0),
        );
        let _ = writeln!(
            t,
            "  baseline / tuned enqueue p50: {r:.1}x (paper {:.1}x)",
            paper.unwrap_or(f64::NAN)
        );
    }
    let _ = writeln!(
        t,
        "  message rate, {} requests per point (paper: Table 10, P-IB, cold)",
        p.params.rate_messages
    );
    for r in &p.rates {
        let paper = r
            .paper_mmsg_per_s
            .map_or(String::new(), |v| format!("  paper {v}"));
        let _ = writeln!(
            t,
            "  T={} R={:<2} B={:<2} {:>8.2} M msg/s ({:.1} WQEs per doorbell, {} pinned){paper}",
            r.workers, r.rings, r.batch, r.mmsg_per_s, r.wqes_per_doorbell, r.pinned
        );
    }
    let _ = writeln!(
        t,
        "  probe put+c under bulk load, {} probes (paper: Table 11 loaded RTT p50, T4/R32/B16, 64 CTAs)",
        p.params.probe_iters
    );
    for r in &p.probes {
        let _ = writeln!(
            t,
            "  {:<8} ring p50 {:>9.0} ns p99 {:>9.0} ns (bulk {:.2} M msg/s, {} producers, T{} R{} B{})  paper {}",
            r.ring,
            r.probe_ns.p50,
            r.probe_ns.p99,
            r.bulk_mmsg_per_s,
            r.bulk_producers,
            r.workers,
            r.bulk_rings,
            r.batch,
            paper_us(r.paper_rtt_p50_us)
        );
    }
    if let Some(r) = p.shared_over_private_probe_p50 {
        let paper = ratio(paper::proxy_table11(true), paper::proxy_table11(false));
        let _ = writeln!(
            t,
            "  shared / private probe p50: {r:.1}x (paper {:.1}x)",
            paper.unwrap_or(f64::NAN)
        );
    }
    let _ = writeln!(
        t,
        "  CPU-assisted doorbell (paper: a host thread ringing for GPU-built WQEs, {} M msg/s)",
        paper::ASSISTED_P_IB_MMSG_PER_S
    );
    for r in &p.assisted {
        let _ = writeln!(
            t,
            "  {} forwarder(s) {} queues B={:<2} {:>8.2} M WQE/s  {} doorbells forwarded ({} indices published)",
            r.forwarders,
            r.queues,
            r.batch,
            r.mwqe_per_s,
            r.doorbells_forwarded,
            r.indices_published
        );
    }
    for f in &p.failed {
        let _ = writeln!(t, "FAILED {} {}: {}", f.experiment, f.row, f.error);
    }
    t
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ibgda_kernels::experiments::proxy::Producer;

    fn ns(p50: f64) -> Percentiles {
        Percentiles {
            count: 1,
            p50,
            ..Percentiles::default()
        }
    }

    /// A proxy result with every section, as the GPU machine writes it.
    pub(crate) fn proxy_result() -> ProxyResult {
        let params = ProxyParams::new(Producers::Gpu, true);
        let enqueue = ["baseline", "tuned"]
            .iter()
            .map(|&handoff| {
                let paper = paper::proxy_table3(handoff);
                EnqueueRow {
                    handoff: handoff.into(),
                    enqueue_ns: ns(100.0),
                    put_completion_ns: ns(2400.0),
                    sm_clock_mhz: Some(1980.0),
                    pinned: "1/1".into(),
                    paper_enqueue_us: paper.map(|p| p.0),
                    paper_put_completion_us: paper.map(|p| p.1),
                }
            })
            .collect();
        let rates = params
            .rate_configs()
            .iter()
            .map(|&c| rate_row(&rate(Producer::Gpu, c)))
            .collect();
        let probes = [false, true]
            .iter()
            .map(|&shared| ProbeRow {
                ring: if shared { "shared" } else { "private" }.into(),
                workers: 4,
                bulk_rings: 32,
                batch: 16,
                bulk_producers: 2048,
                probe_ns: ns(45_000.0),
                bulk_mmsg_per_s: 15.0,
                pinned: "4/4".into(),
                paper_rtt_p50_us: paper::proxy_table11(shared),
            })
            .collect();
        let assisted = [1, 4]
            .iter()
            .map(|&forwarders| AssistedRow {
                forwarders,
                queues: 8,
                batch: 16,
                rounds: 200,
                wqes: 8 * 200 * 16,
                seconds: 0.002,
                mwqe_per_s: 12.8,
                queue_ns: ns(2e6),
                doorbells_forwarded: 1600,
                indices_published: 1600,
            })
            .collect();
        ProxyResult {
            params,
            cores: 16,
            sm_clock_mhz: Some(1980.0),
            enqueue,
            rates,
            probes,
            assisted,
            baseline_over_tuned_enqueue_p50: None,
            shared_over_private_probe_p50: None,
            failed: Vec::new(),
        }
    }

    #[test]
    fn ratios_are_taken_within_the_run_by_name() {
        let mut p = proxy_result();
        p.enqueue[0].enqueue_ns.p50 = 1900.0; // baseline
        p.enqueue[1].enqueue_ns.p50 = 100.0; // tuned
        p.probes[0].probe_ns.p50 = 45_000.0; // private
        p.probes[1].probe_ns.p50 = 135_000.0; // shared
        assert_eq!(ratios(&p.enqueue, &p.probes), (Some(19.0), Some(3.0)));
        // Order does not matter; a missing or zero denominator gives none.
        p.enqueue.reverse();
        p.probes.truncate(1);
        assert_eq!(ratios(&p.enqueue, &p.probes), (Some(19.0), None));
        p.enqueue[0].enqueue_ns.p50 = 0.0;
        assert_eq!(ratios(&p.enqueue, &p.probes), (None, None));
    }

    #[test]
    fn a_report_with_the_proxy_round_trips_and_older_reports_still_read() {
        let report = crate::record::Report {
            proxy: Some(proxy_result()),
            ..crate::record::Report::default()
        };
        let text = serde_json::to_string(&report).unwrap();
        let back: crate::record::Report = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["proxy"]["params"]["producers"], "gpu");
        assert_eq!(value["proxy"]["enqueue"][1]["paper_enqueue_us"], 0.13);
        assert_eq!(value["proxy"]["probes"][1]["paper_rtt_p50_us"], 2190.0);
        // A results.json written before the proxy joined the report reads without it.
        let old: crate::record::Report = serde_json::from_str(include_str!(
            "../../kernels/results/h200-2026-12-01/results.json"
        ))
        .unwrap();
        assert!(old.proxy.is_none() && old.gpu_sink.is_some());
    }

    fn rate(producer: Producer, config: RateConfig) -> RateResult {
        RateResult {
            producer,
            config,
            messages: config.messages,
            ns: 2_000_000,
            mmsg_per_s: config.messages as f64 / 2_000.0,
            posted: config.messages,
            doorbells: config.messages / 16,
            wqes_per_doorbell: 16.0,
            pinning: WorkerPinning {
                pinned: 1,
                workers: config.workers,
            },
        }
    }

    #[test]
    fn cpu_and_gpu_rate_results_make_the_same_row_with_the_papers_figure() {
        let cpu = rate_row(&rate(Producer::Cpu, RateConfig::cpu(1, 32, 16, 1 << 14)));
        let gpu = rate_row(&rate(Producer::Gpu, RateConfig::gpu(1, 32, 16, 1 << 14)));
        assert_eq!((cpu.workers, cpu.rings, cpu.batch), (1, 32, 16));
        assert_eq!(cpu.producer_threads, 2);
        assert_eq!(gpu.producer_threads, 32);
        assert_eq!((cpu.ring_slots, gpu.ring_slots), (256, 1024));
        assert_eq!(cpu.pinned, "1/1");
        assert!((cpu.seconds - 0.002).abs() < 1e-12);
        assert_eq!(cpu.paper_mmsg_per_s, Some(14.4));
        assert_eq!(gpu.paper_mmsg_per_s, Some(14.4));
        let other = rate_row(&rate(Producer::Cpu, RateConfig::cpu(2, 32, 16, 1 << 14)));
        assert_eq!(other.paper_mmsg_per_s, None);
    }

    #[test]
    fn quick_cpu_grid_holds_the_papers_rate_rows() {
        let p = ProxyParams::new(Producers::Cpu, true);
        let configs = p.rate_configs();
        assert_eq!(configs.len(), 2 * 2 * 2);
        for (t, r, b) in [(1, 32, 1), (1, 32, 16)] {
            assert!(
                configs
                    .iter()
                    .any(|c| (c.workers, c.rings, c.batch) == (t, r, b)),
                "T={t} R={r} B={b} missing"
            );
        }
        assert!(ProxyParams::new(Producers::Gpu, false).rate_configs().len() == 36);
    }
}
