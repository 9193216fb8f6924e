// Raw PRM command bytes can name any address for the NIC to DMA to (a CREATE_QP with
// `dbr_umem_valid = 0` and a raw `dbr_addr`): a backend's command methods are `unsafe`, so
// safe code creates queues only through the typed control plane.
use ibgda::nic::{Backend, Device};

fn forge_a_queue_pair<B: Backend>(device: &Device<B>, forged_create_qp: &[u8]) {
    let mut output = [0u8; 256];
    let _ = device.backend().create_object(forged_create_qp, &mut output);
    let _ = device.backend().general_command(forged_create_qp, &mut output);
}

fn main() {}
