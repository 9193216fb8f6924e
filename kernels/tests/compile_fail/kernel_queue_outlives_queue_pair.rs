// A kernel argument keeps the borrow of its queue pair up to the launch.
use ibgda::cq::CqMode;
use ibgda::order::GpuReleaseStore;
use ibgda_kernels::gpu::{Gpu, KernelQueue};

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let arg;
    {
        let qp = gpu.rc_queue_pair(1, 64, 64, 16, CqMode::Ring, GpuReleaseStore).unwrap();
        arg = KernelQueue::new(&qp.device_queue());
    }
    let _ = arg;
}
