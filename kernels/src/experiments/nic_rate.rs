//! The CUDA software NIC's own throughput: WQEs it executes per second, on one SM (one
//! engine), on every SM (one engine per SM) and on every SM with [`WIDE_ENGINES_PER_SM`]
//! engines each (an engine is one thread that waits on memory for most of each WQE, so
//! an SM runs many side by side), for the four operations of the CPU
//! software NIC's row (8 B inline WRITE, 64 B WRITE from a gather entry, 64 B READ, 8 B
//! fetch-add). No producer runs beside it: every queue's ring is filled before the launch
//! with `WQES_PER_QUEUE` WQEs (the Rust builders' bytes), its doorbell record and doorbell
//! announcing them, and one launch of `ibgda_softnic` steps every engine until idle. The
//! rate is the WQEs executed over the slowest engine's %globaltimer time (the launch's
//! first step to its last). The memory effects are checked after the run: every WRITE's
//! bytes, every READ's, and each fetch-add cell at its count.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use serde::Serialize;

use ibgda::cq::CqMode;
use ibgda::memory::DeviceBuffer;
use ibgda::order::GpuReleaseStore;
use ibgda::queue::{
    DoorbellPolicy, Gpu as GpuPlaced, QpConfig, QueuePair, SendQueueConfig, SendQueueMemory,
};
use ibgda::softnic::Access;
use ibgda::wqe::{
    Atomic, CompletionMode, LKey, LocalBuffer, Qpn, RKey, Rc, RdmaRead, RdmaWrite, RemoteAddress,
    RingSize, SendRing, Sge, WqeIndex, WqeLimits,
};

use crate::gpu::{Gpu, GpuError};
use crate::softnic::builder::{DeviceNicBuilder, QueueOptions};

/// WQEs (one WQEBB each) pre-posted on every queue: its whole ring.
pub const WQES_PER_QUEUE: u32 = 4096;
/// Queues per engine.
pub const QUEUES_PER_ENGINE: u32 = 2;
/// The bytes each queue's WQEs move (8 for the inline WRITE and the fetch-add).
pub const MESSAGE_BYTES: u32 = 64;
/// Engines per SM of the widest row. One engine executed 0.32 M WQE/s on the H200
/// (2026-12-03) and 132 engines, one per SM, 38.7 M: each WQE is a chain of dependent
/// memory round trips, so engines side by side on an SM scale until memory does not.
pub const WIDE_ENGINES_PER_SM: u32 = 16;

/// One operation of the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum NicOp {
    /// RDMA WRITE of 8 inline bytes.
    WriteInline8,
    /// RDMA WRITE of 64 bytes from one gather entry.
    Write64,
    /// RDMA READ of 64 bytes into one scatter entry.
    Read64,
    /// 8-byte fetch-add of 1.
    FetchAdd,
}

impl NicOp {
    /// Every operation, in the CPU software NIC row's order.
    pub const ALL: [Self; 4] = [
        Self::WriteInline8,
        Self::Write64,
        Self::Read64,
        Self::FetchAdd,
    ];

    /// The row's label.
    pub fn label(self) -> &'static str {
        match self {
            Self::WriteInline8 => "8 B inline WRITE",
            Self::Write64 => "64 B WRITE (SGE)",
            Self::Read64 => "64 B READ",
            Self::FetchAdd => "8 B fetch-add",
        }
    }
}

/// One run: an operation on some engines.
#[derive(Clone, Debug, Serialize)]
pub struct NicRateResult {
    /// The operation.
    pub op: NicOp,
    /// Engines (blocks, one per SM).
    pub engines: u32,
    /// Queues in all.
    pub queues: u32,
    /// WQEs executed successfully (the engines' count; every WQE posted).
    pub wqes: u64,
    /// The slowest engine's time, ns.
    pub ns: u64,
    /// Millions of WQEs per second over that time.
    pub mwqe_per_s: f64,
    /// SM clock of the slowest engine over its run, MHz.
    pub sm_mhz: f64,
}

/// The GPU's SM count.
pub fn sm_count(gpu: &Gpu) -> Result<u32, GpuError> {
    let n = gpu
        .context()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| GpuError::Invalid(format!("multiprocessor count: {e:?}")))?;
    u32::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| GpuError::Invalid(format!("multiprocessor count {n}")))
}

/// Where queue `i`'s operations land: its own 64-byte cell in each buffer.
fn cell(i: u32) -> u64 {
    u64::from(i) * u64::from(MESSAGE_BYTES)
}

/// The bytes queue `i` sends (its WRITE source and the READ's remote data).
fn pattern(i: u32) -> Vec<u8> {
    (0..MESSAGE_BYTES)
        .map(|k| (k as u8).wrapping_mul(29) ^ (i as u8).wrapping_mul(101) ^ 0x3c)
        .collect()
}

/// The ring of queue `i` (number `qpn`): `WQES_PER_QUEUE` WQEs of `op`, the last signaled.
#[allow(clippy::too_many_arguments)]
fn ring_bytes(
    op: NicOp,
    qpn: u32,
    i: u32,
    remote: (u64, RKey),
    local: (u64, LKey),
) -> Result<Vec<u8>, GpuError> {
    let e = |x: ibgda::wqe::WqeError| GpuError::Invalid(format!("NIC rate WQE: {x}"));
    let mut ring = vec![0u8; WQES_PER_QUEUE as usize * 64];
    let mut r = SendRing::new(&mut ring, WqeLimits::default()).map_err(e)?;
    let qpn = Qpn::new(qpn).map_err(e)?;
    let to = RemoteAddress::new(remote.0 + cell(i), remote.1);
    let here = local.0 + cell(i);
    let payload = pattern(i);
    for k in 0..WQES_PER_QUEUE {
        let completion = if k + 1 == WQES_PER_QUEUE {
            CompletionMode::Always
        } else {
            CompletionMode::OnError
        };
        let index = WqeIndex(k as u16);
        let w = match op {
            NicOp::WriteInline8 => {
                let b = RdmaWrite::new(to)
                    .completion(completion)
                    .inline(&payload[..8]);
                r.write(index, qpn, &b.build().map_err(e)?)
            }
            NicOp::Write64 => {
                let sge = Sge::new(here, MESSAGE_BYTES, local.1).map_err(e)?;
                let b = RdmaWrite::new(to).completion(completion).sge(sge);
                r.write(index, qpn, &b.build().map_err(e)?)
            }
            NicOp::Read64 => {
                let sge = Sge::new(here, MESSAGE_BYTES, local.1).map_err(e)?;
                let b = RdmaRead::new(to).completion(completion).sge(sge);
                r.write(index, qpn, &b.build().map_err(e)?)
            }
            NicOp::FetchAdd => {
                let b = Atomic::fetch_add(to, LocalBuffer::new(here, local.1), 1)
                    .completion(completion);
                r.write(index, qpn, &b.build().map_err(e)?)
            }
        };
        if w.map_err(e)? != 1 {
            return Err(GpuError::Invalid(format!(
                "NIC rate: {op:?} is not one WQEBB"
            )));
        }
    }
    Ok(ring)
}

/// A GPU-placed RC queue pair whose ring already holds `ring` and whose doorbell record
/// and doorbell announce all of it (`WQES_PER_QUEUE` WQEs).
fn prefilled_queue_pair(
    gpu: &Gpu,
    qpn: u32,
    ring: &[u8],
) -> Result<QueuePair<Rc, GpuPlaced, GpuReleaseStore>, GpuError> {
    let invalid = |e: String| GpuError::Invalid(format!("NIC rate queue: {e}"));
    let size = RingSize::new(WQES_PER_QUEUE as usize).map_err(|e| invalid(e.to_string()))?;
    let next = WQES_PER_QUEUE & 0xffff;
    let mut dbrec = [0u8; 8];
    dbrec[ibgda::queue::SEND_DBREC_OFFSET..].copy_from_slice(&next.to_be_bytes());
    let mut doorbell = [0u8; 8];
    doorbell[..4].copy_from_slice(&(next << 8).to_be_bytes());
    doorbell[4..].copy_from_slice(&(qpn << 8).to_be_bytes());
    let sq = SendQueueMemory::from_device(
        size,
        gpu.device_buffer_from(ring)?,
        gpu.device_buffer_from(&dbrec)?,
        gpu.device_buffer_from(&doorbell)?,
    )
    .map_err(|e| invalid(e.to_string()))?;
    // The CQ and producer state as any GPU queue's (the send ring made there is dropped).
    let mem = gpu.gpu_queue_memory(64, 64)?;
    let config = QpConfig {
        send: SendQueueConfig {
            limits: WqeLimits::default(),
            // The producer's bound (at most half the ring); the ring is pre-built here,
            // its WQEs unsignaled but the last, and no producer posts to it.
            max_unsignaled_wqebbs: Some(WQES_PER_QUEUE / 2),
            doorbell: DoorbellPolicy::Explicit,
        },
        cq_mode: CqMode::Ring,
    };
    let qpn = Qpn::new(qpn).map_err(|e| invalid(e.to_string()))?;
    Ok(QueuePair::for_device(
        qpn,
        sq,
        mem.cq,
        mem.state,
        config,
        GpuReleaseStore,
    )?)
}

/// Engines (blocks of 32 threads of `ibgda_softnic`) the GPU holds at once: the rate is
/// taken over the slowest engine's own time, which is the launch's only when every
/// engine runs from its start.
pub fn resident_engines(gpu: &Gpu) -> Result<u32, GpuError> {
    let per_sm = gpu
        .function("ibgda_softnic")?
        .occupancy_max_active_blocks_per_multiprocessor(32, 0, None)
        .map_err(|e| GpuError::Invalid(format!("ibgda_softnic occupancy: {e:?}")))?;
    Ok(per_sm.saturating_mul(sm_count(gpu)?))
}

/// Runs `op` on `engines` engines of `QUEUES_PER_ENGINE` loopback RC queues each; at most
/// [`resident_engines`].
pub fn run(gpu: &Gpu, op: NicOp, engines: u32) -> Result<NicRateResult, GpuError> {
    let resident = resident_engines(gpu)?;
    if engines == 0 || engines > resident {
        return Err(GpuError::Invalid(format!(
            "NIC rate on {engines} engines (1..={resident}: the engines this GPU holds at once)"
        )));
    }
    let queues = engines * QUEUES_PER_ENGINE;
    let bytes = queues as usize * MESSAGE_BYTES as usize;
    // Remote cells (WRITE target, READ source, fetch-add counters) and local cells (WRITE
    // source, READ target, fetch-add results), one of each per queue.
    let mut remote_init = vec![0u8; bytes];
    let mut local_init = vec![0u8; bytes];
    for i in 0..queues {
        let at = cell(i) as usize..cell(i + 1) as usize;
        match op {
            NicOp::Read64 => remote_init[at].copy_from_slice(&pattern(i)),
            NicOp::Write64 => local_init[at].copy_from_slice(&pattern(i)),
            NicOp::WriteInline8 | NicOp::FetchAdd => {}
        }
    }
    let remote = Arc::new(gpu.device_buffer_from(&remote_init)?);
    let local = Arc::new(gpu.device_buffer_from(&local_init)?);
    let mut builder = DeviceNicBuilder::new();
    let node = builder.node(1)?;
    let all =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let rk = builder.region(node, &remote, 0, remote.len(), all)?;
    let lk = builder.region(node, &local, 0, local.len(), Access::LOCAL_WRITE)?;
    let qps = (0..queues)
        .map(|i| {
            let qpn = 0x300 + i;
            let ring = ring_bytes(
                op,
                qpn,
                i,
                (remote.addr(), rk.rkey),
                (local.addr(), lk.lkey),
            )?;
            prefilled_queue_pair(gpu, qpn, &ring)
        })
        .collect::<Result<Vec<_>, GpuError>>()?;
    let options = QueueOptions {
        max_message_bytes: u64::from(MESSAGE_BYTES),
        doorbell_only: false,
    };
    for e in 0..engines {
        let engine = builder.engine();
        for q in &qps[(e * QUEUES_PER_ENGINE) as usize..((e + 1) * QUEUES_PER_ENGINE) as usize] {
            let slot = builder.rc(engine, node, q, options)?;
            builder.connect(slot, slot)?;
        }
    }
    let mut nic = builder.build(gpu)?;
    nic.run_until_idle()?;
    let records = nic.read()?;
    drop(nic);
    let (mut wqes, mut ns, mut cycles) = (0u64, 0u64, 0u64);
    for (i, (engine, _)) in records.iter().enumerate() {
        let s = &engine.stats;
        let want = u64::from(QUEUES_PER_ENGINE) * u64::from(WQES_PER_QUEUE);
        if engine.status != 0 || s.wqes_executed != want || s.wqes_failed + s.wqes_flushed != 0 {
            return Err(GpuError::Invalid(format!(
                "NIC rate {op:?}, engine {i}: status {}, {} executed of {want}, {} failed, {} flushed",
                engine.status, s.wqes_executed, s.wqes_failed, s.wqes_flushed
            )));
        }
        wqes += s.wqes_executed;
        if engine.ns > ns {
            ns = engine.ns;
            cycles = engine.cycles;
        }
    }
    check_effects(gpu, op, queues, &remote, &local)?;
    Ok(NicRateResult {
        op,
        engines,
        queues,
        wqes,
        ns,
        mwqe_per_s: super::rate::million_per_s(wqes, ns),
        sm_mhz: super::sm_mhz(cycles, ns),
    })
}

/// Every queue's memory effect: WRITEs left its bytes at its remote cell, READs brought
/// its remote bytes to its local cell, fetch-adds counted its cell up to `WQES_PER_QUEUE`
/// (and the last one returned one less).
fn check_effects(
    gpu: &Gpu,
    op: NicOp,
    queues: u32,
    remote: &DeviceBuffer,
    local: &DeviceBuffer,
) -> Result<(), GpuError> {
    let (r, l) = (gpu.read_device(remote)?, gpu.read_device(local)?);
    for i in 0..queues {
        let at = cell(i) as usize;
        let p = pattern(i);
        // Atomic operands and fetched values are big-endian in memory (IB-spec atomics,
        // as the software NICs model them).
        let word = |b: &[u8]| u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let ok = match op {
            NicOp::WriteInline8 => r[at..at + 8] == p[..8],
            NicOp::Write64 => r[at..at + p.len()] == p[..],
            NicOp::Read64 => l[at..at + p.len()] == p[..],
            NicOp::FetchAdd => {
                word(&r) == u64::from(WQES_PER_QUEUE) && word(&l) == u64::from(WQES_PER_QUEUE) - 1
            }
        };
        if !ok {
            return Err(GpuError::Invalid(format!(
                "NIC rate {op:?}: queue {i}'s memory effect is wrong"
            )));
        }
    }
    Ok(())
}

/// Every operation on one engine, on one engine per SM and on [`WIDE_ENGINES_PER_SM`]
/// per SM (or as many as the GPU holds at once, if fewer).
pub fn run_all(gpu: &Gpu) -> Result<Vec<NicRateResult>, GpuError> {
    let sms = sm_count(gpu)?;
    let wide = sms
        .saturating_mul(WIDE_ENGINES_PER_SM)
        .min(resident_engines(gpu)?);
    let mut out = Vec::new();
    for op in NicOp::ALL {
        for engines in [1, sms, wide] {
            super::progress(&format!(
                "GPU: CUDA software NIC rate: {} on {engines} engine(s)",
                op.label()
            ));
            out.push(run(gpu, op, engines)?);
        }
    }
    Ok(out)
}
