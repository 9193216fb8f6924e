//! Host path: ibgda's CPU post (encode, publish, doorbell record, doorbell) against
//! rdma-core's own `mlx5_post_send` on the oracle's fake objects, one core, same run.
//!
//! Both post the same request, an 8-byte inline RDMA WRITE on RC, one WQE and one 8-byte
//! doorbell per post, on a 256-WQEBB ring with no BlueFlame (rdma-core's `bf_buf_size` 0,
//! so neither side copies the WQE into a BlueFlame register). Ring slots come back as a
//! completion would bring them back:
//! - ibgda: the queue signals one WQE in every 128 (half the ring, its default); when it
//!   does, this loop writes that WQE's requester CQE into the collapsed CQ (as the NIC
//!   would) and polls it. Both are inside ibgda's timed loop.
//! - rdma-core: the oracle moves the provider's `sq.tail` to `sq.head` every 128 posts,
//!   a plain store inside its loop (no CQE is written or polled: in rdma-core's favour).
//!
//! ibgda is measured twice: building the WQE (`RdmaWrite::new(..).inline(..).build()`)
//! every post, and posting one WQE built once, as rdma-core's caller builds its
//! `ibv_send_wr` once; both encode it into the ring every post. Neither lets the compiler
//! fold the request into the loop: the built WQE's address, key and payload bytes come
//! through `black_box` every post (the payload an 8-byte array, whose length the typed
//! builder knows), and the WQE built once is read from memory every post, its payload's
//! length included. rdma-core's provider, compiled apart in C, reads its work request
//! every post. Each side runs `batches` timed batches of `batch` posts, alternating
//! sides, so all see the same machine state; a batch's time divided by its posts is one
//! sample.

use std::hint::black_box;
use std::time::Instant;

use ibgda::cq::CqMode;
use ibgda::queue::{
    CompletionQueueMemory, CompletionQueueNicAccess, Executor, QpConfig, QueuePair, SendQueueMemory,
};
use ibgda::wqe::{Inline, Qpn, RKey, Rc, RdmaWrite, RemoteAddress, RingSize, Wqe};
use ibgda_rdma_core_oracle as oracle;
use serde::{Deserialize, Serialize};

use crate::stats::{Durations, Percentiles};
use crate::BenchError;

const QPN: u32 = 0x00_0b_e0;
const RING_WQEBBS: u32 = 256;
const RETIRE_EVERY: u32 = RING_WQEBBS / 2;
const REMOTE_ADDR: u64 = 0x7000_0000;
const RKEY: u32 = 0x99;
const PAYLOAD: [u8; 8] = 0x0102_0304_0506_0708u64.to_be_bytes();
/// `sop_drop_qpn` opcode byte of an RDMA WRITE requester CQE (the WQE's opcode).
const CQE_OPCODE_RDMA_WRITE: u8 = 0x08;

/// Sizes of the host-post experiment.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct HostPostParams {
    /// Timed batches per side.
    pub batches: u32,
    /// Posts per batch.
    pub batch: u32,
    /// Send ring size in WQEBBs (both sides).
    pub ring_wqebbs: u32,
    /// Posts between two slot retirements (both sides).
    pub retire_every: u32,
    /// Inline payload bytes.
    pub payload_bytes: u32,
}

impl HostPostParams {
    /// The full or the quick size.
    pub fn new(quick: bool) -> Self {
        Self {
            batches: if quick { 20 } else { 200 },
            batch: 16_384,
            ring_wqebbs: RING_WQEBBS,
            retire_every: RETIRE_EVERY,
            payload_bytes: PAYLOAD.len() as u32,
        }
    }
}

/// One side's time per post.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PostSide {
    /// "ibgda" or "rdma-core mlx5_post_send".
    pub name: String,
    /// Time per post, per batch (ns).
    pub ns_per_post: Percentiles,
    /// Posts per second at the median.
    pub posts_per_s_p50: f64,
}

/// The host-post experiment's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostPostResult {
    /// Its sizes.
    pub params: HostPostParams,
    /// ibgda's queue pair, building the WQE every post.
    pub ibgda: PostSide,
    /// ibgda's queue pair posting a WQE built once (the post path alone).
    pub ibgda_prebuilt: PostSide,
    /// rdma-core's provider.
    pub rdma_core: PostSide,
    /// rdma-core's median time per post over ibgda's (above 1: ibgda is faster).
    pub speedup_p50: f64,
    /// The same for the WQE built once.
    pub speedup_prebuilt_p50: f64,
    /// The target for `speedup_p50`.
    pub target: f64,
}

/// The request both sides post: 8 inline bytes to `REMOTE_ADDR`.
///
/// Its inputs pass through [`black_box`], so the compiler cannot fold the constants into
/// the post loop: every post builds, checks and encodes values it reads (the address, the
/// key and the payload's bytes), as rdma-core's provider (compiled apart, in C) reads its
/// `ibv_send_wr` every post. The payload is an 8-byte array, so its length is known where
/// the WQE is built, as in a typed 8-byte put; the WQE built once
/// ([`IbgdaPoster::post_built`]) is read whole from memory, length included.
#[inline(always)]
fn write_wqe() -> Result<Wqe<RdmaWrite<'static, Rc, Inline<'static>>>, BenchError> {
    let payload: &'static [u8; 8] = black_box(&PAYLOAD);
    RdmaWrite::new(RemoteAddress::new(
        black_box(REMOTE_ADDR),
        RKey(black_box(RKEY)),
    ))
    .inline(payload)
    .build()
    .map_err(BenchError::msg)
}

/// ibgda's side: a host queue pair over plain memory and a collapsed one-entry CQ, with
/// the NIC's access to that CQ (this loop plays the NIC).
struct IbgdaPoster {
    qp: QueuePair<Rc>,
    nic_cq: CompletionQueueNicAccess,
    retired_signal: u64,
}

impl IbgdaPoster {
    fn new() -> Result<Self, BenchError> {
        let ring = RingSize::new(RING_WQEBBS as usize).map_err(BenchError::msg)?;
        let sq = SendQueueMemory::allocate(ring).map_err(BenchError::msg)?;
        let cq = CompletionQueueMemory::allocate(1).map_err(BenchError::msg)?;
        let config = QpConfig {
            cq_mode: CqMode::Collapsed,
            ..QpConfig::default()
        };
        let qpn = Qpn::new(QPN).map_err(BenchError::msg)?;
        let qp = QueuePair::new(qpn, sq, cq, config).map_err(BenchError::msg)?;
        // SAFETY: this loop is the only NIC of the queue pair and uses the capability only
        // while `qp` lives (both are fields of this value); the CQEs it writes retire WQEs
        // that name no local memory (the payload is inline), so nothing is released early.
        let executor = Executor::new("the host-post benchmark's completion loop");
        // SAFETY: as above.
        let nic_cq =
            unsafe { qp.cq().memory().nic_access_unchecked(&executor) }.map_err(BenchError::msg)?;
        Ok(Self {
            qp,
            nic_cq,
            retired_signal: 0,
        })
    }

    /// Builds, encodes, publishes and rings one WQE; completes the signaled one when the
    /// queue signals (as the NIC would) and polls it.
    #[inline(always)]
    fn post_one(&mut self) -> Result<(), BenchError> {
        let wqe = write_wqe()?;
        self.post(&wqe)
    }

    /// [`IbgdaPoster::post_one`] with the WQE built once by the caller (as rdma-core's
    /// caller builds its `ibv_send_wr` once): encode, publish, doorbell, completion.
    #[inline(always)]
    fn post_built(&mut self, wqe: &Wqe<RdmaWrite<'_, Rc, Inline<'_>>>) -> Result<(), BenchError> {
        // Read from memory every post, as rdma-core reads its work request.
        self.post(black_box(wqe))
    }

    /// Encodes, publishes and rings `wqe`; completes the signaled one when the queue
    /// signals (as the NIC would) and polls it.
    #[inline(always)]
    fn post(&mut self, wqe: &Wqe<RdmaWrite<'_, Rc, Inline<'_>>>) -> Result<(), BenchError> {
        self.qp.post(wqe, &[]).map_err(BenchError::msg)?;
        let signaled = self.qp.sq().signaled_through();
        if signaled != self.retired_signal {
            self.retired_signal = signaled;
            self.complete_through(signaled - 1)?;
        }
        Ok(())
    }

    /// Writes the requester CQE of the WQE starting at `index` into the collapsed CQ and
    /// polls it (offsets 56 `sop_drop_qpn`, 60 `wqe_counter`, 63 `op_own`).
    fn complete_through(&mut self, index: u64) -> Result<(), BenchError> {
        let mut cqe = [0u8; 64];
        cqe[56..60].copy_from_slice(&(u32::from(CQE_OPCODE_RDMA_WRITE) << 24 | QPN).to_be_bytes());
        cqe[60..62].copy_from_slice(&(index as u16).to_be_bytes());
        cqe[63] = 0;
        self.nic_cq.write_cqe(0, &cqe);
        match self.qp.poll().map_err(BenchError::msg)? {
            Some(_) => Ok(()),
            None => Err(BenchError::Invalid(format!(
                "ibgda host post: the CQE for WQE {index} was not seen"
            ))),
        }
    }
}

/// Runs the experiment.
pub fn run(
    params: HostPostParams,
    progress: &indicatif::ProgressBar,
) -> Result<HostPostResult, BenchError> {
    let mut ibgda = IbgdaPoster::new()?;
    let config = oracle::QpConfig {
        sq_wqebbs: RING_WQEBBS,
        bf_buf_size: 0,
        ..oracle::QpConfig::rc(QPN)
    };
    let mut provider = oracle::OracleQp::new(config).map_err(BenchError::msg)?;
    let wr = oracle::SendWr {
        payload: oracle::Payload::Inline(vec![PAYLOAD.to_vec()]),
        ..oracle::SendWr::new(
            1,
            oracle::Op::Write {
                remote_addr: REMOTE_ADDR,
                rkey: RKEY,
            },
            oracle::Sge {
                addr: 0,
                len: 0,
                lkey: 0,
            },
        )
    };
    let mut ours = Durations::new();
    let mut prebuilt = Durations::new();
    let built = write_wqe()?;
    let mut theirs = Durations::new();
    let posts = f64::from(params.batch);
    progress.set_length(u64::from(params.batches));
    progress.set_message("host post: ibgda vs rdma-core");
    for _ in 0..params.batches {
        let t = Instant::now();
        for _ in 0..params.batch {
            ibgda.post_one()?;
        }
        ours.record_nanos(t.elapsed().as_nanos() as f64 / posts)
            .map_err(BenchError::msg)?;

        let t = Instant::now();
        for _ in 0..params.batch {
            ibgda.post_built(&built)?;
        }
        prebuilt
            .record_nanos(t.elapsed().as_nanos() as f64 / posts)
            .map_err(BenchError::msg)?;

        let t = Instant::now();
        let end = provider
            .post_loop(&wr, u64::from(params.batch), params.retire_every)
            .map_err(BenchError::msg)?;
        theirs
            .record_nanos(t.elapsed().as_nanos() as f64 / posts)
            .map_err(BenchError::msg)?;
        if end != params.batch {
            return Err(BenchError::Invalid(format!(
                "rdma-core posted {end} of {} WQEs",
                params.batch
            )));
        }
        progress.inc(1);
    }
    let side = |name: &str, d: &Durations| {
        let ns_per_post = d.summary();
        PostSide {
            name: name.into(),
            ns_per_post,
            posts_per_s_p50: 1e9 / ns_per_post.p50,
        }
    };
    let ibgda = side("ibgda (build + post)", &ours);
    let ibgda_prebuilt = side("ibgda (post, WQE built once)", &prebuilt);
    let rdma_core = side("rdma-core mlx5_post_send", &theirs);
    Ok(HostPostResult {
        params,
        speedup_p50: rdma_core.ns_per_post.p50 / ibgda.ns_per_post.p50,
        speedup_prebuilt_p50: rdma_core.ns_per_post.p50 / ibgda_prebuilt.ns_per_post.p50,
        ibgda,
        ibgda_prebuilt,
        rdma_core,
        target: 2.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ibgda_side_posts_and_retires_past_the_ring() {
        let mut p = IbgdaPoster::new().unwrap();
        // Three times around the ring: only possible if completions retire slots.
        for _ in 0..3 * RING_WQEBBS {
            p.post_one().unwrap();
        }
        assert_eq!(p.qp.sq().producer(), u64::from(3 * RING_WQEBBS));
        // Every signaled WQE was completed and retired; the unsignaled tail waits.
        let sq = p.qp.sq();
        assert_eq!(sq.retired(), sq.signaled_through());
        assert!(
            sq.retired() > u64::from(2 * RING_WQEBBS),
            "{}",
            sq.retired()
        );
    }
}
