// One forwarder serves a CPU-assisted queue: its forwarding target cannot be cloned into a
// second `Forwarder`, which could move the doorbell record backwards.
use ibgda::proxy::{ForwardTarget, Forwarder};

fn serve_twice(target: ForwardTarget) {
    let second = target.clone();
    let _a = Forwarder::spawn(vec![target]);
    let _b = Forwarder::spawn(vec![second]);
}

fn main() {}
