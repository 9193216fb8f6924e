//! Arbitrary 64 bytes as a CQE: `parse_cqe` never panics, and the verbs view of a parsed
//! completion is consistent with it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ibgda_fuzz::fuzz_parse_cqe(data);
});
