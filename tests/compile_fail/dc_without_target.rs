// A DC WQE must name its target: a bare remote address is an RC destination.
use ibgda::wqe::{Compact, Dc, LKey, RKey, RdmaWrite, RemoteAddress, Sge};

fn main() {
    let sge = Sge::new(0x1000, 8, LKey(1)).unwrap();
    let _ = RdmaWrite::<Dc<Compact>>::new(RemoteAddress::new(0x2000, RKey(2))).sge(sge).build();
}
