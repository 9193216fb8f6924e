// A GPU-placed queue has no host posting methods: only device code writes its ring.
use ibgda::order::GpuFence;
use ibgda::queue::{Gpu, QueuePair};
use ibgda::wqe::{Nop, Rc};

fn post_from_host(qp: &mut QueuePair<Rc, Gpu, GpuFence>) {
    let nop = Nop::<Rc>::new().build().unwrap();
    let _ = qp.post(&nop, &[]);
}

fn main() {}
