//! The same user kernel as `user_kernel.rs` (`user_kernel.cu`: an inline WRITE, a gathered
//! WRITE, a READ and a fetch-and-add, posted by one GPU thread), with its queue pair and
//! memory made through the control plane on the mlx5 backend: send ring, CQ and doorbell
//! records in GPU memory registered as UMEM by DMA-BUF, the UAR doorbell mapped into the
//! GPU, the data regions GPU memory registered by DMA-BUF. On a ConnectX the NIC executes
//! the WQEs; on the emulated ConnectX's GPU build, the CUDA software NIC does:
//!
//! ```sh
//! IBGDA_EMU_FEATURES=cuda scripts/with-emulated-nic env IBGDA_NIC=mlx5_0 \
//!     cargo run --release -p ibgda-kernels --features mlx5 --example control_plane_gpu
//! ```
//!
//! Each step is said on stderr with the seconds since the start, so that a run stopped
//! from outside shows where it was (the emulated ConnectX compiles the CUDA software NIC's
//! kernel with NVRTC at the first GPU registration).

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::LaunchConfig;
use ibgda::memory::DeviceBuffer;
use ibgda::nic::mlx5::Mlx5Backend;
use ibgda::nic::{Device, MemoryAccess, QueueAllocator, QueueFill, QueueSpec, RegisterMemory};
use ibgda::order::GpuReleaseStore;
use ibgda::queue::{Gpu as GpuPlaced, ProducerStateMemory};
use ibgda::wqe::{Rc, RingSize};
use ibgda_kernels::gpu::{CompileOptions, Gpu, KernelArg};
use ibgda_kernels::nic::CudaNicAccess;

const SOURCE: &str = include_str!("user_kernel.cu");

/// Says on stderr that `what` is done, `start` being the program's start.
fn step(start: Instant, what: &str) {
    eprintln!(
        "control_plane_gpu +{:.1} s: {what}",
        start.elapsed().as_secs_f64()
    );
}

fn main() -> Result<(), Box<dyn Error>> {
    let start = Instant::now();
    // A wait that lasts 3 s becomes an error status instead of a hang.
    let options = CompileOptions::new().spin_limit(Duration::from_secs(3))?;
    // Only this program's kernel is compiled (the NIC, a ConnectX or the emulator's CUDA
    // software NIC, is not this process's code).
    let gpu = Arc::new(Gpu::open_for_user_programs(0, &options)?);
    let program = gpu.compile_program("user_kernel.cu", SOURCE)?;
    let kernel = program.kernel::<Rc, GpuReleaseStore>("put_get_add")?;
    step(start, "GPU 0 open, user_kernel.cu compiled");

    // The device named by IBGDA_NIC (or the first mlx5 device), with GPU access: DMA-BUF
    // export of GPU memory, the UAR doorbell mapped into the GPU.
    let access = Arc::new(CudaNicAccess::new(gpu.clone()));
    let backend = Mlx5Backend::from_env()?.with_gpu(access.clone(), access.clone());
    let device = Device::open(backend)?;
    let pd = device.alloc_pd()?;
    step(start, "device open, protection domain allocated");

    // GPU memory in page-aligned ranges of its own (as queue memory is), registered.
    let memory = |len: usize, init: &[u8]| -> Result<Arc<DeviceBuffer>, Box<dyn Error>> {
        let b = QueueAllocator::<GpuPlaced>::allocate(&*access, len, 4096, QueueFill::Zero)?;
        gpu.write_device(&b, 0, init)?;
        Ok(Arc::new(b))
    };
    let src_bytes: Vec<u8> = (0..256u32).map(|i| (i * 7 + 3) as u8).collect();
    let src = memory(256, &src_bytes)?;
    let dst = memory(1024, &[0; 1024])?;
    let counter = memory(8, &40u64.to_be_bytes())?;
    let register = |b: &Arc<DeviceBuffer>, access: MemoryAccess| {
        pd.register_memory(
            RegisterMemory::Gpu {
                buffer: b.clone(),
                offset: 0,
                len: b.len(),
            },
            access,
        )
    };
    let src_region = register(&src, MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_READ)?;
    let dst_region = register(&dst, MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_WRITE)?;
    let counter_region = register(
        &counter,
        MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_ATOMIC,
    )?;
    let status = gpu.device_buffer(4)?;
    step(start, "GPU memory registered (3 regions)");

    // An RC queue pair in GPU memory, connected to itself.
    let pending = pd.create_rc_in::<GpuPlaced>(QueueSpec::new(RingSize::new(64)?), &*access)?;
    let endpoint = pending.endpoint();
    let state = ProducerStateMemory::from_device(gpu.device_buffer(64)?)?;
    let mut qp = pending.connect_device(&endpoint, state, GpuReleaseStore)?;
    // Loopback moves take microseconds: a completion that never comes ends the kernel's
    // wait with the deadline status after 10 s instead of the default 60 s.
    qp.set_device_wait(Duration::from_secs(10))?;
    step(start, "RC queue pair in GPU memory connected to itself");

    let (value, add) = (0x1122_3344_5566_7788u64, 2u64);
    let args = [
        KernelArg::U64(src.addr()),
        KernelArg::U64(dst.addr()),
        KernelArg::U64(counter.addr()),
        KernelArg::U32(src_region.lkey().0),
        KernelArg::U32(src_region.rkey().0),
        KernelArg::U32(dst_region.lkey().0),
        KernelArg::U32(dst_region.rkey().0),
        KernelArg::U32(counter_region.rkey().0),
        KernelArg::U64(value),
        KernelArg::U64(add),
        KernelArg::U64(status.addr()),
    ];
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: put_get_add_GpuReleaseStore(descriptor, u64 src, u64 dst, u64 counter, u32 x5
    // keys, u64 value, u64 add, int* status): exactly these arguments; it touches
    // src[0..256], dst[0..1024], counter[0..8] (through the NIC) and status[0..4], all
    // registered or allocated above and alive until the synchronize below.
    unsafe { kernel.launch(&qp.device_queue(), one, &args) }?;
    step(start, "kernel launched");
    gpu.stream().synchronize()?;
    step(start, "kernel done");

    let status = i32::from_ne_bytes(gpu.read_device(&status)?[..4].try_into()?);
    let dst = gpu.read_device(&dst)?;
    let counter = u64::from_be_bytes(gpu.read_device(&counter)?[..8].try_into()?);
    assert_eq!(status, 0, "completion status");
    assert_eq!(dst[..8], value.to_ne_bytes(), "inline WRITE");
    assert_eq!(dst[64..128], src_bytes[..64], "gathered WRITE");
    assert_eq!(dst[256..320], src_bytes[128..192], "READ");
    assert_eq!(
        dst[512..520],
        40u64.to_be_bytes(),
        "fetch-and-add's old value"
    );
    assert_eq!(counter, 42, "fetch-and-add");
    let (io, host) = device.backend().doorbell_mappings();
    println!(
        "{} on {}: 4 WQEs posted from the GPU, every byte as expected (doorbell mapped as {})",
        kernel.name(),
        device.backend().device().name(),
        if host > 0 {
            "host memory: the emulated ConnectX"
        } else if io > 0 {
            "I/O memory"
        } else {
            "nothing"
        }
    );
    Ok(())
}
