//! Arbitrary rings, doorbell records, doorbells and CQ doorbell records fed to the
//! software NIC: it never panics and never touches memory outside its registered regions
//! and the queue memory it was given (see `ibgda_fuzz::softnic` for the input format).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ibgda_fuzz::fuzz_softnic(data);
});
