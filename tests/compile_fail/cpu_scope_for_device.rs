// The host barrier is a CPU producer's scope: it cannot make a queue GPU threads post to.
use ibgda::order::HostBarrier;
use ibgda::queue::{CompletionQueueMemory, Host, QpConfig, QueuePair, SendQueueMemory};
use ibgda::wqe::{Qpn, Rc, RingSize};
use std::sync::Arc;

fn main() {
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let cq = CompletionQueueMemory::allocate(8).unwrap();
    let state = Arc::new(ibgda::memory::DmaBuffer::zeroed(64, 64).unwrap());
    let _ = QueuePair::<Rc, Host, HostBarrier>::for_device(Qpn::new(1).unwrap(), sq, cq, state, QpConfig::default(), HostBarrier);
}
