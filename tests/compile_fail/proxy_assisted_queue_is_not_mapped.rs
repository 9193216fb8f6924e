// A kernel that rings a mapped doorbell takes a `DeviceQueue`; a CPU-assisted queue's
// descriptor is another type, so it cannot reach such a kernel.
use ibgda::order::SystemReleaseStore;
use ibgda::proxy::AssistedDeviceQueue;
use ibgda::queue::DeviceQueue;
use ibgda::wqe::Rc;

fn launch_mapped_doorbell_kernel(_q: &DeviceQueue<'_, Rc, SystemReleaseStore>) {}

fn launch(q: &AssistedDeviceQueue<'_, Rc, SystemReleaseStore>) {
    launch_mapped_doorbell_kernel(q);
}

fn main() {}
