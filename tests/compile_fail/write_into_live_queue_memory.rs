//! Safe code cannot write a live send slot or a CQE: queue memory's buffers are private,
//! what it offers reads only, and the crate's own door to the NIC capability is private.
use ibgda::queue::*;
use ibgda::wqe::*;

fn main() {
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let cq = CompletionQueueMemory::allocate(8).unwrap();
    let mut qp = QueuePair::<Rc>::new(Qpn::new(1).unwrap(), sq, cq, QpConfig::default()).unwrap();
    let nop = Nop::<Rc>::new().signaled().build().unwrap();
    qp.post(&nop, &[]).unwrap();
    // Overwrite the published WQE.
    qp.sq().memory().ring.write(0, &[0; 64]).unwrap();
    // Forge a CQE retiring it.
    qp.cq().memory().ring.write(0, &[0; 64]).unwrap();
    // Or through the crate-internal door.
    let _ = qp.cq().memory().nic_access();
}
