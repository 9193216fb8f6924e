// A running sink borrows the queue pairs it serves: it cannot outlive them.
use ibgda::cq::CqMode;
use ibgda::order::GpuReleaseStore;
use ibgda_kernels::gpu::Gpu;
use ibgda_kernels::harness::{Sink, SINK_CHECK};

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let sink;
    {
        let qp = gpu.rc_queue_pair(1, 64, 64, 16, CqMode::Ring, GpuReleaseStore).unwrap();
        sink = Sink::start(&gpu, &[&qp], SINK_CHECK, 0, 1, 1).unwrap();
    }
    drop(sink);
}
