//! The GPU experiments of `ibgda_kernels::experiments` in one run against the doorbell sink
//! (no NIC): issue per scope typed vs raw (Table 4), completion scope (Figure 4), message
//! rate (Table 5), dormant cost (Figure 9). Writes `gpu-bench.json` (every parameter and
//! raw sample, the GPU and its SM clock) to OUT_DIR and prints the tables with the targets
//! reached or not.
//!
//! Usage: `ibgda-gpu-bench [--nic soft|DEVICE] [OUT_DIR]` (`--nic soft`, the default,
//! measures against the doorbell sink; `--nic DEVICE` opens a ConnectX through the mlx5
//! backend, feature `mlx5`, and reports its typed error when it cannot: hardware figures
//! need the control plane's queue creation); `ibgda-gpu-bench --one-warp` (only the one-warp,
//! one-QP cooperative rate, in one launch, for a profiler); `ibgda-gpu-bench --one-warp-rows`
//! (that rate five times each against the sink with a reused ring, a ring never reused, and
//! in one launch); `ibgda-gpu-bench --shapes [ITERATIONS]` (only the single-operation
//! shapes, typed beside raw); `ibgda-gpu-bench --dormant [REPETITIONS]` (only the dormant cost, every
//! point's median, spread and loss); `ibgda-gpu-bench --rates PATTERN [REPETITIONS]` (only the
//! Table 5 rows whose label contains PATTERN); `ibgda-gpu-bench --peers
//! [OUT_DIR]` (DOCA GPUNetIO's issue loop compiled from the pinned wheel's headers, beside
//! ibgda typed and raw, on the same queue memory and sink; `peers.json`; a separate run,
//! since the peer's waits are unbounded). Exits 2 with a typed error when no GPU is usable
//! or a program does not compile, 1 when a target is missed or an experiment failed (each
//! failure is recorded in the JSON and printed, and the run goes on).

use std::fmt::Write as _;

use serde::Serialize;

use ibgda::order::{
    GpuFence, GpuFencedDbrec, GpuReleaseStore, SystemFence, SystemReleaseStore, ThreadFence,
    Unordered,
};
use ibgda_kernels::experiments::completion::{self, CompletionResult, WaitScope};
use ibgda_kernels::experiments::dormant::{self, DormantPoint, DormantRegisters};
use ibgda_kernels::experiments::issue::{self, IssueResult};
use ibgda_kernels::experiments::peers::{self, PeerResult};
use ibgda_kernels::experiments::rate::{self, Publication, RateResult};
use ibgda_kernels::experiments::{bench_options, BenchProgram, Summary};
use ibgda_kernels::gpu::{Gpu, GpuError};

#[derive(Serialize)]
struct LabeledRate {
    label: String,
    #[serde(flatten)]
    result: RateResult,
}

#[derive(Serialize)]
struct Target {
    what: String,
    value: f64,
    goal: String,
    reached: bool,
}

#[derive(Serialize)]
struct Report {
    gpu: String,
    issue_iterations: u32,
    issue: Vec<IssueResult>,
    completion: Vec<CompletionResult>,
    rate: Vec<LabeledRate>,
    dormant_registers: Vec<DormantRegisters>,
    dormant: Vec<DormantPoint>,
    targets: Vec<Target>,
    errors: Vec<String>,
}

fn gpu_name(gpu: &Gpu) -> String {
    gpu.context()
        .name()
        .unwrap_or_else(|e| format!("unknown ({e:?})"))
}

fn one_warp(gpu: &Gpu, program: &BenchProgram) -> Result<String, GpuError> {
    let c = rate::config(Publication::PerWarp, 1, 32, 1, 1, 32, 20_000);
    let r = rate::run_one_launch(gpu, program, c)?;
    Ok(format!(
        "one warp, one QP, cooperative, batch 32 [GpuFence], one launch: {:.2} M WQE/s at {:.0} MHz",
        r.mwqe_per_s, r.sm_mhz
    ))
}

/// The one-warp, one-QP cooperative rate (batch 32, GpuFence) five times each: against
/// the sink with a 4,096-WQEBB ring (slots reused, so the producer polls its CQ for room),
/// with a ring never reused, and in one launch. The spread of repeated rows in one run.
fn one_warp_rows(gpu: &Gpu, program: &BenchProgram) -> Result<String, GpuError> {
    let reuse = rate::config(Publication::PerWarp, 1, 32, 1, 1, 32, 20_000);
    let mut reuse_16k = reuse;
    reuse_16k.ring_wqebbs = 16384;
    let mut fresh = rate::config(Publication::PerWarp, 1, 32, 1, 1, 32, 1024);
    fresh.ring_wqebbs = 32768;
    let mut out = String::new();
    for (what, c) in [
        ("ring of 4,096 reused", reuse),
        ("ring of 16,384 reused", reuse_16k),
        ("ring never reused", fresh),
    ] {
        for _ in 0..5 {
            // SAFETY: the benchmark's throw-away queues; the sink counts stale WQEs.
            let r = rate::run(gpu, program, unsafe { GpuFence::new() }, c)?;
            writeln!(
                out,
                "one warp, one QP, batch 32 [GpuFence], sink, {what}: {:.2} M WQE/s at {:.0} MHz ({} WQEs)",
                r.mwqe_per_s, r.sm_mhz, r.wqes
            )
            .expect("writing to a String");
        }
    }
    for _ in 0..5 {
        out.push_str(&one_warp(gpu, program)?);
        out.push('\n');
    }
    Ok(out)
}

/// The dormant-cost experiment alone (`--dormant [REPETITIONS]`): every point's median,
/// fastest and slowest repetition, its loss against the plain build (at the medians) and
/// the SM clock's range, times in microseconds (for A/B runs of the callers).
fn dormant_only(gpu: &Gpu, repetitions: u32) -> Result<String, GpuError> {
    let work = dormant::Work {
        repetitions,
        ..dormant::Work::default()
    };
    let points = dormant::run(gpu, work)?;
    let mut out = String::new();
    for d in &points {
        let s = Summary::of(&d.ns);
        let mhz = |f: fn(f64, f64) -> f64| d.sm_mhz.iter().copied().reduce(f).unwrap_or(0.0);
        writeln!(
            out,
            "{:<10} {:<8} {:>2} regs {:>4} blocks {:>2} msgs {:<5} p50 {:>8.1} us  min {:>8.1}  max {:>8.1}  loss {:>+6.2} %  {:.0}-{:.0} MHz",
            format!("{:?}", d.caller),
            format!("{:?}", d.build),
            d.registers,
            d.blocks,
            d.messages,
            if d.wait { "wait" } else { "" },
            s.p50 as f64 / 1e3,
            s.min as f64 / 1e3,
            s.max as f64 / 1e3,
            100.0 * d.loss,
            mhz(f64::min),
            mhz(f64::max),
        )
        .expect("writing to a String");
    }
    Ok(out)
}

/// The single-operation shapes alone (`--shapes [ITERATIONS]`): typed and raw issue p50
/// (ns and cycles) and typed over raw in cycles, per shape (for A/B runs of the writers),
/// each shape twice: typed first, as the full run has it, then raw first.
fn shapes_only(gpu: &Gpu, iters: u32) -> Result<String, GpuError> {
    let mut out = String::new();
    for (shape, raw_first) in issue::shapes()
        .into_iter()
        .flat_map(|s| [(s, false), (s, true)])
    {
        let r = issue::run_shape_ordered(gpu, shape, iters, raw_first)?;
        out.push_str(if raw_first {
            "raw first   "
        } else {
            "typed first "
        });
        let (tn, tc, _) = r.typed.summaries();
        let (rn, rc, _) = r.raw.summaries();
        writeln!(
            out,
            "{:<36} typed {:>6} ns {:>6} cycles  raw {:>6} ns {:>6} cycles  typed/raw {:.3}",
            shape.label(),
            tn.p50,
            tc.p50,
            rn.p50,
            rc.p50,
            r.typed_over_raw()
        )
        .expect("writing to a String");
    }
    Ok(out)
}

/// Rate rows alone (`--rates PATTERN [REPETITIONS]`): every Table 5 row whose label
/// contains PATTERN, each run REPETITIONS times in turn against the sink as the full run
/// has it (for A/B runs of the posting paths).
fn rates_only(gpu: &Gpu, pattern: &str, repetitions: u32) -> Result<String, GpuError> {
    let program = BenchProgram::load(gpu)?;
    let rows: Vec<_> = rate::table5(1)
        .into_iter()
        .filter(|(label, _)| label.contains(pattern))
        .collect();
    if rows.is_empty() {
        return Err(GpuError::Invalid(format!(
            "--rates {pattern:?}: no Table 5 row's label contains it"
        )));
    }
    let mut out = String::new();
    for _ in 0..repetitions {
        for (label, c) in &rows {
            // SAFETY: the benchmark's throw-away queues; the sink counts stale WQEs.
            let r = rate::run(gpu, &program, unsafe { GpuFence::new() }, *c)?;
            writeln!(
                out,
                "{label:<76} {:>9.2} M WQE/s  {:>8} doorbells seen  {:>4} stale  SM {:.0} MHz",
                r.mwqe_per_s, r.sink_doorbells, r.stale_wqes, r.sm_mhz
            )
            .expect("writing to a String");
        }
    }
    Ok(out)
}

/// Runs one experiment alone (`FLAG [COUNT]`, COUNT `default` when not given) on GPU 0
/// with the run's options and prints its table; exits 2 on a COUNT that is not a number or
/// on the experiment's error.
fn run_alone(
    flag: &str,
    count_name: &str,
    count: Option<&String>,
    default: u32,
    experiment: impl FnOnce(&Gpu, u32) -> Result<String, GpuError>,
) {
    let count = match count {
        None => default,
        Some(c) => c.parse::<u32>().unwrap_or_else(|e| {
            eprintln!("ibgda-gpu-bench {flag}: {count_name} {c:?}: {e}");
            std::process::exit(2);
        }),
    };
    match bench_options()
        .and_then(|o| Gpu::open_with(0, &o))
        .and_then(|gpu| experiment(&gpu, count))
    {
        Ok(t) => print!("{t}"),
        Err(e) => {
            eprintln!("ibgda-gpu-bench {flag}: {e}");
            std::process::exit(2);
        }
    }
}

/// Keeps an experiment's result, or records its error and goes on (a timed-out wait is a
/// status, not a broken context: the rest of the run still measures).
fn keep<T>(errors: &mut Vec<String>, what: &str, r: Result<T, GpuError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            eprintln!("ibgda-gpu-bench: {what}: {e}");
            errors.push(format!("{what}: {e}"));
            None
        }
    }
}

fn run(out_dir: Option<&str>) -> Result<(String, bool), GpuError> {
    let gpu = Gpu::open_with(0, &bench_options()?)?;
    let program = BenchProgram::load(&gpu)?;
    let mut errors = Vec::new();
    let iters = 20_000;
    let mut issue = Vec::new();
    macro_rules! issue_of {
        ($s:expr) => {{
            let r = issue::run(&gpu, $s, iters);
            issue.extend(keep(&mut errors, "issue", r));
        }};
    }
    // SAFETY: benchmark queues on throw-away device memory read only by the sink.
    issue_of!(unsafe { Unordered::new() });
    // SAFETY: as above.
    issue_of!(unsafe { GpuFence::new() });
    issue_of!(GpuFencedDbrec);
    issue_of!(GpuReleaseStore);
    issue_of!(ThreadFence);
    issue_of!(SystemReleaseStore);
    issue_of!(SystemFence);

    let mut completion = Vec::new();
    for q in completion::QUEUE_COUNTS {
        for w in [WaitScope::OneQueue, WaitScope::AllQueues] {
            // SAFETY: the benchmark's throw-away queues, executed by the sink.
            let r = completion::run(&gpu, &program, unsafe { GpuFence::new() }, q, w, 2_000);
            completion.extend(keep(&mut errors, "completion", r));
        }
    }

    let mut rates = Vec::new();
    let mut rate_of = |label: String, r: Result<RateResult, GpuError>| {
        if let Some(result) = keep(&mut errors, &label, r) {
            rates.push(LabeledRate { label, result });
        }
    };
    for (label, c) in rate::table5(1) {
        let label = if label.starts_with("batch sweep") {
            format!("{label}, batch {}", c.batch)
        } else {
            label.to_string()
        };
        // SAFETY: the benchmark's throw-away queues; the sink counts stale WQEs.
        rate_of(
            label,
            rate::run(&gpu, &program, unsafe { GpuFence::new() }, c),
        );
    }
    // The one-warp and 64-queue cooperative rows in one launch (the sink in the last
    // block, reading doorbell records): the profiler's form, and a second sink design.
    let coop_one = rate::config(Publication::PerWarp, 1, 32, 1, 1, 32, 20_000);
    let coop_64 = rate::config(Publication::PerWarp, 64, 32, 64, 1, 32, 20_000);
    for (c, what) in [(coop_one, "1 warp, 1 QP"), (coop_64, "64 warps, 64 QPs")] {
        rate_of(
            format!("one launch: {what}, per-warp, batch 32"),
            rate::run_one_launch(&gpu, &program, c),
        );
    }
    // The cooperative rows under two other scopes.
    for (c, what) in [(coop_one, "1 warp, 1 QP"), (coop_64, "64 warps, 64 QPs")] {
        rate_of(
            format!("{what}, per-warp, batch 32"),
            rate::run(&gpu, &program, GpuReleaseStore, c),
        );
        rate_of(
            format!("{what}, per-warp, batch 32"),
            // SAFETY: benchmark queues on throw-away device memory read only by the sink.
            rate::run(&gpu, &program, unsafe { Unordered::new() }, c),
        );
    }

    let dormant_registers =
        keep(&mut errors, "dormant registers", dormant::registers()).unwrap_or_default();
    let dormant = keep(
        &mut errors,
        "dormant",
        dormant::run(&gpu, dormant::Work::default()),
    )
    .unwrap_or_default();

    // Targets (issue 9, item 3).
    let mut targets = Vec::new();
    for i in &issue {
        let r = i.typed_over_raw();
        targets.push(Target {
            what: format!("typed/raw issue cycles p50, {}", i.scope),
            value: r,
            goal: "1.00 +- 0.02".into(),
            reached: (0.98..=1.02).contains(&r),
        });
    }
    let find = |scope: &str, label_has: &str| {
        rates
            .iter()
            .find(|r| r.result.scope == scope && r.label.contains(label_has))
            .map(|r| r.result.mwqe_per_s)
            .unwrap_or(0.0)
    };
    let one = find("GpuFence", "32 threads, 1 QP, per-warp, batch 32 (paper");
    targets.push(Target {
        what: "1 warp, 1 QP, cooperative [GpuFence], M WQE/s".into(),
        value: one,
        goal: ">= 21.6".into(),
        reached: one >= 21.6,
    });
    let many = find(
        "GpuFence",
        "64 warps, 64 QPs, 64 SMs, per-warp, batch 32 (target",
    );
    targets.push(Target {
        what: "64 QPs on 64 SMs [GpuFence], M WQE/s".into(),
        value: many,
        goal: ">= 1500".into(),
        reached: many >= 1500.0,
    });
    let all_reached = targets.iter().all(|t| t.reached) && errors.is_empty();

    let report = Report {
        gpu: gpu_name(&gpu),
        issue_iterations: iters,
        issue,
        completion,
        rate: rates,
        dormant_registers,
        dormant,
        targets,
        errors,
    };
    if let Some(dir) = out_dir {
        let json =
            serde_json::to_string(&report).map_err(|e| GpuError::Invalid(format!("JSON: {e}")))?;
        std::fs::write(format!("{dir}/gpu-bench.json"), json)
            .map_err(|e| GpuError::Invalid(format!("{dir}/gpu-bench.json: {e}")))?;
    }
    Ok((table(&report), all_reached))
}

fn table(r: &Report) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "GPU: {}", r.gpu);
    let _ = writeln!(
        t,
        "\nIssue of one 8-byte inline RC WRITE, 1 thread, {} iterations (Table 4)",
        r.issue_iterations
    );
    let _ = writeln!(
        t,
        "{:<20} {:>9} {:>9} {:>8} {:>8} {:>10} {:>10} {:>9} {:>7}",
        "scope",
        "typed p50",
        "raw p50",
        "typ cyc",
        "raw cyc",
        "put+c typ",
        "put+c raw",
        "typed/raw",
        "SM MHz"
    );
    for i in &r.issue {
        let (tn, tc, tp) = i.typed.summaries();
        let (rn, rc, rp) = i.raw.summaries();
        let _ = writeln!(
            t,
            "{:<20} {:>6} ns {:>6} ns {:>8} {:>8} {:>7} ns {:>7} ns {:>9.3} {:>7.0}",
            i.scope,
            tn.p50,
            rn.p50,
            tc.p50,
            rc.p50,
            tp.p50,
            rp.p50,
            i.typed_over_raw(),
            (i.typed.sm_mhz + i.raw.sm_mhz) / 2.0
        );
    }
    let _ = writeln!(
        t,
        "\nCompletion scope: put+completion p50 (p99), GpuFence (Figure 4)"
    );
    for c in &r.completion {
        let s: &Summary = &c.summary;
        let _ = writeln!(
            t,
            "  {:>2} queues  {:<10} {:>7} ns ({:>7} ns)  {:.0} MHz",
            c.queues,
            format!("{:?}", c.wait),
            s.p50,
            s.p99,
            c.sm_mhz
        );
    }
    let _ = writeln!(t, "\nMessage rate (Table 5; sink retires only)");
    for x in &r.rate {
        let _ = writeln!(
            t,
            "  {:<62} {:<18} {:>9.2} M WQE/s  {:>5.0} MHz{}",
            x.label,
            x.result.scope,
            x.result.mwqe_per_s,
            x.result.sm_mhz,
            if x.result.never_wraps {
                "  (no slot reuse)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(t, "\nDormant cost: registers (ptxas via NVRTC)");
    for d in &r.dormant_registers {
        let _ = writeln!(
            t,
            "  {:<10} {:<8} {:>3} registers, {:>3} B stack, {} blocks/SM at 256 threads",
            format!("{:?}", d.caller),
            format!("{:?}", d.build),
            d.registers,
            d.stack_bytes,
            d.blocks_per_sm
        );
    }
    let _ = writeln!(
        t,
        "\nDormant cost: 528 x 256 threads, loss vs the plain kernel (Figure 9)"
    );
    for d in &r.dormant {
        let best = d.ns.iter().copied().min().unwrap_or(0);
        let _ = writeln!(
            t,
            "  {:<10} {:<8} {:>4} blocks {:>2} msgs {:<5} {:>9.3} ms  loss {:>6.1} %  {:.0} MHz",
            format!("{:?}", d.caller),
            format!("{:?}", d.build),
            d.blocks,
            d.messages,
            if d.wait { "wait" } else { "" },
            best as f64 / 1e6,
            100.0 * d.loss,
            d.sm_mhz.first().copied().unwrap_or(0.0)
        );
    }
    for e in &r.errors {
        let _ = writeln!(t, "\nERROR {e}");
    }
    let _ = writeln!(t, "\nTargets");
    for x in &r.targets {
        let _ = writeln!(
            t,
            "  {:<52} {:>10.3}  goal {:<12} {}",
            x.what,
            x.value,
            x.goal,
            if x.reached { "reached" } else { "NOT reached" }
        );
    }
    t
}

#[derive(Serialize)]
struct PeersReport {
    gpu: String,
    iterations: u32,
    ibgda: IssueResult,
    doca: PeerResult,
}

fn run_peers(out_dir: Option<&str>) -> Result<String, GpuError> {
    let gpu = Gpu::open_with(0, &bench_options()?)?;
    let iters = 20_000;
    // SAFETY: the benchmark's throw-away queues, executed by the sink.
    let ibgda = issue::run(&gpu, unsafe { GpuFence::new() }, iters)?;
    let doca = peers::run_doca(&gpu, iters)?;
    let report = PeersReport {
        gpu: gpu_name(&gpu),
        iterations: iters,
        ibgda,
        doca,
    };
    if let Some(dir) = out_dir {
        let json =
            serde_json::to_string(&report).map_err(|e| GpuError::Invalid(format!("JSON: {e}")))?;
        std::fs::write(format!("{dir}/peers.json"), json)
            .map_err(|e| GpuError::Invalid(format!("{dir}/peers.json: {e}")))?;
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Peers: one 8-byte inline RC WRITE, 1 thread, {iters} iterations, same queue memory and sink"
    );
    let rows = [
        ("ibgda typed [GpuFence]", &report.ibgda.typed),
        ("ibgda raw [GpuFence]", &report.ibgda.raw),
        ("DOCA GPUNetIO p_thread", &report.doca.run),
    ];
    for (what, r) in rows {
        let (n, c, p) = r.summaries();
        let _ = writeln!(
            t,
            "  {what:<26} issue {:>6} ns ({:>5} cycles)  put+c {:>6} ns  {:.0} MHz",
            n.p50, c.p50, p.p50, r.sm_mhz
        );
    }
    let d = &report.doca;
    let _ = writeln!(
        t,
        "  DOCA queue-pair struct {} B; sink: {} doorbells, {} WQEs, {} CQEs, {} bad WQEs, {} bad doorbells",
        d.qp_struct_bytes, d.sink.doorbells, d.sink.wqes, d.sink.cqes, d.sink.bad_wqes, d.sink.bad_doorbells
    );
    let _ = writeln!(
        t,
        "  DOCA's last {} WQEs: {} parsed by ibgda; parse errors {:?}",
        d.wqes.examined, d.wqes.parsed, d.wqes.parse_errors
    );
    for f in &d.wqes.differences {
        let _ = writeln!(
            t,
            "  byte {:>2}: DOCA {:#04x}, ibgda {:#04x}{}",
            f.offset,
            f.peer,
            f.ibgda,
            if f.peer == 0xa5 {
                " (never written: ring poison)"
            } else {
                ""
            }
        );
    }
    Ok(t)
}

/// Opens a hardware NIC for the run: the device or the typed reason it cannot be used.
#[cfg(feature = "mlx5")]
fn hardware(device: &str) -> Result<String, String> {
    let dev = ibgda::nic::mlx5::Mlx5Device::open(Some(device)).map_err(|e| e.to_string())?;
    Err(format!(
        "opened {}; queues on a hardware NIC come from the control plane's queue creation, \
         which this build does not include yet: run with --nic soft",
        dev.name()
    ))
}

#[cfg(not(feature = "mlx5"))]
fn hardware(device: &str) -> Result<String, String> {
    Err(format!(
        "--nic {device}: built without the mlx5 backend; rebuild with \
         `cargo build --release -p ibgda-kernels --features mlx5,test-support`"
    ))
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(at) = args.iter().position(|a| a == "--nic") {
        let Some(nic) = args.get(at + 1).cloned() else {
            eprintln!("ibgda-gpu-bench: --nic needs a value (soft or a device)");
            std::process::exit(2);
        };
        args.drain(at..at + 2);
        if nic != "soft" {
            if let Err(e) = hardware(&nic) {
                eprintln!("ibgda-gpu-bench: {e}");
                std::process::exit(2);
            }
        }
    }
    let arg = args.first().cloned();
    if arg.as_deref() == Some("--peers") {
        let out = args.get(1).cloned();
        match run_peers(out.as_deref()) {
            Ok(t) => println!("{t}"),
            Err(e) => {
                eprintln!("ibgda-gpu-bench --peers: {e}");
                std::process::exit(2);
            }
        }
        return;
    }
    if let Some(flag @ ("--shapes" | "--dormant")) = arg.as_deref() {
        if flag == "--shapes" {
            run_alone(flag, "iterations", args.get(1), 5_000, shapes_only);
        } else {
            let repetitions = dormant::Work::default().repetitions;
            run_alone(flag, "repetitions", args.get(1), repetitions, dormant_only);
        }
        return;
    }
    if arg.as_deref() == Some("--rates") {
        let Some(pattern) = args.get(1).cloned() else {
            eprintln!("ibgda-gpu-bench --rates: needs a PATTERN (part of a rate row's label)");
            std::process::exit(2);
        };
        let experiment = move |gpu: &Gpu, reps: u32| rates_only(gpu, &pattern, reps);
        run_alone("--rates", "repetitions", args.get(2), 1, experiment);
        return;
    }
    if let Some(flag @ ("--one-warp" | "--one-warp-rows")) = arg.as_deref() {
        let rows = flag == "--one-warp-rows";
        let r = bench_options()
            .and_then(|o| Gpu::open_with(0, &o))
            .and_then(|gpu| {
                BenchProgram::load(&gpu).and_then(|p| {
                    if rows {
                        one_warp_rows(&gpu, &p)
                    } else {
                        one_warp(&gpu, &p)
                    }
                })
            });
        match r {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("ibgda-gpu-bench: {e}");
                std::process::exit(2);
            }
        }
        return;
    }
    match run(arg.as_deref()) {
        Ok((table, all_reached)) => {
            println!("{table}");
            if !all_reached {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("ibgda-gpu-bench: {e}");
            std::process::exit(2);
        }
    }
}
