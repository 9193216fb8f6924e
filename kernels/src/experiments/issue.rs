//! Issue and put+completion time of one 8-byte inline RC WRITE from one thread, per
//! ordering scope, through the device library (`ibgda_issue_bench_<S>`) and through the
//! hand-written baseline (`ibgda_raw_issue_<S>`), alternating in one run (section 4.1,
//! Table 4). Issue: from before the reservation to after the doorbell store, in
//! %globaltimer ns and clock64 cycles; put+completion: to after the CQE the sink wrote
//! was consumed. The SM clock is clock64 over %globaltimer across the timed iterations.

use serde::Serialize;

use ibgda::cq::CqMode;
use ibgda::order::{
    GpuFence, GpuFencedDbrec, GpuReleaseStore, GpuThread, OrderingScope, SystemFence,
    SystemReleaseStore, ThreadFence, Unordered, ValidFor,
};
use ibgda::queue::Gpu as GpuPlaced;

use super::{
    launch_config, sm_mhz, tolerates_stale_wqes, wait_stream, word32, word64, Summary,
    HOST_WAIT_LIMIT,
};
use crate::gpu::{Gpu, GpuError, KernelArg, KernelQueue};
use crate::harness::{gpu_queue_pair, Sink, SINK_CHECK};

/// Warm-up iterations before the timed ones.
pub const WARMUP: u32 = 1000;

/// One kernel's run.
#[derive(Clone, Debug, Serialize)]
pub struct IssueRun {
    /// Issue time per iteration, ns.
    pub issue_ns: Vec<u64>,
    /// Issue time per iteration, SM cycles.
    pub issue_cycles: Vec<u64>,
    /// Put+completion per iteration, ns.
    pub put_c_ns: Vec<u64>,
    /// SM clock over the timed iterations, MHz.
    pub sm_mhz: f64,
    /// WQEs the sink read stale after the doorbell, of `iterations` + warm-up: possible
    /// only for `Unordered` (a measured finding there, an error for any other scope).
    pub stale_wqes: u64,
}

impl IssueRun {
    /// Summaries of (issue ns, issue cycles, put+completion ns).
    pub fn summaries(&self) -> (Summary, Summary, Summary) {
        (
            Summary::of(&self.issue_ns),
            Summary::of(&self.issue_cycles),
            Summary::of(&self.put_c_ns),
        )
    }
}

/// One scope, typed and raw.
#[derive(Clone, Debug, Serialize)]
pub struct IssueResult {
    /// The scope (`OrderingScope::NAME`).
    pub scope: &'static str,
    /// Timed iterations per kernel.
    pub iterations: u32,
    /// Through the device library.
    pub typed: IssueRun,
    /// Hand-written.
    pub raw: IssueRun,
}

impl IssueResult {
    /// typed / raw of the p50 issue cycles (the target is 1.00 +- 0.02).
    pub fn typed_over_raw(&self) -> f64 {
        let t = Summary::of(&self.typed.issue_cycles).p50 as f64;
        let r = Summary::of(&self.raw.issue_cycles).p50.max(1) as f64;
        t / r
    }
}

fn one<S>(gpu: &Gpu, scope: S, raw: bool, iters: u32) -> Result<IssueRun, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    if iters == 0 {
        return Err(GpuError::Invalid("issue: 0 iterations".into()));
    }
    let qp = gpu_queue_pair(gpu, 0x77, 64, 64, 32, CqMode::Ring, scope)?;
    let q = qp.device_queue();
    let n = 8 * u64::from(iters);
    // Three sample columns, two clock words, the status.
    let out = gpu.device_buffer((3 * n + 16 + 8) as usize)?;
    let sink = Sink::start(gpu, &[&qp], SINK_CHECK, 0, 1, 1)?;
    let base = out.addr();
    let args = [
        KernelArg::Queue(KernelQueue::new(&q).into()),
        KernelArg::U32(WARMUP),
        KernelArg::U32(iters),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(base),
        KernelArg::U64(base + n),
        KernelArg::U64(base + 2 * n),
        KernelArg::U64(base + 3 * n),
        KernelArg::U64(base + 3 * n + 16),
    ];
    let name = format!(
        "ibgda_{}_{}",
        if raw { "raw_issue" } else { "issue_bench" },
        S::NAME
    );
    // SAFETY: (DeviceQueueDescriptor, u32, u32, u64, u32, u64*, u64*, u64*, u64*, int*):
    // the arguments above, all inside `out`, which lives past the sink's stop (a
    // synchronize of the whole context); the queue pair lives to the end of this function.
    let launched = unsafe { gpu.launch_raw(raw, &name, launch_config(1, 1), false, &args) };
    let synced = launched.and_then(|()| wait_stream(gpu, &name, HOST_WAIT_LIMIT));
    if let Err(e) = &synced {
        if super::gpu_hung(e) {
            // The kernel may still run: leave everything it uses allocated.
            std::mem::forget(sink);
            std::mem::forget((qp, out));
            return Err(e.clone());
        }
    }
    let (stats, _) = sink.stop()?;
    synced?;
    let o = gpu.read_device(&out)?;
    let col = |k: u64| -> Result<Vec<u64>, GpuError> {
        (0..u64::from(iters))
            .map(|i| word64(&o, (k * n + 8 * i) as usize))
            .collect()
    };
    let status = word32(&o, (3 * n + 16) as usize)?;
    let stale_wqes = if tolerates_stale_wqes::<S>() {
        stats.bad_wqes
    } else {
        0
    };
    if status != 0 || stats.bad_wqes - stale_wqes + stats.bad_doorbells != 0 {
        return Err(GpuError::Invalid(format!(
            "{name}: status {status}, sink {stats:?}"
        )));
    }
    Ok(IssueRun {
        issue_ns: col(0)?,
        issue_cycles: col(1)?,
        put_c_ns: col(2)?,
        sm_mhz: sm_mhz(
            word64(&o, (3 * n) as usize)?,
            word64(&o, (3 * n + 8) as usize)?,
        ),
        stale_wqes,
    })
}

/// Typed then raw for one scope.
pub fn run<S>(gpu: &Gpu, scope: S, iters: u32) -> Result<IssueResult, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    Ok(IssueResult {
        scope: S::NAME,
        iterations: iters,
        typed: one(gpu, scope, false, iters)?,
        raw: one(gpu, scope, true, iters)?,
    })
}

/// Every GPU scope, in Table 4's order, each with its own result: a failing scope does
/// not stop the others, except a timeout (the GPU may still be busy), after which the
/// remaining scopes are not run and say so.
pub fn run_all(gpu: &Gpu, iters: u32) -> Vec<(&'static str, Result<IssueResult, GpuError>)> {
    let mut out: Vec<(&'static str, Result<IssueResult, GpuError>)> = Vec::new();
    let mut row = |name: &'static str, f: &dyn Fn() -> Result<IssueResult, GpuError>| {
        let hung = out
            .iter()
            .any(|(_, r)| r.as_ref().is_err_and(super::gpu_hung));
        let result = if hung {
            Err(GpuError::Invalid(format!(
                "issue {name}: not run, an earlier launch timed out"
            )))
        } else {
            super::progress(&format!("GPU: issue {name}, typed and raw"));
            f()
        };
        out.push((name, result));
    };
    // SAFETY: benchmark queues on throw-away device memory read only by the sink.
    row(Unordered::NAME, &|| {
        run(gpu, unsafe { Unordered::new() }, iters)
    });
    // SAFETY: as above; the sink follows the record, and counts any stale WQE it fetches.
    row(GpuFence::NAME, &|| {
        run(gpu, unsafe { GpuFence::new() }, iters)
    });
    row(GpuFencedDbrec::NAME, &|| run(gpu, GpuFencedDbrec, iters));
    row(GpuReleaseStore::NAME, &|| run(gpu, GpuReleaseStore, iters));
    row(ThreadFence::NAME, &|| run(gpu, ThreadFence, iters));
    row(SystemReleaseStore::NAME, &|| {
        run(gpu, SystemReleaseStore, iters)
    });
    row(SystemFence::NAME, &|| run(gpu, SystemFence, iters));
    out
}
