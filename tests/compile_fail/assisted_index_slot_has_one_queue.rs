// A CPU-assisted queue pair's index slot is moved in: a second queue pair over the same
// slot, whose published index the forwarder would announce as the first one's doorbell
// record, is a use after move.
use ibgda::memory::DmaBuffer;
use ibgda::proxy::AssistedQueuePair;
use ibgda::queue::QueuePair;
use ibgda::wqe::Rc;

fn two_over_one_slot(a: QueuePair<Rc>, b: QueuePair<Rc>) {
    let slot = DmaBuffer::zeroed(64, 64).unwrap();
    let _first = AssistedQueuePair::new(a, slot);
    let _second = AssistedQueuePair::new(b, slot);
}

fn main() {}
