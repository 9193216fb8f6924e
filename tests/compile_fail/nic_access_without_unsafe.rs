//! The NIC's capability to a queue's memory (which writes CQEs) is `unsafe` to take
//! outside the crate.
use ibgda::queue::*;
use ibgda::wqe::*;

fn main() {
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let cq = CompletionQueueMemory::allocate(8).unwrap();
    let qp = QueuePair::<Rc>::new(Qpn::new(1).unwrap(), sq, cq, QpConfig::default()).unwrap();
    let executor = Executor::new("a NIC");
    let nic = qp.cq().memory().nic_access_unchecked(&executor).unwrap();
    nic.write_cqe(0, &[0; 64]);
}
