//! Software NIC: the CPU engine's WQE/s on one core.
//!
//! One RC queue pair between two nodes of a [`Fabric`] in step mode, all on this thread.
//! Each round the host posts `round` WQEs of one kind (the last one signaled, one
//! doorbell), then the engine runs until idle: that call alone is timed (fetch, parse,
//! key and bounds checks, the data move, the CQE), and the round's CQE is polled after.
//! One sample is the round's engine time divided by its WQEs. Results are checked: the
//! engine must report exactly `round` WQEs executed, none failed.
//!
//! After each round the same thread copies the bytes the round moved (each WQE's 64-byte
//! WQEBB, its payload, the CQE) from one buffer to another, timed the same way: the
//! engine's time over that copy's is a ratio that the machine's clock does not move (the
//! same binary measured 21.4 M and 9.9 M WQE/s on two CPUs).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Instant;

use ibgda::memory::DmaBuffer;
use ibgda::queue::{DoorbellPolicy, Polled, QueuePair, Registered, SendQueueConfig};
use ibgda::softnic::{Access, Fabric, MemoryRegion, QueuePairSpec};
use ibgda::wqe::{Atomic, LocalBuffer, Rc, RdmaRead, RdmaWrite, RingSize, WqeError};
use serde::{Deserialize, Serialize};

use crate::stats::{Durations, Percentiles};
use crate::BenchError;

/// The WQE kinds measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum WqeKind {
    /// RDMA WRITE of 8 inline bytes.
    InlineWrite8,
    /// RDMA WRITE of 64 bytes from one SGE.
    PointerWrite64,
    /// RDMA READ of 64 bytes into one SGE.
    Read64,
    /// 8-byte fetch-and-add.
    FetchAdd,
}

impl WqeKind {
    /// Every kind, in report order.
    pub const ALL: [WqeKind; 4] = [
        WqeKind::InlineWrite8,
        WqeKind::PointerWrite64,
        WqeKind::Read64,
        WqeKind::FetchAdd,
    ];

    /// Bytes one WQE of this kind moves through memory besides its 64-byte WQEBB: the
    /// payload (a fetch-add reads and writes 8 bytes, and writes the 8-byte result).
    pub fn payload_bytes(self) -> usize {
        match self {
            WqeKind::InlineWrite8 => 8,
            WqeKind::PointerWrite64 | WqeKind::Read64 => 64,
            WqeKind::FetchAdd => 24,
        }
    }

    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            WqeKind::InlineWrite8 => "8 B inline WRITE",
            WqeKind::PointerWrite64 => "64 B WRITE (SGE)",
            WqeKind::Read64 => "64 B READ",
            WqeKind::FetchAdd => "8 B fetch-add",
        }
    }
}

/// Sizes of the software-NIC experiment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SoftnicParams {
    /// WQEs per round (one doorbell, the last one signaled).
    pub round: u32,
    /// Timed rounds per kind.
    pub rounds: u32,
    /// Send ring size in WQEBBs.
    pub ring_wqebbs: u32,
    /// The kinds measured, in order.
    pub kinds: Vec<WqeKind>,
}

impl SoftnicParams {
    /// The full or the quick size, for `kinds` (every kind when empty).
    pub fn new(quick: bool, kinds: &[WqeKind]) -> Self {
        Self {
            round: 512,
            rounds: if quick { 100 } else { 2_000 },
            ring_wqebbs: 1024,
            kinds: if kinds.is_empty() {
                WqeKind::ALL.to_vec()
            } else {
                kinds.to_vec()
            },
        }
    }
}

/// One kind's engine time per WQE.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SoftnicRow {
    /// The WQE kind.
    pub kind: WqeKind,
    /// Engine time per WQE, per round (ns).
    pub ns_per_wqe: Percentiles,
    /// WQEs per second on one core at the median.
    pub wqes_per_s_p50: f64,
    /// The same-run baseline: copying the bytes a round moved, per WQE, per round (ns).
    #[serde(default)]
    pub copy_ns_per_wqe: Percentiles,
    /// Engine time over copy time at the medians: how many copies of its bytes one WQE
    /// costs (independent of the machine's clock).
    #[serde(default)]
    pub copies_per_wqe_p50: f64,
}

/// The software-NIC experiment's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SoftnicResult {
    /// Its sizes.
    pub params: SoftnicParams,
    /// One row per kind.
    pub rows: Vec<SoftnicRow>,
    /// The target, WQE/s per core.
    pub target_wqes_per_s: f64,
}

const BUFFER_BYTES: usize = 64 * 1024;

/// The copy baseline: `from` to `to` (as many bytes as `to` holds), timed.
fn timed_copy(from: &[u8], to: &mut [u8]) -> f64 {
    let n = to.len().min(from.len());
    let t = Instant::now();
    to[..n].copy_from_slice(std::hint::black_box(&from[..n]));
    std::hint::black_box(&mut to[..n]);
    t.elapsed().as_nanos() as f64
}

struct Bench {
    fabric: Fabric,
    qp: QueuePair<Rc>,
    local: MemoryRegion,
    remote: MemoryRegion,
    keep: [Arc<dyn Registered>; 1],
}

impl Bench {
    fn new(params: &SoftnicParams) -> Result<Self, BenchError> {
        let fabric = Fabric::new();
        let a = fabric.add_node(1).map_err(BenchError::msg)?;
        let b = fabric.add_node(2).map_err(BenchError::msg)?;
        let ring = RingSize::new(params.ring_wqebbs as usize).map_err(BenchError::msg)?;
        let every = NonZeroU32::new(params.round)
            .ok_or(BenchError::Invalid("software NIC round of 0 WQEs".into()))?;
        let spec = QueuePairSpec {
            send: SendQueueConfig {
                doorbell: DoorbellPolicy::Every(every),
                ..Default::default()
            },
            ..QueuePairSpec::new(ring)
        };
        let qp = fabric
            .create_queue_pair::<Rc>(a, spec)
            .map_err(BenchError::msg)?;
        let peer = fabric
            .create_queue_pair::<Rc>(b, spec)
            .map_err(BenchError::msg)?;
        fabric
            .connect(qp.qpn(), peer.qpn())
            .map_err(BenchError::msg)?;
        let all = Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC;
        let buffer = |_: ()| DmaBuffer::zeroed(BUFFER_BYTES, 4096).map(Arc::new);
        let local_buf = buffer(()).map_err(BenchError::msg)?;
        let remote_buf = buffer(()).map_err(BenchError::msg)?;
        let local = fabric
            .register(a, local_buf, 0, BUFFER_BYTES, all)
            .map_err(BenchError::msg)?;
        let remote = fabric
            .register(b, remote_buf, 0, BUFFER_BYTES, all)
            .map_err(BenchError::msg)?;
        let keep = [local.registered()];
        Ok(Self {
            fabric,
            qp,
            local,
            remote,
            keep,
        })
    }

    /// Posts WQE `i` of a round of `kind` (each to its own 64-byte slot).
    fn post(&mut self, kind: WqeKind, i: u32) -> Result<(), BenchError> {
        let slot = u64::from(i % (BUFFER_BYTES as u32 / 64)) * 64;
        let remote = self.remote.remote(slot);
        let payload = u64::from(i).to_be_bytes();
        let posted = match kind {
            WqeKind::InlineWrite8 => {
                let wqe = RdmaWrite::new(remote).inline(&payload).build();
                self.qp.post(&wqe.map_err(BenchError::msg)?, &self.keep)
            }
            WqeKind::PointerWrite64 => {
                let sge = self.local.sge(slot, 64).map_err(BenchError::msg)?;
                let wqe = RdmaWrite::new(remote).sge(sge).build();
                self.qp.post(&wqe.map_err(BenchError::msg)?, &self.keep)
            }
            WqeKind::Read64 => {
                let sge = self.local.sge(slot, 64).map_err(BenchError::msg)?;
                let wqe = RdmaRead::new(remote).sge(sge).build();
                self.qp.post(&wqe.map_err(BenchError::msg)?, &self.keep)
            }
            WqeKind::FetchAdd => {
                let result = LocalBuffer {
                    addr: self.local.addr_at(slot),
                    lkey: self.local.lkey(),
                };
                let wqe: Result<_, WqeError> = Atomic::fetch_add(remote, result, 1).build();
                self.qp.post(&wqe.map_err(BenchError::msg)?, &self.keep)
            }
        };
        posted.map(|_| ()).map_err(BenchError::msg)
    }

    /// One round: post, ring, time the engine, poll. Returns the engine's nanoseconds.
    fn round(&mut self, kind: WqeKind, round: u32) -> Result<f64, BenchError> {
        for i in 0..round {
            self.post(kind, i)?;
        }
        // The queue rings itself every `round` WQEs; a signaled tail brings the slots back.
        let tail = self.qp.sq_mut().signal_tail().map_err(BenchError::msg)?;
        self.qp.ring_doorbell();
        let t = Instant::now();
        let report = self.fabric.run_until_idle();
        let ns = t.elapsed().as_nanos() as f64;
        let expected = u64::from(round) + u64::from(tail.is_some());
        if report.wqes_executed != expected || report.wqes_failed + report.wqes_flushed != 0 {
            return Err(BenchError::Invalid(format!(
                "software NIC {}: {} of {expected} WQEs executed, {} failed, {} flushed",
                kind.label(),
                report.wqes_executed,
                report.wqes_failed,
                report.wqes_flushed
            )));
        }
        while !self.qp.sq().is_idle() {
            match self.qp.poll().map_err(BenchError::msg)? {
                Some(Polled::Sent { .. }) => {}
                Some(other) => {
                    return Err(BenchError::Invalid(format!(
                        "software NIC: unexpected completion {other:?}"
                    )))
                }
                None => {
                    return Err(BenchError::Invalid(
                        "software NIC: a signaled WQE wrote no CQE".into(),
                    ))
                }
            }
        }
        Ok(ns / expected as f64)
    }
}

/// Runs the experiment.
pub fn run(
    params: SoftnicParams,
    progress: &indicatif::ProgressBar,
) -> Result<SoftnicResult, BenchError> {
    let mut rows = Vec::new();
    progress.set_length(u64::from(params.rounds) * params.kinds.len() as u64);
    for &kind in &params.kinds {
        progress.set_message(format!("software NIC: {}", kind.label()));
        let mut bench = Bench::new(&params)?;
        // Warm-up round (allocations, caches), not recorded.
        bench.round(kind, params.round)?;
        let bytes = params.round as usize * (64 + kind.payload_bytes()) + 64;
        let from = vec![0x5au8; bytes];
        let mut to = vec![0u8; bytes];
        timed_copy(&from, &mut to);
        let mut samples = Durations::new();
        let mut copies = Durations::new();
        for _ in 0..params.rounds {
            let ns = bench.round(kind, params.round)?;
            samples.record_nanos(ns).map_err(BenchError::msg)?;
            let copy = timed_copy(&from, &mut to) / f64::from(params.round);
            copies.record_nanos(copy).map_err(BenchError::msg)?;
            progress.inc(1);
        }
        let ns_per_wqe = samples.summary();
        let copy_ns_per_wqe = copies.summary();
        rows.push(SoftnicRow {
            kind,
            wqes_per_s_p50: 1e9 / ns_per_wqe.p50,
            copies_per_wqe_p50: if copy_ns_per_wqe.p50 > 0.0 {
                ns_per_wqe.p50 / copy_ns_per_wqe.p50
            } else {
                0.0
            },
            ns_per_wqe,
            copy_ns_per_wqe,
        });
    }
    Ok(SoftnicResult {
        params,
        rows,
        target_wqes_per_s: 20e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_executes_and_moves_its_bytes() {
        let params = SoftnicParams {
            round: 8,
            rounds: 1,
            ring_wqebbs: 64,
            kinds: WqeKind::ALL.to_vec(),
        };
        for kind in WqeKind::ALL {
            let mut b = Bench::new(&params).unwrap();
            // Seed remote slot 1 so READ and fetch-add have something to return.
            b.remote
                .buffer()
                .write(64, &0x1122_3344_5566_7788u64.to_be_bytes())
                .unwrap();
            b.round(kind, 8).unwrap();
            let remote = b.remote.buffer().to_vec();
            let local = b.local.buffer().to_vec();
            match kind {
                WqeKind::InlineWrite8 => assert_eq!(remote[64..72], 1u64.to_be_bytes()),
                WqeKind::PointerWrite64 => assert_eq!(remote[64..128], local[64..128]),
                WqeKind::Read64 => {
                    assert_eq!(local[64..72], 0x1122_3344_5566_7788u64.to_be_bytes())
                }
                WqeKind::FetchAdd => {
                    assert_eq!(local[64..72], 0x1122_3344_5566_7788u64.to_be_bytes());
                    assert_eq!(remote[64..72], 0x1122_3344_5566_7789u64.to_be_bytes());
                }
            }
        }
    }
}
