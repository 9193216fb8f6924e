//! ibgda's control plane bringing up what NVSHMEM 3.4.5's IBGDA transport brings up for one
//! PE with its defaults, so that the two command streams can be compared
//! (`emu/nvshmem-command-diff.md`, `scripts/nvshmem-on-emulator.sh`): `--dct` DC targets
//! with NVSHMEM's access key, `--dci` DC initiators and `--rc` RC queue pairs (connected in
//! pairs, a stand-in for the peers' queue pairs) of `--depth` WQEBBs with collapsed CQs of
//! as many entries, on the device `IBGDA_NIC` names, queue memory in the host or in GPU 0.
//! It prints each step before taking it, so a run that stops shows where; with the
//! emulated ConnectX's `IBGDA_EMU_LOG=<file>` every command is logged.
//!
//! ```sh
//! scripts/with-emulated-nic env IBGDA_NIC=mlx5_0 IBGDA_EMU_LOG=ibgda.log \
//!     cargo run --release -p ibgda-kernels --features mlx5 --example nvshmem_config
//! IBGDA_EMU_FEATURES=cuda scripts/with-emulated-nic env IBGDA_NIC=mlx5_0 \
//!     IBGDA_EMU_LOG=ibgda.log cargo run --release -p ibgda-kernels --features mlx5 \
//!     --example nvshmem_config -- --placement gpu
//! ```

use std::error::Error;
use std::io::Write;
use std::sync::Arc;

use ibgda::cq::CqMode;
use ibgda::nic::mlx5::Mlx5Backend;
use ibgda::nic::{Device, QueueSpec};
use ibgda::order::GpuReleaseStore;
use ibgda::queue::{Gpu as GpuPlaced, ProducerStateMemory};
use ibgda::wqe::{Full, RingSize};
use ibgda_kernels::gpu::Gpu;
use ibgda_kernels::nic::CudaNicAccess;

/// NVSHMEM's `IBGDA_DC_ACCESS_KEY`.
const DC_ACCESS_KEY: u64 = 0x5623_ceaf;

const USAGE: &str = "usage: nvshmem_config [--placement host|gpu] [--dct N] [--dci N] \
                     [--rc N (even)] [--depth WQEBBS] [--dct-cq ENTRIES]\n\
                     defaults: host, 2 DCTs, 1 DCI, 2 RC, 1024 WQEBBs, 32768 DCT CQ entries \
                     (NVSHMEM 3.4.5's defaults; its DC targets' verbs CQs get 32768)";

#[derive(Debug)]
struct Options {
    gpu: bool,
    dcts: usize,
    dcis: usize,
    rcs: usize,
    depth: usize,
    dct_cq: u32,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        gpu: false,
        dcts: 2,
        dcis: 1,
        rcs: 2,
        depth: 1024,
        dct_cq: 32768,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value\n{USAGE}"));
        let number = |v: String| {
            v.parse::<usize>()
                .map_err(|e| format!("{flag} {v}: {e}\n{USAGE}"))
        };
        match flag.as_str() {
            "--placement" => {
                o.gpu = match value()?.as_str() {
                    "host" => false,
                    "gpu" => true,
                    other => return Err(format!("--placement {other}\n{USAGE}")),
                }
            }
            "--dct" => o.dcts = number(value()?)?,
            "--dci" => o.dcis = number(value()?)?,
            "--rc" => o.rcs = number(value()?)?,
            "--depth" => o.depth = number(value()?)?,
            "--dct-cq" => {
                let n = number(value()?)?;
                o.dct_cq = u32::try_from(n).map_err(|e| format!("--dct-cq {n}: {e}"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    if o.rcs % 2 != 0 {
        return Err(format!("--rc {}: RC queue pairs connect in pairs", o.rcs));
    }
    Ok(o)
}

/// Prints a step before it is taken (flushed: the last line says where a run stopped).
fn step(what: &str) {
    println!("nvshmem_config: {what}");
    let _ = std::io::stdout().flush();
}

fn main() -> Result<(), Box<dyn Error>> {
    let o = options()?;
    step(&format!("configuration {o:?}"));
    let gpu_access = if o.gpu {
        step("opening GPU 0 (no programs) for queue memory and the doorbell mapping");
        let gpu = Arc::new(Gpu::open_without_programs(0)?);
        Some((gpu.clone(), Arc::new(CudaNicAccess::new(gpu))))
    } else {
        None
    };
    step("opening the device IBGDA_NIC names (QUERY_HCA_CAP)");
    let mut backend = Mlx5Backend::from_env()?;
    if let Some((_, access)) = &gpu_access {
        backend = backend.with_gpu(access.clone(), access.clone());
    }
    let device = Device::open(backend)?;
    step(&format!(
        "device {} open: port {:?}",
        device.backend().device().name(),
        device.port()
    ));
    let pd = device.alloc_pd()?;
    let spec = QueueSpec {
        cq_mode: CqMode::Collapsed,
        ..QueueSpec::new(RingSize::new(o.depth)?)
    };

    let mut dcts = Vec::new();
    for i in 0..o.dcts {
        step(&format!(
            "DC target {i}: CQ of {} entries, CREATE_DCT",
            o.dct_cq
        ));
        dcts.push(pd.create_dct(DC_ACCESS_KEY, o.dct_cq)?);
    }
    // Queue pairs and their producer state live for the whole run, whatever placement.
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    for i in 0..o.dcis {
        step(&format!(
            "DC initiator {i}: CQ, CREATE_QP, RST2INIT, INIT2RTR, RTR2RTS"
        ));
        match &gpu_access {
            None => keep.push(Box::new(pd.create_dci::<Full>(spec)?.activate()?)),
            Some((gpu, access)) => {
                let pending = pd.create_dci_in::<Full, GpuPlaced>(spec, &**access)?;
                let state = ProducerStateMemory::from_device(gpu.device_buffer(64)?)?;
                keep.push(Box::new(pending.activate_device(state, GpuReleaseStore)?));
            }
        }
    }
    for pair in 0..o.rcs / 2 {
        step(&format!(
            "RC queue pairs {} and {}: CQs, CREATE_QPs, connected to each other",
            2 * pair,
            2 * pair + 1
        ));
        match &gpu_access {
            None => {
                let (a, b) = (pd.create_rc(spec)?, pd.create_rc(spec)?);
                let (ea, eb) = (a.endpoint(), b.endpoint());
                keep.push(Box::new(a.connect(&eb)?));
                keep.push(Box::new(b.connect(&ea)?));
            }
            Some((gpu, access)) => {
                let a = pd.create_rc_in::<GpuPlaced>(spec, &**access)?;
                let b = pd.create_rc_in::<GpuPlaced>(spec, &**access)?;
                let (ea, eb) = (a.endpoint(), b.endpoint());
                let state = || -> Result<_, Box<dyn Error>> {
                    Ok(ProducerStateMemory::from_device(gpu.device_buffer(64)?)?)
                };
                keep.push(Box::new(a.connect_device(
                    &eb,
                    state()?,
                    GpuReleaseStore,
                )?));
                keep.push(Box::new(b.connect_device(
                    &ea,
                    state()?,
                    GpuReleaseStore,
                )?));
            }
        }
    }
    let (io, host) = device.backend().doorbell_mappings();
    step(&format!(
        "brought up: {} DC targets, {} DC initiators, {} RC queue pairs \
         (doorbells mapped into the GPU: {io} as I/O memory, {host} as host memory); tearing down",
        o.dcts, o.dcis, o.rcs
    ));
    drop(keep);
    drop(dcts);
    drop(pd);
    let (failures, last) = device.teardown_failures();
    if failures > 0 {
        return Err(format!("{failures} teardown failures, the last: {last:?}").into());
    }
    step("done");
    Ok(())
}
