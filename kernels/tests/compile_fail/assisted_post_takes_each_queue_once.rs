// `ProxyKernels::assisted_post` runs one exclusive producer per handle it is given. A
// CPU-assisted queue's device handle borrows its queue mutably and is neither `Clone` nor
// `Copy`, so one queue cannot be named twice: not by two handles, not by one repeated.
use ibgda::order::SystemReleaseStore;
use ibgda::proxy::AssistedGpuQueue;
use ibgda::wqe::Rc;
use ibgda_kernels::gpu::Gpu;
use ibgda_kernels::proxy::ProxyKernels;

type Queue = AssistedGpuQueue<Rc, SystemReleaseStore>;

fn two_handles(k: &ProxyKernels, gpu: &Gpu, q: &mut Queue) {
    let a = q.device_queue();
    let b = q.device_queue();
    let _ = k.assisted_post(gpu, &[a, b], &[(0, 0), (0, 0)], 1, 1);
}

fn one_handle_twice(k: &ProxyKernels, gpu: &Gpu, q: &mut Queue) {
    let a = q.device_queue();
    let _ = k.assisted_post(gpu, &[a, a], &[(0, 0), (0, 0)], 1, 1);
}

fn main() {}
