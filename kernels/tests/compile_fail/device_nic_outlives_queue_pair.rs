// The CUDA software NIC borrows the queue pairs it executes: it cannot outlive them.
use ibgda::cq::CqMode;
use ibgda::order::GpuReleaseStore;
use ibgda_kernels::gpu::Gpu;
use ibgda_kernels::softnic::builder::{DeviceNicBuilder, QueueOptions};

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let nic;
    {
        let qp = gpu.rc_queue_pair(1, 64, 64, 16, CqMode::Ring, GpuReleaseStore).unwrap();
        let mut builder = DeviceNicBuilder::new();
        let node = builder.node(1).unwrap();
        let engine = builder.engine();
        builder.rc(engine, node, &qp, QueueOptions::default()).unwrap();
        nic = builder.build(&gpu).unwrap();
    }
    drop(nic);
}
