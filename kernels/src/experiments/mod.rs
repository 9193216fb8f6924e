//! The paper's GPU experiments as library functions, each returning a plain result struct
//! with the raw samples (or totals) and the SM clock it ran at; a program (the benchmark
//! binaries) chooses what to run, prints and stores. Every experiment runs against the
//! doorbell sink (`ibgda_sink`, a persistent stand-in for the NIC), so what is measured is
//! the GPU side: building, publishing, ordering, ringing, polling.
//!
//! - [`issue`]: issue and put+completion time of one 8-byte inline RC WRITE, one thread,
//!   per ordering scope, typed and hand-written raw in the same run (section 4.1, Table 4);
//! - [`completion`]: waiting for one queue against a quiet over 1..64 queues (4.1, Fig. 4);
//! - [`rate`]: message rate over threads, queues, doorbell batch, publication mode and
//!   placement of warps on SMs (4.3.1, Table 5);
//! - [`dormant`]: what carrying, executing and waiting on the communication code costs a
//!   compute and a streaming kernel, with ptxas's register counts (4.3.2, Figure 9);
//! - [`peers`]: the issue loop through DOCA GPUNetIO's device verbs, compiled at run time
//!   from the pinned wheel's headers, on ibgda's queue memory, its WQEs judged by ibgda.
//! - [`proxy`]: the CPU proxy and the CPU-assisted doorbell on software NICs (4.2), with
//!   GPU producers or CPU threads standing in for them (no GPU needed).
//! - [`nic_rate`]: the CUDA software NIC's own throughput (WQEs executed per second on one
//!   SM and on all) over pre-posted rings.
//!
//! Everything is allocated before the sink (a persistent kernel) starts, since allocation
//! and synchronous copies may wait for running kernels; every device wait is bounded (the
//! programs are compiled with `-DIBGDA_SPIN_LIMIT_NS`), so a protocol fault becomes an
//! error status instead of a hung GPU.

use std::collections::HashMap;
use std::io::Write as _;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use serde::Serialize;

use ibgda::order::{GpuFence, OrderingScope, Unordered};

use crate::gpu::{CompileOptions, Gpu, GpuError, KernelArg};
use crate::nvrtc::{compile, compile_source_with, Compiled, Program};

pub mod completion;
pub mod dormant;
pub mod issue;
pub mod moe;
pub mod moe_process;
pub mod nic_rate;
pub mod peers;
pub mod proxy;
pub mod rate;

/// The bound on every device wait in the experiments: 5 s.
pub const SPIN_LIMIT: Duration = Duration::from_secs(5);

/// The host's bound on one launch of an experiment (every device wait in it is bounded by
/// [`SPIN_LIMIT`], the peers' by a watchdog of the same length; this catches the rest).
pub const HOST_WAIT_LIMIT: Duration = Duration::from_secs(30);

/// Prints `what` on stdout and flushes it, so that a run killed from outside still shows
/// the step it was in.
pub fn progress(what: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "[ibgda-bench] {what}");
    let _ = out.flush();
}

/// Waits for the work queued so far on the GPU's main stream, at most `limit`.
///
/// On [`GpuError::Timeout`] the work may still be running: the caller must leave every
/// allocation it uses alive (`std::mem::forget`) and must not synchronize the context
/// again (the sink's stop would wait for it too).
pub fn wait_stream(gpu: &Gpu, what: &str, limit: Duration) -> Result<(), GpuError> {
    let done = gpu.stream().record_event(None)?;
    let start = Instant::now();
    loop {
        if done.try_is_complete()? {
            return Ok(());
        }
        if start.elapsed() >= limit {
            return Err(GpuError::Timeout {
                what: what.to_string(),
                limit,
                still_running: true,
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether `e` is a host-side timeout with the kernel possibly still running (then no
/// later launch may be waited for: the GPU is busy for good).
pub fn gpu_hung(e: &GpuError) -> bool {
    matches!(
        e,
        GpuError::Timeout {
            still_running: true,
            ..
        }
    )
}

/// Whether scope `S` may let the sink read a WQE before its bytes arrived. Its stale
/// WQEs are a measured finding, counted in the result; for every other scope one is an
/// error.
/// - `Unordered`: no fence between the WQE stores and the doorbell.
/// - `GpuFence` (DOCA GPUNetIO's and NCCL GDAKI's order): the doorbell record is stored
///   before the fence, unordered with the same round's WQE stores. A NIC that, woken by
///   round k's doorbell, reads the record already holding round k+1's counter fetches
///   round k+1's WQEs before they are visible. The sink reads the record as such a NIC
///   would; on the H200 it saw 2 or 3 stale WQEs in 40,960,128 with 128 single-warp
///   queues on 64 SMs (and none with 64 queues). `GpuFencedDbrec` fences the record too.
pub fn tolerates_stale_wqes<S: OrderingScope>() -> bool {
    scope_tolerates_stale_wqes(S::NAME)
}

/// [`tolerates_stale_wqes`] for a scope known by its name (a result's `scope` field).
pub fn scope_tolerates_stale_wqes(scope: &str) -> bool {
    scope == Unordered::NAME || scope == GpuFence::NAME
}

/// The compile options of the experiments: every device wait bounded by [`SPIN_LIMIT`].
pub fn bench_options() -> Result<CompileOptions, GpuError> {
    CompileOptions::new().spin_limit(SPIN_LIMIT)
}

/// The benchmark program (`cuda/bench_experiments.cu`) compiled and loaded on a GPU.
pub struct BenchProgram {
    functions: HashMap<String, CudaFunction>,
    compiled: Compiled,
}

impl BenchProgram {
    /// Compiles `bench_experiments.cu` with the GPU's options (sm_90) and loads it, every
    /// kernel fully loaded (a launch beside the running sink must not wait for it).
    pub fn load(gpu: &Gpu) -> Result<Self, GpuError> {
        let compiled = compile(Program::BenchExperiments, gpu.options())?;
        let functions = gpu.load_compiled(&compiled)?;
        Ok(Self {
            functions,
            compiled,
        })
    }

    /// As [`BenchProgram::load`], with the device library's frontier wait (the shared
    /// protocol's in-order publication) backing off `ns` between polls
    /// (`IBGDA_FRONTIER_BACKOFF_NS`): the variant the rate experiment measures beside the
    /// default, in the same run.
    pub fn load_with_frontier_backoff(gpu: &Gpu, ns: u32) -> Result<Self, GpuError> {
        let p = Program::BenchExperiments;
        let define = format!("-DIBGDA_FRONTIER_BACKOFF_NS={ns}u");
        let compiled = compile_source_with(p.name(), p.source(), gpu.options(), &[], &[&define])?;
        let functions = gpu.load_compiled(&compiled)?;
        Ok(Self {
            functions,
            compiled,
        })
    }

    /// A kernel of the program.
    pub fn function(&self, name: &str) -> Result<CudaFunction, GpuError> {
        self.functions
            .get(name)
            .cloned()
            .ok_or_else(|| GpuError::Invalid(format!("no kernel {name} in bench_experiments.cu")))
    }

    /// The compiled program (its ptxas report is in the log).
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }
}

/// A one-dimensional launch shape.
pub(crate) fn launch_config(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Launches `f` on the GPU's main stream.
///
/// # Safety
///
/// `args` must be exactly the kernel's parameters, in order, every address a live device
/// allocation (or mapped host memory) large enough for what the kernel does with it, kept
/// alive until the work completes.
pub(crate) unsafe fn launch(
    gpu: &Gpu,
    f: &CudaFunction,
    cfg: LaunchConfig,
    args: &[KernelArg<'_>],
) -> Result<(), GpuError> {
    let mut b = gpu.stream().launch_builder(f);
    for a in args {
        match a {
            KernelArg::U64(v) => b.arg(v),
            KernelArg::U32(v) => b.arg(v),
            KernelArg::Queue(q) => b.arg(q),
        };
    }
    // SAFETY: the caller's contract: the arguments are the kernel's parameters and every
    // address stays valid until the work completes.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// Reads a native-endian `u64` at `at` of a copied-out device buffer.
pub(crate) fn word64(bytes: &[u8], at: usize) -> Result<u64, GpuError> {
    bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_ne_bytes)
        .ok_or_else(|| GpuError::Invalid(format!("no u64 at {at} of {} bytes", bytes.len())))
}

/// Reads a native-endian `i32` at `at` of a copied-out device buffer.
pub(crate) fn word32(bytes: &[u8], at: usize) -> Result<i32, GpuError> {
    bytes
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(i32::from_ne_bytes)
        .ok_or_else(|| GpuError::Invalid(format!("no i32 at {at} of {} bytes", bytes.len())))
}

/// The SM clock in MHz from clock64 cycles over %globaltimer ns of one thread's run.
pub fn sm_mhz(cycles: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        cycles as f64 * 1e3 / ns as f64
    }
}

/// Order statistics of a set of samples (nearest rank on the sorted samples).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub count: usize,
    /// Smallest.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Summary {
    /// The summary of `samples` (all zero when empty).
    pub fn of(samples: &[u64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        let rank = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
        Self {
            count: s.len(),
            min: s[0],
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            max: s[s.len() - 1],
            mean: s.iter().map(|&v| v as f64).sum::<f64>() / s.len() as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_takes_nearest_ranks() {
        let v: Vec<u64> = (1..=101).rev().collect();
        let s = Summary::of(&v);
        assert_eq!(
            (s.count, s.min, s.p50, s.p90, s.p99, s.max),
            (101, 1, 51, 91, 100, 101)
        );
        assert!((s.mean - 51.0).abs() < 1e-9);
        assert_eq!(Summary::of(&[]), Summary::default());
    }

    #[test]
    fn unordered_and_gpu_fence_tolerate_stale_wqes() {
        use ibgda::order::{
            GpuFence, GpuFencedDbrec, GpuReleaseStore, SystemFence, SystemReleaseStore,
            ThreadFence, Unordered,
        };
        assert!(tolerates_stale_wqes::<Unordered>());
        assert!(tolerates_stale_wqes::<GpuFence>());
        assert!(!tolerates_stale_wqes::<GpuFencedDbrec>());
        assert!(!tolerates_stale_wqes::<GpuReleaseStore>());
        assert!(!tolerates_stale_wqes::<ThreadFence>());
        assert!(!tolerates_stale_wqes::<SystemReleaseStore>());
        assert!(!tolerates_stale_wqes::<SystemFence>());
        let left = GpuError::Timeout {
            what: "x".into(),
            limit: SPIN_LIMIT,
            still_running: true,
        };
        let ended = GpuError::Timeout {
            what: "x".into(),
            limit: SPIN_LIMIT,
            still_running: false,
        };
        assert!(gpu_hung(&left));
        assert!(!gpu_hung(&ended));
        assert!(!gpu_hung(&GpuError::Invalid("status -1".into())));
    }

    #[test]
    fn words_are_bounds_checked() {
        let b = 7u64.to_ne_bytes();
        assert_eq!(word64(&b, 0), Ok(7));
        assert!(word64(&b, 1).is_err());
        assert!(word32(&b, 5).is_err());
        assert_eq!(sm_mhz(1980, 1000), 1980.0);
        assert_eq!(sm_mhz(5, 0), 0.0);
    }
}
