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
use ibgda_kernels::gpu::{CompileOptions, Gpu, KernelArg, UserProgram};

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

/// The issue loop of `tests/cuda/hot_path.cu`, compiled for this GPU.
fn program(gpu: &Gpu) -> UserProgram {
    gpu.compile_program("hot_path.cu", include_str!("cuda/hot_path.cu"))
        .unwrap_or_else(|e| panic!("{e}"))
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

/// What the CUDA software NIC does to the loop's first WQE.
#[derive(Clone, Copy, Debug)]
enum FirstWqe {
    /// Executes it with its CQE.
    Completes,
    /// Executes it without its CQE.
    LosesItsCompletion,
    /// Fails it with a retry-exceeded error CQE.
    RetryExceeded,
}

/// What one launch of the issue loop returned.
struct Outcome {
    status: i32,
    took: Duration,
    data: Vec<u8>,
}

/// The value the loop's WRITE of iteration `i` carries (`hot_path.cu`).
fn written(i: u64) -> [u8; 8] {
    (0x0123_4567_89ab_cdef_u64 ^ i).to_ne_bytes()
}

/// Runs `iters` iterations of `issue_loop_GpuReleaseStore` on a fresh queue pair whose
/// device waits are bounded by `wait`, with `first` done to its first WQE.
fn issue_loop(first: FirstWqe, iters: u32, wait: Duration) -> Outcome {
    let gpu = gpu();
    let program = program(&gpu);
    let fabric = CudaFabric::new(gpu.clone());
    let mut r = rank(&fabric);
    assert_eq!(r.queues.len(), 1, "one rank: one queue pair, to itself");
    r.queues[0].set_device_wait(wait).expect("a valid bound");
    assert_eq!(r.queues[0].device_wait(), wait);
    let qpn = r.queues[0].device_queue().raw().qpn;
    let devices: Vec<&SoftGpuNic> = vec![r.device.backend()];
    let all: Vec<&QueuePair<Rc, GpuPlaced, GpuReleaseStore>> = r.queues.iter().collect();
    let mut builder = nic_builder(&devices, &all, 1, DATA_LEN as u64).expect("nic");
    match first {
        FirstWqe::Completes => {}
        FirstWqe::LosesItsCompletion => builder.drop_completion(qpn, 0).expect("drop"),
        FirstWqe::RetryExceeded => builder
            .inject_fault(qpn, 0, Syndrome::TransportRetryExceeded, 0x81)
            .expect("inject"),
    }
    let mut nic = builder.build(&gpu).expect("nic");
    nic.start().expect("start");
    let kernel = program
        .kernel::<Rc, GpuReleaseStore>("issue_loop")
        .expect("issue_loop_GpuReleaseStore");
    let cycles = gpu.device_buffer(8 * iters as usize).expect("cycles");
    let status = gpu.device_buffer(4).expect("status");
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    let t0 = Instant::now();
    // SAFETY: issue_loop_GpuReleaseStore(DeviceQueueDescriptor, u32 iters, u64 raddr,
    // u32 rkey, u64* cycles, int* status): the queue pair's descriptor, a WRITE target
    // inside the registered data region, `iters` cycle words and a status word, every
    // buffer alive until the synchronize below.
    unsafe {
        kernel.launch(
            &r.queues[0].device_queue(),
            cfg,
            &[
                KernelArg::U32(iters),
                KernelArg::U64(r.region.addr()),
                KernelArg::U32(r.region.rkey().0),
                KernelArg::U64(cycles.addr()),
                KernelArg::U64(status.addr()),
            ],
        )
    }
    .expect("launch");
    gpu.synchronize().expect("synchronize");
    let took = t0.elapsed();
    nic.stop().expect("stop");
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

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn every_wait_returns_when_every_completion_comes() {
    let o = issue_loop(FirstWqe::Completes, 8, Duration::from_secs(5));
    assert_eq!(DeviceStatus::from_code(o.status), DeviceStatus::Ok);
    assert_eq!(o.data[..8], written(7), "the last WRITE landed");
    println!(
        "8 posts and waits, every completion delivered: {:?}",
        o.took
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn a_dropped_completion_ends_the_wait_at_the_queue_pairs_deadline() {
    let wait = Duration::from_millis(200);
    let o = issue_loop(FirstWqe::LosesItsCompletion, 4, wait);
    assert_eq!(
        DeviceStatus::from_code(o.status),
        DeviceStatus::Deadline,
        "status {:#x}",
        o.status
    );
    assert_eq!(o.data[..8], written(0), "the WRITE itself landed");
    assert!(
        o.took >= wait,
        "returned after {:?}, before its {wait:?}",
        o.took
    );
    assert!(
        o.took < wait + Duration::from_secs(2),
        "the {wait:?} wait took {:?}",
        o.took
    );
    println!(
        "a lost completion: DEADLINE after {:?} (host side, bound {wait:?})",
        o.took
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn a_retry_exceeded_error_ends_the_wait_with_its_syndrome() {
    let wait = Duration::from_secs(5);
    let o = issue_loop(FirstWqe::RetryExceeded, 4, wait);
    assert_eq!(
        DeviceStatus::from_code(o.status),
        DeviceStatus::Completion(Syndrome::TransportRetryExceeded as u8),
        "status {:#x}",
        o.status
    );
    assert_eq!(o.status, -0x15);
    assert_eq!(o.data[..8], [0u8; 8], "the failed WRITE wrote nothing");
    assert!(
        o.took < Duration::from_secs(2),
        "the error took {:?} (the deadline is {wait:?})",
        o.took
    );
    println!("retry exceeded: -0x15 after {:?} (host side)", o.took);
}
