// The host barrier is a CPU producer's scope: it cannot make a queue GPU threads post to.
use ibgda::order::HostBarrier;
use ibgda::queue::{CompletionQueueMemory, Host, ProducerStateMemory, QpConfig, QueuePair, SendQueueMemory};
use ibgda::wqe::{Qpn, Rc, RingSize};

fn main() {
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let cq = CompletionQueueMemory::allocate(8).unwrap();
    let state = ProducerStateMemory::from_buffer(ibgda::memory::DmaBuffer::zeroed(64, 64).unwrap()).unwrap();
    let _ = QueuePair::<Rc, Host, HostBarrier>::for_device(Qpn::new(1).unwrap(), sq, cq, state, QpConfig::default(), HostBarrier);
}
