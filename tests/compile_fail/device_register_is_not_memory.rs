// A UAR doorbell mapped into the GPU is a store-only device register, not device memory:
// it cannot be registered for RDMA (a NIC could then read or write the register page).
use ibgda::memory::DeviceRegister;
use ibgda::nic::RegisterMemory;
use std::sync::Arc;

fn register_the_doorbell_as_data(register: DeviceRegister) -> RegisterMemory {
    RegisterMemory::Gpu {
        buffer: Arc::new(register),
        offset: 0,
        len: 8,
    }
}

fn main() {}
