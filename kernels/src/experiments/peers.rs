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
//! NVSHMEM's IBGDA device path (`non_abi/device/pt-to-pt/ibgda_device.cuh`) is not
//! compiled: it needs `cuda_fp16.h` (a toolkit header), rdma-core's `infiniband/mlx5dv.h`
//! (which pulls `<infiniband/verbs.h>` and `<pthread.h>`, host headers NVRTC cannot
//! compile; NVSHMEM's 8,384-byte device state is static-asserted over its structs),
//! unannotated host functions (refused by NVRTC's JIT mode), `NVSHMEMI_STATIC` from
//! `nvshmem.h`'s host include chain, and it reads its queues through the `__constant__`
//! `nvshmemi_ibgda_device_state_d` that `libnvshmem_device` defines (see the README).

use std::path::{Path, PathBuf};

use serde::Serialize;

use ibgda::cq::CqMode;
use ibgda::order::GpuFence;
use ibgda::wqe::{
    parse_wqe, CompletionMode, Qpn, RKey, RdmaWrite, RemoteAddress, SendRing, TransportKind,
    WqeIndex, WqeLimits,
};

use super::issue::{IssueRun, WARMUP};
use super::{
    gpu_hung, launch, launch_config, progress, sm_mhz, wait_stream, word32, word64,
    HOST_WAIT_LIMIT, SPIN_LIMIT,
};
use crate::gpu::{CompileOptions, Gpu, GpuError, KernelArg, KernelQueue};
use crate::harness::{gpu_queue_pair, Sink, SINK_CHECK};
use crate::nvrtc::{compile_source_with, Compiled};

/// The DOCA peer program (`cuda/bench_peers_doca.cu`).
pub const BENCH_PEERS_DOCA_CU: &str = include_str!("../../cuda/bench_peers_doca.cu");
/// The C library shim the peers' headers need under NVRTC (`cuda/peer_shims/libc_shim.h`).
pub const LIBC_SHIM_H: &str = include_str!("../../cuda/peer_shims/libc_shim.h");

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
    let mut headers: Vec<(&str, &str)> = vec![("libc_shim.h", LIBC_SHIM_H)];
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
        match parse_wqe(ring, index, TransportKind::Rc) {
            Ok(_) => v.parsed += 1,
            Err(e) => {
                if v.parse_errors.len() < 8 {
                    v.parse_errors.push(format!("WQE {at}: {e}"));
                }
            }
        }
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
        let slot = (at % wqebbs) as usize * 64;
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
    let kernel = |name: &str| {
        functions
            .get(name)
            .cloned()
            .ok_or_else(|| GpuError::Invalid(format!("no kernel {name} in bench_peers_doca.cu")))
    };
    let (setup, issue) = (
        kernel("ibgda_peer_doca_setup")?,
        kernel("ibgda_peer_doca_issue")?,
    );
    progress("peers: allocating the queue pair and buffers");
    let (raddr, rkey) = (0x7000_0000u64, 0x99u32);
    let qp = gpu_queue_pair(gpu, 0x78, 64, 64, 1, CqMode::Ring, GpuFence)?;
    let q = qp.device_queue();
    let qpn = q.raw().qpn;
    let doca_qp = gpu.device_buffer(4096)?;
    let n = 8 * u64::from(iters);
    let out = gpu.device_buffer((3 * n + 16 + 8 + 8) as usize)?;
    let size_at = 3 * n + 24;
    progress("peers: launching ibgda_peer_doca_setup");
    // SAFETY: ibgda_peer_doca_setup(DeviceQueueDescriptor, doca_gpu_dev_verbs_qp*, u32*):
    // the descriptor of a live queue pair (its ring is poisoned), a 4 KiB buffer for the
    // struct (its size is checked below, after the launch, before any other use), a word
    // inside `out`; synchronized at once.
    unsafe {
        launch(
            gpu,
            &setup,
            launch_config(1, 1),
            &[
                KernelArg::Queue(KernelQueue::new(&q).into()),
                KernelArg::U64(doca_qp.addr()),
                KernelArg::U64(out.addr() + size_at),
            ],
        )
    }?;
    progress("peers: waiting for the setup kernel");
    if let Err(e) = wait_stream(gpu, "ibgda_peer_doca_setup", HOST_WAIT_LIMIT) {
        if gpu_hung(&e) {
            // The kernel may still run: leave everything it uses allocated.
            std::mem::forget((qp, doca_qp, out));
        }
        return Err(e);
    }
    let size = word32(&gpu.read_device(&out)?, size_at as usize)? as u32;
    if size == 0 || size > 4096 {
        return Err(GpuError::Invalid(format!(
            "DOCA's queue-pair struct is {size} bytes (expected 1..=4096)"
        )));
    }
    progress(&format!(
        "peers: DOCA's queue-pair struct is {size} bytes; starting the sink"
    ));
    let sink = Sink::start(gpu, &[&qp], SINK_CHECK, 0, 1, 1)?;
    let base = out.addr();
    let args = [
        KernelArg::U64(doca_qp.addr()),
        KernelArg::U32(WARMUP),
        KernelArg::U32(iters),
        KernelArg::U64(raddr),
        KernelArg::U32(rkey),
        KernelArg::U64(base),
        KernelArg::U64(base + n),
        KernelArg::U64(base + 2 * n),
        KernelArg::U64(base + 3 * n),
        KernelArg::U64(base + 3 * n + 16),
    ];
    // SAFETY: ibgda_peer_doca_issue(doca_gpu_dev_verbs_qp*, u32, u32, u64, u32, u64*, u64*,
    // u64*, u64*, int*): the struct filled above naming the live queue pair's memory, the
    // sample columns, clocks and two status words inside `out`; the sink's stop
    // synchronizes the context before anything is dropped. Two warps: the loop's thread
    // and its watchdog's.
    progress(&format!(
        "peers: launching DOCA's issue loop ({WARMUP} + {iters} iterations, watchdog {SPIN_LIMIT:?})"
    ));
    let launched = unsafe { launch(gpu, &issue, launch_config(1, 64), &args) };
    progress("peers: waiting for DOCA's issue loop");
    let synced = launched.and_then(|()| wait_stream(gpu, "DOCA's issue loop", HOST_WAIT_LIMIT));
    if let Err(e) = &synced {
        if gpu_hung(e) {
            // The kernel may still run: leave everything it uses allocated.
            std::mem::forget(sink);
            std::mem::forget((qp, doca_qp, out));
            return Err(e.clone());
        }
    }
    progress("peers: stopping the sink");
    let (stats, _) = sink.stop()?;
    synced?;
    let o = gpu.read_device(&out)?;
    let status = word32(&o, (3 * n + 16) as usize)?;
    if status == PEER_WATCHDOG {
        let at = word32(&o, (3 * n + 20) as usize)?;
        // What DOCA wrote up to the iteration that never completed, judged as below.
        let ring = gpu.read_send_ring(&q)?;
        let v = judge(&ring, qpn, raddr, rkey, u64::from(at as u32) + 1);
        return Err(GpuError::Timeout {
            what: format!(
                "DOCA's poll for the completion of iteration {at} (sink {stats:?}; its WQEs: \
                 {} parsed of {}, errors {:?}, bytes unlike ibgda's {:?})",
                v.parsed, v.examined, v.parse_errors, v.differences
            ),
            limit: SPIN_LIMIT,
            still_running: false,
        });
    }
    if status != 0 {
        return Err(GpuError::Invalid(format!(
            "DOCA issue loop: status {status}, sink {stats:?}"
        )));
    }
    progress("peers: judging DOCA's WQEs");
    let col = |k: u64| -> Result<Vec<u64>, GpuError> {
        (0..u64::from(iters))
            .map(|i| word64(&o, (k * n + 8 * i) as usize))
            .collect()
    };
    let ring = gpu.read_send_ring(&q)?;
    let posted = u64::from(WARMUP) + u64::from(iters);
    Ok(PeerResult {
        peer: "DOCA GPUNetIO doca_gpu_dev_verbs_p_thread (exclusive, SM doorbell)",
        run: IssueRun {
            issue_ns: col(0)?,
            issue_cycles: col(1)?,
            put_c_ns: col(2)?,
            sm_mhz: sm_mhz(
                word64(&o, (3 * n) as usize)?,
                word64(&o, (3 * n + 8) as usize)?,
            ),
            // DOCA's own ordering (a GPU-scope release before its doorbell); what the sink
            // found wrong is in `sink`.
            stale_wqes: 0,
        },
        qp_struct_bytes: size,
        sink: SinkCounts {
            doorbells: stats.doorbells,
            wqes: stats.wqes,
            cqes: stats.cqes,
            bad_wqes: stats.bad_wqes,
            bad_doorbells: stats.bad_doorbells,
        },
        wqes: judge(&ring, qpn, raddr, rkey, posted),
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

    #[test]
    fn ibgda_own_wqes_are_judged_identical() {
        let ring = ibgda_ring(0x78, 0x7000_0000, 0x99, 100);
        let v = judge(&ring, 0x78, 0x7000_0000, 0x99, 100);
        assert_eq!((v.examined, v.parsed), (64, 64));
        assert!(v.parse_errors.is_empty(), "{:?}", v.parse_errors);
        assert!(v.differences.is_empty(), "{:?}", v.differences);
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
