//! The peers side by side (section 4.1, Table 3): the one-thread issue loop of
//! [`super::issue`] through DOCA GPUNetIO's device verbs (`doca_gpu_dev_verbs_p_thread`,
//! the path NCCL GIN's GDAKI takes), compiled at run time with NVRTC from the headers that
//! the pinned `nvidia-nvshmem-cu13` wheel ships (`scripts/peer-headers.sh` installs its
//! `include/` directory; nothing of it is in this repository), on ibgda's GPU-resident
//! queue memory and the doorbell sink, in the same run as ibgda typed and raw. The WQEs
//! DOCA wrote are then parsed with ibgda's parser and compared byte for byte with what
//! ibgda's host encoder writes for the same request: every difference is a finding.
//!
//! A finding before any byte ran: DOCA packs its wire structs with a trailing
//! `} __attribute__((__packed__))`, which NVRTC ignores (nvcc honours it). Unpacked, its
//! control segment is 20 bytes with `fm_ce_se` in byte 12, so the first DOCA run on the H200
//! wrote a WQE asking for no completion and waited forever. The program now packs the one
//! header that defines them and static-asserts every field offset against ibgda's layout.
//!
//! NVSHMEM's IBGDA device path (`non_abi/device/pt-to-pt/ibgda_device.cuh`) cannot be
//! compiled with NVRTC (it needs rdma-core's `infiniband/mlx5dv.h` with `verbs.h` and
//! `pthread.h`, toolkit headers and unannotated host functions), so [`compile_nvshmem`]
//! compiles `cuda/bench_peers_nvshmem.cu` with nvcc at run time (the toolkit's, or the
//! pinned wheels of `scripts/peer-headers.sh --nvcc`), with rdma-core's include directory.
//! Its queue pair, collapsed CQ and device state (the module's `__constant__`
//! `nvshmemi_ibgda_device_state_d`, filled by the host as `nvshmemx_cumodule_init` does)
//! name ibgda's GPU queue memory; its loop runs the QP-level calls of
//! `nvshmemi_ibgda_rma_p_impl` (reserve, inline-write WQE, submit) and `ibgda_quiet`,
//! without the PE-to-QP and address-to-key lookups.
//!
//! Each peer kernel is launched once with no iterations before the sink starts: NVSHMEM's
//! has a stack frame, and a first launch that grows the context's local memory waits for
//! the GPU to go idle, which beside the persistent sink never happens.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cudarc::driver::CudaFunction;
use cudarc::nvrtc::Ptx;

use serde::Serialize;

use ibgda::cq::CqMode;
use ibgda::memory::DeviceBuffer;
use ibgda::order::GpuFence;
use ibgda::queue::{Gpu as GpuPlaced, QueuePair};
use ibgda::wqe::{
    parse_wqe, CompletionMode, Qpn, RKey, Rc, RdmaWrite, RemoteAddress, SendRing, TransportKind,
    WqeIndex, WqeLimits,
};

use super::issue::{IssueRun, WARMUP};
use super::{
    gpu_hung, launch, launch_config, progress, sm_mhz, wait_stream, word32, word64,
    HOST_WAIT_LIMIT, SPIN_LIMIT,
};
use crate::gpu::{load_every_kernel, CompileOptions, Gpu, GpuError, KernelArg, KernelQueue};
use crate::harness::{gpu_queue_pair, Sink, SINK_CHECK};
use crate::layout::layout_header;
use crate::nvrtc::{compile_source_with, Compiled};

/// The DOCA peer program (`cuda/bench_peers_doca.cu`).
pub const BENCH_PEERS_DOCA_CU: &str = include_str!("../../cuda/bench_peers_doca.cu");
/// The C library shim the peers' headers need under NVRTC (`cuda/peer_shims/libc_shim.h`).
pub const LIBC_SHIM_H: &str = include_str!("../../cuda/peer_shims/libc_shim.h");
/// What both peers' issue loops share: clock, phase word, watchdog
/// (`cuda/peer_shims/peer_loop.h`).
pub const PEER_LOOP_H: &str = include_str!("../../cuda/peer_shims/peer_loop.h");

/// The DOCA loop's status when its watchdog completed a wait DOCA never saw end
/// (`PEER_WATCHDOG` of `cuda/bench_peers_doca.cu`).
pub const PEER_WATCHDOG: i32 = -0x7d0;

/// The wheel whose headers are compiled (pinned).
pub const PEER_WHEEL: &str = "nvidia-nvshmem-cu13==3.8.0";

/// C library headers the peers include, each answered by the shim.
const SHIMMED: [&str; 10] = [
    "stdio.h",
    "stdint.h",
    "limits.h",
    "linux/types.h",
    "assert.h",
    "cuda.h",
    "math.h",
    "errno.h",
    "string.h",
    "stddef.h",
];

fn workspace_target() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) if Path::new(&t).is_absolute() => PathBuf::from(t),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
    }
}

/// The wheel's `include/` directory: `$IBGDA_PEER_INCLUDE`, else
/// `<target>/peers/include` (where `scripts/peer-headers.sh` puts it).
pub fn peer_include_dir() -> Result<PathBuf, GpuError> {
    let dir = std::env::var_os("IBGDA_PEER_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_target().join("peers/include"));
    if dir
        .join("gpunetio/device/doca_gpunetio_dev_verbs_onesided.cuh")
        .is_file()
    {
        Ok(dir)
    } else {
        Err(GpuError::Invalid(format!(
            "no {PEER_WHEEL} headers in {} (run scripts/peer-headers.sh, or set IBGDA_PEER_INCLUDE)",
            dir.display()
        )))
    }
}

/// CCCL's include directory (`<cuda/std/...>`, `<cuda/atomic>`): `$IBGDA_CCCL_INCLUDE`,
/// the pinned wheels of `scripts/cuda-wheels.sh`, or the CUDA toolkit's.
pub fn cccl_include_dir() -> Result<PathBuf, GpuError> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("IBGDA_CCCL_INCLUDE")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    let wheels = std::env::var_os("IBGDA_CUDA_WHEELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_target().join("cuda-wheels/13.0"));
    candidates.push(wheels.join("cu13/include/cccl"));
    candidates.push(PathBuf::from("/usr/local/cuda/include/cccl"));
    candidates.push(PathBuf::from(
        "/usr/local/cuda/targets/x86_64-linux/include/cccl",
    ));
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    candidates
        .iter()
        .find(|d| d.join("cuda/std/cstdint").is_file())
        .cloned()
        .ok_or_else(|| {
            GpuError::Invalid(format!(
                "no CCCL headers (cuda/std/cstdint) in {candidates:?}"
            ))
        })
}

/// Compiles the DOCA peer program (NVRTC only, no GPU) with `options`.
pub fn compile_doca(options: &CompileOptions) -> Result<Compiled, GpuError> {
    let include = peer_include_dir()?;
    let cccl = cccl_include_dir()?;
    let forward = "#include \"libc_shim.h\"\n";
    let mut headers: Vec<(&str, &str)> =
        vec![("libc_shim.h", LIBC_SHIM_H), ("peer_loop.h", PEER_LOOP_H)];
    headers.extend(SHIMMED.iter().map(|h| (*h, forward)));
    let inc = format!("-I{}", include.display());
    let cc = format!("-I{}", cccl.display());
    compile_source_with(
        "bench_peers_doca.cu",
        BENCH_PEERS_DOCA_CU,
        options,
        &headers,
        &[inc.as_str(), cc.as_str()],
    )
}

/// One difference between a peer's WQE and ibgda's encoding of the same request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ByteFinding {
    /// Byte offset in the WQE.
    pub offset: usize,
    /// The peer's byte (0xa5: never written; the ring was poisoned with it).
    pub peer: u8,
    /// ibgda's byte.
    pub ibgda: u8,
}

/// The WQEs the peer left in the ring, judged by ibgda.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WqeVerdict {
    /// WQEs examined (the last ring's worth).
    pub examined: usize,
    /// WQEs ibgda's parser accepted.
    pub parsed: usize,
    /// Parser errors (first few, with the index).
    pub parse_errors: Vec<String>,
    /// Byte differences from ibgda's encoding, by offset, over all examined WQEs (offset,
    /// peer byte, ibgda byte), each distinct triple once.
    pub differences: Vec<ByteFinding>,
    /// WQEs whose parse equals that of ibgda's encoding: the same operation, flags,
    /// addresses, keys and payload, so a NIC executes them alike (byte differences outside
    /// what the parser reads, such as inline padding, leave this equal to `parsed`).
    pub execute_like_ibgda: usize,
    /// The last WQE examined, as the peer left it (64 bytes, hex), for replaying.
    pub last_wqe_hex: String,
}

/// What the doorbell sink counted while serving a peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SinkCounts {
    /// Doorbell values seen change.
    pub doorbells: u64,
    /// WQEs consumed.
    pub wqes: u64,
    /// CQEs written.
    pub cqes: u64,
    /// WQEs whose control segment was wrong (index, QPN or DS 0).
    pub bad_wqes: u64,
    /// Doorbell values whose QPN or index disagreed with the doorbell record.
    pub bad_doorbells: u64,
}

/// The DOCA run beside ibgda's.
#[derive(Clone, Debug, Serialize)]
pub struct PeerResult {
    /// Which peer path.
    pub peer: &'static str,
    /// The issue loop's samples.
    pub run: IssueRun,
    /// Size of the peer's queue-pair struct.
    pub qp_struct_bytes: u32,
    /// Doorbells, WQEs and CQEs the sink counted, and what it found wrong (a bad doorbell
    /// or control segment here is a finding too).
    pub sink: SinkCounts,
    /// The WQEs judged by ibgda.
    pub wqes: WqeVerdict,
}

/// Judges the last ring's worth of WQEs before `next` in `ring` (one-WQEBB 8-byte inline
/// RC WRITEs, the i-th carrying `0x0123456789abcdef ^ i`, signaled): each through ibgda's
/// parser, and byte for byte (48 bytes) against ibgda's host encoder for the same request.
pub fn judge(ring: &[u8], qpn: u32, raddr: u64, rkey: u32, next: u64) -> WqeVerdict {
    let mut v = WqeVerdict::default();
    let wqebbs = (ring.len() / 64) as u64;
    let first = next.saturating_sub(wqebbs);
    for at in first..next {
        v.examined += 1;
        let index = WqeIndex(at as u16);
        let theirs = match parse_wqe(ring, index, TransportKind::Rc) {
            Ok(p) => {
                v.parsed += 1;
                Some(p)
            }
            Err(e) => {
                if v.parse_errors.len() < 8 {
                    v.parse_errors.push(format!("WQE {at}: {e}"));
                }
                None
            }
        };
        // What ibgda writes for the same request: iteration i carries 0x0123456789abcdef ^ i
        // (the loop's i = at, one WQE per iteration from a fresh queue), signaled.
        let payload = (0x0123_4567_89ab_cdef_u64 ^ at).to_ne_bytes();
        let mut mine = vec![0u8; ring.len()];
        let encoded = (|| -> Result<(), String> {
            let mut r =
                SendRing::new(&mut mine, WqeLimits::default()).map_err(|e| e.to_string())?;
            let w = RdmaWrite::new(RemoteAddress::new(raddr, RKey(rkey)))
                .completion(CompletionMode::Always)
                .inline(&payload)
                .build()
                .map_err(|e| e.to_string())?;
            r.write(index, Qpn::new(qpn).map_err(|e| e.to_string())?, &w)
                .map_err(|e| e.to_string())?;
            Ok(())
        })();
        if let Err(e) = encoded {
            v.parse_errors
                .push(format!("ibgda could not encode WQE {at}: {e}"));
            continue;
        }
        if theirs.is_some_and(|t| parse_wqe(&mine, index, TransportKind::Rc) == Ok(t)) {
            v.execute_like_ibgda += 1;
        }
        let slot = (at % wqebbs) as usize * 64;
        v.last_wqe_hex = ring[slot..slot + 64]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        for k in 0..48 {
            let f = ByteFinding {
                offset: k,
                peer: ring[slot + k],
                ibgda: mine[slot + k],
            };
            if f.peer != f.ibgda && !v.differences.contains(&f) {
                v.differences.push(f);
            }
        }
    }
    v
}

/// The scratch of a peer's issue loop: the sample columns and the status words.
struct LoopOutput {
    buffer: DeviceBuffer,
    /// Bytes per sample column.
    column: u64,
}

impl LoopOutput {
    fn new(gpu: &Gpu, iters: u32) -> Result<Self, GpuError> {
        let column = 8 * u64::from(iters);
        // Three sample columns, two clock words, two status words.
        let buffer = gpu.device_buffer((3 * column + 16 + 8) as usize)?;
        Ok(Self { buffer, column })
    }

    /// The loop kernel's pointer arguments: issue ns, issue cycles, put+completion ns,
    /// clocks, status.
    fn args(&self) -> [KernelArg<'static>; 5] {
        let (base, n) = (self.buffer.addr(), self.column);
        [
            KernelArg::U64(base),
            KernelArg::U64(base + n),
            KernelArg::U64(base + 2 * n),
            KernelArg::U64(base + 3 * n),
            KernelArg::U64(base + 3 * n + 16),
        ]
    }
}

/// What one peer's issue loop left: its samples, what the sink counted, and the WQEs it
/// wrote, judged by ibgda.
struct LoopOutcome {
    run: IssueRun,
    sink: SinkCounts,
    wqes: WqeVerdict,
}

/// Runs a peer's issue-loop kernel (`(peer struct*, u32 warmup, u32 iters, u64 raddr, u32
/// rkey, u64* issue_ns, u64* issue_cycles, u64* total_ns, u64* clocks, int* status, u64*
/// phase)`, one thread plus a watchdog warp; `phase` host-mapped) over `qp`, served by the
/// doorbell sink.
///
/// # Safety
/// `peer_struct` is the peer's queue-pair struct, filled (by its setup kernel, completed)
/// to name exactly `qp`'s memory, and `issue` has the signature above.
unsafe fn run_issue_loop(
    gpu: &Gpu,
    peer: &str,
    issue: &CudaFunction,
    peer_struct: &DeviceBuffer,
    qp: &QueuePair<Rc, GpuPlaced, GpuFence>,
    iters: u32,
    (raddr, rkey): (u64, u32),
) -> Result<LoopOutcome, GpuError> {
    let q = qp.device_queue();
    let qpn = q.raw().qpn;
    let out = LoopOutput::new(gpu, iters)?;
    let n = out.column;
    // Where the loop is, readable while it runs (iteration << 8 | step).
    let phase = Arc::new(gpu.mapped_host_buffer(8)?);
    let phase_dev = phase
        .device_addr()
        .ok_or_else(|| GpuError::Invalid("unmapped".into()))?;
    let args_for = |warmup: u32, iters: u32| {
        let mut args = vec![
            KernelArg::U64(peer_struct.addr()),
            KernelArg::U32(warmup),
            KernelArg::U32(iters),
            KernelArg::U64(raddr),
            KernelArg::U32(rkey),
        ];
        args.extend(out.args());
        args.push(KernelArg::U64(phase_dev));
        args
    };
    // A launch of no iterations first, before the sink runs: a kernel with a stack frame
    // (NVSHMEM's path has 8 bytes: its printf and its payload passed by pointer) makes the
    // driver grow the context's local memory at its first launch, which waits for the GPU
    // to go idle; beside the persistent sink that first launch, and the host, wait for
    // ever (the H200 run of 2026-12-01: NVSHMEM's kernel never started).
    // SAFETY: as for the timed launch below (no sink yet; nothing is posted).
    let primed = unsafe { launch(gpu, issue, launch_config(1, 64), &args_for(0, 0)) }
        .and_then(|()| wait_stream(gpu, &format!("{peer}'s empty launch"), HOST_WAIT_LIMIT));
    if let Err(e) = primed {
        if gpu_hung(&e) {
            // The kernel may still run: leave what it uses allocated.
            std::mem::forget((out, phase));
        }
        return Err(e);
    }
    let sink = Sink::start(gpu, &[qp], SINK_CHECK, 0, 1, 1)?;
    let args = args_for(WARMUP, iters);
    progress(&format!(
        "peers: launching {peer}'s issue loop ({WARMUP} + {iters} iterations, watchdog {SPIN_LIMIT:?})"
    ));
    // SAFETY: the kernel's signature is the one above (the caller's contract); the
    // struct names the live queue pair's memory (the caller's contract), the sample
    // columns, clocks and two status words lie inside `out`, the phase word is the mapped
    // `phase`; the sink's stop synchronizes the context before anything is dropped (or,
    // when the host gives up waiting, all of it is leaked). Two warps: the loop's thread and its
    // watchdog's.
    let launched = unsafe { launch(gpu, issue, launch_config(1, 64), &args) };
    // Reports where the loop is every 2 s while the host waits (a plain read of mapped
    // memory: it works even while a CUDA call blocks).
    let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (phase, watching, peer) = (phase.clone(), watching.clone(), peer.to_string());
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let mut last_report = started;
            while watching.load(std::sync::atomic::Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(20));
                if last_report.elapsed() >= std::time::Duration::from_secs(2) {
                    last_report = std::time::Instant::now();
                    let at = phase.words()[0].load(std::sync::atomic::Ordering::Acquire);
                    progress(&format!(
                        "peers: {peer}'s loop after {:.0} s: iteration {} step {}",
                        started.elapsed().as_secs_f64(),
                        at >> 8,
                        at & 0xff
                    ));
                }
            }
        })
    };
    progress(&format!("peers: waiting for {peer}'s issue loop"));
    let what = format!("{peer}'s issue loop");
    let synced = launched.and_then(|()| wait_stream(gpu, &what, HOST_WAIT_LIMIT));
    watching.store(false, std::sync::atomic::Ordering::Release);
    let _ = watcher.join();
    if let Err(e) = &synced {
        if gpu_hung(e) {
            let at = phase.words()[0].load(std::sync::atomic::Ordering::Acquire);
            // The kernel may still run: leave everything it uses allocated (the caller
            // leaves the queue pair and the struct).
            std::mem::forget(sink);
            std::mem::forget((out, phase));
            return Err(GpuError::Timeout {
                what: format!(
                    "{peer}'s issue loop, stuck at iteration {} step {} (see the kernel)",
                    at >> 8,
                    at & 0xff
                ),
                limit: HOST_WAIT_LIMIT,
                still_running: true,
            });
        }
    }
    progress("peers: stopping the sink");
    let (stats, _) = sink.stop()?;
    synced?;
    let o = gpu.read_device(&out.buffer)?;
    let status = word32(&o, (3 * n + 16) as usize)?;
    let ring = gpu.read_send_ring(&q)?;
    if status == PEER_WATCHDOG {
        let at = word32(&o, (3 * n + 20) as usize)?;
        // What the peer wrote up to the iteration that never completed, judged as below.
        let v = judge(&ring, qpn, raddr, rkey, u64::from(at as u32) + 1);
        return Err(GpuError::Timeout {
            what: format!(
                "{peer}'s wait for the completion of iteration {at} (sink {stats:?}; its WQEs: \
                 {} parsed of {}, errors {:?}, bytes unlike ibgda's {:?})",
                v.parsed, v.examined, v.parse_errors, v.differences
            ),
            limit: SPIN_LIMIT,
            still_running: false,
        });
    }
    if status != 0 {
        return Err(GpuError::Invalid(format!(
            "{peer} issue loop: status {status}, sink {stats:?}"
        )));
    }
    progress(&format!("peers: judging {peer}'s WQEs"));
    let col = |k: u64| -> Result<Vec<u64>, GpuError> {
        (0..u64::from(iters))
            .map(|i| word64(&o, (k * n + 8 * i) as usize))
            .collect()
    };
    let posted = u64::from(WARMUP) + u64::from(iters);
    let outcome = LoopOutcome {
        run: IssueRun {
            issue_ns: col(0)?,
            issue_cycles: col(1)?,
            put_c_ns: col(2)?,
            sm_mhz: sm_mhz(
                word64(&o, (3 * n) as usize)?,
                word64(&o, (3 * n + 8) as usize)?,
            ),
            // The peer's own ordering; what the sink found wrong is in `sink`.
            stale_wqes: 0,
        },
        sink: SinkCounts {
            doorbells: stats.doorbells,
            wqes: stats.wqes,
            cqes: stats.cqes,
            bad_wqes: stats.bad_wqes,
            bad_doorbells: stats.bad_doorbells,
        },
        wqes: judge(&ring, qpn, raddr, rkey, posted),
    };
    let p50 = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2]
    };
    progress(&format!(
        "peers: {peer}: issue p50 {} ns ({} cycles), put+c p50 {} ns, SM {:.0} MHz; sink {:?}; \
         WQEs {} parsed of {}, {} executed as ibgda's, errors {:?}, bytes unlike ibgda's {:?}; \
         last WQE {}",
        p50(&outcome.run.issue_ns),
        p50(&outcome.run.issue_cycles),
        p50(&outcome.run.put_c_ns),
        outcome.run.sm_mhz,
        outcome.sink,
        outcome.wqes.parsed,
        outcome.wqes.examined,
        outcome.wqes.execute_like_ibgda,
        outcome.wqes.parse_errors,
        outcome.wqes.differences,
        outcome.wqes.last_wqe_hex
    ));
    Ok(outcome)
}

/// Where the peers' 8-byte writes go (no NIC executes them: any address and key).
const REMOTE: (u64, u32) = (0x7000_0000, 0x99);

/// Runs a setup kernel `(DeviceQueueDescriptor, ...)` on one thread and waits for it.
///
/// # Safety
/// `args` match `setup`'s signature after the descriptor, each pointer naming live device
/// memory of the size the kernel writes.
unsafe fn run_setup(
    gpu: &Gpu,
    name: &str,
    setup: &CudaFunction,
    qp: &QueuePair<Rc, GpuPlaced, GpuFence>,
    args: &[KernelArg],
) -> Result<(), GpuError> {
    let q = qp.device_queue();
    let mut all = vec![KernelArg::Queue(KernelQueue::new(&q).into())];
    all.extend_from_slice(args);
    progress(&format!("peers: launching {name}"));
    // SAFETY: the descriptor of a live queue pair, then the caller's arguments (its
    // contract); waited for below.
    unsafe { launch(gpu, setup, launch_config(1, 1), &all) }?;
    wait_stream(gpu, name, HOST_WAIT_LIMIT)
}

/// Finds kernel `name` in a loaded peer program.
fn kernel_of(
    functions: &HashMap<String, CudaFunction>,
    program: &str,
    name: &str,
) -> Result<CudaFunction, GpuError> {
    functions
        .get(name)
        .cloned()
        .ok_or_else(|| GpuError::Invalid(format!("no kernel {name} in {program}")))
}

/// Runs DOCA's issue loop (scope of ibgda's comparison row: GpuFence, DOCA's own ordering)
/// for `iters` timed iterations.
pub fn run_doca(gpu: &Gpu, iters: u32) -> Result<PeerResult, GpuError> {
    if iters == 0 {
        return Err(GpuError::Invalid("peers: 0 iterations".into()));
    }
    progress("peers: compiling bench_peers_doca.cu with NVRTC (the wheel's DOCA headers)");
    let started = std::time::Instant::now();
    let compiled = compile_doca(gpu.options())?;
    progress(&format!(
        "peers: compiled in {:.1} s; loading",
        started.elapsed().as_secs_f64()
    ));
    let functions = gpu.load_compiled(&compiled)?;
    let setup = kernel_of(&functions, "bench_peers_doca.cu", "ibgda_peer_doca_setup")?;
    let issue = kernel_of(&functions, "bench_peers_doca.cu", "ibgda_peer_doca_issue")?;
    progress("peers: allocating the queue pair and buffers");
    // SAFETY: the peers' issue loop on throw-away device memory, read only by the sink,
    // which counts any stale WQE as a finding (DOCA orders with GPU-scope fences too).
    let qp = gpu_queue_pair(gpu, 0x78, 64, 64, 1, CqMode::Ring, unsafe {
        GpuFence::new()
    })?;
    let doca_qp = gpu.device_buffer(4096)?;
    let report = gpu.device_buffer(8)?;
    // SAFETY: ibgda_peer_doca_setup(DeviceQueueDescriptor, doca_gpu_dev_verbs_qp*, u32*):
    // a 4 KiB buffer for the struct (its size is checked below, before any other use) and
    // a word for that size.
    let set = unsafe {
        run_setup(
            gpu,
            "ibgda_peer_doca_setup",
            &setup,
            &qp,
            &[
                KernelArg::U64(doca_qp.addr()),
                KernelArg::U64(report.addr()),
            ],
        )
    };
    if let Err(e) = set {
        if gpu_hung(&e) {
            // The kernel may still run: leave everything it uses allocated.
            std::mem::forget((qp, doca_qp, report));
        }
        return Err(e);
    }
    let size = word32(&gpu.read_device(&report)?, 0)? as u32;
    if size == 0 || size > 4096 {
        return Err(GpuError::Invalid(format!(
            "DOCA's queue-pair struct is {size} bytes (expected 1..=4096)"
        )));
    }
    progress(&format!(
        "peers: DOCA's queue-pair struct is {size} bytes; starting the sink"
    ));
    // SAFETY: ibgda_peer_doca_issue has the loop signature; `doca_qp` was filled for `qp`
    // by the setup kernel, which completed.
    let r = unsafe { run_issue_loop(gpu, "DOCA", &issue, &doca_qp, &qp, iters, REMOTE) };
    if r.as_ref().is_err_and(gpu_hung) {
        std::mem::forget((qp, doca_qp));
    }
    let r = r?;
    Ok(PeerResult {
        peer: "DOCA GPUNetIO doca_gpu_dev_verbs_p_thread (exclusive, SM doorbell)",
        run: r.run,
        qp_struct_bytes: size,
        sink: r.sink,
        wqes: r.wqes,
    })
}

/// The NVSHMEM peer program (`cuda/bench_peers_nvshmem.cu`), compiled with nvcc.
pub const BENCH_PEERS_NVSHMEM_CU: &str = include_str!("../../cuda/bench_peers_nvshmem.cu");

/// Sizes NVSHMEM's headers static-assert (`nvshmem_common_ibgda.h`): its queue pair, CQ
/// and device state, as the setup kernel reports them.
const NVSHMEM_STRUCTS: [u32; 3] = [184, 72, 8384];

/// An nvcc for the NVSHMEM peer program: `$IBGDA_NVCC`, the pinned wheels of
/// `scripts/peer-headers.sh --nvcc` (`<target>/peers/nvcc`), or the CUDA toolkit's.
pub fn nvcc_path() -> Result<PathBuf, GpuError> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("IBGDA_NVCC")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.push(workspace_target().join("peers/nvcc/nvidia/cu13/bin/nvcc"));
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            GpuError::Invalid(format!(
                "no nvcc in {candidates:?} (run scripts/peer-headers.sh --nvcc, or set IBGDA_NVCC)"
            ))
        })
}

/// rdma-core's include directory (`infiniband/mlx5dv.h`, `verbs.h`), which NVSHMEM's device
/// path includes: `$IBGDA_RDMA_CORE_INCLUDE`, else the one `scripts/rdma-core.sh` builds.
pub fn rdma_core_include_dir() -> Result<PathBuf, GpuError> {
    let dir = std::env::var_os("IBGDA_RDMA_CORE_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_target().join("rdma-core/56.1/build/include"));
    if dir.join("infiniband/mlx5dv.h").is_file() {
        Ok(dir)
    } else {
        Err(GpuError::Invalid(format!(
            "no infiniband/mlx5dv.h in {} (run scripts/rdma-core.sh, or set IBGDA_RDMA_CORE_INCLUDE)",
            dir.display()
        )))
    }
}

/// Compiles the NVSHMEM peer program for sm_90 with nvcc (no GPU needed): the cubin, its
/// PTX and ptxas's `-v` report.
pub fn compile_nvshmem(options: &CompileOptions) -> Result<Compiled, GpuError> {
    let nvcc = nvcc_path()?;
    let include = peer_include_dir()?;
    let rdma = rdma_core_include_dir()?;
    let failed = |log: String| GpuError::Compile {
        program: "bench_peers_nvshmem.cu".into(),
        log,
    };
    let dir = std::env::temp_dir().join(format!(
        "ibgda-peers-nvshmem-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let io = |e: std::io::Error| failed(format!("{}: {e}", dir.display()));
    std::fs::create_dir_all(&dir).map_err(io)?;
    let compiled = (|| {
        std::fs::write(dir.join("bench_peers_nvshmem.cu"), BENCH_PEERS_NVSHMEM_CU).map_err(io)?;
        std::fs::write(dir.join("ibgda_layout.h"), layout_header()).map_err(io)?;
        std::fs::write(dir.join("peer_loop.h"), PEER_LOOP_H).map_err(io)?;
        let mut cmd = std::process::Command::new(&nvcc);
        cmd.current_dir(&dir)
            .args(["-std=c++17", "-arch=sm_90", "-cubin", "-O3", "-DNDEBUG"])
            .args(["-Xptxas", "-v", "--keep", "--keep-dir", "."])
            .arg(format!("-I{}", include.display()))
            .arg(format!("-I{}", rdma.display()))
            .args(["-I.", "-o", "bench_peers_nvshmem.cubin"]);
        if let Some(ns) = options.spin_limit_ns() {
            cmd.arg(format!("-DIBGDA_SPIN_LIMIT_NS={ns}ull"));
        }
        cmd.arg("bench_peers_nvshmem.cu");
        let output = cmd
            .output()
            .map_err(|e| failed(format!("{}: {e}", nvcc.display())))?;
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if !output.status.success() {
            return Err(failed(format!(
                "{} {}:\n{log}",
                nvcc.display(),
                output.status
            )));
        }
        Ok(Compiled {
            name: "bench_peers_nvshmem.cu".into(),
            ptx: std::fs::read_to_string(dir.join("bench_peers_nvshmem.ptx")).map_err(io)?,
            cubin: std::fs::read(dir.join("bench_peers_nvshmem.cubin")).map_err(io)?,
            log,
        })
    })();
    let _ = std::fs::remove_dir_all(&dir);
    compiled
}

/// Runs NVSHMEM's issue loop (its own ordering: GPU-scope fences for GPU-resident NIC
/// buffers) for `iters` timed iterations, on a queue pair with a collapsed CQ (NVSHMEM's).
pub fn run_nvshmem(gpu: &Gpu, iters: u32) -> Result<PeerResult, GpuError> {
    if iters == 0 {
        return Err(GpuError::Invalid("peers: 0 iterations".into()));
    }
    progress("peers: compiling bench_peers_nvshmem.cu with nvcc (the wheel's NVSHMEM headers)");
    let started = std::time::Instant::now();
    let compiled = compile_nvshmem(gpu.options())?;
    progress(&format!(
        "peers: compiled in {:.1} s; loading",
        started.elapsed().as_secs_f64()
    ));
    gpu.context().bind_to_thread()?;
    let module = gpu
        .context()
        .load_module(Ptx::from_binary(compiled.cubin.clone()))?;
    let functions = load_every_kernel(&module, &compiled.ptx)?;
    let setup = kernel_of(
        &functions,
        "bench_peers_nvshmem.cu",
        "ibgda_peer_nvshmem_setup",
    )?;
    let issue = kernel_of(
        &functions,
        "bench_peers_nvshmem.cu",
        "ibgda_peer_nvshmem_issue",
    )?;
    progress("peers: allocating the queue pair and buffers");
    // SAFETY: as for DOCA's run above.
    let scope = unsafe { GpuFence::new() };
    let qp = gpu_queue_pair(gpu, 0x79, 64, 64, 1, CqMode::Collapsed, scope)?;
    let [qp_bytes, cq_bytes, state_bytes] = NVSHMEM_STRUCTS.map(|b| b as usize);
    let nvshmem_qp = gpu.device_buffer(qp_bytes)?;
    let nvshmem_cq = gpu.device_buffer(cq_bytes)?;
    let state = gpu.device_buffer(state_bytes)?;
    let report = gpu.device_buffer(16)?;
    // SAFETY: ibgda_peer_nvshmem_setup(DeviceQueueDescriptor, nvshmemi_ibgda_device_qp_t*,
    // nvshmemi_ibgda_device_cq_t*, nvshmemi_ibgda_device_state_t*, u32*): buffers of the
    // sizes NVSHMEM's headers static-assert (184, 72, 8,384 bytes) and four report words.
    let set = unsafe {
        run_setup(
            gpu,
            "ibgda_peer_nvshmem_setup",
            &setup,
            &qp,
            &[
                KernelArg::U64(nvshmem_qp.addr()),
                KernelArg::U64(nvshmem_cq.addr()),
                KernelArg::U64(state.addr()),
                KernelArg::U64(report.addr()),
            ],
        )
    };
    if let Err(e) = set {
        if gpu_hung(&e) {
            // The kernel may still run: leave everything it uses allocated.
            std::mem::forget((qp, nvshmem_qp, nvshmem_cq, state, report));
        }
        return Err(e);
    }
    let r = gpu.read_device(&report)?;
    let sizes = [word32(&r, 0)?, word32(&r, 4)?, word32(&r, 8)?].map(|w| w as u32);
    if sizes != NVSHMEM_STRUCTS {
        return Err(GpuError::Invalid(format!(
            "NVSHMEM's qp, cq and state structs are {sizes:?} bytes, expected {NVSHMEM_STRUCTS:?}"
        )));
    }
    // The device state lives in this module's __constant__ nvshmemi_ibgda_device_state_d,
    // which the host fills (as nvshmemx_cumodule_init does).
    let bytes = gpu.read_device(&state)?;
    let mut symbol = module.get_global("nvshmemi_ibgda_device_state_d", gpu.stream())?;
    if symbol.len() != bytes.len() {
        return Err(GpuError::Invalid(format!(
            "nvshmemi_ibgda_device_state_d is {} bytes, the state {}",
            symbol.len(),
            bytes.len()
        )));
    }
    gpu.stream().memcpy_htod(&bytes, &mut symbol)?;
    gpu.synchronize()?;
    progress("peers: NVSHMEM's device state is in place; starting the sink");
    // SAFETY: ibgda_peer_nvshmem_issue has the loop signature; `nvshmem_qp` (and the CQ
    // and state it and the module's constant name) was filled for `qp` by the setup
    // kernel, which completed.
    let run = unsafe { run_issue_loop(gpu, "NVSHMEM", &issue, &nvshmem_qp, &qp, iters, REMOTE) };
    if run.as_ref().is_err_and(gpu_hung) {
        std::mem::forget((qp, nvshmem_qp, nvshmem_cq, state, module));
    }
    let run = run?;
    Ok(PeerResult {
        peer: "NVSHMEM IBGDA ibgda_write_rdma_write_inl_wqe + ibgda_submit_requests + ibgda_quiet (RC)",
        run: run.run,
        qp_struct_bytes: sizes[0],
        sink: run.sink,
        wqes: run.wqes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ibgda_ring(qpn: u32, raddr: u64, rkey: u32, n: u64) -> Vec<u8> {
        let mut ring = vec![0u8; 64 * 64];
        let mut r = SendRing::new(&mut ring, WqeLimits::default()).expect("ring");
        for at in 0..n {
            let payload = (0x0123_4567_89ab_cdef_u64 ^ at).to_ne_bytes();
            let w = RdmaWrite::new(RemoteAddress::new(raddr, RKey(rkey)))
                .completion(CompletionMode::Always)
                .inline(&payload)
                .build()
                .expect("wqe");
            r.write(WqeIndex(at as u16), Qpn::new(qpn).expect("qpn"), &w)
                .expect("write");
        }
        ring
    }

    /// NVSHMEM's IBGDA device path, from the pinned wheel's headers and rdma-core's
    /// mlx5dv.h, compiles with nvcc for sm_90 into the peer program (its static assertions
    /// check rdma-core's WQE and CQE layouts against ibgda's), and its issue loop posts with
    /// NVSHMEM's ordering: GPU-scope fences (`__threadfence`, `membar.gl`) around the
    /// doorbell record, then the doorbell store.
    #[test]
    #[ignore = "needs nvcc (scripts/peer-headers.sh --nvcc), the peer headers and rdma-core's build"]
    fn nvshmem_device_path_compiles_with_nvcc_on_ibgda_queues() {
        let c = compile_nvshmem(&CompileOptions::new()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&c.cubin[..4], b"\x7fELF");
        let usage = crate::nvrtc::resource_usage(&c.log);
        for k in ["ibgda_peer_nvshmem_setup", "ibgda_peer_nvshmem_issue"] {
            let u = usage
                .iter()
                .find(|u| u.kernel == k)
                .unwrap_or_else(|| panic!("{k} missing:\n{}", c.log));
            println!(
                "{k:<28} {:>4} registers, {} B stack",
                u.registers, u.stack_bytes
            );
            assert_eq!((u.spill_stores, u.spill_loads), (0, 0), "{k} spills");
        }
        let order = crate::ptx::ordering_of(&c.ptx, "ibgda_peer_nvshmem_issue")
            .expect("NVSHMEM issue loop");
        println!("NVSHMEM issue loop ordering: {}", order.join("; "));
        assert!(
            order.iter().any(|i| i.starts_with("membar.gl")),
            "no GPU-scope fence in {order:?}"
        );
    }

    #[test]
    fn ibgda_own_wqes_are_judged_identical() {
        let ring = ibgda_ring(0x78, 0x7000_0000, 0x99, 100);
        let v = judge(&ring, 0x78, 0x7000_0000, 0x99, 100);
        assert_eq!((v.examined, v.parsed, v.execute_like_ibgda), (64, 64, 64));
        assert!(v.parse_errors.is_empty(), "{:?}", v.parse_errors);
        assert!(v.differences.is_empty(), "{:?}", v.differences);
    }

    /// What the H200 runs found in DOCA's WQEs: inline padding left unwritten (the ring's
    /// 0xa5 poison) is a byte difference that executes alike; a memory key written in the
    /// other byte order parses but executes differently.
    #[test]
    fn unwritten_padding_executes_alike_and_a_swapped_key_does_not() {
        let mut ring = ibgda_ring(0x78, 0x7000_0000, 0x99, 100);
        for slot in 0..64 {
            ring[slot * 64 + 44..slot * 64 + 48].fill(0xa5);
        }
        let v = judge(&ring, 0x78, 0x7000_0000, 0x99, 100);
        assert_eq!((v.examined, v.parsed, v.execute_like_ibgda), (64, 64, 64));
        let offsets: Vec<usize> = v.differences.iter().map(|d| d.offset).collect();
        assert_eq!(offsets, [44, 45, 46, 47]);
        assert_eq!(v.last_wqe_hex.len(), 128);
        assert_eq!(&v.last_wqe_hex[88..96], "a5a5a5a5", "{}", v.last_wqe_hex);
        // WQE 99 (slot 35): the rkey (raddr segment bytes 8..12, WQE bytes 24..28) reversed.
        ring[35 * 64 + 24..35 * 64 + 28].reverse();
        let v = judge(&ring, 0x78, 0x7000_0000, 0x99, 100);
        assert_eq!((v.parsed, v.execute_like_ibgda), (64, 63));
        assert!(v.differences.contains(&ByteFinding {
            offset: 24,
            peer: 0x99,
            ibgda: 0
        }));
    }

    #[test]
    fn a_changed_byte_is_a_finding_and_a_bad_opcode_a_parse_error() {
        let mut ring = ibgda_ring(0x78, 0x7000_0000, 0x99, 100);
        // WQE 99 sits in slot 35: its immediate (ctrl bytes 12..16) left unwritten.
        ring[35 * 64 + 12] = 0xa5;
        // WQE 98 (slot 34): an opcode ibgda does not know.
        ring[34 * 64 + 3] = 0xff;
        let v = judge(&ring, 0x78, 0x7000_0000, 0x99, 100);
        assert!(v.differences.contains(&ByteFinding {
            offset: 12,
            peer: 0xa5,
            ibgda: 0
        }));
        assert_eq!(v.parsed, 63);
        assert_eq!(v.parse_errors.len(), 1, "{:?}", v.parse_errors);
        assert!(v.parse_errors[0].starts_with("WQE 98"));
    }
}
