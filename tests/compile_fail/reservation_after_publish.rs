// Publishing consumes a reservation: it cannot be written after.
use ibgda::order::HostBarrier;
use ibgda::queue::{SendQueue, SendQueueConfig, SendQueueMemory};
use ibgda::wqe::{Nop, Qpn, Rc, RingSize};

fn main() {
    let memory = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let mut sq = SendQueue::<Rc>::new(Qpn::new(1).unwrap(), memory, SendQueueConfig::default(), HostBarrier).unwrap();
    let nop = Nop::<Rc>::new().build().unwrap();
    let mut reservation = sq.reserve(2).unwrap();
    reservation.write(&nop).unwrap();
    let _ticket = reservation.publish();
    reservation.write(&nop).unwrap();
}
