//! `ibgda-bench`: the paper's experiments that a machine without a NIC can run, each
//! against a baseline in the same run, written as JSON (`results.json`) and plotted (PNG
//! and SVG) beside the paper's numbers.
//!
//! CPU experiments: ibgda's host post against rdma-core's `mlx5_post_send` (`host-post`)
//! and the software NIC's WQE/s per core (`softnic`). GPU experiments (`gpu`, from
//! `ibgda_kernels::experiments`): issue time per ordering scope, typed and raw (Table 4),
//! completion scope, posting rates (Table 5), dormant cost (Figure 9), against the
//! doorbell sink; `peers`: DOCA GPUNetIO's issue loop beside ibgda's; `proxy`: the CPU
//! proxy and the CPU-assisted doorbell on software NICs, GPU producers (CPU producers with
//! `--quick`). `--quick` shrinks the CPU experiments and skips the GPU ones (CI).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod gpu;
mod host;
mod moe;
mod paper;
mod plot;
mod proxy;
mod record;
mod softnic;
mod stats;
mod targets;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use record::{GpuInfo, Machine, Report, Skipped, SCHEMA_VERSION};

/// Why a run failed.
#[derive(Debug)]
pub enum BenchError {
    /// A result failed its own check, or a step refused its input.
    Invalid(String),
    /// The GPU side failed (no driver, NVRTC, a launch or a bounded wait).
    Gpu(ibgda_kernels::gpu::GpuError),
    /// Writing results.
    Io(PathBuf, std::io::Error),
    /// Drawing a plot.
    Plot(String),
}

impl BenchError {
    /// Wraps any displayable error as [`BenchError::Invalid`].
    pub fn msg(e: impl std::fmt::Display) -> Self {
        Self::Invalid(e.to_string())
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(m) => f.write_str(m),
            Self::Gpu(e) => write!(f, "GPU: {e}"),
            Self::Io(p, e) => write!(f, "{}: {e}", p.display()),
            Self::Plot(m) => write!(f, "plot: {m}"),
        }
    }
}

impl std::error::Error for BenchError {}

impl From<ibgda_kernels::gpu::GpuError> for BenchError {
    fn from(e: ibgda_kernels::gpu::GpuError) -> Self {
        Self::Gpu(e)
    }
}

#[derive(Parser, Debug)]
#[command(name = "ibgda-bench", version, about, long_about = None)]
struct Cli {
    /// Directory for results.json and the plots (created if missing).
    #[arg(short, long, default_value = "bench-out", global = true)]
    out: PathBuf,
    /// Small sizes for CI; experiments that need a GPU are skipped (and listed as such),
    /// the proxy runs with CPU producers unless `proxy --producers gpu` asks for the GPU.
    #[arg(long, global = true)]
    quick: bool,
    /// Write no plots.
    #[arg(long, global = true)]
    no_plots: bool,
    /// Hide progress bars (they are hidden anyway when stderr is not a terminal).
    #[arg(long, global = true)]
    no_progress: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug, Clone)]
enum Command {
    /// ibgda's host post rate against rdma-core's mlx5_post_send, one core, same run.
    HostPost,
    /// The CPU software NIC's WQE/s per core, per WQE kind.
    Softnic {
        /// Only these kinds (repeatable; all when absent).
        #[arg(long = "kind", value_enum)]
        kinds: Vec<softnic::WqeKind>,
    },
    /// Every CPU experiment (host-post, softnic).
    Cpu,
    /// Every GPU experiment against the doorbell sink (Table 4, completion scope, Table 5,
    /// dormant cost). Needs a GPU.
    Gpu,
    /// DOCA GPUNetIO's device verbs beside ibgda typed and raw, on the same queue memory
    /// and sink (headers of the pinned nvidia-nvshmem-cu13 wheel: $IBGDA_PEER_INCLUDE or
    /// target/peers/include). Needs a GPU. Writes peers.json.
    Peers {
        /// Which peers run beside ibgda (NVSHMEM's first launch can block in the driver:
        /// running it alone keeps DOCA's figures whatever it does).
        #[arg(long, value_enum, default_value = "both")]
        peer: gpu::PeerSet,
    },
    /// The CPU proxy and the CPU-assisted doorbell on software NICs (section 4.2): enqueue
    /// per handoff, T x R x B message rate, private vs shared probe under load, 1 and 4
    /// forwarders. GPU producers; with --quick, CPU threads stand in for them.
    Proxy {
        /// Who produces the requests (default: gpu, or cpu with --quick).
        #[arg(long, value_enum)]
        producers: Option<proxy::Producers>,
    },
    /// A DeepEP-style low-latency MoE dispatch and combine (8 ranks emulated on one GPU,
    /// 128 tokens each, hidden 7168, top-8 of 256 experts; BF16 and FP8), the device API
    /// against the same kernels on the builders, over the CUDA software NIC. Needs a GPU.
    Moe {
        /// Timed iterations of each variant and format.
        #[arg(long, default_value_t = 50)]
        iterations: usize,
    },
    /// Everything: CPU and GPU experiments and the proxy (GPU ones skipped with --quick,
    /// the proxy then with CPU producers).
    All,
    /// Re-renders the plots and the table of a results.json.
    Plot {
        /// The results.json to read.
        json: PathBuf,
    },
}

fn progress_bar(hidden: bool) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(
        Some(0),
        if hidden {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        },
    );
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:32} {pos}/{len} {msg}")
            .expect("a valid progress template"),
    );
    bar
}

/// The raw results written beside the report: (file name, the library's own results
/// with their raw samples).
type RawResults = Vec<(&'static str, serde_json::Value)>;

/// Runs what the command asks for; returns the report and the libraries' own results
/// (raw samples) of the GPU and proxy experiments that ran.
fn run(cli: &Cli) -> Result<(Report, RawResults), BenchError> {
    if let Command::Plot { json } = &cli.command {
        let text = std::fs::read_to_string(json).map_err(|e| BenchError::Io(json.clone(), e))?;
        let report = serde_json::from_str(&text)
            .map_err(|e| BenchError::Invalid(format!("{}: {e}", json.display())))?;
        return Ok((report, Vec::new()));
    }
    let (cpu, gpu) = match cli.command {
        Command::HostPost | Command::Softnic { .. } | Command::Cpu => (true, false),
        Command::Gpu | Command::Peers { .. } => (false, true),
        Command::Proxy { .. } | Command::Moe { .. } => (false, false),
        Command::All => (true, true),
        Command::Plot { .. } => unreachable!("handled above"),
    };
    let default_producers = if cli.quick {
        proxy::Producers::Cpu
    } else {
        proxy::Producers::Gpu
    };
    let proxy_producers = match cli.command {
        Command::Proxy { producers } => Some(producers.unwrap_or(default_producers)),
        Command::All => Some(default_producers),
        _ => None,
    };
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        tool: format!("ibgda-bench {}", env!("CARGO_PKG_VERSION")),
        started_unix_s: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        quick: cli.quick,
        machine: Machine::probe(),
        ..Report::default()
    };
    let bar = progress_bar(cli.no_progress);
    let mut raw = RawResults::new();
    if cpu && !matches!(cli.command, Command::Softnic { .. }) {
        report.host_post = Some(host::run(host::HostPostParams::new(cli.quick), &bar)?);
    }
    if cpu && !matches!(cli.command, Command::HostPost) {
        let kinds = match &cli.command {
            Command::Softnic { kinds } => kinds.clone(),
            _ => Vec::new(),
        };
        let params = softnic::SoftnicParams::new(cli.quick, &kinds);
        report.softnic = Some(softnic::run(params, &bar)?);
    }
    // Before the sink experiments: their GPU may be left busy by a launch that timed out,
    // while every proxy wait is bounded on the device.
    if let Some(producers) = proxy_producers {
        let params = proxy::ProxyParams::new(producers, cli.quick);
        match proxy::run(params, &bar) {
            Ok((result, proxy_raw)) => {
                report.failed |= result.failed();
                if producers == proxy::Producers::Gpu && report.gpu.is_none() {
                    let mut info = GpuInfo::probe();
                    info.measured_sm_clock_mhz = result.sm_clock_mhz.unwrap_or(0.0);
                    report.gpu = Some(info);
                }
                report.proxy = Some(result);
                raw.push(("proxy-raw.json", proxy_raw));
            }
            // `all` keeps the other results and says why the proxy's are missing (the run
            // still fails); `proxy` alone just fails.
            Err(e) if matches!(cli.command, Command::All) => {
                report.skipped.push(Skipped {
                    experiment: "proxy".into(),
                    reason: format!("failed: {e}"),
                });
                report.failed = true;
            }
            Err(e) => return Err(e),
        }
    }
    if let Command::Moe { iterations } = cli.command {
        if cli.quick {
            report.skipped.push(Skipped {
                experiment: "moe".into(),
                reason: "--quick runs only what needs no GPU".into(),
            });
        } else {
            let (result, moe_raw) = moe::run(iterations)?;
            report.failed |= result.failed();
            report.gpu = Some(GpuInfo::probe());
            report.moe = Some(result);
            raw.push(("moe-raw.json", moe_raw));
        }
    }
    if gpu {
        if cli.quick {
            report.skipped.push(Skipped {
                experiment: "gpu".into(),
                reason: "--quick runs only what needs no GPU".into(),
            });
        } else {
            let mut info = GpuInfo::probe();
            let params = gpu::GpuParams::default();
            // A failed row is kept in the result (with why) and fails the run.
            let outcome = if let Command::Peers { peer } = cli.command {
                gpu::run_peers(params.issue_iters, &bar, peer).map(|(result, raw)| {
                    info.measured_sm_clock_mhz = result.ibgda_typed.sm_clock_mhz;
                    report.failed |= result.failed();
                    report.peers = Some(result);
                    raw
                })
            } else {
                gpu::run(params, &bar).map(|(result, raw)| {
                    info.measured_sm_clock_mhz = result.sm_clock_mhz;
                    report.failed |= result.failed();
                    report.gpu_sink = Some(result);
                    raw
                })
            };
            match outcome {
                Ok(gpu_raw) => {
                    report.gpu = Some(info);
                    let name = if matches!(cli.command, Command::Peers { .. }) {
                        "peers-raw.json"
                    } else {
                        "gpu-raw.json"
                    };
                    raw.push((name, gpu_raw));
                }
                // `all` keeps the CPU results and says why the GPU part is missing (the
                // run still fails); the GPU commands alone just fail.
                Err(e) if matches!(cli.command, Command::All) => {
                    report.skipped.push(Skipped {
                        experiment: "gpu".into(),
                        reason: format!("failed: {e}"),
                    });
                    report.failed = true;
                }
                Err(e) => return Err(e),
            }
        }
    }
    bar.finish_and_clear();
    Ok((report, raw))
}

fn write_outputs(cli: &Cli, report: &Report, raw: &RawResults) -> Result<Vec<PathBuf>, BenchError> {
    let dir = &cli.out;
    std::fs::create_dir_all(dir).map_err(|e| BenchError::Io(dir.clone(), e))?;
    let mut files = Vec::new();
    let stem = if matches!(cli.command, Command::Peers { .. }) {
        "peers"
    } else {
        "results"
    };
    let mut write = |name: String, value: &dyn erased_json::Json| -> Result<(), BenchError> {
        let path = dir.join(name);
        let text = value.to_json()?;
        std::fs::write(&path, text).map_err(|e| BenchError::Io(path.clone(), e))?;
        files.push(path);
        Ok(())
    };
    if !matches!(cli.command, Command::Plot { .. }) {
        write(format!("{stem}.json"), report)?;
    }
    for (name, value) in raw {
        write(name.to_string(), value)?;
    }
    if !cli.no_plots {
        files.extend(plot::render_report(report, dir)?);
    }
    Ok(files)
}

/// The text tables of a report.
fn table(report: &Report) -> String {
    let mut t = String::new();
    if let Some(h) = &report.host_post {
        let _ = writeln!(
            t,
            "\nHost post, 8 B inline RC WRITE, one WQE and one doorbell per post, one core \
             ({} batches of {} posts)",
            h.params.batches, h.params.batch
        );
        for side in [&h.ibgda, &h.ibgda_prebuilt, &h.rdma_core] {
            let p = &side.ns_per_post;
            let _ = writeln!(
                t,
                "  {:<30} p50 {:>7.2} ns  p99 {:>7.2} ns  {:>7.2} M posts/s",
                side.name,
                p.p50,
                p.p99,
                side.posts_per_s_p50 / 1e6
            );
        }
        let _ = writeln!(
            t,
            "  ibgda / rdma-core speed: {:.2}x, WQE built once {:.2}x (target {:.1}x: {})",
            h.speedup_p50,
            h.speedup_prebuilt_p50,
            h.target,
            verdict(h.speedup_p50 >= h.target)
        );
    }
    if let Some(s) = &report.softnic {
        let _ = writeln!(
            t,
            "\nCPU software NIC, one core ({} rounds of {} WQEs per kind; engine time only)",
            s.params.rounds, s.params.round
        );
        for r in &s.rows {
            let _ = writeln!(
                t,
                "  {:<20} p50 {:>7.1} ns/WQE  p99 {:>7.1}  {:>7.2} M WQE/s ({})  same-run copy of its bytes {:>6.1} ns/WQE: {:.1} copies per WQE",
                r.kind.label(),
                r.ns_per_wqe.p50,
                r.ns_per_wqe.p99,
                r.wqes_per_s_p50 / 1e6,
                verdict(r.wqes_per_s_p50 >= s.target_wqes_per_s),
                r.copy_ns_per_wqe.p50,
                r.copies_per_wqe_p50
            );
        }
        let _ = writeln!(
            t,
            "  (target {:.0} M WQE/s per core)",
            s.target_wqes_per_s / 1e6
        );
    }
    if let Some(g) = &report.gpu_sink {
        if let Some(info) = &report.gpu {
            let _ = writeln!(
                t,
                "\nGPU {} (driver {}), SM clock measured {:.0} MHz (nvidia-smi before: {}, max {})",
                info.name, info.driver, g.sm_clock_mhz, info.smi_sm_clock, info.smi_max_sm_clock
            );
        }
        let _ = writeln!(
            t,
            "Table 4: issue of one 8 B inline RC WRITE, 1 thread, {} iterations, doorbell sink",
            g.params.issue_iters
        );
        let _ = writeln!(
            t,
            "  {:<20} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}",
            "scope", "typed p50", "raw p50", "typ cyc", "raw cyc", "typed/raw", "paper issue"
        );
        for r in &g.issue {
            let paper = paper::table4(&r.scope)
                .map_or("-".to_string(), |(_, issue, _)| format!("{issue:.2} us"));
            let _ = writeln!(
                t,
                "  {:<20} {:>7.0} ns {:>7.0} ns {:>10.0} {:>10.0} {:>10.3} {:>12}",
                r.scope,
                r.typed.issue_ns.p50,
                r.raw.issue_ns.p50,
                r.typed.issue_cycles.p50,
                r.raw.issue_cycles.p50,
                r.typed_over_raw,
                paper
            );
            if let Some(st) = r.stale_wqes {
                let _ = writeln!(t, "    stale WQEs seen: {} of {}", st.seen, st.of);
            }
        }
        if !g.shapes.is_empty() {
            let _ = writeln!(
                t,
                "Table 3 / Figure 3: one operation's shape [GpuFence], issue p50 typed and raw, put+c (sink)"
            );
            for r in &g.shapes {
                let paper = match (r.kind.as_str(), r.bytes) {
                    ("Inline", b) if b <= paper::FIG3_INLINE_GAIN_ENDS_BYTES => {
                        format!("paper issue ~{:.2} us", paper::fig3_inline_issue_us(b))
                    }
                    ("Pointer", 8) => format!(
                        "paper issue {:.2} us, put+c {:.2} us",
                        paper::TABLE3_MINI_GDA_POINTER.0,
                        paper::TABLE3_MINI_GDA_POINTER.1
                    ),
                    _ => String::new(),
                };
                let _ = writeln!(
                    t,
                    "  {:<36} typed {:>6.0} ns  raw {:>6.0} ns  typed/raw {:.3}  put+c {:>6.0} ns  {paper}",
                    r.label,
                    r.typed.issue_ns.p50,
                    r.raw.issue_ns.p50,
                    r.typed_over_raw,
                    r.typed.put_c_ns.p50
                );
            }
        }
        let _ = writeln!(
            t,
            "Completion scope [GpuFence]: put+c p50, wait for one queue vs quiet over all"
        );
        for c in &g.completion {
            let _ = writeln!(
                t,
                "  {:>3} queues {:<10} p50 {:>8.0} ns  p99 {:>8.0} ns",
                c.queues, c.wait, c.put_c_ns.p50, c.put_c_ns.p99
            );
        }
        let _ = writeln!(t, "Table 5: posting rate (sink only retires)");
        for r in &g.rates {
            let mut notes = String::new();
            if r.scope == "GpuFence" {
                if let Some(v) = paper::table5(&r.label) {
                    let _ = write!(notes, "  paper {v}");
                }
                if let Some(goal) = paper::rate_target(&r.label) {
                    let _ = write!(notes, "  target {goal}: {}", verdict(r.mwqe_per_s >= goal));
                }
            }
            if let Some(st) = r.stale_wqes {
                let _ = write!(notes, "  stale WQEs seen: {} of {}", st.seen, st.of);
            }
            match (r.sink_bound_mwqe_per_s, r.sink_share()) {
                (Some(bound), Some(share)) => {
                    let _ = write!(
                        notes,
                        "  sink bound {bound:.1} ({:.0} %{})",
                        share * 100.0,
                        if share >= gpu::SINK_BOUND_SHARE {
                            ": BOUNDED BY THE SINK"
                        } else {
                            ""
                        }
                    );
                }
                _ if !r.label.starts_with("one launch") => {
                    let _ = write!(notes, "  sink bound not measured");
                }
                _ => {}
            }
            let _ = writeln!(
                t,
                "  {:<66} {:>9.2} M WQE/s{notes}",
                format!("{} [{}]", r.label, r.scope),
                r.mwqe_per_s
            );
        }
        let _ = writeln!(
            t,
            "Sink capacity: the sink alone over pre-built WQEs and doorbells (no producer), one thread per queue"
        );
        for c in &g.sink_capacity {
            let _ = writeln!(
                t,
                "  {:<13} {:>4} queues  {:>7.1} ns/doorbell  {:>7.2} M doorbells/s per queue  {:>8.2} M doorbells/s in all",
                c.mode,
                c.queues,
                c.ns_per_doorbell,
                c.doorbells_per_s_per_queue / 1e6,
                c.doorbells_per_s / 1e6
            );
        }
        let _ = writeln!(
            t,
            "CUDA software NIC: WQEs executed over pre-posted rings, no producer (target {} M WQE/s on all SMs)",
            targets::NIC_RATE_MWQE
        );
        for r in &g.nic_rate {
            let _ = writeln!(
                t,
                "  {:<18} {:>4} engine(s) {:>4} queues {:>8} WQEs  {:>8.2} M WQE/s  SM {:.0} MHz",
                r.op, r.engines, r.queues, r.wqes, r.mwqe_per_s, r.sm_clock_mhz
            );
        }
        let _ = writeln!(t, "Dormant cost: registers per thread (ptxas)");
        for r in &g.dormant_registers {
            let _ = writeln!(
                t,
                "  {:<10} {:<8} {:>4} registers, {} B stack, {} spill stores, {} blocks/SM",
                r.caller, r.build, r.registers, r.stack_bytes, r.spill_stores, r.blocks_per_sm
            );
        }
        let _ = writeln!(
            t,
            "Dormant cost: kernel time against the plain kernel of the same launch"
        );
        for d in &g.dormant {
            let _ = writeln!(
                t,
                "  {:<10} {:<8} {:>4} blocks {:>3} regs {:>3} messages/block{} p50 {:>10.0} ns  loss {:>6.2} %",
                d.caller,
                d.build,
                d.blocks,
                d.registers,
                d.messages,
                if d.wait { ", waiting" } else { "         " },
                d.ns.p50,
                d.loss * 100.0
            );
        }
    }
    if let Some(g) = &report.gpu_sink {
        for f in &g.failed {
            let _ = writeln!(t, "FAILED {} {}: {}", f.experiment, f.row, f.error);
        }
    }
    let goals = targets::all(report);
    if !goals.is_empty() {
        let _ = writeln!(
            t,
            "\nTargets of the GPU path (the paper's figure or better in every row; dormant code free): {} of {} reached",
            goals.iter().filter(|x| x.reached).count(),
            goals.len()
        );
        t.push_str(&targets::table(&goals));
    }
    if let Some(p) = &report.peers {
        let _ = writeln!(
            t,
            "\nPeers: one 8-byte inline RC WRITE, 1 thread, {} iterations, same queue memory and sink",
            p.iterations
        );
        let nvshmem = p.nvshmem.as_ref();
        for (what, side, error) in [
            ("ibgda typed [GpuFence]", Some(&p.ibgda_typed), None),
            ("ibgda raw [GpuFence]", Some(&p.ibgda_raw), None),
            ("DOCA GPUNetIO", p.doca.as_ref(), p.doca_error.as_deref()),
            (
                "NVSHMEM IBGDA",
                nvshmem.and_then(|n| n.run.as_ref()),
                nvshmem.and_then(|n| n.error.as_deref()),
            ),
        ] {
            let Some(side) = side else {
                match error {
                    Some(why) => {
                        let _ = writeln!(t, "  {what:<24} FAILED: {why}");
                    }
                    // Not selected with --peer (a peer that ran has a result or an error).
                    None => {
                        let _ = writeln!(t, "  {what:<24} not run in this process");
                    }
                }
                continue;
            };
            let _ =
                writeln!(
                t,
                "  {:<24} issue p50 {:>6.0} ns ({:>6.0} cycles)  put+c p50 {:>7.0} ns  {:.0} MHz",
                what, side.issue_ns.p50, side.issue_cycles.p50, side.put_c_ns.p50, side.sm_clock_mhz
            );
        }
        if p.doca.is_some() || p.doca_error.is_some() {
            let _ = writeln!(
                t,
                "  DOCA WQEs: {} examined, {} parsed by ibgda, {} refused, {} byte differences from ibgda's encoding",
                p.doca_wqes_examined,
                p.doca_wqes_parsed,
                p.doca_parse_errors.len(),
                p.doca_byte_differences.len()
            );
        }
        for e in p
            .doca_parse_errors
            .iter()
            .chain(&p.doca_byte_differences)
            .take(8)
        {
            let _ = writeln!(t, "    {e}");
        }
        if let Some(n) = nvshmem.filter(|n| n.error.is_none()) {
            let _ = writeln!(
                t,
                "  NVSHMEM WQEs: {} examined, {} parsed by ibgda, {} refused, {} byte differences from ibgda's encoding; sink {}",
                n.wqes_examined,
                n.wqes_parsed,
                n.parse_errors.len(),
                n.byte_differences.len(),
                n.sink
            );
            for e in n.parse_errors.iter().chain(&n.byte_differences).take(8) {
                let _ = writeln!(t, "    {e}");
            }
        }
    }
    if let Some(p) = &report.proxy {
        t.push_str(&proxy::table(p));
    }
    if let Some(m) = &report.moe {
        t.push_str(&moe::table(m));
    }
    for s in &report.skipped {
        let _ = writeln!(t, "\nskipped {}: {}", s.experiment, s.reason);
    }
    t
}

/// Pretty JSON of the two kinds of value written.
mod erased_json {
    use crate::BenchError;

    /// A value written as pretty JSON.
    pub trait Json {
        /// The JSON text.
        fn to_json(&self) -> Result<String, BenchError>;
    }

    impl Json for crate::record::Report {
        fn to_json(&self) -> Result<String, BenchError> {
            serde_json::to_string_pretty(self).map_err(BenchError::msg)
        }
    }

    impl Json for serde_json::Value {
        fn to_json(&self) -> Result<String, BenchError> {
            // Raw samples: compact, they are large.
            serde_json::to_string(self).map_err(BenchError::msg)
        }
    }
}

fn verdict(reached: bool) -> &'static str {
    if reached {
        "reached"
    } else {
        "NOT reached"
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (report, raw) = match run(&cli) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ibgda-bench: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", table(&report));
    match write_outputs(&cli, &report, &raw) {
        Ok(files) => {
            println!();
            for f in files {
                println!("wrote {}", Path::new(&f).display());
            }
            if report.failed {
                eprintln!("ibgda-bench: an experiment failed (see FAILED and \"skipped\" above)");
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("ibgda-bench: {e}");
            ExitCode::from(2)
        }
    }
}
