// A sink capacity run writes NOPs into its queues' rings and CQEs into their CQs that their
// producer state never counted: it consumes the queue pairs, so no kernel posts to them
// afterwards (and takes those CQEs for completions of its own WQEs).
use ibgda::cq::CqMode;
use ibgda::order::GpuReleaseStore;
use ibgda_kernels::gpu::Gpu;
use ibgda_kernels::harness::{sink_capacity, SINK_RETIRE};

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let qp = gpu.rc_queue_pair(1, 64, 64, 16, CqMode::Ring, GpuReleaseStore).unwrap();
    sink_capacity(&gpu, vec![qp], SINK_RETIRE, 1, 1).unwrap();
    let _after = qp.device_queue();
}
