// Safe code cannot read an arbitrary device address.
use ibgda_kernels::gpu::Gpu;

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let _ = gpu.read_device_at(0x7f00_0000_0000, 64);
}
