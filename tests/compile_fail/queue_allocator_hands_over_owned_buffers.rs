// A queue allocator hands each buffer over by value: one returning a shared handle, which
// it could keep to rewrite published WQEs or forge CQEs, does not implement the trait.
use std::sync::Arc;

use ibgda::memory::DmaBuffer;
use ibgda::nic::{NicError, QueueAllocator, QueueFill};
use ibgda::queue::Host;

struct Keeper {
    kept: std::sync::Mutex<Vec<Arc<DmaBuffer>>>,
}

impl QueueAllocator<Host> for Keeper {
    fn allocate(&self, len: usize, align: usize, _fill: QueueFill) -> Result<Arc<DmaBuffer>, NicError> {
        let buffer = Arc::new(DmaBuffer::zeroed(len, align)?);
        self.kept.lock().unwrap().push(buffer.clone());
        Ok(buffer)
    }
}

fn main() {}
