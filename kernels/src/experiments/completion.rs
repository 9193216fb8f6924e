//! Completion scope (section 4.1, Figure 4): one thread posts one signaled 8-byte inline
//! RC WRITE to queue 0 and waits for it, either on that queue alone (`wait_ticket`, as
//! DeepEP's single-QP quiet) or with `quiet_all` over every configured queue (as
//! NVSHMEM's PE-wide quiet visits every QP), for 1, 2, 4, 16 and 64 configured queues.
//! The other queues are idle, as in the paper. put+completion ns per iteration.

use serde::Serialize;

use ibgda::cq::CqMode;
use ibgda::order::{GpuThread, OrderingScope, ValidFor};
use ibgda::queue::Gpu as GpuPlaced;

use super::{
    launch, launch_config, sm_mhz, tolerates_stale_wqes, wait_stream, word32, word64, BenchProgram,
    Summary, HOST_WAIT_LIMIT,
};
use crate::gpu::{Gpu, GpuError, KernelArg};
use crate::harness::{descriptor_array, gpu_queue_pair, Sink, SINK_CHECK};

/// The queue counts of the paper's figure.
pub const QUEUE_COUNTS: [u32; 5] = [1, 2, 4, 16, 64];

/// Warm-up iterations before the timed ones.
pub const WARMUP: u32 = 200;

/// How the thread waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum WaitScope {
    /// Wait for the one queue posted to.
    OneQueue,
    /// Quiet: every configured queue.
    AllQueues,
}

/// One (scope, queues, wait) point.
#[derive(Clone, Debug, Serialize)]
pub struct CompletionResult {
    /// The ordering scope.
    pub scope: &'static str,
    /// Configured queues.
    pub queues: u32,
    /// How the thread waited.
    pub wait: WaitScope,
    /// put+completion per iteration, ns.
    pub put_c_ns: Vec<u64>,
    /// Its summary.
    pub summary: Summary,
    /// SM clock over the timed iterations, MHz.
    pub sm_mhz: f64,
    /// WQEs the sink read stale after the doorbell: possible only for `Unordered` (a
    /// measured finding there, an error for any other scope).
    pub stale_wqes: u64,
}

/// One point.
pub fn run<S>(
    gpu: &Gpu,
    program: &BenchProgram,
    scope: S,
    queues: u32,
    wait: WaitScope,
    iters: u32,
) -> Result<CompletionResult, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    if queues == 0 || queues > 1024 || iters == 0 {
        return Err(GpuError::Invalid(format!(
            "completion: {queues} queues (1..=1024), {iters} iterations (> 0)"
        )));
    }
    let f = program.function(&format!("ibgda_bench_completion_{}", S::NAME))?;
    // Every WQE signaled (interval 1): a wait needs no extra NOP.
    let qps = (0..queues)
        .map(|i| gpu_queue_pair(gpu, 0x200 + i, 64, 64, 1, CqMode::Ring, scope))
        .collect::<Result<Vec<_>, _>>()?;
    let descs: Vec<_> = qps.iter().map(|q| *q.device_queue().raw()).collect();
    let arr = descriptor_array(gpu, &descs)?;
    let n = 8 * u64::from(iters);
    let out = gpu.device_buffer((n + 16 + 8) as usize)?;
    let refs: Vec<_> = qps.iter().collect();
    let sink = Sink::start(gpu, &refs, SINK_CHECK, 0, queues, 1)?;
    let args = [
        KernelArg::U64(arr.addr()),
        KernelArg::U32(queues),
        KernelArg::U32(u32::from(wait == WaitScope::AllQueues)),
        KernelArg::U32(WARMUP),
        KernelArg::U32(iters),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(out.addr()),
        KernelArg::U64(out.addr() + n),
        KernelArg::U64(out.addr() + n + 16),
    ];
    // SAFETY: ibgda_bench_completion_<S>(const DeviceQueueDescriptor*, u32, u32, u32, u32,
    // u64, u32, u64*, u64*, int*): the arguments above; `arr` holds `queues` descriptors of
    // queue pairs alive to the end of this function, the samples, clocks and status lie
    // inside `out`; the sink's stop synchronizes the context before any is dropped.
    let launched = unsafe { launch(gpu, &f, launch_config(1, 1), &args) };
    let what = format!("completion {} {queues} queues {wait:?}", S::NAME);
    let synced = launched.and_then(|()| wait_stream(gpu, &what, HOST_WAIT_LIMIT));
    if let Err(e) = &synced {
        if super::gpu_hung(e) {
            // The kernel may still run: leave everything it uses allocated.
            std::mem::forget(sink);
            std::mem::forget((qps, arr, out));
            return Err(e.clone());
        }
    }
    let (stats, _) = sink.stop()?;
    synced?;
    let o = gpu.read_device(&out)?;
    let status = word32(&o, (n + 16) as usize)?;
    let stale_wqes = if tolerates_stale_wqes::<S>() {
        stats.bad_wqes
    } else {
        0
    };
    if status != 0 || stats.bad_wqes - stale_wqes + stats.bad_doorbells != 0 {
        return Err(GpuError::Invalid(format!(
            "completion {} {queues} queues {wait:?}: status {status}, sink {stats:?}",
            S::NAME
        )));
    }
    let put_c_ns = (0..u64::from(iters))
        .map(|i| word64(&o, (8 * i) as usize))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CompletionResult {
        scope: S::NAME,
        queues,
        wait,
        summary: Summary::of(&put_c_ns),
        put_c_ns,
        sm_mhz: sm_mhz(word64(&o, n as usize)?, word64(&o, (n + 8) as usize)?),
        stale_wqes,
    })
}

/// Both waits at every queue count of [`QUEUE_COUNTS`], each point with its own result: a
/// failing point does not stop the others, except a timeout (the GPU may still be busy),
/// after which the remaining points are not run and say so.
pub fn sweep<S>(
    gpu: &Gpu,
    program: &BenchProgram,
    scope: S,
    iters: u32,
) -> Vec<(u32, WaitScope, Result<CompletionResult, GpuError>)>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    let mut out: Vec<(u32, WaitScope, Result<CompletionResult, GpuError>)> = Vec::new();
    for q in QUEUE_COUNTS {
        for w in [WaitScope::OneQueue, WaitScope::AllQueues] {
            let hung = out
                .iter()
                .any(|(_, _, r)| r.as_ref().is_err_and(super::gpu_hung));
            let result = if hung {
                Err(GpuError::Invalid(format!(
                    "completion {q} queues {w:?}: not run, an earlier launch timed out"
                )))
            } else {
                super::progress(&format!("GPU: completion {} {q} queues {w:?}", S::NAME));
                run(gpu, program, scope, q, w, iters)
            };
            out.push((q, w, result));
        }
    }
    out
}
