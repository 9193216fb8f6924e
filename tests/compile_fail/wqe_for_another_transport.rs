// A queue takes only WQEs of its own transport: an RC WQE does not go to a DCI.
use ibgda::queue::QueuePair;
use ibgda::wqe::{Full, Dc, RKey, RdmaWrite, RemoteAddress};

fn post(qp: &mut QueuePair<Dc<Full>>) {
    let payload = [0u8; 8];
    let wqe = RdmaWrite::new(RemoteAddress::new(0x2000, RKey(2))).inline(&payload).build().unwrap();
    let _ = qp.post(&wqe, &[]);
}

fn main() {}
