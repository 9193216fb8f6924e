//! Control-plane handles own NIC objects: none can be copied, so each object is destroyed
//! exactly once, after everything made from it.
use ibgda::nic::{Device, SoftNic};
use ibgda::softnic::Fabric;

fn main() {
    let fabric = Fabric::new();
    let device = Device::open(SoftNic::open(&fabric, 1).unwrap()).unwrap();
    let pd = device.alloc_pd().unwrap();
    let _second_device = device.clone();
    let _second_pd = pd.clone();
}
