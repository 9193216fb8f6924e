// Recovery lends a queue pair's buffers to its `DeviceQueueAccess` as plain borrows of the
// owned buffers: an implementation cannot keep a handle to the ring it was lent (to write
// into it behind the queue pair's back later), since there is no `Arc` to clone.
use std::sync::{Arc, Mutex};

use ibgda::memory::DmaBuffer;
use ibgda::queue::{DeviceQueueAccess, Host, HostDoorbell};

struct Keeper {
    kept: Mutex<Vec<Arc<DmaBuffer>>>,
}

unsafe impl DeviceQueueAccess<Host> for Keeper {
    fn read(&self, buffer: &DmaBuffer, offset: usize, dst: &mut [u8]) -> Result<(), String> {
        self.kept.lock().unwrap().push(Arc::clone(buffer));
        buffer.read(offset, dst).map_err(|e| e.to_string())
    }
    fn write(&self, buffer: &DmaBuffer, offset: usize, src: &[u8]) -> Result<(), String> {
        buffer.write(offset, src).map_err(|e| e.to_string())
    }
    fn ring(&self, _doorbell: &HostDoorbell, _value: [u8; 8]) -> Result<(), String> {
        Ok(())
    }
}

fn main() {}
