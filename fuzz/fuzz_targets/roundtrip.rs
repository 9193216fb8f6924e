//! An arbitrary WQE description, built with the erased builder and written at an arbitrary
//! index of an arbitrary ring, parses back to exactly what was built. Typed errors on the
//! way are fine; a WQE that builds and writes but does not round-trip is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|case: ibgda_fuzz::WqeCase| {
    ibgda_fuzz::fuzz_roundtrip(&case);
});
