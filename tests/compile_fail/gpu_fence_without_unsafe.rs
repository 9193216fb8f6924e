// The GPU-scope fence orders WQEs before the doorbell but not before the doorbell record,
// which an mlx5 NIC may follow: like the unordered scope, it is made only through
// `unsafe`.
use ibgda::order::GpuFence;

fn main() {
    let _scope = GpuFence::new();
}
