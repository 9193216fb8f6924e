// A READ cannot carry inline data.
use ibgda::wqe::{RKey, RdmaRead, RemoteAddress};

fn main() {
    let _ = RdmaRead::new(RemoteAddress::new(0x2000, RKey(2))).inline(&[1, 2, 3]);
}
