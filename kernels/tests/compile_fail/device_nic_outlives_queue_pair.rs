// The CUDA software NIC borrows the queue pairs whose memory it may touch.
use ibgda::cq::CqMode;
use ibgda::order::GpuFence;
use ibgda_kernels::gpu::Gpu;
use ibgda_kernels::softnic::device::{DeviceNic, NicMemory};

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let nic;
    {
        let qp = gpu.rc_queue_pair(1, 64, 64, 16, CqMode::Ring, GpuFence).unwrap();
        let mut memory = NicMemory::new();
        memory.queue_pair(&qp);
        nic = DeviceNic::new(&gpu, &[], memory).unwrap();
    }
    drop(nic);
}
