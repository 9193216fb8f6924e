// The CUDA software NIC's tables are built by the library from typed queue pairs and
// buffers (DeviceNicBuilder): tables made by a caller, which could name any device
// memory in any role, are never accepted.
use ibgda_kernels::gpu::Gpu;
use ibgda_kernels::softnic::device::DeviceNic;
use ibgda_kernels::softnic::NicTables;

fn main() {
    let gpu = Gpu::open(0).unwrap();
    let _nic = DeviceNic::from_tables(&gpu, &[NicTables::default()], todo!());
}
