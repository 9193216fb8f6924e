//! Arbitrary bytes as a PRM command the software NIC executes, on a device that already
//! holds a protection domain, a CQ and an RC queue pair in RESET. Byte 0 picks the entry
//! point (create, modify, destroy, general: the state transitions, 2ERR_QP and 2RST_QP
//! among the modify commands), the object it is sent to, and the device (bit 4: an
//! InfiniBand port, or a RoCE v2 port, whose INIT2RTR paths go through the RoCE checks);
//! the rest is the command.
//!
//! Properties: the NIC never panics; a command it refuses (malformed or not) changes
//! nothing: the fabric's objects, the device's allocations, its command log and the queue
//! pair's state are exactly as before.
//!
//! Building the device (two QUERY_HCA_CAP pages, a PD, a CQ and a QP) costs far more than
//! one command, so the device is kept between executions for as long as commands are
//! refused. After a command the NIC accepts, the next execution starts from a fresh device:
//! every input runs against the same starting state.
#![no_main]

use std::cell::RefCell;

use ibgda::nic::{roce, Device, PendingRc, QueueSpec, SoftNic, SoftNicAllocations, SoftObject};
use ibgda::queue::Host;
use ibgda::softnic::{Census, Fabric, QpStatus};
use ibgda::wqe::RingSize;
use libfuzzer_sys::fuzz_target;

/// Output space for every command (QUERY_HCA_CAP's output is the largest).
const OUTPUT_BYTES: usize = 0x1010;

/// A device holding a PD, a CQ and an RC queue pair in RESET.
struct Setup {
    fabric: Fabric,
    device: Device<SoftNic>,
    qpn: ibgda::wqe::Qpn,
    // Kept alive for the objects it owns; dropped (destroyed) with the setup.
    _pending: PendingRc<SoftNic, Host>,
}

type Snapshot = (Census, SoftNicAllocations, Vec<u16>, Option<QpStatus>);

impl Setup {
    fn new(roce_port: bool) -> Self {
        let fabric = Fabric::new();
        let nic = if roce_port {
            let mac = [0x02, 0, 0, 0, 0, 1];
            SoftNic::open_roce(&fabric, mac, roce::kernel_gid_table(mac, &[[10, 0, 0, 1]]))
        } else {
            SoftNic::open(&fabric, 1)
        };
        let device = Device::open(nic.expect("a node")).expect("a device");
        let pd = device.alloc_pd().expect("a PD");
        let pending = pd
            .create_rc(QueueSpec::new(RingSize::new(16).expect("16 WQEBBs")))
            .expect("an RC queue pair");
        let qpn = pending.qpn();
        Self {
            fabric,
            device,
            qpn,
            _pending: pending,
        }
    }

    fn snapshot(&self) -> Snapshot {
        let nic = self.device.backend();
        (
            self.fabric.census(),
            nic.allocated(),
            nic.executed_commands(),
            self.fabric.qp_status(self.qpn),
        )
    }
}

thread_local! {
    /// The device and its state before any command, reused while commands are refused.
    static SETUP: RefCell<[Option<(Setup, Snapshot)>; 2]> = const { RefCell::new([None, None]) };
    static OUTPUT: RefCell<Vec<u8>> = RefCell::new(vec![0u8; OUTPUT_BYTES]);
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    let roce_port = selector & 0x10 != 0;
    SETUP.with_borrow_mut(|setups| {
        let slot = &mut setups[usize::from(roce_port)];
        let (setup, before) = slot.get_or_insert_with(|| {
            let setup = Setup::new(roce_port);
            let snapshot = setup.snapshot();
            (setup, snapshot)
        });
        let qpn = setup.qpn;
        let nic = setup.device.backend();
        let object = match (selector >> 2) & 3 {
            0 => SoftObject::Qp(qpn.get()),
            1 => SoftObject::Cq(1),
            2 => SoftObject::Dct(qpn.get()),
            _ => SoftObject::Qp(u32::from(selector)),
        };
        let refused = OUTPUT.with_borrow_mut(|output| {
            output.fill(0);
            match selector & 3 {
                0 => nic.create_object(input, output).is_err(),
                1 => nic.modify_object(&object, input, output).is_err(),
                2 => nic.destroy_object(object, input).is_err(),
                _ => nic.general_command(input, output).is_err(),
            }
        });
        if refused {
            assert_eq!(
                &setup.snapshot(),
                before,
                "a refused command changed the NIC"
            );
        } else {
            // Accepted: it may have changed state the snapshot does not show, so the next
            // input starts from a fresh device.
            *slot = None;
        }
    });
});
