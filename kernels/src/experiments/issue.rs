//! Issue and put+completion time of one 8-byte inline RC WRITE from one thread, per
//! ordering scope, through the device library (`ibgda_issue_bench_<S>`) and through the
//! hand-written baseline (`ibgda_raw_issue_<S>`), alternating in one run (section 4.1,
//! Table 4). Issue: from before the reservation to after the doorbell store, in
//! %globaltimer ns and clock64 cycles; put+completion: to after the CQE the sink wrote
//! was consumed. The SM clock is clock64 over %globaltimer across the timed iterations.

use serde::Serialize;

use ibgda::cq::CqMode;
use ibgda::order::{
    GpuFence, GpuFencedDbrec, GpuReleaseStore, GpuThread, OrderingScope, SystemFence,
    SystemReleaseStore, ThreadFence, Unordered, ValidFor,
};
use ibgda::queue::Gpu as GpuPlaced;

use super::{
    launch_config, sm_mhz, tolerates_stale_wqes, wait_stream, word32, word64, Summary,
    HOST_WAIT_LIMIT,
};
use crate::gpu::{Gpu, GpuError, KernelArg, KernelQueue};
use crate::harness::{compact_target, full_target, gpu_queue_pair, Sink, SINK_CHECK};
use zerocopy::IntoBytes;

/// Warm-up iterations before the timed ones.
pub const WARMUP: u32 = 1000;

/// One kernel's run.
#[derive(Clone, Debug, Serialize)]
pub struct IssueRun {
    /// Issue time per iteration, ns.
    pub issue_ns: Vec<u64>,
    /// Issue time per iteration, SM cycles.
    pub issue_cycles: Vec<u64>,
    /// Put+completion per iteration, ns.
    pub put_c_ns: Vec<u64>,
    /// SM clock over the timed iterations, MHz.
    pub sm_mhz: f64,
    /// WQEs the sink read stale after the doorbell, of `iterations` + warm-up: possible
    /// only for `Unordered` (a measured finding there, an error for any other scope).
    pub stale_wqes: u64,
}

impl IssueRun {
    /// Summaries of (issue ns, issue cycles, put+completion ns).
    pub fn summaries(&self) -> (Summary, Summary, Summary) {
        (
            Summary::of(&self.issue_ns),
            Summary::of(&self.issue_cycles),
            Summary::of(&self.put_c_ns),
        )
    }
}

/// One scope, typed and raw.
#[derive(Clone, Debug, Serialize)]
pub struct IssueResult {
    /// The scope (`OrderingScope::NAME`).
    pub scope: &'static str,
    /// Timed iterations per kernel.
    pub iterations: u32,
    /// Through the device library.
    pub typed: IssueRun,
    /// Hand-written.
    pub raw: IssueRun,
}

impl IssueResult {
    /// typed / raw of the p50 issue cycles (the target is 1.00 +- 0.02).
    pub fn typed_over_raw(&self) -> f64 {
        let t = Summary::of(&self.typed.issue_cycles).p50 as f64;
        let r = Summary::of(&self.raw.issue_cycles).p50.max(1) as f64;
        t / r
    }
}

fn one<S>(gpu: &Gpu, scope: S, raw: bool, iters: u32) -> Result<IssueRun, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    if iters == 0 {
        return Err(GpuError::Invalid("issue: 0 iterations".into()));
    }
    let qp = gpu_queue_pair(gpu, 0x77, 64, 64, 32, CqMode::Ring, scope)?;
    let q = qp.device_queue();
    let n = 8 * u64::from(iters);
    // Three sample columns, two clock words, the status.
    let out = gpu.device_buffer((3 * n + 16 + 8) as usize)?;
    let sink = Sink::start(gpu, &[&qp], SINK_CHECK, 0, 1, 1)?;
    let base = out.addr();
    let args = [
        KernelArg::Queue(KernelQueue::new(&q).into()),
        KernelArg::U32(WARMUP),
        KernelArg::U32(iters),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(base),
        KernelArg::U64(base + n),
        KernelArg::U64(base + 2 * n),
        KernelArg::U64(base + 3 * n),
        KernelArg::U64(base + 3 * n + 16),
    ];
    let name = format!(
        "ibgda_{}_{}",
        if raw { "raw_issue" } else { "issue_bench" },
        S::NAME
    );
    // SAFETY: (DeviceQueueDescriptor, u32, u32, u64, u32, u64*, u64*, u64*, u64*, int*):
    // the arguments above, all inside `out`, which lives past the sink's stop (a
    // synchronize of the whole context); the queue pair lives to the end of this function.
    let launched = unsafe { gpu.launch_raw(raw, &name, launch_config(1, 1), false, &args) };
    let synced = launched.and_then(|()| wait_stream(gpu, &name, HOST_WAIT_LIMIT));
    if let Err(e) = &synced {
        if super::gpu_hung(e) {
            // The kernel may still run: leave everything it uses allocated.
            std::mem::forget(sink);
            std::mem::forget((qp, out));
            return Err(e.clone());
        }
    }
    let (stats, _) = sink.stop()?;
    synced?;
    let o = gpu.read_device(&out)?;
    let col = |k: u64| -> Result<Vec<u64>, GpuError> {
        (0..u64::from(iters))
            .map(|i| word64(&o, (k * n + 8 * i) as usize))
            .collect()
    };
    let status = word32(&o, (3 * n + 16) as usize)?;
    let stale_wqes = if tolerates_stale_wqes::<S>() {
        stats.bad_wqes
    } else {
        0
    };
    if status != 0 || stats.bad_wqes - stale_wqes + stats.bad_doorbells != 0 {
        return Err(GpuError::Invalid(format!(
            "{name}: status {status}, sink {stats:?}"
        )));
    }
    Ok(IssueRun {
        issue_ns: col(0)?,
        issue_cycles: col(1)?,
        put_c_ns: col(2)?,
        sm_mhz: sm_mhz(
            word64(&o, (3 * n) as usize)?,
            word64(&o, (3 * n + 8) as usize)?,
        ),
        stale_wqes,
    })
}

/// One operation's shape, for Table 3's rows and Figure 3's sweep (scope GpuFence).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum IssueShape {
    /// An RC WRITE of this many inline bytes (1..=256), read from device memory.
    Inline(u32),
    /// An RC WRITE of this many bytes from one gather entry (the pointer form).
    Pointer(u32),
    /// A DC WRITE of 8 inline bytes, compact address vector.
    DcCompact,
    /// A DC WRITE of 8 inline bytes, full address vector.
    DcFull,
}

impl IssueShape {
    fn code(self) -> (u32, u32) {
        match self {
            Self::Inline(len) => (0, len),
            Self::Pointer(len) => (1, len),
            Self::DcCompact => (2, 8),
            Self::DcFull => (3, 8),
        }
    }

    /// The row's label.
    pub fn label(self) -> String {
        match self {
            Self::Inline(len) => format!("RC WRITE, {len} B inline"),
            Self::Pointer(len) => format!("RC WRITE, {len} B pointer (SGE)"),
            Self::DcCompact => "DC WRITE, 8 B inline, compact AV".into(),
            Self::DcFull => "DC WRITE, 8 B inline, full AV".into(),
        }
    }
}

/// What the shape rows' WQEs carry besides their shape (the same for the typed and the raw
/// kernel): the remote and local sides, the inline payload source and the address vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeOperands {
    /// Remote address.
    pub raddr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Local address of the pointer form's gather entry.
    pub laddr: u64,
    /// Its local key.
    pub lkey: u32,
    /// The inline shapes' payload source (the first `len` bytes are sent).
    pub payload: [u8; 256],
    /// The DC shapes' address vector (compact: the first 16 bytes).
    pub av: [u8; 48],
}

impl ShapeOperands {
    /// The operands of the run of `shape`.
    pub fn of_run(shape: IssueShape) -> Self {
        let mut payload = [0u8; 256];
        for (i, b) in payload.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37) ^ 0x5a;
        }
        let mut av = [0u8; 48];
        match shape {
            IssueShape::DcCompact => {
                av[..16].copy_from_slice(compact_target(1).segment().as_bytes())
            }
            IssueShape::DcFull => av.copy_from_slice(full_target(2).segment().as_bytes()),
            _ => {}
        }
        Self {
            raddr: 0x7000_0000,
            rkey: 0x99,
            laddr: 0x7100_0000,
            lkey: 0x55,
            payload,
            av,
        }
    }
}

/// The inline value of iteration `i` of the DC shapes.
pub fn shape_value(i: u32) -> u64 {
    0x0123_4567_89ab_cdef ^ u64::from(i)
}

#[cfg(not(ibgda_no_host_engine))]
extern "C" {
    fn ibgda_raw_shape_host(
        ring: *mut u8,
        cap: u32,
        next: u64,
        qpn: u32,
        shape: u32,
        len: u32,
        raddr: u64,
        rkey: u32,
        laddr: u64,
        lkey: u32,
        payload: *const u8,
        av: *const u8,
        value: u64,
    ) -> u32;
}

/// The hand-written baseline's WQE of `shape` (`raw_shape_wqe` in `cuda/raw_baseline.cu`,
/// the code the raw shape kernel runs, built for the host by `build.rs`) written into
/// `ring` at WQEBB counter `next`, with queue number `qpn`, `operands` and inline `value`
/// (the DC shapes); returns its WQEBBs. `ring` must be a power of two of 64-byte WQEBBs,
/// at least the WQE's; the shape's length 1..=256.
pub fn raw_shape_wqe_on_host(
    ring: &mut [u8],
    next: u64,
    qpn: u32,
    shape: IssueShape,
    operands: &ShapeOperands,
    value: u64,
) -> Result<u32, GpuError> {
    let (code, len) = shape.code();
    let wqebbs = ring.len() / 64;
    let cap = u32::try_from(wqebbs).ok().filter(|&c| {
        c.is_power_of_two() && ring.len() % 64 == 0 && c >= 16 && (1..=256).contains(&len)
    });
    let Some(cap) = cap else {
        return Err(GpuError::Invalid(format!(
            "raw shape {shape:?} into a ring of {} bytes (a power of two of at least 16 WQEBBs, length 1..=256)",
            ring.len()
        )));
    };
    if qpn > 0xff_ffff {
        return Err(GpuError::Invalid(format!(
            "raw shape: QPN {qpn:#x} over 24 bits"
        )));
    }
    #[cfg(ibgda_no_host_engine)]
    {
        let _ = (next, operands, value, cap, code);
        Err(GpuError::Invalid(
            "the host build of the raw baseline was left out (IBGDA_SKIP_HOST_ENGINE=1)".into(),
        ))
    }
    #[cfg(not(ibgda_no_host_engine))]
    {
        // Word-aligned copies: the writer stores and loads 4-byte words.
        let mut words = vec![0u32; ring.len() / 4];
        for (w, b) in words.iter_mut().zip(ring.chunks_exact(4)) {
            *w = u32::from_ne_bytes(b.try_into().expect("4 bytes"));
        }
        let mut payload = [0u32; 64];
        for (w, b) in payload.iter_mut().zip(operands.payload.chunks_exact(4)) {
            *w = u32::from_ne_bytes(b.try_into().expect("4 bytes"));
        }
        let mut av = [0u32; 12];
        for (w, b) in av.iter_mut().zip(operands.av.chunks_exact(4)) {
            *w = u32::from_ne_bytes(b.try_into().expect("4 bytes"));
        }
        // SAFETY: `words` holds `cap` WQEBBs (cap a power of two): the writer masks every
        // WQEBB index with cap - 1, so it stores only inside them; it reads `len` <= 256
        // bytes of `payload` (256 bytes) and at most 3 octowords of `av` (48 bytes); all
        // three are 4-byte aligned and live across the call, which keeps no pointer.
        let written = unsafe {
            ibgda_raw_shape_host(
                words.as_mut_ptr().cast(),
                cap,
                next,
                qpn,
                code,
                len,
                operands.raddr,
                operands.rkey,
                operands.laddr,
                operands.lkey,
                payload.as_ptr().cast(),
                av.as_ptr().cast(),
                value,
            )
        };
        for (b, w) in ring.chunks_exact_mut(4).zip(&words) {
            b.copy_from_slice(&w.to_ne_bytes());
        }
        Ok(written)
    }
}

/// Inline payload lengths of Figure 3's sweep.
pub const INLINE_SWEEP: [u32; 9] = [8, 16, 32, 48, 64, 96, 128, 192, 256];

/// The shapes run: Table 3's pointer WRITE beside the 8 B inline one, the inline sweep and
/// the pointer form at each of its lengths, and DC with either address vector.
pub fn shapes() -> Vec<IssueShape> {
    let mut v: Vec<IssueShape> = INLINE_SWEEP
        .iter()
        .map(|&l| IssueShape::Inline(l))
        .collect();
    v.extend(INLINE_SWEEP.iter().map(|&l| IssueShape::Pointer(l)));
    v.extend([IssueShape::DcCompact, IssueShape::DcFull]);
    v
}

/// One shape, typed and raw.
#[derive(Clone, Debug, Serialize)]
pub struct ShapeResult {
    /// The shape.
    pub shape: IssueShape,
    /// Timed iterations per kernel.
    pub iterations: u32,
    /// Through the device library (`ibgda_issue_shape_GpuFence`).
    pub typed: IssueRun,
    /// Hand-written (`ibgda_raw_issue_shape_GpuFence`).
    pub raw: IssueRun,
}

impl ShapeResult {
    /// typed / raw of the p50 issue cycles.
    pub fn typed_over_raw(&self) -> f64 {
        let t = Summary::of(&self.typed.issue_cycles).p50 as f64;
        let r = Summary::of(&self.raw.issue_cycles).p50.max(1) as f64;
        t / r
    }
}

fn one_shape(
    gpu: &Gpu,
    shape: IssueShape,
    raw: bool,
    iters: u32,
) -> Result<(IssueRun, Vec<u8>), GpuError> {
    let (code, len) = shape.code();
    if iters == 0 || len == 0 || len > 256 {
        return Err(GpuError::Invalid(format!(
            "issue shape {shape:?}: {iters} iterations"
        )));
    }
    // SAFETY: a benchmark queue on throw-away device memory, executed only by the sink,
    // which checks every WQE it reads.
    let qp = gpu_queue_pair(gpu, 0x78, 64, 64, 32, CqMode::Ring, unsafe {
        GpuFence::new()
    })?;
    let q = qp.device_queue();
    let n = 8 * u64::from(iters);
    let out = gpu.device_buffer((3 * n + 16 + 8) as usize)?;
    let operands = ShapeOperands::of_run(shape);
    let payload = gpu.device_buffer_from(&operands.payload)?;
    let av = gpu.device_buffer_from(&operands.av)?;
    let sink = Sink::start(gpu, &[&qp], SINK_CHECK, 0, 1, 1)?;
    let base = out.addr();
    let args = [
        KernelArg::Queue(KernelQueue::new(&q).into()),
        KernelArg::U32(code),
        KernelArg::U32(len),
        KernelArg::U32(WARMUP),
        KernelArg::U32(iters),
        KernelArg::U64(operands.raddr),
        KernelArg::U32(operands.rkey),
        KernelArg::U64(operands.laddr),
        KernelArg::U32(operands.lkey),
        KernelArg::U64(payload.addr()),
        KernelArg::U64(av.addr()),
        KernelArg::U64(base),
        KernelArg::U64(base + n),
        KernelArg::U64(base + 2 * n),
        KernelArg::U64(base + 3 * n),
        KernelArg::U64(base + 3 * n + 16),
    ];
    let name = if raw {
        "ibgda_raw_issue_shape_GpuFence"
    } else {
        "ibgda_issue_shape_GpuFence"
    };
    // SAFETY: (DeviceQueueDescriptor, u32 shape, u32 len, u32 warmup, u32 iters, u64
    // raddr, u32 rkey, u64 laddr, u32 lkey, const u32* payload, av, u64*, u64*, u64*,
    // u64*, int*): the arguments above; the payload buffer (a device allocation, so 4-byte
    // aligned, as both kernels read it by words) holds the 256 bytes the longest inline
    // shape reads, `av` the 48 bytes of the full address vector, the outputs lie in
    // `out`, all alive past the sink's stop; the sink never dereferences laddr or raddr.
    let launched = unsafe { gpu.launch_raw(raw, name, launch_config(1, 1), false, &args) };
    let synced = launched.and_then(|()| wait_stream(gpu, name, HOST_WAIT_LIMIT));
    if let Err(e) = &synced {
        if super::gpu_hung(e) {
            std::mem::forget(sink);
            std::mem::forget((qp, out, payload, av));
            return Err(e.clone());
        }
    }
    let (stats, _) = sink.stop()?;
    synced?;
    let o = gpu.read_device(&out)?;
    let status = word32(&o, (3 * n + 16) as usize)?;
    if status != 0 || stats.bad_wqes + stats.bad_doorbells != 0 {
        return Err(GpuError::Invalid(format!(
            "{name} {shape:?}: status {status}, sink {stats:?}"
        )));
    }
    let col = |k: u64| -> Result<Vec<u64>, GpuError> {
        (0..u64::from(iters))
            .map(|i| word64(&o, (k * n + 8 * i) as usize))
            .collect()
    };
    let ring = gpu.read_send_ring(&q)?;
    Ok((
        IssueRun {
            issue_ns: col(0)?,
            issue_cycles: col(1)?,
            put_c_ns: col(2)?,
            sm_mhz: sm_mhz(
                word64(&o, (3 * n) as usize)?,
                word64(&o, (3 * n + 8) as usize)?,
            ),
            stale_wqes: 0,
        },
        ring,
    ))
}

/// One shape typed then raw; both must leave byte-identical rings (the same WQEs at the
/// same indices: both post `WARMUP + iters` WQEs of the shape from a fresh queue).
pub fn run_shape(gpu: &Gpu, shape: IssueShape, iters: u32) -> Result<ShapeResult, GpuError> {
    run_shape_ordered(gpu, shape, iters, false)
}

/// [`run_shape`], raw first when `raw_first` (each run allocates its own queue, so the
/// order is also which run gets which fresh allocation: the A/B of order and placement).
pub fn run_shape_ordered(
    gpu: &Gpu,
    shape: IssueShape,
    iters: u32,
    raw_first: bool,
) -> Result<ShapeResult, GpuError> {
    let ((typed, typed_ring), (raw, raw_ring)) = if raw_first {
        let r = one_shape(gpu, shape, true, iters)?;
        (one_shape(gpu, shape, false, iters)?, r)
    } else {
        let t = one_shape(gpu, shape, false, iters)?;
        (t, one_shape(gpu, shape, true, iters)?)
    };
    if let Some(at) = typed_ring.iter().zip(&raw_ring).position(|(a, b)| a != b) {
        return Err(GpuError::Invalid(format!(
            "issue shape {shape:?}: typed and raw rings differ at byte {at} (typed {:#04x}, raw {:#04x})",
            typed_ring[at], raw_ring[at]
        )));
    }
    Ok(ShapeResult {
        shape,
        iterations: iters,
        typed,
        raw,
    })
}

/// Typed then raw for one scope.
pub fn run<S>(gpu: &Gpu, scope: S, iters: u32) -> Result<IssueResult, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    Ok(IssueResult {
        scope: S::NAME,
        iterations: iters,
        typed: one(gpu, scope, false, iters)?,
        raw: one(gpu, scope, true, iters)?,
    })
}

/// Every GPU scope, in Table 4's order, each with its own result: a failing scope does
/// not stop the others, except a timeout (the GPU may still be busy), after which the
/// remaining scopes are not run and say so.
pub fn run_all(gpu: &Gpu, iters: u32) -> Vec<(&'static str, Result<IssueResult, GpuError>)> {
    let mut out: Vec<(&'static str, Result<IssueResult, GpuError>)> = Vec::new();
    let mut row = |name: &'static str, f: &dyn Fn() -> Result<IssueResult, GpuError>| {
        let hung = out
            .iter()
            .any(|(_, r)| r.as_ref().is_err_and(super::gpu_hung));
        let result = if hung {
            Err(GpuError::Invalid(format!(
                "issue {name}: not run, an earlier launch timed out"
            )))
        } else {
            super::progress(&format!("GPU: issue {name}, typed and raw"));
            f()
        };
        out.push((name, result));
    };
    // SAFETY: benchmark queues on throw-away device memory read only by the sink.
    row(Unordered::NAME, &|| {
        run(gpu, unsafe { Unordered::new() }, iters)
    });
    // SAFETY: as above; the sink follows the record, and counts any stale WQE it fetches.
    row(GpuFence::NAME, &|| {
        run(gpu, unsafe { GpuFence::new() }, iters)
    });
    row(GpuFencedDbrec::NAME, &|| run(gpu, GpuFencedDbrec, iters));
    row(GpuReleaseStore::NAME, &|| run(gpu, GpuReleaseStore, iters));
    row(ThreadFence::NAME, &|| run(gpu, ThreadFence, iters));
    row(SystemReleaseStore::NAME, &|| {
        run(gpu, SystemReleaseStore, iters)
    });
    row(SystemFence::NAME, &|| run(gpu, SystemFence, iters));
    out
}
