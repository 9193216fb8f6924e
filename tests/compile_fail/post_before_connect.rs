//! A queue pair the control plane made is not postable until it is connected (RTS): the
//! pending handle has no posting methods, only `connect`.
use ibgda::nic::{Device, QueueSpec, SoftNic};
use ibgda::softnic::Fabric;
use ibgda::wqe::*;

fn main() {
    let fabric = Fabric::new();
    let device = Device::open(SoftNic::open(&fabric, 1).unwrap()).unwrap();
    let pd = device.alloc_pd().unwrap();
    let mut pending = pd.create_rc(QueueSpec::new(RingSize::new(8).unwrap())).unwrap();
    let nop = Nop::<Rc>::new().build().unwrap();
    pending.post(&nop, &[]);
}
