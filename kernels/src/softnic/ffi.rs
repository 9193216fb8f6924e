//! The only door to the host build of the CUDA software NIC's engine (C++, compiled by
//! `build.rs` from `cuda/softnic_host.cpp`): the `extern "C"` declarations and thin
//! wrappers that state what each call needs.

use super::tables::NicEngine;

#[cfg(not(ibgda_no_host_engine))]
extern "C" {
    fn ibgda_softnic_host_step(engine: *mut NicEngine) -> u64;
    fn ibgda_softnic_host_parse(
        buf: *const u8,
        len: u32,
        index: u32,
        transport: u32,
        fields: *mut u32,
    ) -> i32;
}

/// Whether the host engine was built (see `build.rs`, `IBGDA_SKIP_HOST_ENGINE`).
pub(crate) const BUILT: bool = cfg!(not(ibgda_no_host_engine));

/// Stand-in when the engine was left out of the build: nothing runs.
///
/// # Safety
///
/// None needed (it touches nothing); `unsafe` only to match the real declaration.
#[cfg(ibgda_no_host_engine)]
unsafe fn ibgda_softnic_host_step(_: *mut NicEngine) -> u64 {
    0
}
/// Stand-in when the engine was left out of the build: nothing parses.
///
/// # Safety
///
/// None needed (it touches nothing); `unsafe` only to match the real declaration.
#[cfg(ibgda_no_host_engine)]
unsafe fn ibgda_softnic_host_parse(_: *const u8, _: u32, _: u32, _: u32, _: *mut u32) -> i32 {
    0
}

/// One step of the engine: every queue of its table observes its doorbell and executes
/// what is published. Returns the progress count (0: nothing happened).
///
/// # Safety
///
/// `engine` must point to a valid [`NicEngine`] whose table addresses point to valid
/// arrays of their counts, and every address in those tables (rings of `2^log_wqebbs`
/// WQEBBs, 8-byte doorbell records and doorbells, CQ rings of `entries` CQEs and their
/// 8-byte records, regions' `base..base + len`, and the scratch buffer of `scratch_len`
/// bytes) must be valid for reads and writes, 8-byte aligned where a 64-bit word is
/// accessed (records, doorbells, CQE last words, and `base - start ≡ 0 mod 8` for
/// regions), and not accessed by anything else during the call. Table indices and keys
/// may hold any value: the engine checks them.
pub(crate) unsafe fn step(engine: *mut NicEngine) -> u64 {
    // SAFETY: the caller's contract is the engine's; the C++ side only touches the memory
    // the tables name.
    unsafe { ibgda_softnic_host_step(engine) }
}

/// What the engine's parser reads out of a WQE: opcode, QPN, DS, `fm_ce_se`, operation
/// kind, data kind, segment count or inline length, atomic width.
pub type ParsedFields = [u32; 8];

/// Runs the engine's parser (the rules of `ibgda::wqe::parse_fetched_wqe`) over fetched
/// WQE bytes. `None` when they do not parse.
pub fn parse(fetched: &[u8], index: u16, transport: u32) -> Option<ParsedFields> {
    let len = u32::try_from(fetched.len()).ok()?;
    let mut fields = [0u32; 8];
    // SAFETY: `fetched` is valid for `len` bytes and the parser reads only below `len`
    // (it checks the DS against it before reading any segment); `fields` has the 8 words
    // it writes.
    let ok = unsafe {
        ibgda_softnic_host_parse(
            fetched.as_ptr(),
            len,
            u32::from(index),
            transport,
            fields.as_mut_ptr(),
        )
    };
    (ok != 0).then_some(fields)
}
