//! A DeepEP-style low-latency MoE dispatch and combine (`cuda/moe.cu`) on the device API,
//! and the same kernels written directly on the builders, R ranks emulated on one GPU:
//! each rank a device of the CUDA software NIC's control plane ([`CudaFabric`]), its
//! buffers reachable by other ranks only through its queue pairs and windows, the CUDA
//! software NIC moving the bytes.
//!
//! Every rank is set up by [`setup_rank`], which takes its rank from a
//! [`Bootstrap`] and its device from any control-plane backend: here the ranks are
//! threads of one process ([`CudaFabric::ranks`]); with a `TcpBootstrap` and the mlx5
//! backend the same function sets up a process per GPU.
//!
//! [`run`] checks dispatch and combine against a CPU reference ([`mod@reference`]) for a
//! random routing (BF16 payloads, or FP8 E4M3 with one scale per 128 values), both with
//! the device API and with the builders, then times each phase of both in the same run.
//! The figures are the CUDA software NIC's (one engine thread per connected pair copying
//! the bytes), not a ConnectX's.

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{LaunchConfig, PushKernelArg};
use serde::Serialize;

use ibgda::memory::DeviceBuffer;
use ibgda::nic::team::{connect_rc, exchange_window, Bootstrap, TeamError};
use ibgda::nic::{
    Backend, Device, MemoryAccess, MemoryRegion, NicError, QueueAllocator, QueueSpec,
    RegisterMemory, Window,
};
use ibgda::order::{GpuReleaseStore, OrderingScope};
use ibgda::queue::{Gpu as GpuPlaced, ProducerStateMemory, QueuePair};
use ibgda::wqe::{Rc, RingSize};

use super::{progress, wait_stream, Summary};
use crate::api::{status, CommOptions, GpuComm, GpuWindow};
use crate::cudanic::CudaFabric;
use crate::gpu::{CompileOptions, Gpu, GpuError};
use crate::nvrtc::{compile_source_with, Compiled};
use crate::softnic::device::DeviceNic;
use crate::softnic::state as nic_state;

/// The kernels' source.
pub const MOE_CU: &str = include_str!("../../cuda/moe.cu");

/// The scope every rank's queue pairs are posted with.
pub type MoeScope = GpuReleaseStore;

/// Values per FP8 scale.
pub const FP8_BLOCK: usize = 128;
/// Iterations whose phase stamps the kernels keep.
pub const MAX_ITERS: usize = 512;
/// Stamps per iteration and rank: dispatch start, sent, received; combine start, sent,
/// done.
pub const STAMPS: usize = 6;

/// The windows of a rank, in the order of the device array.
pub const WINDOWS: usize = 5;
/// The send window: x, the FP8 staging, top-k experts and weights, the combined output,
/// the phase stamps.
pub const W_SEND: usize = 0;
/// The receive window: dispatch slots, then their meta words.
pub const W_RECV: usize = 1;
/// The combine window: the expert outputs sent back.
pub const W_COMBINE: usize = 2;
/// The signal window: counts, the combine count, local bookkeeping; its buffer has the
/// 64-byte scratch word after the window.
pub const W_SIGNAL: usize = 3;
/// The expert window (FP8: the dequantized expert outputs).
pub const W_EXPERT: usize = 4;

/// What runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MoeParams {
    /// Ranks (emulated on one GPU).
    pub ranks: usize,
    /// Tokens per rank.
    pub tokens: usize,
    /// Hidden size (a multiple of 128).
    pub hidden: usize,
    /// Experts per token.
    pub topk: usize,
    /// Experts (a multiple of the ranks).
    pub experts: usize,
    /// FP8 E4M3 payloads with a scale per 128 values (BF16 otherwise).
    pub fp8: bool,
    /// Blocks per rank (256 threads each).
    pub blocks_per_rank: usize,
    /// CUDA software NIC engines (each a block, serving whole connected pairs).
    pub engines: usize,
    /// Timed iterations of each variant.
    pub iterations: usize,
    /// Untimed iterations first.
    pub warmup: usize,
    /// Seed of the routing, weights and tokens.
    pub seed: u64,
}

impl MoeParams {
    /// DeepEP's low-latency shape: 8 ranks, 128 tokens each, hidden 7168, top-8 of 256
    /// experts, BF16.
    pub fn deepep(fp8: bool) -> Self {
        Self {
            ranks: 8,
            tokens: 128,
            hidden: 7168,
            topk: 8,
            experts: 256,
            fp8,
            blocks_per_rank: 16,
            engines: 36,
            iterations: 50,
            warmup: 5,
            seed: 0x5eed_0e1e,
        }
    }

    /// Checks the shape the kernels assume.
    pub fn check(&self) -> Result<(), GpuError> {
        let bad = |what: String| Err(GpuError::Invalid(what));
        if self.ranks == 0 || self.experts % self.ranks != 0 {
            return bad(format!(
                "{} experts over {} ranks",
                self.experts, self.ranks
            ));
        }
        if self.hidden == 0 || self.hidden % FP8_BLOCK != 0 {
            return bad(format!(
                "hidden {} not a multiple of {FP8_BLOCK}",
                self.hidden
            ));
        }
        if self.tokens == 0 || self.tokens > 0xffff || self.topk == 0 || self.topk > self.experts {
            return bad(format!(
                "{} tokens, top-{} of {}",
                self.tokens, self.topk, self.experts
            ));
        }
        if self.blocks_per_rank == 0 || self.engines == 0 {
            return bad("no blocks or no engines".into());
        }
        if self.warmup + self.iterations + 2 > MAX_ITERS / 2 {
            return bad(format!("at most {} iterations", MAX_ITERS / 2 - 2));
        }
        Ok(())
    }

    /// Experts per rank.
    pub fn local_experts(&self) -> usize {
        self.experts / self.ranks
    }

    /// Bytes of one dispatched token.
    pub fn message_bytes(&self) -> usize {
        if self.fp8 {
            self.hidden + self.hidden / FP8_BLOCK * 4
        } else {
            self.hidden * 2
        }
    }
}

/// Where everything lies in a rank's windows (byte offsets), and the windows' sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MoeLayout {
    /// x, BF16 `[tokens][hidden]`.
    pub x: usize,
    /// The FP8 messages `[tokens]`.
    pub staging: usize,
    /// Top-k expert ids, i32 `[tokens][topk]`.
    pub topk: usize,
    /// Top-k weights, f32 `[tokens][topk]`.
    pub weights: usize,
    /// The combined output, BF16 `[tokens][hidden]`.
    pub out: usize,
    /// Phase stamps, u64 `[MAX_ITERS][STAMPS]`.
    pub stamps: usize,
    /// Meta words in the receive window.
    pub meta: usize,
    /// The combine count in the signal window.
    pub combine_count: usize,
    /// Last count value seen, per (local expert, source).
    pub last: usize,
    /// This iteration's counts, u32 per (local expert, source).
    pub counts: usize,
    /// Sizes of the five windows.
    pub sizes: [usize; WINDOWS],
}

fn up(at: usize) -> usize {
    at.next_multiple_of(256)
}

impl MoeLayout {
    /// The layout of `p`.
    pub fn of(p: &MoeParams) -> Self {
        let (t, h, k) = (p.tokens, p.hidden, p.topk);
        let x = 0;
        let staging = up(x + t * h * 2);
        let topk = up(staging + if p.fp8 { t * p.message_bytes() } else { 0 });
        let weights = up(topk + t * k * 4);
        let out = up(weights + t * k * 4);
        let stamps = up(out + t * h * 2);
        let send = up(stamps + MAX_ITERS * STAMPS * 8);
        let slots = p.local_experts() * p.ranks * t;
        let meta = up(slots * p.message_bytes());
        let recv = up(meta + slots * 8);
        let combine = up(t * k * h * 2);
        let pairs = p.local_experts() * p.ranks;
        let combine_count = pairs * 8;
        let last = up(combine_count + 8);
        let counts = up(last + pairs * 8);
        let signal = up(counts + pairs * 4);
        let expert = if p.fp8 { up(slots * h * 2) } else { 256 };
        Self {
            x,
            staging,
            topk,
            weights,
            out,
            stamps,
            meta,
            combine_count,
            last,
            counts,
            sizes: [send, recv, combine, signal, expert],
        }
    }

    /// The generated header `moe_layout.h` the kernels include.
    pub fn header(&self, p: &MoeParams) -> String {
        let mut o = String::from(
            "/* moe_layout.h: GENERATED by ibgda_kernels::experiments::moe::MoeLayout::header. */\n\
             #pragma once\n",
        );
        let mut c = |name: &str, v: u64| o.push_str(&format!("#define MOE_{name} {v}ull\n"));
        c("RANKS", p.ranks as u64);
        c("TOKENS", p.tokens as u64);
        c("HIDDEN", p.hidden as u64);
        c("TOPK", p.topk as u64);
        c("EXPERTS", p.experts as u64);
        c("LOCAL_EXPERTS", p.local_experts() as u64);
        c("BLOCK", FP8_BLOCK as u64);
        c("SCALES", (p.hidden / FP8_BLOCK) as u64);
        c("FP8", p.fp8.into());
        c("MSG_BYTES", p.message_bytes() as u64);
        c("OUT_BYTES", (p.hidden * 2) as u64);
        c("BLOCKS", p.blocks_per_rank as u64);
        c("WINDOWS", WINDOWS as u64);
        for (name, w) in [
            ("W_SEND", W_SEND),
            ("W_RECV", W_RECV),
            ("W_COMBINE", W_COMBINE),
            ("W_SIGNAL", W_SIGNAL),
            ("W_EXPERT", W_EXPERT),
        ] {
            c(name, w as u64);
        }
        c("X_OFF", self.x as u64);
        c("STAGING_OFF", self.staging as u64);
        c("TOPK_OFF", self.topk as u64);
        c("WEIGHTS_OFF", self.weights as u64);
        c("OUT_OFF", self.out as u64);
        c("STAMPS_OFF", self.stamps as u64);
        c("MAX_ITERS", MAX_ITERS as u64);
        c("STAMPS", STAMPS as u64);
        for (i, name) in [
            "DISPATCH_START",
            "DISPATCH_SENT",
            "DISPATCH_RECEIVED",
            "COMBINE_START",
            "COMBINE_SENT",
            "COMBINE_DONE",
        ]
        .iter()
        .enumerate()
        {
            c(&format!("STAMP_{name}"), i as u64);
        }
        c("META_OFF", self.meta as u64);
        c("COMBINE_COUNT_OFF", self.combine_count as u64);
        c("LAST_OFF", self.last as u64);
        c("COUNTS_OFF", self.counts as u64);
        o.push_str(&format!("#define MOE_SCOPE {}\n", MoeScope::NAME));
        o
    }
}

/// The CPU reference: numerics as the kernels compute them, the routing, and what every
/// rank's buffers must hold after dispatch and combine.
pub mod reference {
    use super::{MoeParams, FP8_BLOCK};

    /// BF16 (its bits) to f32.
    pub fn bf16_to_f32(b: u16) -> f32 {
        f32::from_bits(u32::from(b) << 16)
    }

    /// f32 to BF16, round to nearest even (finite inputs).
    pub fn f32_to_bf16(f: f32) -> u16 {
        let bits = f.to_bits();
        ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
    }

    /// f32 to FP8 E4M3, round to nearest even, saturating at 448.
    pub fn f32_to_e4m3(f: f32) -> u8 {
        let sign = ((f.to_bits() >> 31) << 7) as u8;
        let a = f.abs();
        if a == 0.0 {
            return sign;
        }
        let e = ((a.to_bits() >> 23) & 0xff) as i32 - 127;
        if e < -6 {
            let m = (a * 512.0).round_ties_even();
            return sign | m as u8;
        }
        let mut m = (a * 2f32.powi(3 - e)).round_ties_even();
        let mut ex = e;
        if m >= 16.0 {
            m = 8.0;
            ex += 1;
        }
        if ex > 8 || (ex == 8 && m > 14.0) {
            return sign | 0x7e;
        }
        sign | (((ex + 7) as u8) << 3) | (m as u8 - 8)
    }

    /// FP8 E4M3 to f32.
    pub fn e4m3_to_f32(q: u8) -> f32 {
        let s = if q & 0x80 != 0 { -1.0 } else { 1.0 };
        let (ex, m) = (i32::from((q >> 3) & 0xf), f32::from(q & 7));
        if ex == 0 {
            s * m * 2f32.powi(-9)
        } else {
            s * (8.0 + m) * 2f32.powi(ex - 10)
        }
    }

    /// A token's FP8 message: the E4M3 values, then one f32 scale (native bytes) per
    /// block of 128 (scale = block max / 448, 1 for an all-zero block).
    pub fn quantize(x: &[u16]) -> Vec<u8> {
        let mut msg = vec![0u8; x.len() + x.len() / FP8_BLOCK * 4];
        for (b, block) in x.chunks(FP8_BLOCK).enumerate() {
            let v: Vec<f32> = block.iter().map(|&h| bf16_to_f32(h)).collect();
            let amax = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let scale = if amax == 0.0 { 1.0 } else { amax / 448.0 };
            for (i, x) in v.iter().enumerate() {
                msg[b * FP8_BLOCK + i] = f32_to_e4m3(x / scale);
            }
            let at = x.len() + b * 4;
            msg[at..at + 4].copy_from_slice(&scale.to_ne_bytes());
        }
        msg
    }

    /// The BF16 expert output of an FP8 message (dequantized).
    pub fn dequantize(msg: &[u8], hidden: usize) -> Vec<u16> {
        (0..hidden)
            .map(|h| {
                let b = h / FP8_BLOCK;
                let at = hidden + b * 4;
                let scale = f32::from_ne_bytes(msg[at..at + 4].try_into().expect("a scale"));
                f32_to_bf16(e4m3_to_f32(msg[h]) * scale)
            })
            .collect()
    }

    /// splitmix64: the reference's only randomness.
    pub fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// One rank's inputs: tokens, their top-k distinct experts and weights.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Inputs {
        /// BF16 `[tokens][hidden]`.
        pub x: Vec<u16>,
        /// `[tokens][topk]`.
        pub topk: Vec<i32>,
        /// `[tokens][topk]`.
        pub weights: Vec<f32>,
    }

    /// Every rank's inputs, from the seed.
    pub fn inputs(p: &MoeParams) -> Vec<Inputs> {
        let mut s = p.seed;
        (0..p.ranks)
            .map(|_| {
                let x = (0..p.tokens * p.hidden)
                    .map(|_| {
                        // Values in about [-4, 4): sign, exponent 126..129, mantissa.
                        let r = splitmix(&mut s);
                        let exp = 125 + (r % 5) as u32;
                        let bits = ((r >> 8) as u32 & 0x8000_0000)
                            | (exp << 23)
                            | ((r >> 16) as u32 & 0x007f_0000);
                        f32_to_bf16(f32::from_bits(bits))
                    })
                    .collect();
                let mut topk = Vec::with_capacity(p.tokens * p.topk);
                let mut weights = Vec::with_capacity(p.tokens * p.topk);
                for _ in 0..p.tokens {
                    let mut pool: Vec<i32> = (0..p.experts as i32).collect();
                    for k in 0..p.topk {
                        let j = k + (splitmix(&mut s) % (p.experts - k) as u64) as usize;
                        pool.swap(k, j);
                        topk.push(pool[k]);
                        weights.push((splitmix(&mut s) >> 40) as f32 / (1u64 << 24) as f32);
                    }
                }
                Inputs { x, topk, weights }
            })
            .collect()
    }

    /// The message rank `src` sends for token `t`.
    pub fn message(p: &MoeParams, inputs: &Inputs, t: usize) -> Vec<u8> {
        let x = &inputs.x[t * p.hidden..(t + 1) * p.hidden];
        if p.fp8 {
            quantize(x)
        } else {
            x.iter().flat_map(|v| v.to_ne_bytes()).collect()
        }
    }

    /// What rank `r` receives for (local expert, source rank): the (token, k) pairs in
    /// token order.
    pub fn received(
        p: &MoeParams,
        all: &[Inputs],
        r: usize,
        e_local: usize,
        src: usize,
    ) -> Vec<(usize, usize)> {
        let e = (r * p.local_experts() + e_local) as i32;
        (0..p.tokens)
            .filter_map(|t| {
                (0..p.topk)
                    .find(|&k| all[src].topk[t * p.topk + k] == e)
                    .map(|k| (t, k))
            })
            .collect()
    }

    /// Rank `src`'s combined output: per token, BF16 of the weighted sum (fused
    /// multiply-adds in k order) of its experts' outputs (the token itself on BF16, its
    /// dequantized FP8 message on FP8).
    pub fn combined(p: &MoeParams, inputs: &Inputs) -> Vec<u16> {
        let mut out = vec![0u16; p.tokens * p.hidden];
        for t in 0..p.tokens {
            let y: Vec<u16> = if p.fp8 {
                dequantize(&message(p, inputs, t), p.hidden)
            } else {
                inputs.x[t * p.hidden..(t + 1) * p.hidden].to_vec()
            };
            for h in 0..p.hidden {
                let mut acc = 0.0f32;
                for k in 0..p.topk {
                    acc = inputs.weights[t * p.topk + k].mul_add(bf16_to_f32(y[h]), acc);
                }
                out[t * p.hidden + h] = f32_to_bf16(acc);
            }
        }
        out
    }
}

/// One rank's device, queue pairs, registrations and windows.
pub struct MoeRank<B: Backend> {
    /// Its windows, by [`WINDOWS`] index (dropped before the registrations).
    pub windows: Vec<Window>,
    /// Its registrations (the windows', then the scratch word's).
    pub regions: Vec<MemoryRegion<B>>,
    /// Its queue pair to every rank.
    pub queues: Vec<QueuePair<Rc, GpuPlaced, MoeScope>>,
    /// Its window buffers.
    pub buffers: Vec<Arc<DeviceBuffer>>,
    /// The device.
    pub device: Device<B>,
}

/// One rank's setup, whatever gives it its rank and its device: a queue pair to every
/// rank (memory from `queue_memory`, producer state from `state`), its window buffers
/// (`buffers`, sized by [`MoeLayout`], the last 64 bytes of the signal buffer its
/// scratch word) registered and exchanged as windows.
pub fn setup_rank<B: Backend>(
    bootstrap: &dyn Bootstrap,
    device: Device<B>,
    queue_memory: &dyn QueueAllocator<GpuPlaced>,
    state: &dyn Fn() -> Result<ProducerStateMemory<GpuPlaced>, NicError>,
    buffers: Vec<Arc<DeviceBuffer>>,
    layout: &MoeLayout,
) -> Result<MoeRank<B>, TeamError> {
    let pd = device.alloc_pd()?;
    let spec = QueueSpec::new(RingSize::new(1024).map_err(NicError::Queue)?);
    let queues = connect_rc(
        bootstrap,
        &pd,
        spec,
        queue_memory,
        state,
        MoeScope::default(),
    )?;
    let rw = MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_WRITE | MemoryAccess::REMOTE_ATOMIC;
    let mut regions = Vec::new();
    let mut windows = Vec::new();
    for (w, buffer) in buffers.iter().enumerate() {
        let region = pd.register_memory(
            RegisterMemory::Gpu {
                buffer: buffer.clone(),
                offset: 0,
                len: layout.sizes[w],
            },
            rw,
        )?;
        windows.push(exchange_window(bootstrap, &region, w as u32)?);
        regions.push(region);
    }
    regions.push(pd.register_memory(
        RegisterMemory::Gpu {
            buffer: buffers[W_SIGNAL].clone(),
            offset: layout.sizes[W_SIGNAL],
            len: 64,
        },
        MemoryAccess::LOCAL_WRITE,
    )?);
    Ok(MoeRank {
        windows,
        regions,
        queues,
        buffers,
        device,
    })
}

/// The builders' tables `cuda/moe.cu`'s raw kernels read, for `ranks` in launch order
/// (slots): `remote`, per slot, per peer, per window, the peer's (base, rkey); `local`,
/// per slot, per window, its own (base, lkey), then its scratch word's (address, lkey).
/// They name what the device API's window tables name (every rank has `WINDOWS` windows
/// of `peers` peers and its scratch registration after their registrations).
pub fn raw_rows<B: Backend>(
    ranks: &[&MoeRank<B>],
    peers: usize,
) -> Result<(Vec<u64>, Vec<u64>), String> {
    let mut remote = Vec::new();
    let mut local = Vec::new();
    for (r, rank) in ranks.iter().enumerate() {
        if rank.windows.len() != WINDOWS
            || rank.regions.len() <= WINDOWS
            || rank.windows.iter().any(|w| w.n_peers() != peers)
        {
            return Err(format!(
                "slot {r}: {} windows, {} registrations, for {peers} ranks",
                rank.windows.len(),
                rank.regions.len(),
            ));
        }
        for peer in 0..peers {
            for w in &rank.windows {
                let e = w.peers()[peer];
                remote.extend_from_slice(&[e.addr, u64::from(e.rkey.0)]);
            }
        }
        for w in &rank.windows {
            let l = w.local_side();
            local.extend_from_slice(&[l.addr, u64::from(l.lkey.0)]);
        }
        let s = &rank.regions[WINDOWS];
        local.extend_from_slice(&[s.addr(), u64::from(s.lkey().0)]);
    }
    Ok((remote, local))
}

/// [`raw_rows`] of every rank of one launch, ranks in rank order.
pub fn raw_tables<B: Backend>(ranks: &[MoeRank<B>]) -> Result<(Vec<u64>, Vec<u64>), String> {
    let all: Vec<&MoeRank<B>> = ranks.iter().collect();
    raw_rows(&all, ranks.len())
}

/// One phase's latency over the iterations (µs), from the kernel's events and from its
/// stamps.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PhaseStats {
    /// The kernel, between events before and after it on its stream, ns.
    pub kernel_ns: Summary,
    /// Until every rank had posted (stamps: latest rank), ns from the first block's start.
    pub sent_ns: Summary,
    /// Until every rank had what it waits for, ns from the first block's start.
    pub done_ns: Summary,
}

/// One variant (device API or builders).
#[derive(Clone, Debug, Default, Serialize)]
pub struct VariantResult {
    /// `typed` (the device API) or `raw` (the builders).
    pub name: String,
    /// FP8 quantization kernel (FP8 only), ns.
    pub quantize_ns: Summary,
    /// Dispatch.
    pub dispatch: PhaseStats,
    /// Combine.
    pub combine: PhaseStats,
    /// Dispatch + combine (+ quantize) kernels per iteration, ns.
    pub total_ns: Summary,
    /// Whether its one checked iteration matched the CPU reference byte for byte.
    pub checked: bool,
}

/// The experiment's result.
#[derive(Clone, Debug, Serialize)]
pub struct MoeResult {
    /// Parameters.
    pub params: MoeParams,
    /// Bytes dispatched per iteration (all ranks).
    pub dispatch_bytes: u64,
    /// The device API's kernels.
    pub typed: VariantResult,
    /// The same kernels on the builders.
    pub raw: VariantResult,
    /// typed / raw, p50 of the total.
    pub typed_over_raw: f64,
    /// The target of that ratio: 1.00 +- 0.02.
    pub target: (f64, f64),
    /// What the figures are.
    pub note: String,
}

impl MoeResult {
    /// Whether a check failed or the ratio missed its target.
    pub fn failed(&self) -> bool {
        !self.typed.checked
            || !self.raw.checked
            || self.typed_over_raw < self.target.0
            || self.typed_over_raw > self.target.1
    }
}

pub(crate) fn bytes_of<T: Copy>(v: &[T]) -> Vec<u8> {
    // SAFETY: plain `#[repr(C)]` records or numbers without padding: initialised bytes.
    unsafe { core::slice::from_raw_parts(v.as_ptr().cast::<u8>(), core::mem::size_of_val(v)) }
        .to_vec()
}

fn invalid(what: String) -> GpuError {
    GpuError::Invalid(what)
}

/// Compiles the kernels for `p` with `options`.
pub fn compile_for(p: &MoeParams, options: &CompileOptions) -> Result<Compiled, GpuError> {
    p.check()?;
    let header = MoeLayout::of(p).header(p);
    compile_source_with("moe.cu", MOE_CU, options, &[("moe_layout.h", &header)], &[])
}

/// Runs the experiment on GPU `gpu` (see the [module documentation](crate::experiments::moe)).
pub fn run(gpu: Arc<Gpu>, p: MoeParams) -> Result<MoeResult, GpuError> {
    p.check()?;
    let layout = MoeLayout::of(&p);
    progress(&format!(
        "MoE: {} ranks x {} tokens, hidden {}, top-{} of {} experts, {}",
        p.ranks,
        p.tokens,
        p.hidden,
        p.topk,
        p.experts,
        if p.fp8 { "FP8" } else { "BF16" }
    ));
    let compiled = compile_for(&p, gpu.options())?;
    let functions = gpu.load_compiled(&compiled)?;
    let function = |name: &str| {
        functions
            .get(name)
            .cloned()
            .ok_or_else(|| invalid(format!("moe.cu has no {name}")))
    };
    let inputs = reference::inputs(&p);
    // Every rank on a thread of its own, through the seam a process per GPU would use.
    let fabric = CudaFabric::new(gpu.clone());
    let ranks = fabric
        .ranks(p.ranks, |b, device| {
            let buffers = layout
                .sizes
                .iter()
                .enumerate()
                .map(|(w, &len)| {
                    gpu.device_buffer(len + if w == W_SIGNAL { 64 } else { 0 })
                        .map(Arc::new)
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    TeamError::Nic(NicError::Unsupported {
                        what: e.to_string(),
                    })
                })?;
            setup_rank(
                b,
                device,
                fabric.queue_memory(),
                &|| fabric.producer_state(),
                buffers,
                &layout,
            )
        })
        .map_err(|e| invalid(format!("ranks: {e}")))?
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("rank setup: {e}")))?;
    // Inputs into each rank's send window; the stamps' starts at their largest value.
    for (r, rank) in ranks.iter().enumerate() {
        let send = &rank.buffers[W_SEND];
        gpu.write_device(send, layout.x, &bytes_of(&inputs[r].x))?;
        gpu.write_device(send, layout.topk, &bytes_of(&inputs[r].topk))?;
        gpu.write_device(send, layout.weights, &bytes_of(&inputs[r].weights))?;
        let mut stamps = vec![0u64; MAX_ITERS * STAMPS];
        for i in 0..MAX_ITERS {
            stamps[i * STAMPS] = u64::MAX;
            stamps[i * STAMPS + 3] = u64::MAX;
        }
        gpu.write_device(send, layout.stamps, &bytes_of(&stamps))?;
    }
    // Communicators, windows and the builders' tables, in device memory.
    let mut comms = Vec::new();
    for (r, rank) in ranks.iter().enumerate() {
        let queues: Vec<_> = rank.queues.iter().collect();
        comms.push(GpuComm::new(
            &gpu,
            r,
            &queues,
            &rank.regions[WINDOWS],
            CommOptions {
                wait: Duration::from_secs(10),
                ..CommOptions::default()
            },
        )?);
    }
    let gpu_windows = ranks
        .iter()
        .flat_map(|rank| rank.windows.iter().map(|w| GpuWindow::new(&gpu, w)))
        .collect::<Result<Vec<_>, _>>()?;
    let comm_table: Vec<_> = comms.iter().map(|c| *c.device()).collect();
    let window_table: Vec<_> = gpu_windows.iter().map(|w| *w.device()).collect();
    let comms_buf = gpu.device_buffer_from(&bytes_of(&comm_table))?;
    let windows_buf = gpu.device_buffer_from(&bytes_of(&window_table))?;
    let (remote, local) = raw_tables(&ranks).map_err(invalid)?;
    let remote_buf = gpu.device_buffer_from(&bytes_of(&remote))?;
    let local_buf = gpu.device_buffer_from(&bytes_of(&local))?;
    let status_word = gpu.device_buffer(4)?;
    let devices: Vec<_> = ranks.iter().map(|r| r.device.backend()).collect();
    let all: Vec<&QueuePair<Rc, GpuPlaced, MoeScope>> =
        ranks.iter().flat_map(|r| r.queues.iter()).collect();
    let max_message = (p.message_bytes().max(p.hidden * 2) as u64).next_multiple_of(4096);
    let cfg = LaunchConfig {
        grid_dim: ((p.ranks * p.blocks_per_rank) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let quantize = function("moe_quantize")?;
    let dispatch = [
        function("moe_dispatch_typed")?,
        function("moe_dispatch_raw")?,
    ];
    let combine = [function("moe_combine_typed")?, function("moe_combine_raw")?];
    // Every block of a launch waits for others: all of them (and the NIC's engines) must
    // be resident at once.
    let sms = gpu.context().attribute(
        cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    )? as usize;
    for f in dispatch.iter().chain(&combine) {
        let per_sm = f.occupancy_max_active_blocks_per_multiprocessor(256, 0, None)? as usize;
        // The engines' blocks take an SM's slot each, at worst.
        if per_sm * sms < p.ranks * p.blocks_per_rank + p.engines {
            return Err(invalid(format!(
                "{} blocks per rank x {} ranks + {} engines cannot all be resident \
                 ({per_sm} blocks per SM, {sms} SMs)",
                p.blocks_per_rank, p.ranks, p.engines
            )));
        }
    }
    let stream = gpu.stream();
    let iteration = std::cell::Cell::new(0u32);
    // One iteration of variant `v` (0 typed, 1 raw): launch times (ns) of quantize,
    // dispatch and combine.
    let step = |v: usize| -> Result<[u64; 3], GpuError> {
        let mut times = [0u64; 3];
        let i = iteration.get();
        iteration.set(i + 1);
        // The kernel's time between two events of its stream (the host waits with a bound).
        let timed = |f: &dyn Fn() -> Result<(), GpuError>| -> Result<u64, GpuError> {
            let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = stream.record_event(timing)?;
            f()?;
            let end = stream.record_event(timing)?;
            wait_stream(&gpu, "a MoE kernel", super::HOST_WAIT_LIMIT)?;
            Ok((f64::from(start.elapsed_ms(&end)?) * 1e6) as u64)
        };
        if p.fp8 {
            times[0] = timed(&|| {
                let mut b = stream.launch_builder(&quantize);
                let (c, w) = (comms_buf.addr(), windows_buf.addr());
                b.arg(&c).arg(&w);
                // SAFETY: moe_quantize(const DeviceComm*, const DeviceWindow*): the tables
                // above; it writes only each rank's own send window.
                unsafe { b.launch(cfg) }?;
                Ok(())
            })?;
        }
        for (k, f) in [(1, &dispatch[v]), (2, &combine[v])] {
            times[k] = timed(&|| {
                let mut b = stream.launch_builder(f);
                let (c, w, rem, loc) = (
                    comms_buf.addr(),
                    windows_buf.addr(),
                    remote_buf.addr(),
                    local_buf.addr(),
                );
                b.arg(&c).arg(&w);
                if v == 1 {
                    b.arg(&rem).arg(&loc);
                }
                let st = status_word.addr();
                b.arg(&i).arg(&st);
                // SAFETY: moe_{dispatch,combine}_{typed,raw}(const DeviceComm*, const
                // DeviceWindow*, [const u64* remote, const u64* local,] u32, int*): the
                // tables allocated above, alive until the NIC stops; the kernels reach
                // other ranks only through the communicators' queue pairs.
                unsafe { b.launch(cfg) }?;
                Ok(())
            })?;
        }
        Ok(times)
    };
    // One NIC for the whole run (its engines keep each queue's consumer counter):
    // stopped only to read and clear buffers, which must not happen while it runs.
    let mut nic = fabric.device_nic(&gpu, &devices, &all, p.engines, max_message)?;
    // A checked iteration of each variant (buffers cleared before each), the device API's
    // first unless IBGDA_MOE_RAW_FIRST=1 (which tells a variant's own failure from one of
    // the second step on a restarted NIC).
    let mut checked = [false; 2];
    let order = if std::env::var_os("IBGDA_MOE_RAW_FIRST").is_some_and(|v| v == "1") {
        [1, 0]
    } else {
        [0, 1]
    };
    for v in order {
        for rank in &ranks {
            for w in [W_RECV, W_COMBINE] {
                gpu.write_device(&rank.buffers[w], 0, &vec![0u8; layout.sizes[w]])?;
            }
            gpu.write_device(
                &rank.buffers[W_SEND],
                layout.out,
                &vec![0u8; p.tokens * p.hidden * 2],
            )?;
        }
        gpu.write_device(&status_word, 0, &[0u8; 4])?;
        // A copy from pageable memory may return before its DMA lands, and the kernels'
        // streams do not wait for it: the cleared buffers and status word first.
        gpu.synchronize()?;
        nic.start()?;
        let r = step(v);
        nic.stop()?;
        if let Err(e) = r {
            // The step's own error, as it was (a caller may tell a hung GPU from it).
            let report = nic_report(&nic).unwrap_or_default();
            if !report.is_empty() {
                progress(&format!("MoE: variant {v}, the NIC after the step{report}"));
            }
            return Err(e);
        }
        let s = i32::from_ne_bytes(
            gpu.read_device(&status_word)?[..4]
                .try_into()
                .expect("4 bytes"),
        );
        // A wait that ends at its deadline says only that something never came: what the
        // NIC's engines and queue pairs hold says whether the NIC stopped or a queue pair
        // failed.
        let report = nic_report(&nic)?;
        if s != 0 || !report.is_empty() {
            return Err(invalid(format!(
                "variant {v}: status {}{report}",
                status(s)
            )));
        }
        checked[v] = check(&gpu, &p, &layout, &ranks, &inputs)?;
        progress(&format!(
            "MoE: {} checked: {}",
            ["typed", "raw"][v],
            checked[v]
        ));
    }
    // Timed iterations, the variants alternating.
    nic.start()?;
    let mut samples: [Vec<[u64; 3]>; 2] = [Vec::new(), Vec::new()];
    let first = iteration.get();
    let mut outcome = Ok(());
    let total = p.warmup + p.iterations;
    for n in 0..total {
        let mut took = [0u64; 2];
        for (v, s) in samples.iter_mut().enumerate() {
            match step(v) {
                Ok(t) => {
                    took[v] = t.iter().sum();
                    if n >= p.warmup {
                        s.push(t);
                    }
                }
                Err(e) => outcome = Err(e),
            }
        }
        // Where a long run is (a step moves every rank's tokens through the software NIC).
        if outcome.is_ok() && (n < 2 || (n + 1) % 10 == 0 || n + 1 == total) {
            progress(&format!(
                "MoE: iteration {}/{total}: typed {:.1} ms, raw {:.1} ms",
                n + 1,
                took[0] as f64 / 1e6,
                took[1] as f64 / 1e6
            ));
        }
        if outcome.is_err() {
            break;
        }
    }
    nic.stop()?;
    if let Err(e) = outcome {
        let report = nic_report(&nic).unwrap_or_default();
        if !report.is_empty() {
            progress(&format!(
                "MoE: timed iterations, the NIC after them{report}"
            ));
        }
        return Err(e);
    }
    let s = i32::from_ne_bytes(
        gpu.read_device(&status_word)?[..4]
            .try_into()
            .expect("4 bytes"),
    );
    let report = nic_report(&nic)?;
    if s != 0 || !report.is_empty() {
        return Err(invalid(format!(
            "timed iterations: status {}{report}",
            status(s)
        )));
    }
    let stamps: Vec<Vec<u64>> = ranks
        .iter()
        .map(|r| {
            gpu.read_device(&r.buffers[W_SEND]).map(|b| {
                b[layout.stamps..layout.stamps + MAX_ITERS * STAMPS * 8]
                    .chunks(8)
                    .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
                    .collect()
            })
        })
        .collect::<Result<_, _>>()?;
    let variant = |v: usize| -> VariantResult {
        let iters: Vec<u32> = (0..(p.warmup + p.iterations) as u32)
            .filter(|n| *n as usize >= p.warmup)
            .map(|n| first + 2 * n + v as u32)
            .collect();
        let phase = |start: usize, sent: usize, done: usize, kernel: usize| {
            let span = |which: usize| -> Vec<u64> {
                iters
                    .iter()
                    .map(|&i| {
                        let at = (i as usize % MAX_ITERS) * STAMPS;
                        let t0 = stamps.iter().map(|s| s[at + start]).min().unwrap_or(0);
                        let t1 = stamps.iter().map(|s| s[at + which]).max().unwrap_or(0);
                        t1.saturating_sub(t0)
                    })
                    .collect()
            };
            PhaseStats {
                kernel_ns: Summary::of(&samples[v].iter().map(|t| t[kernel]).collect::<Vec<_>>()),
                sent_ns: Summary::of(&span(sent)),
                done_ns: Summary::of(&span(done)),
            }
        };
        VariantResult {
            name: ["typed", "raw"][v].into(),
            quantize_ns: Summary::of(&samples[v].iter().map(|t| t[0]).collect::<Vec<_>>()),
            dispatch: phase(0, 1, 2, 1),
            combine: phase(3, 4, 5, 2),
            total_ns: Summary::of(
                &samples[v]
                    .iter()
                    .map(|t| t.iter().sum())
                    .collect::<Vec<_>>(),
            ),
            checked: checked[v],
        }
    };
    let (typed, raw) = (variant(0), variant(1));
    let ratio = typed.total_ns.p50 as f64 / raw.total_ns.p50.max(1) as f64;
    let dispatch_bytes = (0..p.ranks)
        .map(|src| {
            (0..p.ranks)
                .map(|r| {
                    (0..p.local_experts())
                        .map(|e| reference::received(&p, &inputs, r, e, src).len())
                        .sum::<usize>()
                })
                .sum::<usize>()
        })
        .sum::<usize>() as u64
        * p.message_bytes() as u64;
    Ok(MoeResult {
        params: p,
        dispatch_bytes,
        typed,
        raw,
        typed_over_raw: ratio,
        target: (0.98, 1.02),
        note: format!(
            "the CUDA software NIC's figures ({} engines, one thread each copying the bytes), not a ConnectX's; \
             kernel times between CUDA events, phase spans from %globaltimer stamps",
            p.engines
        ),
    })
}

/// What the stopped NIC tells of a step: every engine that stopped by itself (its status:
/// idle past the compile-time spin limit, or a livelock) and every queue pair in error
/// (why, the syndromes, the failing WQE's index), each engine's WQEs executed, failed and
/// flushed beside it. Empty when no engine stopped and no queue pair is in error.
pub(crate) fn nic_report(nic: &DeviceNic<'_>) -> Result<String, GpuError> {
    let mut o = String::new();
    for (i, (e, t)) in nic.read()?.iter().enumerate() {
        let failed: Vec<String> = t
            .queues
            .iter()
            .filter(|q| q.state == nic_state::ERROR)
            .map(|q| {
                format!(
                    "queue pair {:#x} in error (kind {}, syndrome {:#x}, vendor {:#x}, detail {})",
                    q.qpn, q.error_kind, q.error_syndrome, q.error_vendor, q.error_detail
                )
            })
            .collect();
        if e.status == 0 && failed.is_empty() {
            continue;
        }
        let ended = if e.status == 0 {
            String::new()
        } else {
            format!(" stopped by itself ({})", status(e.status))
        };
        o.push_str(&format!(
            "; NIC engine {i}{ended}: {} WQEs executed, {} failed, {} flushed",
            e.stats.wqes_executed, e.stats.wqes_failed, e.stats.wqes_flushed
        ));
        for f in failed {
            o.push_str(&format!(", {f}"));
        }
    }
    Ok(o)
}

/// Whether every rank's receive slots, counts, meta words and combined output are the
/// CPU reference's.
fn check(
    gpu: &Gpu,
    p: &MoeParams,
    layout: &MoeLayout,
    ranks: &[MoeRank<ibgda::nic::SoftGpuNic>],
    inputs: &[reference::Inputs],
) -> Result<bool, GpuError> {
    let mut ok = true;
    for (r, rank) in ranks.iter().enumerate() {
        ok &= check_rank(gpu, p, layout, r, &rank.buffers, inputs)?;
    }
    Ok(ok)
}

/// Whether rank `r`'s receive slots, counts, meta words and combined output (in its
/// window `buffers`) are the CPU reference's, `inputs` every rank's.
pub(crate) fn check_rank(
    gpu: &Gpu,
    p: &MoeParams,
    layout: &MoeLayout,
    r: usize,
    buffers: &[Arc<DeviceBuffer>],
    inputs: &[reference::Inputs],
) -> Result<bool, GpuError> {
    if buffers.len() != WINDOWS || inputs.len() != p.ranks || r >= p.ranks {
        return Err(invalid(format!(
            "rank {r}: {} window buffers, inputs of {} ranks, for {} ranks",
            buffers.len(),
            inputs.len(),
            p.ranks
        )));
    }
    let mut ok = true;
    let t = p.tokens;
    {
        let recv = gpu.read_device(&buffers[W_RECV])?;
        let signal = gpu.read_device(&buffers[W_SIGNAL])?;
        for e_local in 0..p.local_experts() {
            for src in 0..p.ranks {
                let want = reference::received(p, inputs, r, e_local, src);
                let pair = e_local * p.ranks + src;
                let count = u32::from_ne_bytes(
                    signal[layout.counts + pair * 4..layout.counts + pair * 4 + 4]
                        .try_into()
                        .expect("4 bytes"),
                );
                if count as usize != want.len() {
                    progress(&format!(
                        "MoE check: rank {r} expert {e_local} from {src}: {count} tokens, {} expected",
                        want.len()
                    ));
                    ok = false;
                    continue;
                }
                for (slot, &(token, k)) in want.iter().enumerate() {
                    let at = ((e_local * p.ranks + src) * t + slot) * p.message_bytes();
                    let msg = &recv[at..at + p.message_bytes()];
                    let meta_at = layout.meta + ((e_local * p.ranks + src) * t + slot) * 8;
                    let meta =
                        u64::from_ne_bytes(recv[meta_at..meta_at + 8].try_into().expect("8 bytes"));
                    if msg != reference::message(p, &inputs[src], token).as_slice()
                        || meta != token as u64 | (k as u64) << 16
                    {
                        progress(&format!(
                            "MoE check: rank {r} expert {e_local} from {src} slot {slot}: not token {token} (k {k})"
                        ));
                        ok = false;
                    }
                }
            }
        }
        let send = gpu.read_device(&buffers[W_SEND])?;
        let out: Vec<u16> = send[layout.out..layout.out + t * p.hidden * 2]
            .chunks(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .collect();
        let want = reference::combined(p, &inputs[r]);
        let wrong = out.iter().zip(&want).filter(|(a, b)| a != b).count();
        if wrong != 0 {
            progress(&format!(
                "MoE check: rank {r}: {wrong} combined values differ"
            ));
            ok = false;
        }
    }
    Ok(ok)
}

/// The kernels of `cuda/moe.cu`, both variants, run on host threads over the host build
/// of the CUDA software NIC's engine (`cuda/moe_host.cpp`, built by `build.rs`): each
/// CUDA thread a host thread, the device library's memory operations C++ atomics, one
/// engine per connected pair of queue pairs. The shape is fixed at build time by
/// `cuda/host/moe_layout.h`, generated from [`host::params`] (a test checks it), so a
/// test without a GPU runs the same dispatch and combine code as the GPU, variant after
/// variant in one process as [`run`] does, and checks it against the CPU reference.
pub mod host {
    use std::time::Duration;

    use super::{reference, MoeLayout, MoeParams, WINDOWS};
    use crate::gpu::GpuError;

    /// Where the committed host layout header lies, from the crate's directory.
    pub const LAYOUT_PATH: &str = "cuda/host/moe_layout.h";

    /// The shape `cuda/moe_host.cpp` is built for: 4 ranks, 64 tokens, hidden 128, top-4
    /// of 32 experts, BF16, 2 blocks per rank (of 64 threads on the host).
    pub fn params() -> MoeParams {
        MoeParams {
            ranks: 4,
            tokens: 64,
            hidden: 128,
            topk: 4,
            experts: 32,
            fp8: false,
            blocks_per_rank: 2,
            engines: 10,
            iterations: 1,
            warmup: 0,
            ..MoeParams::deepep(false)
        }
    }

    /// The text `cuda/host/moe_layout.h` must hold.
    pub fn layout_header() -> String {
        let p = params();
        MoeLayout::of(&p).header(&p)
    }

    /// Which kernels a step runs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Variant {
        /// On the device API.
        Typed,
        /// On the builders.
        Raw,
    }

    /// What one step left.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Step {
        /// The kernels' status word (0, or the first failure's code).
        pub status: i32,
        /// Per rank, the combined output (BF16 bits, `[tokens][hidden]`).
        pub out: Vec<Vec<u16>>,
        /// Per rank, the tokens received per (local expert, source rank).
        pub counts: Vec<Vec<u32>>,
    }

    #[cfg(not(ibgda_no_host_engine))]
    extern "C" {
        #[allow(clippy::too_many_arguments)]
        fn ibgda_moe_host_run(
            x: *const u16,
            topk: *const i32,
            weights: *const f32,
            sizes: *const u64,
            variants: *const u32,
            n_steps: u32,
            log_ring: u32,
            wait_ns: u64,
            nic_threads: u32,
            processes: u32,
            statuses: *mut i32,
            out: *mut u16,
            counts: *mut u32,
        ) -> i32;
    }

    /// How the ranks run on the host.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Ranks {
        /// As threads of one process on the GPU: one launch of every rank's blocks per
        /// phase, one engine per connected pair of queue pairs (`moe::run`).
        Threads,
        /// As processes of their own (`moe_process`): a launch per rank over slot 0 of
        /// its own tables, the ranks' launches concurrent (no rank waits for another's to
        /// end), one engine per queue pair whose peer's receive side is a record of it
        /// (`DeviceNicBuilder::connect_remote`), as each process's NIC has them.
        Processes,
    }

    /// Runs one step per entry of `variants` (step `i` as iteration `i`), on queue pairs
    /// of 2^`log_ring` WQEBBs (6..=15), every device wait bounded by `wait`, the engines
    /// stepped by `nic_threads` threads, the ranks as threads of one process.
    /// `inputs` are [`reference::inputs`] of [`params`].
    pub fn run(
        inputs: &[reference::Inputs],
        variants: &[Variant],
        log_ring: u32,
        wait: Duration,
        nic_threads: u32,
    ) -> Result<Vec<Step>, GpuError> {
        run_ranks(
            inputs,
            variants,
            log_ring,
            wait,
            nic_threads,
            Ranks::Threads,
        )
    }

    /// As [`run`], the ranks run as `ranks` says.
    pub fn run_ranks(
        inputs: &[reference::Inputs],
        variants: &[Variant],
        log_ring: u32,
        wait: Duration,
        nic_threads: u32,
        ranks: Ranks,
    ) -> Result<Vec<Step>, GpuError> {
        let p = params();
        let (t, h, k) = (p.tokens, p.hidden, p.topk);
        let pairs = p.local_experts() * p.ranks;
        let shaped = inputs.len() == p.ranks
            && inputs
                .iter()
                .all(|i| i.x.len() == t * h && i.topk.len() == t * k && i.weights.len() == t * k);
        if !shaped || !(6..=15).contains(&log_ring) || nic_threads == 0 {
            return Err(GpuError::Invalid(format!(
                "host MoE: {} ranks of inputs, ring 2^{log_ring}, {nic_threads} NIC threads",
                inputs.len()
            )));
        }
        let n = u32::try_from(variants.len())
            .map_err(|_| GpuError::Invalid("host MoE: too many steps".into()))?;
        let wait_ns = u64::try_from(wait.as_nanos())
            .ok()
            .filter(|&ns| ns > 0)
            .ok_or_else(|| GpuError::Invalid(format!("host MoE: wait {wait:?}")))?;
        let x: Vec<u16> = inputs.iter().flat_map(|i| i.x.iter().copied()).collect();
        let topk: Vec<i32> = inputs.iter().flat_map(|i| i.topk.iter().copied()).collect();
        let weights: Vec<f32> = inputs
            .iter()
            .flat_map(|i| i.weights.iter().copied())
            .collect();
        let sizes: [u64; WINDOWS] = MoeLayout::of(&p).sizes.map(|s| s as u64);
        let codes: Vec<u32> = variants
            .iter()
            .map(|v| match v {
                Variant::Typed => 0,
                Variant::Raw => 1,
            })
            .collect();
        let steps = variants.len();
        let mut statuses = vec![0i32; steps];
        let mut out = vec![0u16; steps * p.ranks * t * h];
        let mut counts = vec![0u32; steps * p.ranks * pairs];
        #[cfg(ibgda_no_host_engine)]
        {
            let _ = (
                x,
                topk,
                weights,
                sizes,
                codes,
                n,
                wait_ns,
                &mut statuses,
                &mut out,
                &mut counts,
                ranks,
            );
            Err(GpuError::Invalid(
                "the host build of the MoE kernels was left out (IBGDA_SKIP_HOST_ENGINE=1)".into(),
            ))
        }
        #[cfg(not(ibgda_no_host_engine))]
        {
            // SAFETY: every pointer is to a live buffer of the length the function reads or
            // writes for the compiled shape, which `params` is (tests/moe_host.rs checks
            // the header against it): x, topk and weights R*T*H and R*T*K, sizes WINDOWS,
            // variants n, statuses n, out n*R*T*H, counts n*R*pairs. It keeps no pointer
            // and joins every thread it starts before returning.
            let rc = unsafe {
                ibgda_moe_host_run(
                    x.as_ptr(),
                    topk.as_ptr(),
                    weights.as_ptr(),
                    sizes.as_ptr(),
                    codes.as_ptr(),
                    n,
                    log_ring,
                    wait_ns,
                    nic_threads,
                    u32::from(ranks == Ranks::Processes),
                    statuses.as_mut_ptr(),
                    out.as_mut_ptr(),
                    counts.as_mut_ptr(),
                )
            };
            if rc != 0 {
                return Err(GpuError::Invalid(format!("host MoE: setup failed ({rc})")));
            }
            Ok((0..steps)
                .map(|i| Step {
                    status: statuses[i],
                    out: (0..p.ranks)
                        .map(|r| out[(i * p.ranks + r) * t * h..][..t * h].to_vec())
                        .collect(),
                    counts: (0..p.ranks)
                        .map(|r| counts[(i * p.ranks + r) * pairs..][..pairs].to_vec())
                        .collect(),
                })
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::reference::*;
    use super::*;

    #[test]
    fn e4m3_round_trips_every_code_and_rounds_to_nearest_even() {
        for q in 0u8..=255 {
            let exp = (q >> 3) & 0xf;
            if exp == 0xf && q & 7 == 7 {
                continue; // NaN
            }
            assert_eq!(
                f32_to_e4m3(e4m3_to_f32(q)),
                if q == 0x80 { 0x80 } else { q },
                "{q:#04x}"
            );
        }
        assert_eq!(e4m3_to_f32(0x7e), 448.0);
        assert_eq!(f32_to_e4m3(1000.0), 0x7e, "saturates");
        assert_eq!(f32_to_e4m3(-1000.0), 0xfe);
        // 1.0625 lies between 1.0 (0x38) and 1.125 (0x39): ties to even.
        assert_eq!(f32_to_e4m3(1.0625), 0x38);
        assert_eq!(f32_to_e4m3(1.1875), 0x3a);
        assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9), "the smallest subnormal");
        assert_eq!(f32_to_e4m3(2f32.powi(-10)), 0x00, "a tie to even at zero");
        assert_eq!(
            f32_to_e4m3(2f32.powi(-6) * 0.999),
            0x08,
            "rounds up to the smallest normal"
        );
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(
            f32_to_bf16(f32::from_bits(0x3f80_8000)),
            0x3f80,
            "tie to even"
        );
        assert_eq!(
            f32_to_bf16(f32::from_bits(0x3f81_8000)),
            0x3f82,
            "tie to even"
        );
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert_eq!(bf16_to_f32(0x4040), 3.0);
    }

    #[test]
    fn quantization_is_within_half_a_step_and_scales_per_block_max_over_448() {
        let p = MoeParams {
            ranks: 2,
            tokens: 4,
            hidden: 256,
            topk: 2,
            experts: 4,
            ..MoeParams::deepep(true)
        };
        let inputs = inputs(&p);
        let x = &inputs[0].x[..p.hidden];
        let msg = quantize(x);
        assert_eq!(msg.len(), p.message_bytes());
        let y = dequantize(&msg, p.hidden);
        for (h, (&a, &b)) in x.iter().zip(&y).enumerate() {
            let (a, b) = (bf16_to_f32(a), bf16_to_f32(b));
            let scale = f32::from_ne_bytes(msg[p.hidden + h / 128 * 4..][..4].try_into().unwrap());
            // Half a step of E4M3 (a 16th of the value), BF16's rounding of the result,
            // and half the smallest subnormal (scaled).
            let bound = a.abs() / 16.0 + b.abs() / 256.0 + scale * 2f32.powi(-10);
            assert!((a - b).abs() <= bound, "{h}: {a} vs {b}");
        }
        let block_max = x[..128]
            .iter()
            .map(|&v| bf16_to_f32(v).abs())
            .fold(0.0, f32::max);
        let scale0 = f32::from_ne_bytes(msg[p.hidden..p.hidden + 4].try_into().unwrap());
        assert_eq!(scale0, block_max / 448.0);
    }

    #[test]
    fn routing_is_distinct_and_every_token_reaches_its_experts_once() {
        let p = MoeParams {
            ranks: 4,
            tokens: 64,
            hidden: 128,
            ..MoeParams::deepep(false)
        };
        p.check().expect("valid");
        let all = inputs(&p);
        for i in &all {
            for t in 0..p.tokens {
                let mut e: Vec<i32> = i.topk[t * p.topk..(t + 1) * p.topk].to_vec();
                e.sort_unstable();
                e.dedup();
                assert_eq!(e.len(), p.topk);
                assert!(e.iter().all(|&x| (0..p.experts as i32).contains(&x)));
            }
        }
        // Every (token, k) of every source is received by exactly one (rank, expert).
        let mut total = 0;
        for r in 0..p.ranks {
            for e in 0..p.local_experts() {
                for src in 0..p.ranks {
                    total += received(&p, &all, r, e, src).len();
                }
            }
        }
        assert_eq!(total, p.ranks * p.tokens * p.topk);
    }

    #[test]
    fn the_layout_header_names_what_the_kernels_use() {
        let p = MoeParams::deepep(false);
        let l = MoeLayout::of(&p);
        let h = l.header(&p);
        for name in [
            "MOE_RANKS 8ull",
            "MOE_MSG_BYTES 14336ull",
            "MOE_SCOPE GpuReleaseStore",
            "MOE_META_OFF",
            "MOE_COUNTS_OFF",
        ] {
            assert!(h.contains(name), "{name}");
        }
        assert!(l.meta >= p.local_experts() * p.ranks * p.tokens * p.message_bytes());
        assert!(l.stamps + MAX_ITERS * STAMPS * 8 <= l.sizes[W_SEND]);
        assert_eq!(
            MoeLayout::of(&MoeParams::deepep(true)).sizes[W_EXPERT] % 256,
            0
        );
    }
}
