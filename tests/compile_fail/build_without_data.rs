// A WRITE must name its data (pointer or inline) or say it has none.
use ibgda::wqe::{RKey, RdmaWrite, RemoteAddress};

fn main() {
    let _ = RdmaWrite::new(RemoteAddress::new(0x2000, RKey(2))).signaled().build();
}
