// The scope rules still hold for CPU-assisted queues: their rings are in host memory, so
// a scope valid only for GPU memory is refused.
use ibgda::order::GpuFence;
use ibgda::proxy::AssistedGpuQueue;
use ibgda::wqe::Rc;

fn hold(_q: AssistedGpuQueue<Rc, GpuFence>) {}

fn main() {}
