//! A DeepEP-style low-latency MoE dispatch and combine on the device API: 8 ranks
//! emulated on one GPU (each a device of the CUDA software NIC's control plane, its
//! buffers reachable by the others only through its queue pairs and windows), 128 tokens
//! per rank, hidden 7168, top-8 of 256 experts, BF16 or (`--fp8`) FP8 E4M3 with a scale
//! per 128 values. Dispatch and combine are checked byte for byte against the CPU
//! reference, with the device API and with the same kernels on the builders, then timed
//! (the CUDA software NIC's figures). The kernels are `kernels/cuda/moe.cu`, the ranks'
//! setup `ibgda_kernels::experiments::moe::setup_rank` (a `Bootstrap` and any backend:
//! threads here, processes and GPUs with another bootstrap). Needs an NVIDIA GPU:
//!
//! ```sh
//! cargo run --release -p ibgda-kernels --features test-support --example moe -- [--fp8]
//! ```

use std::error::Error;
use std::sync::Arc;

use ibgda_kernels::experiments::{bench_options, moe};
use ibgda_kernels::gpu::Gpu;

fn main() -> Result<(), Box<dyn Error>> {
    let fp8 = std::env::args().any(|a| a == "--fp8");
    let gpu = Arc::new(Gpu::open_with(0, &bench_options()?)?);
    let params = moe::MoeParams {
        iterations: 10,
        warmup: 2,
        ..moe::MoeParams::deepep(fp8)
    };
    let r = moe::run(gpu, params)?;
    for v in [&r.typed, &r.raw] {
        println!(
            "{:<6} checked: {}  dispatch {:.1} us  combine {:.1} us  (p50, CUDA software NIC)",
            v.name,
            v.checked,
            v.dispatch.kernel_ns.p50 as f64 / 1e3,
            v.combine.kernel_ns.p50 as f64 / 1e3
        );
    }
    assert!(
        r.typed.checked && r.raw.checked,
        "dispatch or combine differs from the reference"
    );
    println!(
        "{} MB dispatched per iteration; device API / builders {:.3}",
        r.dispatch_bytes as f64 / 1e6,
        r.typed_over_raw
    );
    Ok(())
}
