// A device buffer has one owner: moved into queue memory, no second handle remains for
// the host to write into a ring kernels are writing (share a data region in an `Arc`).
use ibgda::memory::DeviceBuffer;
use ibgda_kernels::gpu::Gpu;

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let ring: DeviceBuffer = gpu.device_buffer(4096).unwrap();
    let kept = ring.clone();
    let _ = (ring, kept);
}
