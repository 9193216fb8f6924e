// A DCI stream id exists only on DC WQEs.
use ibgda::wqe::{RKey, RdmaWrite, RemoteAddress};

fn main() {
    let _ = RdmaWrite::new(RemoteAddress::new(0x2000, RKey(2))).dci_stream(3).without_data().build();
}
