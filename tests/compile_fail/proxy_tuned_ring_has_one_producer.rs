// A tuned ring has exactly one producer: its producer end is not `Clone` (a baseline
// ring's is), so a second producer cannot exist.
use ibgda::proxy::{ProxyRing, Tuned};

fn main() {
    let (producer, _consumer) = ProxyRing::allocate::<Tuned>(4).unwrap();
    let _second = producer.clone();
}
