//! Arbitrary bytes as a ring, read at an arbitrary index for either transport: `parse_wqe`
//! never panics, and a successful parse describes bytes inside the ring.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ibgda_fuzz::fuzz_parse_wqe(data);
});
