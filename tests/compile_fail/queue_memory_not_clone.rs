//! Queue memory has one owner: it cannot be copied, so no second queue can be built over it.
use ibgda::queue::*;
use ibgda::wqe::*;

fn main() {
    let sq = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    let cq = CompletionQueueMemory::allocate(8).unwrap();
    let _second_sq = sq.clone();
    let _second_cq = cq.clone();
}
