// An RC WQE cannot carry a DC target.
use ibgda::wqe::{CompactAddressVector, RKey, Rc, RdmaRead, RemoteAddress};

fn main() {
    let target = CompactAddressVector { dct: 7, ..Default::default() }.encode().unwrap();
    let _ = RdmaRead::<Rc>::new(target.at(RemoteAddress::new(0x2000, RKey(2)))).without_data().build();
}
