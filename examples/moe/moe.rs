//! A DeepEP-style low-latency MoE dispatch and combine on the device API: 8 ranks
//! emulated on one GPU (each a device of the CUDA software NIC's control plane, its
//! buffers reachable by the others only through its queue pairs and windows), 128 tokens
//! per rank, hidden 7168, top-8 of 256 experts, BF16 or (`--fp8`) FP8 E4M3 with a scale
//! per 128 values. Dispatch and combine are checked byte for byte against the CPU
//! reference, with the device API and with the same kernels on the builders, then timed
//! (the CUDA software NIC's figures). The kernels are `kernels/cuda/moe.cu`, the ranks'
//! setup `ibgda_kernels::experiments::moe::setup_rank` (a `Bootstrap` and any backend).
//! Needs an NVIDIA GPU:
//!
//! ```sh
//! cargo run --release -p ibgda-kernels --features test-support --example moe -- [--fp8]
//! ```
//!
//! The same code with one process per rank (`experiments::moe_process`): each process
//! owns its rank's device, queue pairs and buffers on its GPU (`--gpu`, by default
//! rank % the GPUs present), exchanges endpoints, windows and the CUDA IPC exports of its
//! buffers over a TCP bootstrap on loopback, and runs a CUDA software NIC that executes its
//! own queue pairs, writing peer processes' memory through IPC mappings (peer access
//! across GPUs). Every rank checks its own bytes against the CPU reference; rank 0 gathers
//! the verdicts and kernel times. NVLink multicast stays off in every process
//! (`NCCL_NVLS_ENABLE=0`, `NVSHMEM_DISABLE_NVLS=1`).
//!
//! ```sh
//! # a parent that starts N processes of this example on loopback, and waits for them
//! moe --processes 8 --tokens 32 --hidden 1024 --topk 4 --experts 32 --blocks 2 --iterations 4
//! # or each rank by hand (one per GPU): rank 0 listens at the address
//! export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
//! moe --rank 0 --size 2 --bootstrap 127.0.0.1:29500 --gpu 0 &
//! moe --rank 1 --size 2 --bootstrap 127.0.0.1:29500 --gpu 1
//! ```

use std::error::Error;
use std::net::TcpListener;
use std::process::{Command, ExitCode};
use std::sync::Arc;

use ibgda_kernels::experiments::moe_process::{
    join, launch, process_options, run_rank, Args, Mode, RankExit, NVLS_OFF, USAGE,
};
use ibgda_kernels::experiments::{bench_options, moe};
use ibgda_kernels::gpu::{device_count, Gpu};

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("moe: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, Box<dyn Error>> {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("moe: {e}\n{USAGE}");
            return Ok(ExitCode::from(2));
        }
    };
    match args.mode.clone() {
        Mode::Threads => threads(&args),
        Mode::Parent { processes } => parent(&args, processes),
        Mode::Rank {
            rank,
            size,
            bootstrap,
            gpu,
        } => one_rank(&args, rank, size, bootstrap, gpu)
            .map_err(|e| format!("rank {rank}: {e}").into()),
    }
}

/// The ranks as threads of this process (the example as it was).
fn threads(args: &Args) -> Result<ExitCode, Box<dyn Error>> {
    let gpu = Arc::new(Gpu::open_with(0, &bench_options()?)?);
    let r = moe::run(gpu, args.params)?;
    for v in [&r.typed, &r.raw] {
        println!(
            "{:<6} checked: {}  dispatch {:.1} us  combine {:.1} us  (p50, CUDA software NIC)",
            v.name,
            v.checked,
            v.dispatch.kernel_ns.p50 as f64 / 1e3,
            v.combine.kernel_ns.p50 as f64 / 1e3
        );
    }
    println!(
        "{} MB dispatched per iteration; device API / builders {:.3}",
        r.dispatch_bytes as f64 / 1e6,
        r.typed_over_raw
    );
    if let Some(out) = &args.out {
        std::fs::write(out, serde_json::to_string_pretty(&r)?)?;
    }
    if !(r.typed.checked && r.raw.checked) {
        eprintln!("moe: dispatch or combine differs from the reference");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts one process of this program per rank on loopback, and waits for them.
fn parent(args: &Args, processes: usize) -> Result<ExitCode, Box<dyn Error>> {
    // A free port for rank 0 (released here; rank 0 binds it again).
    let root = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let exe = std::env::current_exe()?;
    println!(
        "moe: {processes} processes, bootstrap at {root}, NVLink multicast off ({})",
        NVLS_OFF
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let grace = args.timeout.min(std::time::Duration::from_secs(60));
    let exits = launch(
        processes,
        &|r| {
            let mut c = Command::new(&exe);
            c.args(args.rank_args(r, root));
            c
        },
        args.deadline,
        grace,
    )?;
    let mut ok = true;
    for (r, e) in exits.iter().enumerate() {
        let good = matches!(e, RankExit::Exited(s) if s.success());
        ok &= good;
        let how = match e {
            RankExit::Exited(s) => s
                .code()
                .map_or_else(|| s.to_string(), |c| format!("exit {c}")),
            RankExit::Killed => "killed (deadline, or another rank failed)".into(),
        };
        println!("moe: rank {r}: {how}");
    }
    println!("moe: {}", if ok { "every rank passed" } else { "FAILED" });
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One rank: its GPU, its place in the bootstrap, its run; rank 0 reports.
fn one_rank(
    args: &Args,
    rank: usize,
    size: usize,
    root: std::net::SocketAddr,
    gpu: Option<usize>,
) -> Result<ExitCode, Box<dyn Error>> {
    // NVLink multicast off in every process: the parent sets it for its children; a rank
    // started by hand must be given it (this program never writes its environment).
    let missing: Vec<String> = NVLS_OFF
        .iter()
        .filter(|(k, v)| std::env::var(k).ok().as_deref() != Some(*v))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "moe: rank {rank}: NVLink multicast must be off in every process: run it with {}",
            missing.join(" ")
        );
        return Ok(ExitCode::from(2));
    }
    let bootstrap = join(rank, size, root, args.timeout)?;
    let ordinal = match gpu {
        Some(g) => g,
        None => rank % device_count()?.max(1),
    };
    println!("[ibgda-bench] rank {rank}: GPU {ordinal}, bootstrap joined");
    let gpu = Arc::new(Gpu::open_softnic(ordinal, &process_options()?)?);
    let result = run_rank(&gpu, args.params, &bootstrap, &args.variants)?;
    let Some(r) = result else {
        return Ok(ExitCode::SUCCESS);
    };
    for rep in &r.ranks {
        let verdicts: Vec<String> = rep
            .variants
            .iter()
            .map(|v| format!("{} checked: {}", v.name, v.checked))
            .collect();
        println!(
            "rank {} (GPU {}, {} peer buffers mapped): {}{}",
            rep.rank,
            rep.gpu,
            rep.mappings,
            verdicts.join(", "),
            rep.error
                .as_ref()
                .map(|e| format!("; error: {e}"))
                .unwrap_or_default()
        );
    }
    for v in &r.variants {
        println!(
            "{:<6} checked on every rank: {}  dispatch {:.1} us  combine {:.1} us  \
             (p50 of each iteration's slowest rank, {} iterations; CUDA software NIC across processes)",
            v.name,
            v.checked,
            v.dispatch_ns.p50 as f64 / 1e3,
            v.combine_ns.p50 as f64 / 1e3,
            v.total_ns.count
        );
    }
    if let Some(out) = &args.out {
        std::fs::write(out, serde_json::to_string_pretty(&r)?)?;
    }
    println!(
        "moe: {} processes {}",
        size,
        if r.passed { "passed" } else { "FAILED" }
    );
    Ok(if r.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
