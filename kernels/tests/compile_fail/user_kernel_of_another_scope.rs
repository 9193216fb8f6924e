// A user kernel instance for one scope does not take a queue of another.
use cudarc::driver::LaunchConfig;
use ibgda::cq::CqMode;
use ibgda::order::{GpuFence, ThreadFence};
use ibgda::wqe::Rc;
use ibgda_kernels::gpu::Gpu;

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let program = gpu.compile_program("k.cu", "").unwrap();
    let kernel = program.kernel::<Rc, GpuFence>("put").unwrap();
    let qp = gpu.rc_queue_pair(1, 64, 64, 16, CqMode::Ring, ThreadFence).unwrap();
    let cfg = LaunchConfig::for_num_elems(1);
    let _ = unsafe { kernel.launch(&qp.device_queue(), cfg, &[]) };
}
