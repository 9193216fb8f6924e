// The sink takes owned, validated queue pairs, never a hand-made descriptor.
use ibgda::queue::DeviceQueueDescriptor;
use ibgda_kernels::gpu::Gpu;
use ibgda_kernels::harness::{Sink, SINK_CHECK};

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let forged = DeviceQueueDescriptor::default();
    let _sink = Sink::start(&gpu, &[forged], SINK_CHECK, 0, 1, 1);
}
