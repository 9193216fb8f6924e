// A GPU-produced queue pair is recovered only while no kernel posts to it: kernels get the
// queue as a `DeviceQueue` borrowed from the queue pair (the launchers' contracts keep that
// borrow until the launched work completes), and recovery takes the queue pair by `&mut`,
// so it cannot run while a kernel's descriptor is still borrowed.
use std::time::Duration;

use ibgda::order::SystemReleaseStore;
use ibgda::queue::{HostMemory, QueuePair};
use ibgda::wqe::Rc;

fn launch_then_recover(mut qp: QueuePair<Rc, ibgda::queue::Host, SystemReleaseStore>) {
    let kernel_arg = qp.device_queue();
    let _ = qp.recover_device(None, &HostMemory, Duration::from_secs(1), &mut || {});
    let _still_posting = kernel_arg;
}

fn main() {}
