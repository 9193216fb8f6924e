//! What every entry point shares: `errno`, the message a failure prints, panics caught at
//! the C boundary, and the checks of memory C hands in.

use core::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use ibgda::memory::DmaBuffer;

use crate::emulator::Emulator;

/// Why an entry point failed: the errno it reports and what it prints.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) errno: i32,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(errno: i32, message: impl Into<String>) -> Self {
        Self {
            errno,
            message: message.into(),
        }
    }
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(libc::EINVAL, message)
    }
}

pub(crate) type Outcome<T> = Result<T, Failure>;

/// The failure for a pointer that is not a live object of this library (`what`: "a PD").
pub(crate) fn not_ours<P>(ptr: *const P, what: &str) -> Failure {
    Failure::invalid(format!("{ptr:p} is not {what} of this library"))
}

/// The object of `table` C holds as `ptr` (`what`: "a PD").
pub(crate) fn find<'a, T, P>(
    table: &'a std::collections::HashMap<usize, T>,
    ptr: *const P,
    what: &str,
) -> Outcome<&'a T> {
    table
        .get(&(ptr as usize))
        .ok_or_else(|| not_ours(ptr, what))
}

/// Removes (and so releases) the object of `table` C holds as `ptr`.
pub(crate) fn release<T, P>(
    table: &mut std::collections::HashMap<usize, T>,
    ptr: *const P,
    what: &str,
) -> Outcome<()> {
    table
        .remove(&(ptr as usize))
        .map(drop)
        .ok_or_else(|| not_ours(ptr, what))
}

/// The non-null output block `ptr` of an attribute query (`what`: its C type).
pub(crate) fn out_block<T>(ptr: *mut core::ffi::c_void, what: &str) -> Outcome<*mut T> {
    if ptr.is_null() {
        Err(Failure::invalid(format!("a null {what}")))
    } else {
        Ok(ptr.cast())
    }
}

/// Sets the calling thread's `errno`.
pub(crate) fn set_errno(errno: i32) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, valid for the
    // thread's life.
    unsafe { *libc::__errno_location() = errno };
}

/// The name rdma-core users know an errno by.
pub(crate) fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::ENODATA => "ENODATA",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EREMOTEIO => "EREMOTEIO",
        _ => "errno",
    }
}

/// Whether failures are printed: always, unless `IBGDA_EMU_QUIET=1`.
pub(crate) fn quiet() -> bool {
    static QUIET: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *QUIET.get_or_init(|| std::env::var("IBGDA_EMU_QUIET").is_ok_and(|v| v == "1"))
}

/// Whether entry points that take long are reported (`IBGDA_EMU_TRACE=1`): each that took
/// [`SLOW`] or more when it returns, and every [`SLOW`] each one still running, so that a
/// program stopped from outside shows which call it was in.
pub(crate) fn tracing() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var("IBGDA_EMU_TRACE").is_ok_and(|v| v == "1"))
}

/// What tracing counts as long.
pub(crate) const SLOW: Duration = Duration::from_secs(1);

/// The entry points running now, when tracing: (thread, call, since).
type Running = Vec<(ThreadId, &'static str, Instant)>;

fn running() -> MutexGuard<'static, Running> {
    static RUNNING: Mutex<Running> = Mutex::new(Vec::new());
    RUNNING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The lines for the entry points of `calls` that have run `threshold` or more at `now`.
pub(crate) fn overdue(calls: &Running, now: Instant, threshold: Duration) -> Vec<String> {
    calls
        .iter()
        .filter_map(|&(thread, call, since)| {
            let ran = now.saturating_duration_since(since);
            (ran >= threshold).then(|| {
                format!(
                    "ibgda-emu: trace: {call} still running after {:.1} s ({thread:?})",
                    ran.as_secs_f64()
                )
            })
        })
        .collect()
}

/// One traced entry point: registered while it runs, reported when it returns slow.
struct Traced {
    call: &'static str,
    since: Instant,
}

impl Traced {
    fn start(call: &'static str) -> Option<Self> {
        if !tracing() {
            return None;
        }
        static WATCHER: OnceLock<()> = OnceLock::new();
        WATCHER.get_or_init(|| {
            // Reports what still runs, every SLOW; a failure to start it only loses that.
            let _ = std::thread::Builder::new()
                .name("ibgda-emu-trace".into())
                .spawn(|| loop {
                    std::thread::sleep(SLOW);
                    for line in overdue(&running(), Instant::now(), SLOW) {
                        eprintln!("{line}");
                    }
                });
        });
        let since = Instant::now();
        running().push((std::thread::current().id(), call, since));
        Some(Self { call, since })
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        let me = std::thread::current().id();
        let mut calls = running();
        if let Some(i) = calls
            .iter()
            .rposition(|&(t, c, s)| t == me && c == self.call && s == self.since)
        {
            calls.remove(i);
        }
        drop(calls);
        let took = self.since.elapsed();
        if took >= SLOW {
            eprintln!(
                "ibgda-emu: trace: {} returned after {:.1} s",
                self.call,
                took.as_secs_f64()
            );
        }
    }
}

/// Runs `body` as entry point `call`: a failure sets errno, prints `ibgda-emu: call: ...`
/// on stderr and returns `on_failure(errno)`; a panic is caught (unwinding must not cross
/// into C) and reported as an `EIO` failure.
pub(crate) fn run<T>(
    call: &'static str,
    on_failure: impl FnOnce(i32) -> T,
    body: impl FnOnce(&'static Emulator) -> Outcome<T>,
) -> T {
    let traced = Traced::start(call);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let emulator = Emulator::get().map_err(Failure::invalid)?;
        body(emulator)
    }));
    drop(traced);
    let failure = match result {
        Ok(Ok(value)) => return value,
        Ok(Err(failure)) => failure,
        Err(panic) => Failure::new(
            libc::EIO,
            format!(
                "the emulator panicked (a bug of the emulator): {}",
                panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("no message")
            ),
        ),
    };
    if !quiet() {
        eprintln!(
            "ibgda-emu: {call}: {} ({} {})",
            failure.message,
            errno_name(failure.errno),
            failure.errno
        );
    }
    set_errno(failure.errno);
    on_failure(failure.errno)
}

/// An entry point returning a pointer: NULL on failure.
pub(crate) fn pointer<T>(
    call: &'static str,
    body: impl FnOnce(&'static Emulator) -> Outcome<*mut T>,
) -> *mut T {
    run(call, |_| core::ptr::null_mut(), body)
}

/// An entry point returning 0 or an errno (and setting errno), as most of rdma-core's do.
pub(crate) fn status(
    call: &'static str,
    body: impl FnOnce(&'static Emulator) -> Outcome<()>,
) -> c_int {
    run(call, |e| e, |emulator| body(emulator).map(|()| 0))
}

/// An entry point returning 0 or -1 (errno set), as the older verbs do.
pub(crate) fn minus_one(
    call: &'static str,
    body: impl FnOnce(&'static Emulator) -> Outcome<()>,
) -> c_int {
    run(call, |_| -1, |emulator| body(emulator).map(|()| 0))
}

/// Why an entry point this emulator does not implement fails (`EOPNOTSUPP`; [`run`]
/// prints it with the entry point's name).
pub(crate) fn not_implemented() -> Failure {
    Failure::new(
        libc::EOPNOTSUPP,
        "not implemented by the emulated ConnectX (ibgda-emu; emu/README.md lists what it implements)",
    )
}

/// Checks that `[addr, addr + len)` is host memory this process may read and write (a
/// private or shared read-write mapping), as the kernel's pinning of registered memory
/// requires: GPU memory without peer memory, unmapped or read-only memory is `EFAULT`.
pub(crate) fn check_host_memory(addr: u64, len: u64) -> Outcome<()> {
    let end = addr.checked_add(len).filter(|_| len > 0).ok_or_else(|| {
        Failure::invalid(format!(
            "{len} bytes at {addr:#x}: an empty or wrapping range"
        ))
    })?;
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| Failure::new(libc::EFAULT, format!("reading /proc/self/maps: {e}")))?;
    let mut covered = addr;
    let mut ranges: Vec<(u64, u64)> = maps
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let (start, stop) = words.next()?.split_once('-')?;
            let perms = words.next()?;
            let rw = perms.starts_with("rw");
            rw.then(|| {
                Some((
                    u64::from_str_radix(start, 16).ok()?,
                    u64::from_str_radix(stop, 16).ok()?,
                ))
            })
            .flatten()
        })
        .collect();
    ranges.sort_unstable();
    for (start, stop) in ranges {
        if start <= covered && covered < stop {
            covered = stop;
            if covered >= end {
                return Ok(());
            }
        }
    }
    Err(Failure::new(
        libc::EFAULT,
        format!(
            "{len} bytes at {addr:#x} are not readable and writable host memory of this \
             process (from {covered:#x} on): the CPU emulator reaches only host memory (GPU \
             memory needs peer memory or DMA-BUF, which it does not have)"
        ),
    ))
}

/// A view of the caller's memory `[addr, addr + len)`, widened to whole 8-byte words, and
/// the offset of `addr` in it.
///
/// The one place the emulator makes memory of raw addresses: what `ibv_reg_mr(3)` and
/// `mlx5dv_devx_umem_reg(3)` hand a NIC.
pub(crate) fn caller_memory(addr: u64, len: u64) -> Outcome<(DmaBuffer, usize)> {
    check_host_memory(addr, len)?;
    let start = addr & !7;
    let end = addr
        .checked_add(len)
        .and_then(|e| e.checked_add(7))
        .map(|e| e & !7)
        .ok_or_else(|| Failure::invalid("range wraps"))?;
    // The widened words lie in the same pages as the range's first and last bytes, which
    // the maps check found mapped read-write.
    let ptr = NonNull::new(start as usize as *mut u8)
        .ok_or_else(|| Failure::new(libc::EFAULT, "a null address"))?;
    let words = usize::try_from(end - start).map_err(|_| Failure::invalid("range too long"))?;
    // SAFETY: the caller of the verbs entry point promises what registration promises a
    // NIC (ibv_reg_mr(3), mlx5dv_devx_umem_reg(3)): the memory stays allocated until it is
    // deregistered, and the device may read and write it at any time meanwhile. The span
    // is mapped read-write (checked above) and 8-byte aligned; the view does not own it
    // (its owner is `()`); the emulator touches it only with 64-bit atomics, as a DMA
    // device touches memory (ibgda's own buffers are accessed atomically on the other
    // side too; plain C stores race with the NIC exactly as they do with a real one).
    let buffer = unsafe { DmaBuffer::from_raw(ptr, words, Box::new(())) }
        .map_err(|e| Failure::invalid(format!("memory at {addr:#x}: {e}")))?;
    Ok((buffer, (addr - start) as usize))
}

/// The bytes `[ptr, ptr + len)` C passed in.
///
/// # Safety
///
/// `ptr` must be null or valid for reads of `len` bytes for the returned lifetime.
pub(crate) unsafe fn input<'a>(ptr: *const core::ffi::c_void, len: usize) -> Outcome<&'a [u8]> {
    if ptr.is_null() {
        return Err(Failure::invalid("a null input buffer"));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// The buffer `[ptr, ptr + len)` C passed for output.
///
/// # Safety
///
/// `ptr` must be null or valid for reads and writes of `len` bytes for the returned
/// lifetime, and not otherwise accessed meanwhile.
pub(crate) unsafe fn output<'a>(ptr: *mut core::ffi::c_void, len: usize) -> Outcome<&'a mut [u8]> {
    if ptr.is_null() {
        return Err(Failure::invalid("a null output buffer"));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_reports_exactly_the_calls_running_past_the_threshold() {
        let now = Instant::now();
        let me = std::thread::current().id();
        let calls: Running = vec![
            (me, "ibv_reg_dmabuf_mr", now - Duration::from_millis(2500)),
            (
                me,
                "mlx5dv_devx_obj_create",
                now - Duration::from_millis(200),
            ),
            (me, "ibv_alloc_pd", now),
        ];
        let lines = overdue(&calls, now, SLOW);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("ibgda-emu: trace: ibv_reg_dmabuf_mr still running after 2.5 s"),
            "{}",
            lines[0]
        );
        // A call that started after `now` (another thread's clock read) is not overdue.
        let later: Running = vec![(me, "ibv_open_device", now + Duration::from_secs(5))];
        assert!(overdue(&later, now, SLOW).is_empty());
    }
}
