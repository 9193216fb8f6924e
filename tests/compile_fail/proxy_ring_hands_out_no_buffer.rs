// A descriptor ring hands out no buffer: writing its slots from outside the producer end
// (a second, hidden producer) is not possible from safe code.
use ibgda::proxy::{ProxyRing, Tuned};

fn main() {
    let (producer, _consumer) = ProxyRing::allocate::<Tuned>(4).unwrap();
    let _ = producer.ring().buffer();
}
