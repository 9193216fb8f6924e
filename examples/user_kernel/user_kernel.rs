//! A user's own CUDA kernel (`user_kernel.cu`) posting through a GPU-placed queue pair to
//! the CUDA software NIC: an inline WRITE, a gathered WRITE, a READ and a fetch-and-add,
//! every byte checked afterwards. Needs an NVIDIA GPU (sm_90) and NVRTC 13:
//!
//! ```sh
//! cargo run --release -p ibgda-kernels --example user_kernel
//! ```

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::LaunchConfig;
use ibgda::cq::CqMode;
use ibgda::order::GpuReleaseStore;
use ibgda::softnic::Access;
use ibgda::wqe::Rc;
use ibgda_kernels::gpu::{CompileOptions, Gpu, KernelArg};
use ibgda_kernels::softnic::builder::{DeviceNicBuilder, QueueOptions};

const SOURCE: &str = include_str!("user_kernel.cu");

fn main() -> Result<(), Box<dyn Error>> {
    // A wait that lasts 3 s becomes an error status instead of a hang.
    let options = CompileOptions::new().spin_limit(Duration::from_secs(3))?;
    let gpu = Gpu::open_with(0, &options)?;
    let program = gpu.compile_program("user_kernel.cu", SOURCE)?;
    let kernel = program.kernel::<Rc, GpuReleaseStore>("put_get_add")?;

    // Memory, all allocated before the NIC starts (allocation can wait for running kernels).
    let src_bytes: Vec<u8> = (0..256u32).map(|i| (i * 7 + 3) as u8).collect();
    let src = Arc::new(gpu.device_buffer_from(&src_bytes)?);
    let dst = Arc::new(gpu.device_buffer(1024)?);
    let counter = Arc::new(gpu.device_buffer_from(&40u64.to_be_bytes())?);
    let status = gpu.device_buffer(4)?;
    let qp = gpu.rc_queue_pair(0x42, 64, 64, 16, CqMode::Ring, GpuReleaseStore)?;

    // The CUDA software NIC: one node, three regions (keys chosen by the NIC), the queue
    // pair in loopback. The NIC builds its own tables from these.
    let mut builder = DeviceNicBuilder::new();
    let node = builder.node(1)?;
    let engine = builder.engine();
    let src_keys = builder.region(
        node,
        &src,
        0,
        src.len(),
        Access::LOCAL_WRITE | Access::REMOTE_READ,
    )?;
    let dst_keys = builder.region(
        node,
        &dst,
        0,
        dst.len(),
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
    )?;
    let counter_keys = builder.region(
        node,
        &counter,
        0,
        counter.len(),
        Access::LOCAL_WRITE | Access::REMOTE_ATOMIC,
    )?;
    let queue = builder.rc(engine, node, &qp, QueueOptions::default())?;
    builder.connect(queue, queue)?;
    let mut nic = builder.build(&gpu)?;
    nic.start()?;

    let (value, add) = (0x1122_3344_5566_7788u64, 2u64);
    let args = [
        KernelArg::U64(src.addr()),
        KernelArg::U64(dst.addr()),
        KernelArg::U64(counter.addr()),
        KernelArg::U32(src_keys.lkey.0),
        KernelArg::U32(src_keys.rkey.0),
        KernelArg::U32(dst_keys.lkey.0),
        KernelArg::U32(dst_keys.rkey.0),
        KernelArg::U32(counter_keys.rkey.0),
        KernelArg::U64(value),
        KernelArg::U64(add),
        KernelArg::U64(status.addr()),
    ];
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: put_get_add_GpuReleaseStore(descriptor, u64 src, u64 dst, u64 counter, u32 x5 keys,
    // u64 value, u64 add, int* status): exactly these arguments; it touches src[0..256],
    // dst[0..1024], counter[0..8] (through the NIC) and status[0..4], all allocated above
    // and alive until the NIC's stop below has synchronized.
    unsafe { kernel.launch(&qp.device_queue(), one, &args) }?;
    gpu.stream().synchronize()?;
    nic.stop()?;

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
    let stats = nic.read()?[0].0.stats;
    println!(
        "{}: 4 WQEs posted from the GPU, executed by the CUDA software NIC ({} CQEs), every byte as expected",
        kernel.name(),
        stats.cqes_written
    );
    Ok(())
}
