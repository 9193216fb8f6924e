//! The control-plane suite's GPU-placed queues, on the backend `IBGDA_NIC` names: RC and DC
//! queue pairs whose send rings, CQs and doorbell records are GPU memory registered as
//! UMEM by DMA-BUF, their UAR doorbells mapped into the GPU, data regions in GPU memory,
//! GPU kernels posting every operation and waiting for each completion, and every byte of
//! memory and every completion status checked. With the emulated ConnectX's GPU build
//! (`IBGDA_EMU_FEATURES=cuda scripts/with-emulated-nic`), the CUDA software NIC executes
//! the queues; on a ConnectX host with a GPU, the NIC does.
//!
//! Cases (each in a process of its own, so that the emulator's configuration is the
//! case's):
//!
//! - `gpu_placed_queues`: an RC loopback queue pair (WRITE inline and gathered, READ,
//!   fetch-add, compare-swap, masked fetch-add and compare-swap, NOP) and a DC initiator
//!   reaching a DC target (WRITE, READ, fetch-add), all posted by one GPU kernel; every
//!   UMEM of GPU queue memory registered by DMA-BUF (the backend's `umem_paths`: none
//!   through peer memory, which the emulator's GPU build would also take) and every data
//!   region too;
//! - `a_thousand_gpu_queue_pairs_keep_no_descriptor_open`: 1,000 GPU-placed queue pairs
//!   made through the control plane (4,000 UMEMs, each by DMA-BUF) under a limit of 1,024
//!   open files, and not one descriptor more open afterwards;
//! - `a_first_wqe_failure_reaches_the_device_wait` (the emulator's `fault.first_wqe`): the
//!   kernel's wait returns the error status (LOCAL_QP_OP, then flushes) instead of
//!   spinning.
//!
//! Each case says its steps with the seconds since its first (opening the GPU
//! compiles the crate's programs with NVRTC; the emulated ConnectX compiles its CUDA
//! software NIC at the first GPU registration), and the queue pairs' device waits end
//! after [`DEVICE_WAIT`], so that a run stopped from outside shows where each case was.
//! A case that runs longer than `IBGDA_NIC_SUITE_GPU_CASE_TIMEOUT_S` seconds (default
//! 300) is killed and reported failed, and the next case runs.
//!
//! Needs a GPU: without one (CI), every case is reported ignored with the reason, unless
//! `IBGDA_REQUIRE_GPU=1`. `IBGDA_NIC` unset or `soft` reports every case ignored too: the
//! software backend's GPU placement (the CUDA software NIC behind the control plane) is
//! another binary's.

#[path = "../../tests/case_report/mod.rs"]
mod case_report;

use std::process::{Command, ExitCode};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::LaunchConfig;
use ibgda::memory::DeviceBuffer;
use ibgda::nic::mlx5::{GpuPath, Mlx5Backend, UmemPaths};
use ibgda::nic::{
    Device, MemoryAccess, MemoryRegion, QueueAllocator, QueueFill, QueueSpec, RegisterMemory,
};
use ibgda::order::GpuReleaseStore;
use ibgda::queue::{Gpu as GpuPlaced, ProducerStateMemory};
use ibgda::wqe::{Compact, CompactAddressVector, RingSize};
use ibgda_kernels::gpu::{Gpu, KernelArg};
use ibgda_kernels::nic::CudaNicAccess;
use ibgda_kernels::request::{Shape, TransportForm, WqeRequest};
use zerocopy::IntoBytes;

/// Set in a child process: the case it runs.
const CHILD_ENV: &str = "IBGDA_NIC_SUITE_GPU_CASE";
/// How long a child may run, unless `IBGDA_NIC_SUITE_GPU_CASE_TIMEOUT_S` says otherwise.
const CHILD_TIMEOUT: Duration = Duration::from_secs(300);
/// The environment variable bounding each case's process, in seconds.
const TIMEOUT_ENV: &str = "IBGDA_NIC_SUITE_GPU_CASE_TIMEOUT_S";
/// The device waits' bound on every queue pair the cases make: each operation takes
/// microseconds, so a completion that never comes ends the kernel's wait (the deadline
/// status) within seconds instead of the default 60 s.
const DEVICE_WAIT: Duration = Duration::from_secs(10);

/// The bound on each case's process: `IBGDA_NIC_SUITE_GPU_CASE_TIMEOUT_S` if it is a
/// whole number of seconds above 0, else [`CHILD_TIMEOUT`].
fn child_timeout(var: Option<&str>) -> Result<Duration, String> {
    match var {
        None => Ok(CHILD_TIMEOUT),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(s) if s > 0 => Ok(Duration::from_secs(s)),
            _ => Err(format!(
                "{TIMEOUT_ENV}={v:?}: a whole number of seconds above 0 is needed"
            )),
        },
    }
}

/// Says on stdout that the case reached `what`, with the seconds since its first step.
fn step(what: &str) {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    println!("  +{:.1} s: {what}", start.elapsed().as_secs_f64());
}

type Outcome = Result<(), String>;

struct Case {
    name: &'static str,
    /// The emulated ConnectX's configuration for the case (ignored on a ConnectX).
    config: &'static str,
    run: fn(&str) -> Outcome,
}

const ONE_DEVICE: &str = "[device mlx5_0]\n";

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "gpu_placed_queues",
            config: ONE_DEVICE,
            run: gpu_placed_queues,
        },
        Case {
            name: "a_thousand_gpu_queue_pairs_keep_no_descriptor_open",
            config: ONE_DEVICE,
            run: a_thousand_queue_pairs,
        },
        Case {
            name: "a_first_wqe_failure_reaches_the_device_wait",
            config: "[device mlx5_0]\nfault.first_wqe = 0x68\n",
            run: first_wqe_failure,
        },
    ]
}

fn fail(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The GPU, its access for the backend, and the device opened with it.
struct Setup {
    gpu: Arc<Gpu>,
    access: Arc<CudaNicAccess>,
    device: Device<Mlx5Backend>,
}

/// The GPU, with the crate's programs compiled (`kernels`: for a case that launches
/// kernels) or none, and the device `name`.
fn setup(name: &str, kernels: bool) -> Result<Setup, String> {
    use ibgda::nic::mlx5::Mlx5Device;
    let gpu = if kernels {
        step("opening GPU 0 (NVRTC compiles the crate's programs)");
        Gpu::open(0)
    } else {
        Gpu::open_without_programs(0)
    };
    let gpu = Arc::new(gpu.map_err(|e| format!("GPU 0: {e}"))?);
    step("GPU 0 open");
    let access = Arc::new(CudaNicAccess::new(gpu.clone()));
    let backend = Mlx5Backend::new(Mlx5Device::open(Some(name)).map_err(fail)?)
        .with_gpu(access.clone(), access.clone());
    let device = Device::open(backend).map_err(fail)?;
    step(&format!("device {name} open"));
    Ok(Setup {
        gpu,
        access,
        device,
    })
}

/// GPU memory of `len` bytes holding `init` (zeros past it), in its own page-aligned range
/// (as queue memory is allocated), so that it exports as DMA-BUF.
fn gpu_memory(s: &Setup, len: usize, init: &[u8]) -> Result<Arc<DeviceBuffer>, String> {
    let buffer = QueueAllocator::<GpuPlaced>::allocate(&*s.access, len, 4096, QueueFill::Zero)
        .map_err(fail)?;
    if !init.is_empty() {
        s.gpu.write_device(&buffer, 0, init).map_err(fail)?;
    }
    Ok(Arc::new(buffer))
}

fn spec() -> QueueSpec {
    QueueSpec::new(RingSize::new(64).expect("64 WQEBBs"))
}

/// A signaled request of `shape`.
fn request(shape: Shape) -> WqeRequest {
    WqeRequest {
        shape: shape as u32,
        fm_ce_se: 0x08,
        ..WqeRequest::default()
    }
}

/// Runs `ibgda_nic_requests_GpuReleaseStore` over `queues` (descriptors), `per` requests
/// each: the completion status of every request and the kernel's own status.
fn run_requests(
    gpu: &Gpu,
    queues: &[ibgda::queue::DeviceQueueDescriptor],
    requests: &[WqeRequest],
) -> Result<(Vec<i32>, i32), String> {
    let per = (requests.len() / queues.len()) as u32;
    let bytes: Vec<u8> = requests
        .iter()
        .flat_map(|r| {
            // SAFETY: WqeRequest is #[repr(C)] plain data without padding (264 bytes of
            // integers and byte arrays); viewing it as bytes reads initialised memory.
            unsafe {
                core::slice::from_raw_parts(
                    (r as *const WqeRequest).cast::<u8>(),
                    core::mem::size_of::<WqeRequest>(),
                )
            }
            .to_vec()
        })
        .collect();
    let reqs = gpu.device_buffer_from(&bytes).map_err(fail)?;
    let descs = ibgda_kernels::harness::descriptor_array(gpu, queues).map_err(fail)?;
    let statuses = gpu.device_buffer(4 * requests.len()).map_err(fail)?;
    let status = gpu.device_buffer(4).map_err(fail)?;
    let args = [
        KernelArg::U64(descs.addr()),
        KernelArg::U32(queues.len() as u32),
        KernelArg::U64(reqs.addr()),
        KernelArg::U32(per),
        KernelArg::U32(1),
        KernelArg::U64(statuses.addr()),
        KernelArg::U64(status.addr()),
    ];
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (queues.len() as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    step(&format!(
        "launching {} requests on {} queue pairs",
        requests.len(),
        queues.len()
    ));
    // SAFETY: ibgda_nic_requests_GpuReleaseStore(const DeviceQueueDescriptor*, u32 nq,
    // const WqeRequest*, u32 per, u32 batch, int* statuses, int* status): `queues.len()`
    // descriptors of live GPU-placed queue pairs (the caller holds them), as many times
    // `per` requests and statuses, one status; all alive until the synchronize below.
    unsafe {
        gpu.launch_raw(
            false,
            "ibgda_nic_requests_GpuReleaseStore",
            cfg,
            false,
            &args,
        )
    }
    .map_err(fail)?;
    gpu.stream().synchronize().map_err(fail)?;
    step("kernel done");
    let words = |b: &DeviceBuffer| -> Result<Vec<i32>, String> {
        Ok(gpu
            .read_device(b)
            .map_err(fail)?
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().expect("4 bytes")))
            .collect())
    };
    let kernel_status = words(&status)?[0];
    Ok((words(&statuses)?, kernel_status))
}

/// The backend registered queue memory as `expected` says: GPU queue memory by DMA-BUF,
/// none through peer memory. The emulator's GPU build also reaches GPU memory by address
/// (the peer-memory path), so a fallback would otherwise pass unseen.
fn check_umem_paths(s: &Setup, expected: UmemPaths) -> Outcome {
    let backend = s.device.backend();
    let paths = backend.umem_paths();
    println!(
        "queue memory registered as UMEM: {} by DMA-BUF, {} through peer memory, {} host memory",
        paths.dmabuf, paths.peer_memory, paths.host
    );
    if paths != expected {
        return Err(format!(
            "UMEM registrations {paths:?}, expected {expected:?} (DMA-BUF fallback: {:?})",
            backend.dmabuf_fallback()
        ));
    }
    Ok(())
}

/// Every data region in GPU memory went by DMA-BUF.
fn check_region_paths(regions: &[&MemoryRegion<Mlx5Backend>]) -> Outcome {
    for (i, region) in regions.iter().enumerate() {
        let path = region.backend_region().gpu_path();
        if path != Some(GpuPath::DmaBuf) {
            return Err(format!(
                "data region {i}: registered {path:?}, expected DMA-BUF"
            ));
        }
    }
    Ok(())
}

fn be64(bytes: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn be32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn gpu_placed_queues(name: &str) -> Outcome {
    let s = setup(name, true)?;
    let caps = *s.device.caps();
    let pd = s.device.alloc_pd().map_err(fail)?;
    // Data: a source pattern, destinations, atomic operands (big-endian), results.
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut atoms = vec![0u8; 256];
    atoms[0..8].copy_from_slice(&100u64.to_be_bytes());
    atoms[8..16].copy_from_slice(&7u64.to_be_bytes());
    atoms[16..24].copy_from_slice(&0xffff_0001_7fff_0000u64.to_be_bytes());
    atoms[24..28].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    atoms[128..136].copy_from_slice(&41u64.to_be_bytes());
    let src = gpu_memory(&s, 4096, &pattern)?;
    let dst = gpu_memory(&s, 8192, &[])?;
    let atom = gpu_memory(&s, 256, &atoms)?;
    let res = gpu_memory(&s, 256, &[])?;
    let register = |b: &Arc<DeviceBuffer>| {
        pd.register_memory(
            RegisterMemory::Gpu {
                buffer: b.clone(),
                offset: 0,
                len: b.len(),
            },
            MemoryAccess::all(),
        )
        .map_err(fail)
    };
    step("registering GPU memory (the emulator opens its GPU side at the first)");
    let (r_src, r_dst, r_atom, r_res) = (
        register(&src)?,
        register(&dst)?,
        register(&atom)?,
        register(&res)?,
    );
    step("4 GPU memory regions registered");

    // The queues: an RC queue pair connected to itself, a DC initiator, a DC target.
    let state =
        || ProducerStateMemory::from_device(s.gpu.device_buffer(64).map_err(fail)?).map_err(fail);
    let pending = pd
        .create_rc_in::<GpuPlaced>(spec(), &*s.access)
        .map_err(fail)?;
    let endpoint = pending.endpoint();
    let mut rc = pending
        .connect_device(&endpoint, state()?, GpuReleaseStore)
        .map_err(fail)?;
    rc.set_device_wait(DEVICE_WAIT).map_err(fail)?;
    const KEY: u64 = 0x0102_0304_0506_0708;
    let dct = pd.create_dct(KEY, 16).map_err(fail)?;
    let mut dci = pd
        .create_dci_in::<Compact, GpuPlaced>(spec(), &*s.access)
        .map_err(fail)?
        .activate_device(state()?, GpuReleaseStore)
        .map_err(fail)?;
    dci.set_device_wait(DEVICE_WAIT).map_err(fail)?;
    step("RC queue pair, DC initiator and DC target made");
    let (io, host) = s.device.backend().doorbell_mappings();
    println!("doorbells mapped into the GPU: {io} as I/O memory, {host} as host memory");
    if io + host != 2 {
        return Err(format!("{io} + {host} doorbell mappings, expected 2"));
    }
    // The RC queue pair's and the DCI's rings and records (4 UMEMs each) by DMA-BUF; the DC
    // target's CQ (ring and record) is host memory.
    check_umem_paths(
        &s,
        UmemPaths {
            host: 2,
            dmabuf: 8,
            peer_memory: 0,
        },
    )?;
    check_region_paths(&[&r_src, &r_dst, &r_atom, &r_res])?;

    // RC: every operation, each signaled.
    let mut rc_requests = Vec::new();
    let mut r = request(Shape::WriteInline);
    r.len = 16;
    r.inline_data[..16].copy_from_slice(b"inline, from GPU");
    r.raddr = r_dst.addr_at(0);
    r.rkey = r_dst.rkey().0;
    rc_requests.push(r);
    let mut r = request(Shape::Write);
    r.len = 64;
    r.laddr = r_src.addr_at(0);
    r.lkey = r_src.lkey().0;
    r.raddr = r_dst.addr_at(64);
    r.rkey = r_dst.rkey().0;
    rc_requests.push(r);
    let mut r = request(Shape::Read);
    r.len = 128;
    r.raddr = r_src.addr_at(256);
    r.rkey = r_src.rkey().0;
    r.laddr = r_dst.addr_at(4096);
    r.lkey = r_dst.lkey().0;
    rc_requests.push(r);
    let atomic = |shape: Shape, operand: u64, result: u64, ops: [u64; 4]| {
        let mut r = request(shape);
        r.raddr = r_atom.addr_at(operand);
        r.rkey = r_atom.rkey().0;
        r.laddr = r_res.addr_at(result);
        r.lkey = r_res.lkey().0;
        [r.op0, r.op1, r.op2, r.op3] = ops;
        r
    };
    let masked = caps.atomic && caps.masked_atomics;
    if caps.atomic {
        rc_requests.push(atomic(Shape::FetchAdd, 0, 0, [5, 0, 0, 0]));
        rc_requests.push(atomic(Shape::CompareSwap, 8, 8, [9, 7, 0, 0]));
    }
    if masked {
        // Four 16-bit lanes, each plus one, carries stopped at each lane's top bit.
        rc_requests.push(atomic(
            Shape::MaskedFetchAdd8,
            16,
            16,
            [0x0001_0001_0001_0001, 0x8000_8000_8000_8000, 0, 0],
        ));
        // Compare the high half only (it matches); swap the low half only.
        rc_requests.push(atomic(
            Shape::MaskedCompareSwap4,
            24,
            24,
            [0x0000_abcd, 0x1234_0000, 0x0000_ffff, 0xffff_0000],
        ));
    }
    rc_requests.push(request(Shape::Nop));

    // DC: WRITE, READ, fetch-add through the target, padded to as many requests.
    let av = *CompactAddressVector {
        dct: dct.dct(),
        dc_key: KEY,
        lid: s.device.port().lid,
        ..Default::default()
    }
    .encode()
    .map_err(fail)?
    .segment();
    let dc = |mut r: WqeRequest| {
        r.transport = TransportForm::DcCompact as u32;
        r.av[..16].copy_from_slice(av.as_bytes());
        r
    };
    let mut dc_requests = Vec::new();
    let mut r = request(Shape::WriteInline);
    r.len = 8;
    r.inline_data[..8].copy_from_slice(b"DC write");
    r.raddr = r_dst.addr_at(2048);
    r.rkey = r_dst.rkey().0;
    dc_requests.push(dc(r));
    let mut r = request(Shape::Read);
    r.len = 32;
    r.raddr = r_src.addr_at(1024);
    r.rkey = r_src.rkey().0;
    r.laddr = r_dst.addr_at(6144);
    r.lkey = r_dst.lkey().0;
    dc_requests.push(dc(r));
    if caps.atomic {
        dc_requests.push(dc(atomic(Shape::FetchAdd, 128, 128, [1, 0, 0, 0])));
    }
    while dc_requests.len() < rc_requests.len() {
        dc_requests.push(dc(request(Shape::Nop)));
    }
    while rc_requests.len() < dc_requests.len() {
        rc_requests.push(request(Shape::Nop));
    }
    let per = rc_requests.len();
    let all: Vec<WqeRequest> = rc_requests.into_iter().chain(dc_requests).collect();

    let (statuses, status) = run_requests(
        &s.gpu,
        &[*rc.device_queue().raw(), *dci.device_queue().raw()],
        &all,
    )?;
    if status != 0 {
        return Err(format!(
            "the kernel's status {status} (statuses {statuses:?})"
        ));
    }
    if statuses.iter().any(|&st| st != 0) {
        return Err(format!(
            "completion statuses {statuses:?} ({per} per queue), expected all 0"
        ));
    }

    // Memory, byte for byte where it was written.
    let d = s.gpu.read_device(&dst).map_err(fail)?;
    let a = s.gpu.read_device(&atom).map_err(fail)?;
    let rs = s.gpu.read_device(&res).map_err(fail)?;
    let check = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_owned()) };
    check(&d[0..16] == b"inline, from GPU", "RC inline WRITE")?;
    check(d[64..128] == pattern[0..64], "RC gathered WRITE")?;
    check(d[4096..4224] == pattern[256..384], "RC READ")?;
    check(&d[2048..2056] == b"DC write", "DC WRITE")?;
    check(d[6144..6176] == pattern[1024..1056], "DC READ")?;
    let untouched = [
        (16, 64),
        (128, 2048),
        (2056, 4096),
        (4224, 6144),
        (6176, 8192),
    ];
    for (from, to) in untouched {
        check(
            d[from..to].iter().all(|&b| b == 0),
            &format!("dst {from}..{to} untouched"),
        )?;
    }
    if caps.atomic {
        check(be64(&rs, 0) == 100 && be64(&a, 0) == 105, "fetch-add")?;
        check(be64(&rs, 8) == 7 && be64(&a, 8) == 9, "compare-swap")?;
        check(be64(&rs, 128) == 41 && be64(&a, 128) == 42, "DC fetch-add")?;
    }
    if masked {
        check(
            be64(&rs, 16) == 0xffff_0001_7fff_0000 && be64(&a, 16) == 0x0000_0002_8000_0001,
            "masked fetch-add",
        )?;
        check(
            be32(&rs, 24) == 0x1234_5678 && be32(&a, 24) == 0x1234_abcd,
            "masked compare-swap swaps under the mask",
        )?;
    }
    println!(
        "{} requests on an RC and a DC queue pair in GPU memory: every status 0, every byte as expected",
        all.len()
    );
    drop((rc, dci, dct));
    drop((r_src, r_dst, r_atom, r_res));
    let (failures, last) = s.device.teardown_failures();
    if failures != 0 {
        return Err(format!("{failures} DESTROY commands failed, last {last:?}"));
    }
    Ok(())
}

fn open_descriptors() -> Result<usize, String> {
    Ok(std::fs::read_dir("/proc/self/fd").map_err(fail)?.count())
}

fn a_thousand_queue_pairs(name: &str) -> Outcome {
    // The default limit of open files, whatever this process was started with.
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on valid structures.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut old);
        if old.rlim_cur > 1024 {
            let lower = libc::rlimit {
                rlim_cur: 1024,
                rlim_max: old.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &lower);
        }
    }
    // No kernel runs here: nothing to compile.
    let s = setup(name, false)?;
    let pd = s.device.alloc_pd().map_err(fail)?;
    let small = QueueSpec::new(RingSize::new(16).expect("16 WQEBBs"));
    let before = open_descriptors()?;
    let mut pairs = Vec::with_capacity(1000);
    for i in 0..1000 {
        pairs.push(
            pd.create_rc_in::<GpuPlaced>(small, &*s.access)
                .map_err(|e| format!("queue pair {i}: {e}"))?,
        );
        if (i + 1) % 250 == 0 {
            step(&format!("{} GPU-placed queue pairs made", i + 1));
        }
    }
    let after = open_descriptors()?;
    check_umem_paths(
        &s,
        UmemPaths {
            host: 0,
            dmabuf: 4000,
            peer_memory: 0,
        },
    )?;
    println!("1,000 GPU-placed queue pairs (4,000 DMA-BUF UMEMs): {before} descriptors open before, {after} after");
    if after != before {
        return Err(format!(
            "{} descriptors left open",
            after as i64 - before as i64
        ));
    }
    Ok(())
}

fn first_wqe_failure(name: &str) -> Outcome {
    let s = setup(name, true)?;
    let pd = s.device.alloc_pd().map_err(fail)?;
    let dst = gpu_memory(&s, 4096, &[])?;
    step("registering GPU memory (the emulator opens its GPU side)");
    let region = pd
        .register_memory(
            RegisterMemory::Gpu {
                buffer: dst.clone(),
                offset: 0,
                len: dst.len(),
            },
            MemoryAccess::all(),
        )
        .map_err(fail)?;
    let pending = pd
        .create_rc_in::<GpuPlaced>(spec(), &*s.access)
        .map_err(fail)?;
    let endpoint = pending.endpoint();
    let state =
        ProducerStateMemory::from_device(s.gpu.device_buffer(64).map_err(fail)?).map_err(fail)?;
    let mut rc = pending
        .connect_device(&endpoint, state, GpuReleaseStore)
        .map_err(fail)?;
    rc.set_device_wait(DEVICE_WAIT).map_err(fail)?;
    step("GPU memory registered, RC queue pair connected to itself");
    check_umem_paths(
        &s,
        UmemPaths {
            host: 0,
            dmabuf: 4,
            peer_memory: 0,
        },
    )?;
    check_region_paths(&[&region])?;
    let requests: Vec<WqeRequest> = (0..3)
        .map(|i| {
            let mut r = request(Shape::WriteInline);
            r.len = 8;
            r.inline_data[..8].copy_from_slice(&[i + 1; 8]);
            r.raddr = region.addr_at(8 * u64::from(i));
            r.rkey = region.rkey().0;
            r
        })
        .collect();
    let (statuses, status) = run_requests(&s.gpu, &[*rc.device_queue().raw()], &requests)?;
    // LOCAL_QP_OP (0x02) on the first WQE, WR_FLUSH_ERR (0x05) on the others.
    if status != 0 || statuses != [-0x02, -0x05, -0x05] {
        return Err(format!(
            "kernel status {status}, completion statuses {statuses:?}, expected [-2, -5, -5]"
        ));
    }
    let d = s.gpu.read_device(&dst).map_err(fail)?;
    if d[..24].iter().any(|&b| b != 0) {
        return Err("a failed or flushed WQE wrote memory".into());
    }
    Ok(())
}

/// Runs `case` in a child process (this executable), with the emulator configured for it,
/// for at most `timeout`.
fn run_child(case: &Case, timeout: Duration) -> Outcome {
    let exe = std::env::current_exe().map_err(fail)?;
    let mut child = Command::new(exe)
        .env(CHILD_ENV, case.name)
        .env("IBGDA_EMU_CONFIG_TEXT", case.config)
        .env_remove("IBGDA_EMU_CONFIG")
        .spawn()
        .map_err(fail)?;
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(fail)? {
            return if status.success() {
                Ok(())
            } else {
                Err(format!("the case's process exited with {status}"))
            };
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "the case did not end in {timeout:?} ({TIMEOUT_ENV}); its last step is above"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() -> ExitCode {
    let cases = cases();
    if let Ok(name) = std::env::var(CHILD_ENV) {
        let device = std::env::var("IBGDA_NIC").unwrap_or_default();
        let outcome = match cases.iter().find(|c| c.name == name) {
            Some(case) => (case.run)(&device),
            None => Err(format!("no case {name}")),
        };
        return match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                println!("CASE FAILED: {why}");
                ExitCode::FAILURE
            }
        };
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for case in &cases {
            println!("{}: test", case.name);
        }
        return ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let device = std::env::var("IBGDA_NIC").unwrap_or_default();
    println!("nic_suite_gpu: GPU-placed queues through the control plane, IBGDA_NIC={device:?}");
    let required = std::env::var("IBGDA_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let timeout = match child_timeout(std::env::var(TIMEOUT_ENV).ok().as_deref()) {
        Ok(t) => t,
        Err(why) => {
            println!("{why}");
            return ExitCode::FAILURE;
        }
    };
    let skip = if device.is_empty() || device == "soft" {
        Some("IBGDA_NIC names no mlx5 device: the software backend's GPU placement (the CUDA software NIC behind the control plane) is not this binary's".to_owned())
    } else if !ibgda_kernels::gpu::driver_present() {
        Some("no CUDA driver (needs an NVIDIA GPU)".to_owned())
    } else {
        None
    };
    let selected: Vec<&Case> = cases
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f.as_str())))
        .collect();
    println!("\nrunning {} tests", selected.len());
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    for case in selected {
        match (&skip, required) {
            (Some(reason), false) => {
                ignored += 1;
                println!("test {} ... ignored, {reason}", case.name);
            }
            (Some(reason), true) => {
                failed += 1;
                println!(
                    "test {} ... FAILED\n    IBGDA_REQUIRE_GPU=1 but {reason}",
                    case.name
                );
            }
            (None, _) => {
                println!("{} (a process of its own, at most {timeout:?}):", case.name);
                let start = Instant::now();
                let outcome = run_child(case, timeout);
                let took = start.elapsed().as_secs_f64();
                match outcome {
                    Ok(()) => {
                        passed += 1;
                        println!("test {} ... ok ({took:.1} s)", case.name);
                    }
                    Err(why) => {
                        failed += 1;
                        println!("test {} ... FAILED ({took:.1} s)\n    {why}", case.name);
                    }
                }
            }
        }
    }
    case_report::summary(passed, failed, ignored)
}
