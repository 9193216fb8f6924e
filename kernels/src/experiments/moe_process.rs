//! The MoE dispatch and combine of [`super::moe`] with each rank a process of its own:
//! the process owns its rank's device (on a fabric numbered for its rank), queue pairs,
//! windows and buffers on its GPU, exchanges endpoints, windows and the IPC exports of its
//! buffers over a [`Bootstrap`] (TCP on loopback), and runs a CUDA software NIC that
//! executes its own queue pairs, writing peer ranks' memory through CUDA IPC mappings (the
//! stand-in for the wire: on one GPU across processes, across GPUs with peer access). See
//! [`crate::multiprocess`] for the records and the teardown contract.
//!
//! [`run_rank`] runs one rank: the same kernels (`cuda/moe.cu`, one launch of
//! `blocks_per_rank` blocks for this rank), a checked iteration of each variant asked for
//! (this rank's received slots, counts, meta words and combined output against the CPU
//! reference, which derives every rank's inputs from the seed), then timed iterations;
//! rank 0 gathers every rank's verdict and kernel times ([`ProcessResult`]). Every rank
//! takes part in the same collectives whatever happens to it: a step that fails on one
//! rank is reported to all at the next collective ([`agreed`]), and every rank then goes
//! to the teardown (NIC stopped and dropped, mappings closed, a barrier, buffers freed).
//!
//! [`Args`] is the example's command line (threads of one process, a parent that starts
//! one process per rank with [`launch`], or one rank), parsed here so that it is tested
//! without a GPU. The figures are the CUDA software NIC's (an engine thread copying the
//! bytes across processes, time-sliced with the other processes' contexts on a shared
//! GPU), not a ConnectX's.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{LaunchConfig, PushKernelArg};
use serde::{Deserialize, Serialize};

use ibgda::memory::DeviceBuffer;
use ibgda::nic::team::{Bootstrap, BootstrapError, TcpBootstrap, TeamError};
use ibgda::nic::Device;

use super::moe::{
    bytes_of, check_rank, compile_for, nic_report, raw_rows, reference, setup_rank, MoeLayout,
    MoeParams, MoeRank, MAX_ITERS, STAMPS, WINDOWS, W_COMBINE, W_RECV, W_SEND, W_SIGNAL,
};
use super::{progress, wait_stream, Summary, HOST_WAIT_LIMIT};
use crate::api::{status, CommOptions, GpuComm, GpuWindow};
use crate::cudanic::{process_nic_builder, CudaFabric};
use crate::gpu::{CompileOptions, Gpu, GpuError};
use crate::ipc::{self, Imports};
use crate::multiprocess::{
    barrier, exchange, rank_lid, rank_queue_numbers, rank_record, remote_ranks, RankError,
    MAX_RANKS,
};

/// The environment every process of a multi-process run gets: NVLink multicast (NVLS)
/// off for NCCL and NVSHMEM (nothing here calls `cuMulticastCreate`).
pub const NVLS_OFF: [(&str, &str); 2] = [("NCCL_NVLS_ENABLE", "0"), ("NVSHMEM_DISABLE_NVLS", "1")];

/// The compile options of a process's GPU (its NIC's program and `moe.cu`): every
/// device wait on no queue pair bounded by 30 s, the NIC's idle included. Longer than the
/// experiments' 5 s: between steps a rank's NIC keeps running while the ranks meet at a
/// collective (the slowest rank's step, time-sliced with the other processes on a shared
/// GPU), and a NIC that stopped itself there would be reported.
pub fn process_options() -> Result<CompileOptions, GpuError> {
    CompileOptions::new().spin_limit(Duration::from_secs(30))
}

/// Which kernels a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Variant {
    /// On the device API.
    Typed,
    /// On the builders.
    Raw,
}

impl Variant {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Typed => "typed",
            Self::Raw => "raw",
        }
    }
}

/// How the ranks are run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Threads of this process on GPU 0 ([`super::moe::run`]).
    Threads,
    /// A parent that starts `processes` processes of this program, one rank each, on
    /// loopback, and waits for them.
    Parent {
        /// Processes (ranks).
        processes: usize,
    },
    /// One rank of `size`, its bootstrap's root (rank 0 listens there) at `bootstrap`.
    Rank {
        /// This rank.
        rank: usize,
        /// Ranks in all.
        size: usize,
        /// Rank 0's address.
        bootstrap: SocketAddr,
        /// The GPU (ordinal); by default rank % the GPUs present.
        gpu: Option<usize>,
    },
}

/// The example's command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Args {
    /// How the ranks run.
    pub mode: Mode,
    /// What runs (`ranks` is the processes' count in the process modes).
    pub params: MoeParams,
    /// The variants checked and timed, in order.
    pub variants: Vec<Variant>,
    /// The bound of every bootstrap socket operation (a rank waits this long for the
    /// slowest at a collective).
    pub timeout: Duration,
    /// The parent's bound on the whole run: its children are killed past it.
    pub deadline: Duration,
    /// Rank 0 (or the threads' run) writes its result here as JSON.
    pub out: Option<PathBuf>,
}

/// Why a command line is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// An option this program does not take.
    Unknown(String),
    /// An option without its value.
    MissingValue(String),
    /// A value that does not parse.
    BadValue {
        /// The option.
        option: String,
        /// Its value.
        value: String,
    },
    /// A value past its limit.
    OutOfRange {
        /// The option.
        option: String,
        /// Its value.
        value: u64,
        /// The smallest accepted.
        min: u64,
        /// The largest accepted.
        max: u64,
    },
    /// Options that do not go together, or one missing.
    Conflict(String),
}

impl core::fmt::Display for ArgError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Unknown(o) => write!(f, "unknown option {o}"),
            Self::MissingValue(o) => write!(f, "{o} needs a value"),
            Self::BadValue { option, value } => write!(f, "{option} {value}: not a value of it"),
            Self::OutOfRange {
                option,
                value,
                min,
                max,
            } => write!(f, "{option} {value}: out of range ({min} to {max})"),
            Self::Conflict(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for ArgError {}

/// The usage text.
pub const USAGE: &str = "\
usage: moe [--fp8] [SHAPE]                          ranks as threads of this process (GPU 0)
       moe --processes N [SHAPE]                    N processes of this program, one rank each
       moe --rank R --size N --bootstrap ADDR [--gpu G] [--ranks-per-process 1] [SHAPE]
                                                    one rank (rank 0 listens at ADDR)
SHAPE: --ranks N (threads) --tokens T --hidden H --topk K --experts E --blocks B
       --engines X --iterations I --warmup W --seed S --variants typed|raw|both
       --timeout-s S (bootstrap) --deadline-s S (parent) --out FILE";

fn number(option: &str, value: &str, min: u64, max: u64) -> Result<u64, ArgError> {
    let v: u64 = value.parse().map_err(|_| ArgError::BadValue {
        option: option.into(),
        value: value.into(),
    })?;
    if v < min || v > max {
        return Err(ArgError::OutOfRange {
            option: option.into(),
            value: v,
            min,
            max,
        });
    }
    Ok(v)
}

impl Args {
    /// Parses the arguments after the program's name.
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Self, ArgError> {
        let mut it = args.into_iter();
        let mut fp8 = false;
        let mut shape: Vec<(String, u64)> = Vec::new();
        let (mut processes, mut rank, mut size, mut bootstrap, mut gpu) =
            (None, None, None, None, None);
        let mut variants = vec![Variant::Typed, Variant::Raw];
        let mut timeout = Duration::from_secs(120);
        let mut deadline = Duration::from_secs(600);
        let mut out = None;
        let max_ranks = MAX_RANKS as u64;
        while let Some(a) = it.next() {
            let mut value = || it.next().ok_or_else(|| ArgError::MissingValue(a.clone()));
            match a.as_str() {
                "--fp8" => fp8 = true,
                "--processes" => processes = Some(number(&a, &value()?, 1, max_ranks)? as usize),
                "--rank" => rank = Some(number(&a, &value()?, 0, max_ranks - 1)? as usize),
                "--size" => size = Some(number(&a, &value()?, 1, max_ranks)? as usize),
                "--gpu" => gpu = Some(number(&a, &value()?, 0, 1 << 16)? as usize),
                "--ranks-per-process" => {
                    number(&a, &value()?, 1, 1)?;
                }
                "--bootstrap" => {
                    let v = value()?;
                    bootstrap = Some(v.parse::<SocketAddr>().map_err(|_| ArgError::BadValue {
                        option: a.clone(),
                        value: v,
                    })?);
                }
                "--variants" => {
                    let v = value()?;
                    variants = match v.as_str() {
                        "typed" => vec![Variant::Typed],
                        "raw" => vec![Variant::Raw],
                        "both" => vec![Variant::Typed, Variant::Raw],
                        _ => {
                            return Err(ArgError::BadValue {
                                option: a.clone(),
                                value: v,
                            })
                        }
                    };
                }
                "--timeout-s" => timeout = Duration::from_secs(number(&a, &value()?, 1, 3600)?),
                "--deadline-s" => {
                    deadline = Duration::from_secs(number(&a, &value()?, 1, 24 * 3600)?)
                }
                "--out" => out = Some(PathBuf::from(value()?)),
                "--ranks" | "--tokens" | "--hidden" | "--topk" | "--experts" | "--blocks"
                | "--engines" | "--iterations" | "--warmup" => {
                    let v = number(&a, &value()?, 0, 1 << 20)?;
                    shape.push((a.clone(), v));
                }
                "--seed" => {
                    let v = value()?;
                    let s = v.parse::<u64>().map_err(|_| ArgError::BadValue {
                        option: a.clone(),
                        value: v,
                    })?;
                    shape.push((a.clone(), s));
                }
                _ => return Err(ArgError::Unknown(a)),
            }
        }
        let mode = match (processes, rank, size, bootstrap) {
            (None, None, None, None) => {
                if gpu.is_some() {
                    return Err(ArgError::Conflict("--gpu is an option of a rank".into()));
                }
                Mode::Threads
            }
            (Some(processes), None, None, None) => {
                if gpu.is_some() {
                    return Err(ArgError::Conflict(
                        "--gpu is an option of a rank (a parent's ranks take rank % GPUs)".into(),
                    ));
                }
                Mode::Parent { processes }
            }
            (None, Some(rank), Some(size), Some(bootstrap)) => {
                if rank >= size {
                    return Err(ArgError::OutOfRange {
                        option: "--rank".into(),
                        value: rank as u64,
                        min: 0,
                        max: size as u64 - 1,
                    });
                }
                Mode::Rank {
                    rank,
                    size,
                    bootstrap,
                    gpu,
                }
            }
            _ => {
                return Err(ArgError::Conflict(
                    "either --processes N, or --rank R --size N --bootstrap ADDR, or neither"
                        .into(),
                ))
            }
        };
        let mut params = MoeParams {
            iterations: 10,
            warmup: 2,
            ..MoeParams::deepep(fp8)
        };
        match mode {
            Mode::Parent { processes } => params.ranks = processes,
            Mode::Rank { size, .. } => params.ranks = size,
            Mode::Threads => {}
        }
        for (option, v) in shape {
            let n = v as usize;
            match option.as_str() {
                "--ranks" if !matches!(mode, Mode::Threads) => {
                    return Err(ArgError::Conflict(
                        "--ranks is the threads' count: processes take --processes or --size"
                            .into(),
                    ))
                }
                "--ranks" => params.ranks = n,
                "--tokens" => params.tokens = n,
                "--hidden" => params.hidden = n,
                "--topk" => params.topk = n,
                "--experts" => params.experts = n,
                "--blocks" => params.blocks_per_rank = n,
                "--engines" => params.engines = n,
                "--iterations" => params.iterations = n,
                "--warmup" => params.warmup = n,
                _ => params.seed = v,
            }
        }
        params
            .check()
            .map_err(|e| ArgError::Conflict(format!("the shape: {e}")))?;
        Ok(Self {
            mode,
            params,
            variants,
            timeout,
            deadline,
            out,
        })
    }

    /// The arguments of rank `rank`'s process, as a parent starts it: this run's shape,
    /// variants and bounds, the rank, the size and the bootstrap's address (its GPU left
    /// to the default, rank % the GPUs present). `out` goes to rank 0 alone.
    pub fn rank_args(&self, rank: usize, bootstrap: SocketAddr) -> Vec<String> {
        let p = &self.params;
        let mut a: Vec<String> = vec![
            "--rank".into(),
            rank.to_string(),
            "--size".into(),
            p.ranks.to_string(),
            "--bootstrap".into(),
            bootstrap.to_string(),
        ];
        if p.fp8 {
            a.push("--fp8".into());
        }
        for (o, v) in [
            ("--tokens", p.tokens as u64),
            ("--hidden", p.hidden as u64),
            ("--topk", p.topk as u64),
            ("--experts", p.experts as u64),
            ("--blocks", p.blocks_per_rank as u64),
            ("--engines", p.engines as u64),
            ("--iterations", p.iterations as u64),
            ("--warmup", p.warmup as u64),
            ("--seed", p.seed),
            ("--timeout-s", self.timeout.as_secs()),
        ] {
            a.push(o.into());
            a.push(v.to_string());
        }
        a.push("--variants".into());
        a.push(
            match self.variants.as_slice() {
                [Variant::Typed] => "typed",
                [Variant::Raw] => "raw",
                _ => "both",
            }
            .into(),
        );
        if let (0, Some(out)) = (rank, &self.out) {
            a.push("--out".into());
            a.push(out.display().to_string());
        }
        a
    }
}

/// Rank `rank`'s place in a [`TcpBootstrap`] of `size` ranks whose rank 0 listens at
/// `root`: rank 0 binds it and waits for the others; the others connect, retrying while
/// nobody listens there yet (the processes start together), until `timeout`.
pub fn join(
    rank: usize,
    size: usize,
    root: SocketAddr,
    timeout: Duration,
) -> Result<TcpBootstrap, BootstrapError> {
    if rank == 0 {
        let listener = TcpListener::bind(root).map_err(|e| BootstrapError::Io {
            operation: "bind",
            kind: e.kind(),
        })?;
        return TcpBootstrap::new(0, size, root, Some(listener), timeout);
    }
    let start = Instant::now();
    loop {
        match TcpBootstrap::new(rank, size, root, None, timeout) {
            Err(BootstrapError::Io {
                operation: "connect",
                kind: std::io::ErrorKind::ConnectionRefused,
            }) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(50)),
            other => return other,
        }
    }
}

/// How a process a parent started ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RankExit {
    /// It exited (its status).
    Exited(ExitStatus),
    /// It was still running at the deadline, or after another rank failed and the others
    /// had `grace` to end: killed.
    Killed,
}

/// Starts one process per rank (`command(rank)`, with [`NVLS_OFF`] added to its
/// environment), and waits for all of them: at most `deadline` in all, and at most
/// `grace` after the first one that fails, after which those still running are killed.
/// Returns how each ended, by rank.
pub fn launch(
    ranks: usize,
    command: &dyn Fn(usize) -> Command,
    deadline: Duration,
    grace: Duration,
) -> std::io::Result<Vec<RankExit>> {
    let mut children: Vec<Option<Child>> = Vec::with_capacity(ranks);
    for r in 0..ranks {
        let mut c = command(r);
        c.envs(NVLS_OFF);
        match c.spawn() {
            Ok(child) => children.push(Some(child)),
            Err(e) => {
                for c in children.iter_mut().flatten() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(e);
            }
        }
    }
    let mut exits: Vec<Option<RankExit>> = vec![None; ranks];
    let start = Instant::now();
    let mut failed_at: Option<Instant> = None;
    loop {
        for (r, slot) in children.iter_mut().enumerate() {
            if let Some(c) = slot {
                if let Some(status) = c.try_wait()? {
                    if !status.success() && failed_at.is_none() {
                        failed_at = Some(Instant::now());
                    }
                    exits[r] = Some(RankExit::Exited(status));
                    *slot = None;
                }
            }
        }
        if children.iter().all(Option::is_none) {
            break;
        }
        let past = start.elapsed() >= deadline || failed_at.is_some_and(|t| t.elapsed() >= grace);
        if past {
            for (r, slot) in children.iter_mut().enumerate() {
                if let Some(mut c) = slot.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                    exits[r] = Some(RankExit::Killed);
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(exits
        .into_iter()
        .map(|e| e.unwrap_or(RankExit::Killed))
        .collect())
}

/// One variant as one rank ran it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankVariant {
    /// `typed` or `raw`.
    pub name: String,
    /// Whether this rank's bytes matched the CPU reference after its checked iteration.
    pub checked: bool,
    /// Per timed iteration, the kernel times (ns): quantize (FP8), dispatch, combine.
    pub samples_ns: Vec<[u64; 3]>,
}

/// What one rank tells rank 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    /// The rank.
    pub rank: usize,
    /// Its GPU.
    pub gpu: usize,
    /// Its variants, in the order run.
    pub variants: Vec<RankVariant>,
    /// Why it failed, if it did (its own error, or what every rank was told at a
    /// collective).
    pub error: Option<String>,
    /// Peer buffers it mapped (CUDA IPC).
    pub mappings: usize,
}

/// One variant over all ranks: each iteration's slowest rank.
#[derive(Clone, Debug, Serialize)]
pub struct VariantSummary {
    /// `typed` or `raw`.
    pub name: String,
    /// Whether every rank's bytes matched the reference.
    pub checked: bool,
    /// Dispatch kernel, ns (per iteration, the slowest rank's).
    pub dispatch_ns: Summary,
    /// Combine kernel, ns.
    pub combine_ns: Summary,
    /// Quantize + dispatch + combine, ns.
    pub total_ns: Summary,
}

/// Rank 0's result of a multi-process run.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessResult {
    /// Parameters (`ranks`: processes).
    pub params: MoeParams,
    /// Every rank's report, by rank.
    pub ranks: Vec<RankReport>,
    /// Per variant, over all ranks.
    pub variants: Vec<VariantSummary>,
    /// Whether every rank ran without error and every variant was checked on every rank.
    pub passed: bool,
    /// What the figures are.
    pub note: String,
}

/// Every rank's `mine` over `bootstrap`: `Ok` when all are `Ok`, otherwise every rank's
/// failure (`rank r: why`), the same on every rank. Every rank calls it at the same
/// points, whatever happened to it, so that all of them leave a failed step together.
pub fn agreed(bootstrap: &dyn Bootstrap, mine: Result<(), String>) -> Result<(), String> {
    let bytes = match &mine {
        Ok(()) => vec![0u8],
        Err(e) => {
            let mut b = vec![1u8];
            b.extend_from_slice(e.as_bytes());
            b
        }
    };
    let all = bootstrap
        .all_gather(&bytes)
        .map_err(|e| format!("rank {}: {e}", bootstrap.rank()))?;
    let failures: Vec<String> = all
        .iter()
        .enumerate()
        .filter_map(|(r, b)| match b.split_first() {
            Some((0, [])) => None,
            Some((1, why)) => Some(format!("rank {r}: {}", String::from_utf8_lossy(why))),
            _ => Some(format!("rank {r}: a malformed status")),
        })
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// [`agreed`] on `r`: its value when every rank succeeded, otherwise every rank's
/// failures (this rank's among them when it failed).
fn settle<T>(bootstrap: &dyn Bootstrap, r: Result<T, GpuError>) -> Result<T, String> {
    match r {
        Ok(x) => agreed(bootstrap, Ok(())).map(|()| x),
        Err(e) => {
            let mine = e.to_string();
            Err(agreed(bootstrap, Err(mine.clone())).err().unwrap_or(mine))
        }
    }
}

fn invalid(what: String) -> GpuError {
    GpuError::Invalid(what)
}

fn team(e: TeamError) -> GpuError {
    invalid(format!("rank setup: {e}"))
}

fn rank_error(e: RankError) -> GpuError {
    match e {
        RankError::Gpu(g) => g,
        other => invalid(other.to_string()),
    }
}

/// Runs rank `bootstrap.rank()` of `p` (`p.ranks` = `bootstrap.size()`) on `gpu` (opened
/// with the softnic program: its NIC kernel; `moe.cu` is compiled here): see the
/// [module documentation](self). Returns rank 0's [`ProcessResult`] on rank 0, `None` on
/// the others; an error when this rank could not take part (its setup failed before the
/// exchange, or the bootstrap broke). Failures of steps are reported in the result.
pub fn run_rank(
    gpu: &Arc<Gpu>,
    p: MoeParams,
    bootstrap: &dyn Bootstrap,
    variants: &[Variant],
) -> Result<Option<ProcessResult>, GpuError> {
    p.check()?;
    let me = bootstrap.rank();
    if bootstrap.size() != p.ranks {
        return Err(invalid(format!(
            "a bootstrap of {} ranks for {} ranks",
            bootstrap.size(),
            p.ranks
        )));
    }
    let say = |what: &str| progress(&format!("rank {me}: {what}"));
    let layout = MoeLayout::of(&p);
    let compiled = compile_for(&p, gpu.options())?;
    let functions = gpu.load_compiled(&compiled)?;
    let inputs = reference::inputs(&p);
    let fabric = CudaFabric::with_first_queue_number(
        gpu.clone(),
        rank_queue_numbers(me).map_err(rank_error)?,
    );
    let device = Device::open(
        fabric
            .open(rank_lid(me).map_err(rank_error)?)
            .map_err(|e| invalid(format!("device: {e}")))?,
    )
    .map_err(|e| invalid(format!("device: {e}")))?;
    let buffers = layout
        .sizes
        .iter()
        .enumerate()
        .map(|(w, &len)| {
            gpu.device_buffer(len + if w == W_SIGNAL { 64 } else { 0 })
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let rank = setup_rank(
        bootstrap,
        device,
        fabric.queue_memory(),
        &|| fabric.producer_state(),
        buffers,
        &layout,
    )
    .map_err(team)?;
    say("queue pairs connected, windows exchanged");
    let record = rank_record(me, rank.device.backend(), &mut |b| {
        // SAFETY: `rank_record` exports only the buffers of registrations with remote
        // rights: this rank's window buffers, data regions held in `rank.buffers` and by
        // the registrations until after the teardown barrier, never moved into queue
        // memory (the queue pairs' memory comes from `fabric.queue_memory()`).
        unsafe { ipc::export(gpu, b) }
    })
    .map_err(rank_error)?;
    // From the exchange on, peers may map this rank's buffers (it may fail here and not
    // on another rank): whatever happens, this rank drops its NIC and mappings (at the end
    // of `exchanged`), tells the others at the collective where they check their setup,
    // and waits for every rank to have dropped theirs before `rank` (its buffers) is
    // dropped.
    let records = exchange(bootstrap, &record);
    let mut report = RankReport {
        rank: me,
        gpu: gpu.context().ordinal(),
        ..RankReport::default()
    };
    let outcome = match records {
        Ok(records) => exchanged(
            gpu,
            &p,
            &layout,
            bootstrap,
            &rank,
            &records,
            &functions,
            &inputs,
            variants,
            &mut report,
        ),
        Err(e) => settle(bootstrap, Err::<(), _>(rank_error(e))),
    };
    if let Err(e) = &outcome {
        say(&format!("failed: {e}"));
        report.error = Some(e.clone());
    }
    let teardown = barrier(bootstrap);
    drop(rank);
    teardown.map_err(rank_error)?;
    let json = serde_json::to_vec(&report).map_err(|e| invalid(format!("report: {e}")))?;
    let all = bootstrap
        .all_gather(&json)
        .map_err(|e| invalid(format!("gathering the reports: {e}")))?;
    if me != 0 {
        return Ok(None);
    }
    let ranks = all
        .iter()
        .enumerate()
        .map(|(r, b)| {
            serde_json::from_slice::<RankReport>(b)
                .map_err(|e| invalid(format!("rank {r}'s report: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(summarize(p, ranks, variants)))
}

/// Rank 0's summary of every rank's report.
pub fn summarize(p: MoeParams, ranks: Vec<RankReport>, variants: &[Variant]) -> ProcessResult {
    let summaries: Vec<VariantSummary> = variants
        .iter()
        .enumerate()
        .map(|(v, variant)| {
            let of = |r: &RankReport| r.variants.get(v).cloned().unwrap_or_default();
            let checked = ranks.iter().all(|r| of(r).checked);
            let n = ranks
                .iter()
                .map(|r| of(r).samples_ns.len())
                .min()
                .unwrap_or(0);
            let slowest = |k: &dyn Fn(&[u64; 3]) -> u64| -> Vec<u64> {
                (0..n)
                    .map(|i| {
                        ranks
                            .iter()
                            .map(|r| k(&of(r).samples_ns[i]))
                            .max()
                            .unwrap_or(0)
                    })
                    .collect()
            };
            VariantSummary {
                name: variant.name().into(),
                checked,
                dispatch_ns: Summary::of(&slowest(&|t| t[1])),
                combine_ns: Summary::of(&slowest(&|t| t[2])),
                total_ns: Summary::of(&slowest(&|t| t.iter().sum())),
            }
        })
        .collect();
    let passed = !ranks.is_empty()
        && ranks.len() == p.ranks
        && ranks.iter().all(|r| r.error.is_none())
        && summaries.iter().all(|s| s.checked);
    ProcessResult {
        params: p,
        ranks,
        variants: summaries,
        passed,
        note: "the CUDA software NIC's figures (each process's engines copying the bytes \
               into peer processes' memory through CUDA IPC, time-sliced with the other \
               processes on a shared GPU), not a ConnectX's; kernel times between CUDA \
               events, per iteration the slowest rank's"
            .into(),
    }
}

/// Everything after the exchange of records: the mappings, the NIC, the checked and
/// timed steps. Returns this rank's error or the first failure any rank reported at a
/// collective (then every rank returns it at the same point). The NIC and the mappings
/// are dropped when it returns, the NIC first.
#[allow(clippy::too_many_arguments)]
fn exchanged(
    gpu: &Arc<Gpu>,
    p: &MoeParams,
    layout: &MoeLayout,
    bootstrap: &dyn Bootstrap,
    rank: &MoeRank<ibgda::nic::SoftGpuNic>,
    records: &[crate::multiprocess::RankRecord],
    functions: &std::collections::HashMap<String, cudarc::driver::CudaFunction>,
    inputs: &[reference::Inputs],
    variants: &[Variant],
    report: &mut RankReport,
) -> Result<(), String> {
    let me = bootstrap.rank();
    let say = |what: &str| progress(&format!("rank {me}: {what}"));
    // Declared first, dropped last: after the NIC and every buffer over a mapping.
    let mut imports = Imports::new(gpu);
    let prepared = (|| -> Result<_, GpuError> {
        let remotes = remote_ranks(records, me, &mut |e| {
            // SAFETY: `e` is a peer rank's export (gathered over the bootstrap); every
            // rank keeps its buffers until the teardown barrier of `run_rank`, which it
            // reaches only after this function returned, so after the NIC, the remote
            // ranks' buffers and `imports` were dropped here.
            unsafe { imports.import(e) }
        })
        .map_err(rank_error)?;
        let queues: Vec<_> = rank.queues.iter().collect();
        let max_message = (p.message_bytes().max(p.hidden * 2) as u64).next_multiple_of(4096);
        let engines = p.engines.min(p.ranks);
        let nic = process_nic_builder(
            rank.device.backend(),
            &queues,
            &remotes,
            engines,
            max_message,
        )?
        .build(gpu)?;
        Ok((remotes, nic, engines))
    })();
    let (remotes, mut nic, engines) = settle(bootstrap, prepared)?;
    report.mappings = imports.len();
    say(&format!(
        "NIC built: {} peer buffers mapped, {} engines",
        imports.len(),
        engines
    ));
    let steps = settle(
        bootstrap,
        Steps::new(gpu, p, layout, rank, functions, engines, inputs, me),
    )?;
    // A checked iteration of each variant.
    for &v in variants {
        settle(bootstrap, steps.clear(p, layout, rank))?;
        let ran = nic.start().and_then(|()| steps.step(v));
        // Every rank's kernels ended (or failed) before any NIC stops: the last WQE into
        // a rank's memory precedes the signal that rank waited for.
        let ran = settle(bootstrap, ran);
        let stopped = nic.stop();
        let report_text = nic_report(&nic).unwrap_or_default();
        if let Err(e) = ran {
            if !report_text.is_empty() {
                say(&format!("the NIC after the {} step{report_text}", v.name()));
            }
            return Err(e);
        }
        let checked = stopped.and_then(|()| steps.status()).and_then(|s| {
            if s != 0 || !report_text.is_empty() {
                Err(invalid(format!(
                    "variant {}: status {}{report_text}",
                    v.name(),
                    status(s)
                )))
            } else {
                check_rank(gpu, p, layout, me, &rank.buffers, inputs)
            }
        });
        let checked = settle(bootstrap, checked)?;
        say(&format!("{} checked: {checked}", v.name()));
        report.variants.push(RankVariant {
            name: v.name().into(),
            checked,
            samples_ns: Vec::new(),
        });
    }
    // Timed iterations, the variants alternating.
    settle(bootstrap, nic.start())?;
    let mut outcome = Ok(());
    'timed: for n in 0..p.warmup + p.iterations {
        for (k, &v) in variants.iter().enumerate() {
            match steps.step(v) {
                Ok(t) if n >= p.warmup => {
                    if let Some(rv) = report.variants.get_mut(k) {
                        rv.samples_ns.push(t);
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    outcome = Err(e);
                    break 'timed;
                }
            }
        }
    }
    let timed = settle(bootstrap, outcome);
    let stopped = nic.stop();
    let report_text = nic_report(&nic).unwrap_or_default();
    timed?;
    let end = stopped.and_then(|()| steps.status()).and_then(|s| {
        if s != 0 || !report_text.is_empty() {
            Err(invalid(format!(
                "timed iterations: status {}{report_text}",
                status(s)
            )))
        } else {
            Ok(())
        }
    });
    settle(bootstrap, end)?;
    say("timed iterations done");
    drop(steps);
    drop(nic);
    drop(remotes);
    Ok(())
}

/// One rank's kernels, tables and launch.
struct Steps<'a> {
    gpu: &'a Gpu,
    p: MoeParams,
    _comm: GpuComm<'a, super::moe::MoeScope>,
    _windows: Vec<GpuWindow<'a>>,
    comms_buf: DeviceBuffer,
    windows_buf: DeviceBuffer,
    remote_buf: DeviceBuffer,
    local_buf: DeviceBuffer,
    status_word: DeviceBuffer,
    quantize: cudarc::driver::CudaFunction,
    dispatch: [cudarc::driver::CudaFunction; 2],
    combine: [cudarc::driver::CudaFunction; 2],
    iteration: std::cell::Cell<u32>,
}

impl<'a> Steps<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        gpu: &'a Gpu,
        p: &MoeParams,
        layout: &MoeLayout,
        rank: &'a MoeRank<ibgda::nic::SoftGpuNic>,
        functions: &std::collections::HashMap<String, cudarc::driver::CudaFunction>,
        engines: usize,
        inputs: &[reference::Inputs],
        me: usize,
    ) -> Result<Self, GpuError> {
        let function = |name: &str| {
            functions
                .get(name)
                .cloned()
                .ok_or_else(|| invalid(format!("moe.cu has no {name}")))
        };
        // This rank's inputs into its send window; the stamps' starts at their largest.
        let send = &rank.buffers[W_SEND];
        gpu.write_device(send, layout.x, &bytes_of(&inputs[me].x))?;
        gpu.write_device(send, layout.topk, &bytes_of(&inputs[me].topk))?;
        gpu.write_device(send, layout.weights, &bytes_of(&inputs[me].weights))?;
        let mut stamps = vec![0u64; MAX_ITERS * STAMPS];
        for i in 0..MAX_ITERS {
            stamps[i * STAMPS] = u64::MAX;
            stamps[i * STAMPS + 3] = u64::MAX;
        }
        gpu.write_device(send, layout.stamps, &bytes_of(&stamps))?;
        let queues: Vec<_> = rank.queues.iter().collect();
        let comm = GpuComm::new(
            gpu,
            me,
            &queues,
            &rank.regions[WINDOWS],
            CommOptions {
                wait: Duration::from_secs(10),
                ..CommOptions::default()
            },
        )?;
        let windows = rank
            .windows
            .iter()
            .map(|w| GpuWindow::new(gpu, w))
            .collect::<Result<Vec<_>, _>>()?;
        let comms_buf = gpu.device_buffer_from(&bytes_of(&[*comm.device()]))?;
        let window_table: Vec<_> = windows.iter().map(|w| *w.device()).collect();
        let windows_buf = gpu.device_buffer_from(&bytes_of(&window_table))?;
        let (remote, local) = raw_rows(&[rank], p.ranks).map_err(invalid)?;
        let remote_buf = gpu.device_buffer_from(&bytes_of(&remote))?;
        let local_buf = gpu.device_buffer_from(&bytes_of(&local))?;
        let status_word = gpu.device_buffer(4)?;
        let dispatch = [
            function("moe_dispatch_typed")?,
            function("moe_dispatch_raw")?,
        ];
        let combine = [function("moe_combine_typed")?, function("moe_combine_raw")?];
        // This rank's blocks and its NIC's engines resident at once (the other processes'
        // contexts are time-sliced with this one on a shared GPU).
        let sms = gpu.context().attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )? as usize;
        for f in dispatch.iter().chain(&combine) {
            let per_sm = f.occupancy_max_active_blocks_per_multiprocessor(256, 0, None)? as usize;
            if per_sm * sms < p.blocks_per_rank + engines {
                return Err(invalid(format!(
                    "{} blocks + {engines} engines cannot all be resident ({per_sm} blocks \
                     per SM, {sms} SMs)",
                    p.blocks_per_rank
                )));
            }
        }
        Ok(Self {
            gpu,
            p: *p,
            _comm: comm,
            _windows: windows,
            comms_buf,
            windows_buf,
            remote_buf,
            local_buf,
            status_word,
            quantize: function("moe_quantize")?,
            dispatch,
            combine,
            iteration: std::cell::Cell::new(0),
        })
    }

    /// Clears what a step fills (receive and combine windows, the output, the status).
    fn clear(
        &self,
        p: &MoeParams,
        layout: &MoeLayout,
        rank: &MoeRank<ibgda::nic::SoftGpuNic>,
    ) -> Result<(), GpuError> {
        for w in [W_RECV, W_COMBINE] {
            self.gpu
                .write_device(&rank.buffers[w], 0, &vec![0u8; layout.sizes[w]])?;
        }
        self.gpu.write_device(
            &rank.buffers[W_SEND],
            layout.out,
            &vec![0u8; p.tokens * p.hidden * 2],
        )?;
        self.gpu.write_device(&self.status_word, 0, &[0u8; 4])?;
        // A copy from pageable memory may return before its DMA lands.
        self.gpu.synchronize()
    }

    /// The kernels' status word.
    fn status(&self) -> Result<i32, GpuError> {
        let b = self.gpu.read_device(&self.status_word)?;
        let mut w = [0u8; 4];
        w.copy_from_slice(&b[..4]);
        Ok(i32::from_ne_bytes(w))
    }

    /// One iteration of `v`: the kernel times (ns) of quantize, dispatch and combine.
    fn step(&self, v: Variant) -> Result<[u64; 3], GpuError> {
        let gpu = self.gpu;
        let stream = gpu.stream();
        let cfg = LaunchConfig {
            grid_dim: (self.p.blocks_per_rank as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let i = self.iteration.get();
        self.iteration.set(i + 1);
        let timed = |f: &dyn Fn() -> Result<(), GpuError>| -> Result<u64, GpuError> {
            let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = stream.record_event(timing)?;
            f()?;
            let end = stream.record_event(timing)?;
            wait_stream(gpu, "a MoE kernel", HOST_WAIT_LIMIT)?;
            Ok((f64::from(start.elapsed_ms(&end)?) * 1e6) as u64)
        };
        let (c, w) = (self.comms_buf.addr(), self.windows_buf.addr());
        let (rem, loc) = (self.remote_buf.addr(), self.local_buf.addr());
        let st = self.status_word.addr();
        let mut times = [0u64; 3];
        if self.p.fp8 {
            times[0] = timed(&|| {
                let mut b = stream.launch_builder(&self.quantize);
                b.arg(&c).arg(&w);
                // SAFETY: moe_quantize(const DeviceComm*, const DeviceWindow*): this rank's
                // one-entry tables, alive with `self`; it writes only its own send window.
                unsafe { b.launch(cfg) }?;
                Ok(())
            })?;
        }
        let k = match v {
            Variant::Typed => 0,
            Variant::Raw => 1,
        };
        for (slot, f) in [(1, &self.dispatch[k]), (2, &self.combine[k])] {
            times[slot] = timed(&|| {
                let mut b = stream.launch_builder(f);
                b.arg(&c).arg(&w);
                if v == Variant::Raw {
                    b.arg(&rem).arg(&loc);
                }
                b.arg(&i).arg(&st);
                // SAFETY: moe_{dispatch,combine}_{typed,raw}(const DeviceComm*, const
                // DeviceWindow*, [const u64* remote, const u64* local,] u32, int*): this
                // rank's one-slot tables and status word, alive with `self`; the kernels
                // reach other ranks only through its queue pairs, which this process's
                // NIC executes.
                unsafe { b.launch(cfg) }?;
                Ok(())
            })?;
        }
        Ok(times)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, ArgError> {
        Args::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn the_threads_mode_is_todays_example() {
        let a = parse("").expect("no arguments");
        assert_eq!(a.mode, Mode::Threads);
        assert_eq!(a.params.ranks, 8);
        assert_eq!((a.params.iterations, a.params.warmup), (10, 2));
        assert!(!a.params.fp8);
        assert!(parse("--fp8").expect("fp8").params.fp8);
        assert_eq!(a.variants, vec![Variant::Typed, Variant::Raw]);
    }

    #[test]
    fn a_parent_forwards_its_shape_to_each_rank() {
        let a = parse(
            "--processes 4 --tokens 32 --hidden 1024 --topk 4 --experts 16 --blocks 2 \
             --engines 4 --iterations 3 --warmup 1 --seed 7 --variants typed --timeout-s 30 \
             --out r.json",
        )
        .expect("parent");
        assert_eq!(a.mode, Mode::Parent { processes: 4 });
        assert_eq!(a.params.ranks, 4);
        let root: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
        for r in 0..4 {
            let child = Args::parse(a.rank_args(r, root)).expect("the rank's arguments");
            assert_eq!(
                child.mode,
                Mode::Rank {
                    rank: r,
                    size: 4,
                    bootstrap: root,
                    gpu: None
                }
            );
            assert_eq!(child.params, a.params, "rank {r}");
            assert_eq!(child.variants, vec![Variant::Typed]);
            assert_eq!(child.timeout, Duration::from_secs(30));
            assert_eq!(child.out.is_some(), r == 0, "only rank 0 writes the result");
        }
    }

    #[test]
    fn a_rank_takes_its_place_and_gpu() {
        let a = parse("--rank 2 --size 8 --bootstrap 127.0.0.1:5000 --gpu 1 --ranks-per-process 1")
            .expect("rank");
        assert_eq!(
            a.mode,
            Mode::Rank {
                rank: 2,
                size: 8,
                bootstrap: "127.0.0.1:5000".parse().expect("addr"),
                gpu: Some(1)
            }
        );
        assert_eq!(a.params.ranks, 8);
    }

    #[test]
    fn bad_command_lines_are_typed_errors() {
        assert_eq!(parse("--bogus"), Err(ArgError::Unknown("--bogus".into())));
        assert_eq!(
            parse("--tokens"),
            Err(ArgError::MissingValue("--tokens".into()))
        );
        assert_eq!(
            parse("--tokens many"),
            Err(ArgError::BadValue {
                option: "--tokens".into(),
                value: "many".into()
            })
        );
        assert_eq!(
            parse("--rank 3 --size 2 --bootstrap 127.0.0.1:1"),
            Err(ArgError::OutOfRange {
                option: "--rank".into(),
                value: 3,
                min: 0,
                max: 1
            })
        );
        assert_eq!(
            parse("--processes 0"),
            Err(ArgError::OutOfRange {
                option: "--processes".into(),
                value: 0,
                min: 1,
                max: MAX_RANKS as u64
            })
        );
        assert_eq!(
            parse("--ranks-per-process 2 --rank 0 --size 1 --bootstrap 127.0.0.1:1"),
            Err(ArgError::OutOfRange {
                option: "--ranks-per-process".into(),
                value: 2,
                min: 1,
                max: 1
            })
        );
        assert!(matches!(
            parse("--rank 0 --size 2"),
            Err(ArgError::Conflict(_))
        ));
        assert!(matches!(
            parse("--processes 2 --rank 0"),
            Err(ArgError::Conflict(_))
        ));
        assert!(matches!(
            parse("--processes 2 --ranks 4"),
            Err(ArgError::Conflict(_))
        ));
        assert!(matches!(
            parse("--processes 2 --gpu 1"),
            Err(ArgError::Conflict(_))
        ));
        // 256 experts do not split over 3 processes.
        assert!(matches!(
            parse("--processes 3"),
            Err(ArgError::Conflict(m)) if m.contains("experts")
        ));
        assert!(matches!(
            parse("--bootstrap nowhere --rank 0 --size 1"),
            Err(ArgError::BadValue { .. })
        ));
    }

    #[test]
    fn the_launcher_sets_nvls_off_and_reports_each_rank() {
        let exits = launch(
            3,
            &|r| {
                let mut c = Command::new("/bin/sh");
                c.arg("-c").arg(format!(
                    "test \"$NCCL_NVLS_ENABLE\" = 0 && test \"$NVSHMEM_DISABLE_NVLS\" = 1 && exit {r}"
                ));
                c
            },
            Duration::from_secs(30),
            Duration::from_secs(30),
        )
        .expect("launch");
        let codes: Vec<Option<i32>> = exits
            .iter()
            .map(|e| match e {
                RankExit::Exited(s) => s.code(),
                RankExit::Killed => None,
            })
            .collect();
        assert_eq!(codes, vec![Some(0), Some(1), Some(2)]);
    }

    #[test]
    fn the_launcher_kills_the_others_after_one_fails() {
        let start = Instant::now();
        let exits = launch(
            2,
            &|r| {
                let mut c = Command::new("/bin/sh");
                c.arg("-c")
                    .arg(if r == 0 { "exit 3" } else { "exec sleep 30" });
                c
            },
            Duration::from_secs(60),
            Duration::from_millis(200),
        )
        .expect("launch");
        assert!(matches!(&exits[0], RankExit::Exited(s) if s.code() == Some(3)));
        assert_eq!(exits[1], RankExit::Killed);
        assert!(start.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn ranks_join_a_root_that_listens_late() {
        let probe = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let root = probe.local_addr().expect("addr");
        drop(probe);
        let t = Duration::from_secs(20);
        let gathered: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
            let jobs: Vec<_> = (0..3)
                .map(|r| {
                    s.spawn(move || {
                        if r == 0 {
                            // The others try first and are refused until this listens.
                            std::thread::sleep(Duration::from_millis(300));
                        }
                        let b = join(r, 3, root, t).expect("join");
                        b.all_gather(&[r as u8]).expect("gather")
                    })
                })
                .collect();
            jobs.into_iter().map(|j| j.join().expect("rank")).collect()
        });
        for g in gathered {
            assert_eq!(g, vec![vec![0], vec![1], vec![2]]);
        }
    }

    #[test]
    fn a_root_nobody_opens_is_a_timeout_not_a_hang() {
        let probe = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let root = probe.local_addr().expect("addr");
        drop(probe);
        let start = Instant::now();
        let e = join(1, 2, root, Duration::from_millis(300)).unwrap_err();
        assert_eq!(
            e,
            BootstrapError::Io {
                operation: "connect",
                kind: std::io::ErrorKind::ConnectionRefused
            }
        );
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn the_summary_takes_each_iterations_slowest_rank() {
        let p = MoeParams {
            ranks: 2,
            ..MoeParams::deepep(false)
        };
        let rank = |r: usize, checked: bool, d: u64| RankReport {
            rank: r,
            variants: vec![RankVariant {
                name: "typed".into(),
                checked,
                samples_ns: vec![[0, d, 10], [0, d + 1, 20]],
            }],
            ..RankReport::default()
        };
        let s = summarize(
            p,
            vec![rank(0, true, 100), rank(1, true, 300)],
            &[Variant::Typed],
        );
        assert!(s.passed);
        assert_eq!(s.variants[0].dispatch_ns.max, 301);
        assert_eq!(s.variants[0].dispatch_ns.min, 300);
        assert_eq!(s.variants[0].combine_ns.max, 20);
        let s = summarize(
            p,
            vec![rank(0, true, 1), rank(1, false, 1)],
            &[Variant::Typed],
        );
        assert!(!s.passed, "a rank whose bytes differ fails the run");
        let mut failed = rank(1, true, 1);
        failed.error = Some("rank 1: a deadline".into());
        assert!(!summarize(p, vec![rank(0, true, 1), failed], &[Variant::Typed]).passed);
        assert!(
            !summarize(p, vec![rank(0, true, 1)], &[Variant::Typed]).passed,
            "a missing rank fails the run"
        );
    }

    #[test]
    fn every_rank_learns_every_failure_at_the_same_collective() {
        let group = ibgda::nic::team::LocalBootstrap::group(3);
        let seen: Vec<Result<(), String>> = std::thread::scope(|s| {
            let jobs: Vec<_> = group
                .iter()
                .map(|b| {
                    s.spawn(move || {
                        let first = agreed(b, Ok(()));
                        assert_eq!(first, Ok(()));
                        let mine = if b.rank() == 1 {
                            Err("a deadline".to_string())
                        } else {
                            Ok(())
                        };
                        agreed(b, mine)
                    })
                })
                .collect();
            jobs.into_iter().map(|j| j.join().expect("rank")).collect()
        });
        for s in seen {
            assert_eq!(s, Err("rank 1: a deadline".to_string()));
        }
    }
}
