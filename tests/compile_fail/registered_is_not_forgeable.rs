// A keep-alive claim comes only from the library's region handles: implementing
// `Registered` for a value that keeps no registration alive (so that the region a posted
// WQE names could be dropped while the WQE is outstanding) needs `unsafe`.
use ibgda::queue::Registered;
use ibgda::wqe::LKey;

struct Forged(LKey);

impl Registered for Forged {
    fn lkey(&self) -> LKey {
        self.0
    }
    fn covers(&self, _addr: u64, _len: u64) -> bool {
        true
    }
}

fn main() {}
