// A NIC capability to queue memory is a claim by a named executor, refused while another
// holds the queue: there is no capability without one.
use ibgda::queue::{Executor, SendQueueMemory};
use ibgda::wqe::RingSize;

fn main() {
    let memory = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
    // SAFETY: a compile-fail case; it never runs.
    let _ = unsafe { memory.nic_access_unchecked() };
    let _ = Executor::new("a NIC").clone();
}
