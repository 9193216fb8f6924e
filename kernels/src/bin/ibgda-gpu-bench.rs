//! First figures of the GPU path on one GPU, against the doorbell sink (no NIC):
//! - issue time of one 8-byte inline RC WRITE per scope, typed and raw in the same run
//!   (p50/p99 from %globaltimer and clock64; the SM clock from clock64 / %globaltimer);
//! - posting rate of one warp on one QP (cooperative publication) and of 64 QPs on 64 SMs,
//!   and of one thread with 16 WQEs per doorbell (a sink that only retires).
//!
//! Usage: `ibgda-gpu-bench [--nic soft|DEVICE] [OUT_DIR]` (raw samples are written there as
//! CSV). Prints a table last. Exits with a typed error message (status 2) when no GPU is
//! usable. `--nic soft` (the default) measures against the doorbell sink; `--nic DEVICE`
//! opens a ConnectX through the mlx5 backend (feature `mlx5`) and reports its typed error
//! when it cannot (no RDMA device, not mlx5); hardware figures need the control plane's
//! queue creation.

use std::fmt::Write as _;
use std::time::Instant;

use cudarc::driver::LaunchConfig;
use ibgda::cq::CqMode;
use ibgda::order::{
    GpuFence, GpuFencedDbrec, GpuReleaseStore, GpuThread, OrderingScope, SystemFence,
    SystemReleaseStore, ThreadFence, Unordered, ValidFor,
};
use ibgda::queue::Gpu as GpuPlaced;
use ibgda_kernels::gpu::{CompileOptions, Gpu, GpuError, KernelArg, KernelQueue};
use ibgda_kernels::harness::{descriptor_array, gpu_queue_pair, Sink, SINK_CHECK, SINK_RETIRE};

fn cfg(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn pct(v: &mut [u64], p: f64) -> u64 {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

struct Issue {
    scope: &'static str,
    raw: bool,
    ns: Vec<u64>,
    cycles: Vec<u64>,
    total: Vec<u64>,
    sm_mhz: f64,
}

fn issue<S>(gpu: &Gpu, scope: S, raw: bool, iters: u32) -> Result<Issue, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let qp = gpu_queue_pair(gpu, 0x77, 64, 64, 32, CqMode::Ring, scope)?;
    let q = qp.device_queue();
    let n = 8 * u64::from(iters);
    // Everything is allocated before the sink starts: allocation and synchronous copies
    // may wait for running kernels, and the sink runs until it is stopped.
    let out = gpu.device_buffer((3 * n + 16 + 8) as usize)?;
    let sink = Sink::start(gpu, &[&qp], SINK_CHECK, 0, 1, 1)?;
    let base = out.addr();
    let args = [
        KernelArg::Queue(KernelQueue::new(&q).into()),
        KernelArg::U32(1000),
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
    // the arguments above, all inside `out`, alive past the sink's synchronize.
    unsafe { gpu.launch_raw(raw, &name, cfg(1, 1), false, &args) }?;
    gpu.stream().synchronize()?;
    let (stats, _) = sink.stop()?;
    let o = gpu.read_device(&out)?;
    let col = |k: u64| -> Vec<u64> {
        (0..iters as usize)
            .map(|i| {
                let at = (k * n) as usize + 8 * i;
                u64::from_ne_bytes(o[at..at + 8].try_into().expect("8 bytes"))
            })
            .collect()
    };
    let w = |at: u64| u64::from_ne_bytes(o[at as usize..at as usize + 8].try_into().expect("8"));
    let status = i32::from_ne_bytes(o[(3 * n + 16) as usize..][..4].try_into().expect("4"));
    if status != 0 || stats.bad_wqes + stats.bad_doorbells != 0 {
        return Err(GpuError::Invalid(format!(
            "{name}: status {status}, sink {stats:?}"
        )));
    }
    let (cyc, ns) = (w(3 * n), w(3 * n + 8));
    Ok(Issue {
        scope: S::NAME,
        raw,
        ns: col(0),
        cycles: col(1),
        total: col(2),
        sm_mhz: cyc as f64 * 1e3 / ns.max(1) as f64,
    })
}

struct Rate {
    what: String,
    wqes: u64,
    secs: f64,
}

/// `blocks` blocks of one warp each, block b posting to QP b % nq cooperatively, `iters`
/// rounds of 32 WQEs, batch 32; the sink only retires (one thread per QP, one per block).
fn warp_rate<S>(gpu: &Gpu, scope: S, nq: u32, blocks: u32, iters: u32) -> Result<Rate, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    let qps = (0..nq)
        .map(|i| gpu_queue_pair(gpu, 0x100 + i, 4096, 1024, 1024, CqMode::Ring, scope))
        .collect::<Result<Vec<_>, _>>()?;
    let descs: Vec<_> = qps.iter().map(|q| *q.device_queue().raw()).collect();
    let arr = descriptor_array(gpu, &descs)?;
    let status = gpu.device_buffer(4)?;
    let sink = Sink::start(gpu, &qps.iter().collect::<Vec<_>>(), SINK_RETIRE, 0, nq, 1)?;
    let args = [
        KernelArg::U64(arr.addr()),
        KernelArg::U32(nq),
        KernelArg::U32(iters),
        KernelArg::U32(32),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(status.addr()),
    ];
    let name = format!("ibgda_post_warp_{}", S::NAME);
    let t = Instant::now();
    // SAFETY: (const DeviceQueueDescriptor*, u32, u32, u32, u64, u32, int*): the arguments
    // above; the queue pairs, array and status live past the sink's synchronize.
    unsafe { gpu.launch_raw(false, &name, cfg(blocks, 32), false, &args) }?;
    gpu.stream().synchronize()?;
    let secs = t.elapsed().as_secs_f64();
    let (stats, _) = sink.stop()?;
    let st = gpu.read_device(&status)?;
    let status = i32::from_ne_bytes(st[..4].try_into().expect("4"));
    if status != 0 || stats.bad_wqes + stats.bad_doorbells != 0 {
        return Err(GpuError::Invalid(format!(
            "{name}: status {status}, sink {stats:?}"
        )));
    }
    Ok(Rate {
        what: format!(
            "{} warp(s) x 32 lanes, {nq} QP(s), {blocks} SMs, coop, batch 32 [{}]",
            blocks,
            S::NAME
        ),
        wqes: u64::from(blocks) * 32 * u64::from(iters),
        secs,
    })
}

/// One thread, exclusive producer, `batch` WQEs per doorbell.
fn batch_rate<S>(gpu: &Gpu, scope: S, batch: u32, rounds: u32) -> Result<Rate, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let qp = gpu_queue_pair(gpu, 0x55, 4096, 1024, 1024, CqMode::Ring, scope)?;
    let q = qp.device_queue();
    let out = gpu.device_buffer(16)?;
    let sink = Sink::start(gpu, &[&qp], SINK_RETIRE, 0, 1, 1)?;
    let args = [
        KernelArg::Queue(KernelQueue::new(&q).into()),
        KernelArg::U32(rounds),
        KernelArg::U32(batch),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(out.addr()),
        KernelArg::U64(out.addr() + 8),
    ];
    let name = format!("ibgda_post_batch_{}", S::NAME);
    // SAFETY: (DeviceQueueDescriptor, u32, u32, u64, u32, u64*, int*): the arguments above.
    unsafe { gpu.launch_raw(false, &name, cfg(1, 1), false, &args) }?;
    gpu.stream().synchronize()?;
    let (stats, _) = sink.stop()?;
    let o = gpu.read_device(&out)?;
    let ns = u64::from_ne_bytes(o[..8].try_into().expect("8"));
    let status = i32::from_ne_bytes(o[8..12].try_into().expect("4"));
    if status != 0 || stats.bad_wqes + stats.bad_doorbells != 0 {
        return Err(GpuError::Invalid(format!(
            "{name}: status {status}, sink {stats:?}"
        )));
    }
    Ok(Rate {
        what: format!("1 thread, 1 QP, batch {batch} (exclusive) [{}]", S::NAME),
        wqes: u64::from(batch) * u64::from(rounds),
        secs: ns as f64 * 1e-9,
    })
}

fn run(out_dir: Option<&str>) -> Result<String, GpuError> {
    // Every device wait gives up after 5 s (SPIN_TIMEOUT) instead of hanging; the bound
    // costs one %globaltimer read per wait-loop turn, never on the issue path.
    let options = CompileOptions::new().spin_limit(std::time::Duration::from_secs(5))?;
    let gpu = Gpu::open_with(0, &options)?;
    let iters = 20_000;
    let mut issues = Vec::new();
    // Typed and raw alternate per scope, in one process run.
    macro_rules! both {
        ($s:expr) => {
            issues.push(issue(&gpu, $s, false, iters)?);
            issues.push(issue(&gpu, $s, true, iters)?);
        };
    }
    // SAFETY: benchmark queues on throw-away device memory read only by the sink.
    both!(unsafe { Unordered::new() });
    both!(GpuFence);
    both!(GpuFencedDbrec);
    both!(GpuReleaseStore);
    both!(ThreadFence);
    both!(SystemReleaseStore);
    both!(SystemFence);
    let mut rates = vec![
        batch_rate(&gpu, GpuFence, 1, 20_000)?,
        batch_rate(&gpu, GpuFence, 16, 20_000)?,
        warp_rate(&gpu, GpuFence, 1, 1, 20_000)?,
        warp_rate(&gpu, GpuFence, 64, 64, 20_000)?,
        warp_rate(&gpu, GpuReleaseStore, 1, 1, 20_000)?,
        warp_rate(&gpu, GpuReleaseStore, 64, 64, 20_000)?,
    ];
    rates.push(warp_rate(&gpu, GpuFence, 1, 8, 5_000)?);

    if let Some(dir) = out_dir {
        let mut csv = String::from("scope,kind,iter,issue_ns,issue_cycles,put_c_ns\n");
        for i in &issues {
            for k in 0..i.ns.len() {
                let _ = writeln!(
                    csv,
                    "{},{},{},{},{},{}",
                    i.scope,
                    if i.raw { "raw" } else { "typed" },
                    k,
                    i.ns[k],
                    i.cycles[k],
                    i.total[k]
                );
            }
        }
        let _ = std::fs::write(format!("{dir}/issue_samples.csv"), csv);
        let mut r = String::from("what,wqes,seconds,mwqe_per_s\n");
        for x in &rates {
            let _ = writeln!(
                r,
                "\"{}\",{},{:.6},{:.3}",
                x.what,
                x.wqes,
                x.secs,
                x.wqes as f64 / x.secs / 1e6
            );
        }
        let _ = std::fs::write(format!("{dir}/rates.csv"), r);
    }

    let mut t = String::new();
    let _ = writeln!(t, "\nIssue time of one 8-byte inline RC WRITE, 1 thread, {iters} iterations, doorbell sink (no NIC)");
    let _ = writeln!(
        t,
        "{:<20} {:>9} {:>9} {:>10} {:>10} {:>9} {:>9} {:>11} {:>8}",
        "scope",
        "typed p50",
        "typed p99",
        "raw p50",
        "raw p99",
        "typ cyc",
        "raw cyc",
        "typed/raw",
        "SM MHz"
    );
    for pair in issues.chunks(2) {
        let (ty, rw) = (&pair[0], &pair[1]);
        let (mut a, mut b) = (ty.ns.clone(), rw.ns.clone());
        let (mut ca, mut cb) = (ty.cycles.clone(), rw.cycles.clone());
        let (a50, a99, b50, b99) = (
            pct(&mut a, 0.5),
            pct(&mut a, 0.99),
            pct(&mut b, 0.5),
            pct(&mut b, 0.99),
        );
        let (c50, d50) = (pct(&mut ca, 0.5), pct(&mut cb, 0.5));
        let _ = writeln!(
            t,
            "{:<20} {:>7} ns {:>7} ns {:>8} ns {:>8} ns {:>9} {:>9} {:>11.3} {:>8.0}",
            ty.scope,
            a50,
            a99,
            b50,
            b99,
            c50,
            d50,
            c50 as f64 / d50.max(1) as f64,
            (ty.sm_mhz + rw.sm_mhz) / 2.0
        );
    }
    let _ = writeln!(
        t,
        "(typed/raw: ratio of p50 clock64 cycles; SM MHz: clock64 / %globaltimer over each run)"
    );
    let _ = writeln!(
        t,
        "\nPosting rate (WQEs built and published per second; sink only retires)"
    );
    for x in &rates {
        let _ = writeln!(
            t,
            "  {:<72} {:>9.2} M WQE/s ({} WQEs in {:.4} s)",
            x.what,
            x.wqes as f64 / x.secs / 1e6,
            x.wqes,
            x.secs
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
         `cargo build --release -p ibgda-kernels --features mlx5`"
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
    let out = args.first().cloned();
    match run(out.as_deref()) {
        Ok(table) => println!("{table}"),
        Err(e) => {
            eprintln!("ibgda-gpu-bench: {e}");
            std::process::exit(2);
        }
    }
}
