// The CUDA software NIC's memory is derived from owned buffers and queue pairs, never
// from address ranges a caller says are valid.
use ibgda_kernels::gpu::Gpu;
use ibgda_kernels::softnic::device::DeviceNic;

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let _nic = DeviceNic::new(&gpu, &[], &[(0u64, u64::MAX)]);
}
