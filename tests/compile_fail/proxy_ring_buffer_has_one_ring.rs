// A descriptor ring's buffer is moved in: two tuned producers over one buffer (both
// pushing into slot 0, one request lost) are a use after move.
use ibgda::memory::DmaBuffer;
use ibgda::proxy::{ProxyRing, Tuned};

fn main() {
    let buffer = DmaBuffer::zeroed(4096, 4096).unwrap();
    let (_first, _c1) = ProxyRing::in_buffer::<Tuned>(buffer, 4).unwrap();
    let (_second, _c2) = ProxyRing::in_buffer::<Tuned>(buffer, 4).unwrap();
}
