//! Device waits that never hang, on a GPU (the H200 machine; ignored by default, CI has no
//! GPU): a GPU-placed RC queue pair made by the control plane on the CUDA software NIC's
//! backend, connected to itself, executed by the CUDA software NIC, and the benchmark's
//! exclusive issue loop (`tests/cuda/hot_path.cu`: post, ring, `Exclusive::wait`):
//!
//! - with no fault, every wait returns 0 (the control);
//! - a completion the NIC drops (`DeviceNicBuilder::drop_completion`: the WRITE lands, no
//!   CQE) ends the wait with the deadline status (-0x402) once the queue pair's device wait
//!   (`QueuePair::set_device_wait`) has passed, and not before; no watchdog;
//! - a retry-exceeded error CQE (syndrome 0x15, vendor 0x81) ends the wait at once with
//!   `-0x15`, long before the deadline.
//!
//! The script `kernels/waits-gpu.sh` runs this binary on a machine with no cargo.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::LaunchConfig;
use ibgda::cq::Syndrome;
use ibgda::memory::DeviceBuffer;
use ibgda::nic::team::connect_rc;
use ibgda::nic::{Device, MemoryAccess, MemoryRegion, QueueSpec, RegisterMemory, SoftGpuNic};
use ibgda::order::GpuReleaseStore;
use ibgda::queue::{Gpu as GpuPlaced, QueuePair};
use ibgda::wqe::{Rc, RingSize};
use ibgda_kernels::api::DeviceStatus;
use ibgda_kernels::cudanic::{nic_builder, CudaFabric};
use ibgda_kernels::gpu::{descriptor_bytes, CompileOptions, Gpu, KernelArg};
use ibgda_kernels::nvrtc::compile_source;

/// The bytes of the data region the loop's WRITEs land in.
const DATA_LEN: usize = 4096;

/// One GPU for every test of the binary (opening compiles the crate's programs).
fn gpu() -> Arc<Gpu> {
    static GPU: OnceLock<Arc<Gpu>> = OnceLock::new();
    GPU.get_or_init(|| {
        // The waits on no queue pair (the harness's) stay bounded too.
        let options = CompileOptions::new()
            .spin_limit(Duration::from_secs(3))
            .expect("a valid bound");
        Arc::new(Gpu::open_with(0, &options).unwrap_or_else(|e| panic!("no usable GPU: {e}")))
    })
    .clone()
}

/// One rank: its RC queue pair (to itself), the data region and its buffer, the device.
struct Rank {
    // Declared first: dropped before the device.
    region: MemoryRegion<SoftGpuNic>,
    queues: Vec<QueuePair<Rc, GpuPlaced, GpuReleaseStore>>,
    data: Arc<DeviceBuffer>,
    device: Device<SoftGpuNic>,
}

fn rank(fabric: &CudaFabric) -> Rank {
    let gpu = fabric.gpu().clone();
    let mut ranks = fabric
        .ranks(1, |b, device| {
            let pd = device.alloc_pd().expect("pd");
            let spec = QueueSpec::new(RingSize::new(64).expect("ring"));
            let queues = connect_rc(
                b,
                &pd,
                spec,
                fabric.queue_memory(),
                || fabric.producer_state(),
                GpuReleaseStore,
            )
            .expect("connect");
            let data = Arc::new(gpu.device_buffer(DATA_LEN).expect("data"));
            let region = pd
                .register_memory(
                    RegisterMemory::Gpu {
                        buffer: data.clone(),
                        offset: 0,
                        len: DATA_LEN,
                    },
                    MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_WRITE,
                )
                .expect("region");
            Rank {
                region,
                queues,
                data,
                device,
            }
        })
        .expect("ranks");
    ranks.pop().expect("one rank")
}

/// What the CUDA software NIC does to one WQE (by sequence number).
#[derive(Clone, Copy, Debug)]
enum Fate {
    /// Executes every WQE with its CQE.
    Completes,
    /// Executes this WQE without its CQE.
    LosesItsCompletion(u64),
    /// Fails this WQE with a retry-exceeded error CQE.
    RetryExceeded(u64),
    /// The NIC never runs: nothing executes, nothing completes.
    NoNic,
}

/// What one launch returned.
struct Outcome {
    status: i32,
    took: Duration,
    data: Vec<u8>,
}

/// The value `hot_path.cu`'s WRITE of iteration `i` carries (waits.cu's: `written(0)`).
fn written(i: u64) -> [u8; 8] {
    (0x0123_4567_89ab_cdef_u64 ^ i).to_ne_bytes()
}

/// Launches `kernel` (instantiated for GpuReleaseStore) of `source` with one thread or one
/// warp (`threads`) on a fresh queue pair whose device waits are bounded by `wait`, with
/// `fate` done by the CUDA software NIC; `args` gets (raddr, rkey, status address, the
/// descriptor's bytes in device memory) and returns the arguments after the descriptor.
fn run(
    source: (&str, &str),
    kernel: &str,
    threads: u32,
    fate: Fate,
    wait: Duration,
    args: impl Fn(u64, u32, u64, u64) -> Vec<KernelArg<'static>>,
) -> Outcome {
    let gpu = gpu();
    let program = gpu
        .compile_program(source.0, source.1)
        .unwrap_or_else(|e| panic!("{e}"));
    let fabric = CudaFabric::new(gpu.clone());
    let mut r = rank(&fabric);
    assert_eq!(r.queues.len(), 1, "one rank: one queue pair, to itself");
    r.queues[0].set_device_wait(wait).expect("a valid bound");
    assert_eq!(r.queues[0].device_wait(), wait);
    let qpn = r.queues[0].device_queue().raw().qpn;
    let devices: Vec<&SoftGpuNic> = vec![r.device.backend()];
    let all: Vec<&QueuePair<Rc, GpuPlaced, GpuReleaseStore>> = r.queues.iter().collect();
    let mut builder = nic_builder(&devices, &all, 1, DATA_LEN as u64).expect("nic");
    match fate {
        Fate::Completes | Fate::NoNic => {}
        Fate::LosesItsCompletion(at) => builder.drop_completion(qpn, at).expect("drop"),
        Fate::RetryExceeded(at) => builder
            .inject_fault(qpn, at, Syndrome::TransportRetryExceeded, 0x81)
            .expect("inject"),
    }
    let mut nic = builder.build(&gpu).expect("nic");
    if !matches!(fate, Fate::NoNic) {
        nic.start().expect("start");
    }
    let kernel = program
        .kernel::<Rc, GpuReleaseStore>(kernel)
        .unwrap_or_else(|e| panic!("{e}"));
    let status = gpu.device_buffer(4).expect("status");
    let descriptor = gpu
        .device_buffer_from(&descriptor_bytes(r.queues[0].device_queue().raw()))
        .expect("descriptor");
    let rest = args(
        r.region.addr(),
        r.region.rkey().0,
        status.addr(),
        descriptor.addr(),
    );
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let t0 = Instant::now();
    // SAFETY: every kernel `run` launches takes the queue pair's descriptor by value, then
    // exactly the arguments its caller's `args` returns: the WRITE target inside the
    // registered data region, its rkey, scalars, and device buffers (`status`,
    // `descriptor`, the caller's) alive until the synchronize below.
    unsafe { kernel.launch(&r.queues[0].device_queue(), cfg, &rest) }.expect("launch");
    // The launch stream only: the context also runs the persistent NIC.
    gpu.stream().synchronize().expect("synchronize");
    let took = t0.elapsed();
    if nic.is_running() {
        nic.stop().expect("stop");
    }
    let status = i32::from_ne_bytes(
        gpu.read_device(&status).expect("status")[..4]
            .try_into()
            .expect("4 bytes"),
    );
    Outcome {
        status,
        took,
        data: gpu.read_device(&r.data).expect("data"),
    }
}

const HOT_PATH: (&str, &str) = ("hot_path.cu", include_str!("cuda/hot_path.cu"));
const WAITS: (&str, &str) = ("waits.cu", include_str!("cuda/waits.cu"));

/// `iters` iterations of `hot_path.cu`'s exclusive issue loop (post, ring, Exclusive::wait).
fn issue_loop(fate: Fate, iters: u32, wait: Duration) -> Outcome {
    let cycles = Arc::new(gpu().device_buffer(8 * iters as usize).expect("cycles"));
    let c = cycles.clone();
    run(
        HOT_PATH,
        "issue_loop",
        1,
        fate,
        wait,
        move |raddr, rkey, status, _| {
            vec![
                KernelArg::U32(iters),
                KernelArg::U64(raddr),
                KernelArg::U32(rkey),
                KernelArg::U64(c.addr()),
                KernelArg::U64(status),
            ]
        },
    )
}

/// One of `waits.cu`'s kernels taking (raddr, rkey, status).
fn shared(kernel: &str, fate: Fate, wait: Duration) -> Outcome {
    run(WAITS, kernel, 1, fate, wait, |raddr, rkey, status, _| {
        vec![
            KernelArg::U64(raddr),
            KernelArg::U32(rkey),
            KernelArg::U64(status),
        ]
    })
}

/// Asserts a deadline ended the wait: the status, at least `wait`, well before 2 s more.
fn assert_deadline(what: &str, o: &Outcome, wait: Duration) {
    assert_eq!(
        DeviceStatus::from_code(o.status),
        DeviceStatus::Deadline,
        "{what}: status {:#x}",
        o.status
    );
    assert!(
        o.took >= wait,
        "{what}: returned after {:?}, before its {wait:?}",
        o.took
    );
    assert!(
        o.took < wait + Duration::from_secs(2),
        "{what}: the {wait:?} wait took {:?}",
        o.took
    );
    println!(
        "{what}: DEADLINE after {:?} (host side, bound {wait:?})",
        o.took
    );
}

/// Asserts the retry-exceeded syndrome ended the wait, long before the deadline.
fn assert_retry_exceeded(what: &str, o: &Outcome) {
    assert_eq!(
        DeviceStatus::from_code(o.status),
        DeviceStatus::Completion(Syndrome::TransportRetryExceeded as u8),
        "{what}: status {:#x}",
        o.status
    );
    assert_eq!(o.status, -0x15, "{what}");
    assert!(
        o.took < Duration::from_secs(2),
        "{what}: the error took {:?}",
        o.took
    );
    println!("{what}: -0x15 after {:?} (host side)", o.took);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn every_wait_returns_when_every_completion_comes() {
    let o = issue_loop(Fate::Completes, 8, Duration::from_secs(5));
    assert_eq!(DeviceStatus::from_code(o.status), DeviceStatus::Ok);
    assert_eq!(o.data[..8], written(7), "the last WRITE landed");
    println!(
        "8 posts and waits, every completion delivered: {:?}",
        o.took
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn a_dropped_completion_ends_the_exclusive_wait_at_the_queue_pairs_deadline() {
    let wait = Duration::from_millis(200);
    let o = issue_loop(Fate::LosesItsCompletion(0), 4, wait);
    assert_eq!(o.data[..8], written(0), "the WRITE itself landed");
    assert_deadline("exclusive wait, completion lost", &o, wait);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn a_retry_exceeded_error_ends_the_exclusive_wait_with_its_syndrome() {
    let o = issue_loop(Fate::RetryExceeded(0), 4, Duration::from_secs(5));
    assert_eq!(o.data[..8], [0u8; 8], "the failed WRITE wrote nothing");
    assert_retry_exceeded("exclusive wait, retry exceeded", &o);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn the_shared_waits_end_at_the_deadline_or_with_the_syndrome() {
    let wait = Duration::from_millis(200);
    // The per-thread post's WQE (0) is unsignaled; the ticket wait's signaled NOP is 1.
    for kernel in ["shared_ticket", "quiet"] {
        let o = shared(kernel, Fate::Completes, Duration::from_secs(5));
        assert_eq!(o.status, 0, "{kernel}: every completion delivered");
        assert_eq!(o.data[..8], written(0), "{kernel}");
        let o = shared(kernel, Fate::LosesItsCompletion(1), wait);
        assert_eq!(o.data[..8], written(0), "{kernel}: the WRITE landed");
        assert_deadline(&format!("{kernel}, completion lost"), &o, wait);
        let o = shared(kernel, Fate::RetryExceeded(0), Duration::from_secs(5));
        assert_retry_exceeded(&format!("{kernel}, retry exceeded"), &o);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn the_frontier_and_room_waits_end_at_the_deadline() {
    let wait = Duration::from_millis(200);
    let o = shared("held_frontier", Fate::NoNic, wait);
    assert_deadline("frontier behind a held reservation", &o, wait);
    // 64 WQEBBs fill the ring; the 65th waits for room that nothing frees.
    let o = run(
        WAITS,
        "full_ring",
        1,
        Fate::NoNic,
        wait,
        |raddr, rkey, status, _| {
            vec![
                KernelArg::U32(65),
                KernelArg::U64(raddr),
                KernelArg::U32(rkey),
                KernelArg::U64(status),
            ]
        },
    );
    assert_deadline("room in a full ring", &o, wait);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn the_occasional_send_waits_end_at_the_deadline_or_with_the_syndrome() {
    let wait = Duration::from_millis(200);
    let occasional = |fate, wait| {
        run(
            WAITS,
            "occasional",
            32,
            fate,
            wait,
            |raddr, rkey, status, desc| {
                vec![
                    KernelArg::U64(desc),
                    KernelArg::U64(raddr),
                    KernelArg::U32(rkey),
                    KernelArg::U64(status),
                ]
            },
        )
    };
    let o = occasional(Fate::Completes, Duration::from_secs(5));
    assert_eq!(o.status, 0, "every completion delivered");
    let o = occasional(Fate::LosesItsCompletion(0), wait);
    assert_deadline("occasional send, completion lost", &o, wait);
    let o = occasional(Fate::RetryExceeded(0), Duration::from_secs(5));
    assert_retry_exceeded("occasional send, retry exceeded", &o);
}

/// Without a GPU: both sources compile (NVRTC), and the clock is read only where a wait
/// is: never in the post that does not wait, in every kernel that does.
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn only_waits_read_the_global_timer() {
    for (name, source) in [HOT_PATH, WAITS] {
        let c =
            compile_source(name, source, &CompileOptions::new()).unwrap_or_else(|e| panic!("{e}"));
        let entries: Vec<&str> = c.ptx.split(".entry ").skip(1).collect();
        assert!(!entries.is_empty(), "{name}: no kernel");
        for e in entries {
            let kernel = &e[..e.find('(').expect("a parameter list")];
            let reads = e.contains("%globaltimer");
            assert_eq!(
                reads,
                !kernel.starts_with("exclusive_post_"),
                "{name}: {kernel} reads %globaltimer: {reads}"
            );
        }
    }
}
