// Doorbell memory is handed to the software NICs by value: a GPU doorbell allocator that
// returns a shared handle (which it could keep, to write doorbells no producer rang) does
// not implement the trait, and a UAR's doorbell is moved into `SoftNic::register_uar`.
use std::sync::{Arc, Mutex};

use ibgda::memory::{DeviceBuffer, DmaBuffer};
use ibgda::nic::{GpuDoorbellMemory, NicError, SoftNic};

#[derive(Debug)]
struct Keeper {
    kept: Mutex<Vec<Arc<DeviceBuffer>>>,
}

impl GpuDoorbellMemory for Keeper {
    fn doorbell(&self) -> Result<Arc<DeviceBuffer>, NicError> {
        unimplemented!()
    }
}

fn keep_the_uar_doorbell(nic: &SoftNic) {
    let doorbell = Arc::new(DmaBuffer::zeroed(8, 64).unwrap());
    let _uar = nic.register_uar(doorbell.clone());
}

fn main() {}
