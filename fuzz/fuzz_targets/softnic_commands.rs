//! Arbitrary bytes as a PRM command the software NIC executes, on a device that already
//! holds a protection domain, a CQ and an RC queue pair in RESET. Byte 0 picks the entry
//! point (create, modify, destroy, general) and the object it is sent to; the rest is the
//! command.
//!
//! Properties: the NIC never panics; a command it refuses (malformed or not) changes
//! nothing: the fabric's objects, the device's allocations, its command log and the queue
//! pair's state are exactly as before.
#![no_main]

use ibgda::nic::{Backend, Device, QueueSpec, SoftNic, SoftObject};
use ibgda::softnic::Fabric;
use ibgda::wqe::RingSize;
use libfuzzer_sys::fuzz_target;

/// Output space for every command (QUERY_HCA_CAP's output is the largest).
const OUTPUT_BYTES: usize = 0x1010;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    let fabric = Fabric::new();
    let device = Device::open(SoftNic::open(&fabric, 1).expect("a node")).expect("a device");
    let pd = device.alloc_pd().expect("a PD");
    let pending = pd
        .create_rc(QueueSpec::new(RingSize::new(16).expect("16 WQEBBs")))
        .expect("an RC queue pair");
    let qpn = pending.qpn();
    let nic = device.backend();
    let snapshot = || {
        (
            fabric.census(),
            nic.allocated(),
            nic.executed_commands(),
            fabric.qp_status(qpn),
        )
    };
    let before = snapshot();
    let object = match (selector >> 2) & 3 {
        0 => SoftObject::Qp(qpn.get()),
        1 => SoftObject::Cq(1),
        2 => SoftObject::Dct(qpn.get()),
        _ => SoftObject::Qp(u32::from(selector)),
    };
    let mut output = vec![0u8; OUTPUT_BYTES];
    let refused = match selector & 3 {
        0 => nic.create_object(input, &mut output).is_err(),
        1 => nic.modify_object(&object, input, &mut output).is_err(),
        2 => nic.destroy_object(object, input).is_err(),
        _ => nic.general_command(input, &mut output).is_err(),
    };
    if refused {
        assert_eq!(snapshot(), before, "a refused command changed the NIC");
    }
});
