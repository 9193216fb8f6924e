//! A queue pair consumes its memory: a second queue pair over the same memory is a use
//! after move.
use ibgda::queue::*;
use ibgda::wqe::*;

fn main() {
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let cq = CompletionQueueMemory::allocate(8).unwrap();
    let qpn = Qpn::new(1).unwrap();
    let _first = QueuePair::<Rc>::new(qpn, sq, cq, QpConfig::default()).unwrap();
    let _second = QueuePair::<Rc>::new(qpn, sq, cq, QpConfig::default()).unwrap();
}
