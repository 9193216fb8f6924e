// A CPU-assisted queue's producer publishes its index; only the forwarder rings the
// doorbell, so the queue has no method that rings one.
use ibgda::proxy::AssistedQueuePair;
use ibgda::wqe::Rc;

fn post(q: &mut AssistedQueuePair<Rc>) {
    q.ring_doorbell();
}

fn main() {}
