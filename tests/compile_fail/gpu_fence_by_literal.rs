// The GPU-scope fence is not made by literal or by `Default` either: only its `unsafe`
// constructor makes one.
use ibgda::order::GpuFence;

fn main() {
    let _by_literal = GpuFence;
    let _by_default: GpuFence = Default::default();
}
