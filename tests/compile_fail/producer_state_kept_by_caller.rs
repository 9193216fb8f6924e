// The producer state of a GPU-posted queue pair is moved into it: a caller cannot keep a
// clone of the buffer and write the counters behind the kernels.
use ibgda::memory::DmaBuffer;
use ibgda::order::SystemFence;
use ibgda::queue::{CompletionQueueMemory, Host, QpConfig, QueuePair, SendQueueMemory};
use ibgda::wqe::{Qpn, Rc, RingSize};
use std::sync::Arc;

fn main() {
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let cq = CompletionQueueMemory::allocate(8).unwrap();
    let state = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
    let kept = state.clone();
    let _ = QueuePair::<Rc, Host, SystemFence>::for_device(Qpn::new(1).unwrap(), sq, cq, state, QpConfig::default(), SystemFence);
    kept.write(0, &[0xff; 8]).unwrap();
}
