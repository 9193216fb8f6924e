// A GPU-scope release store does not order stores to host memory before the doorbell: a queue in
// host memory cannot be made with it.
use ibgda::order::GpuReleaseStore;
use ibgda::queue::{CompletionQueueMemory, Host, ProducerStateMemory, QpConfig, QueuePair, SendQueueMemory};
use ibgda::wqe::{Qpn, Rc, RingSize};

fn main() {
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let cq = CompletionQueueMemory::allocate(8).unwrap();
    let state = ProducerStateMemory::from_buffer(ibgda::memory::DmaBuffer::zeroed(64, 64).unwrap()).unwrap();
    let _ = QueuePair::<Rc, Host, GpuReleaseStore>::for_device(Qpn::new(1).unwrap(), sq, cq, state, QpConfig::default(), GpuReleaseStore);
}
